"""The contract of a RAG (sample-level) metric, and the registry ``evaluate_rag`` resolves names in.

A :class:`RagMetric` scores one :class:`~ragmeter.schema.RagSample` and returns a float,
or ``None`` when the sample lacks what the metric needs (it is then skipped and counted
in the report's ``coverage``, never scored as 0). ``needs`` names the sample fields it
reads, so :func:`ragmeter.evaluate_rag` can refuse up front a metric that no sample can
satisfy, saying why (seed 003's rule).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from ragmeter.errors import InvalidInputError, UnknownMetricError
from ragmeter.schema import RagSample

__all__ = ["RAG_METRICS", "RagMetric", "RagMetricRegistry"]


class RagMetric:
    """Base class for sample-level metrics.

    Subclasses set ``name``, ``needs`` (RagSample field names that must be non-empty),
    ``higher_is_better`` and implement :meth:`score`. ``detail`` may return extra
    JSON-ready information for drill-down (e.g. unsupported claims).
    """

    name: ClassVar[str] = ""
    needs: ClassVar[frozenset[str]] = frozenset()
    higher_is_better: ClassVar[bool] = True

    def score(self, sample: RagSample) -> float | None:
        """This sample's score, or ``None`` when it is not measurable."""
        raise NotImplementedError

    def detail(self, sample: RagSample) -> dict[str, Any] | None:
        """Optional extra per-sample information for the report's ``details``."""
        return None

    def applies_to(self, sample: RagSample) -> bool:
        """True when every field in ``needs`` is present and non-empty on ``sample``."""
        for field in self.needs:
            value = getattr(sample, field)
            if value is None or (field == "response" and value == ""):
                return False
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RagMetricRegistry(Mapping[str, RagMetric]):
    """Name -> :class:`RagMetric`; ``register`` adds one (instances or no-arg classes)."""

    def __init__(self) -> None:
        self._metrics: dict[str, RagMetric] = {}

    def register(self, metric: Any, *, replace: bool = False) -> Any:
        """Register a metric instance or class (by its ``name``); returns it (for decorators)."""
        obj = metric() if isinstance(metric, type) else metric
        name = getattr(obj, "name", "")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"cannot register {metric!r}: it has no string 'name'")
        if name in self._metrics and not replace:
            raise InvalidInputError(
                f"a RAG metric named {name!r} is already registered; pass replace=True"
            )
        self._metrics[name] = obj
        return metric

    def get_metric(self, name: str) -> RagMetric:
        """The metric registered as ``name``; :class:`UnknownMetricError` otherwise."""
        try:
            return self._metrics[name]
        except (KeyError, TypeError):
            raise UnknownMetricError(name, self._metrics) from None

    def __getitem__(self, name: str) -> RagMetric:
        return self.get_metric(name)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._metrics))

    def __len__(self) -> int:
        return len(self._metrics)


RAG_METRICS = RagMetricRegistry()
"""Every sample-level metric :func:`ragmeter.evaluate_rag` can compute by name."""
