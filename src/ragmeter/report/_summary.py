"""One metric's scores summarised (:class:`DistributionSummary`), and the per-key mapping that
computes each summary the first time it is asked for."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ragmeter.aggregate import Distribution, MeanRule, summarize_values
from ragmeter.errors import InvalidInputError

__all__ = ["DistributionSummary"]


@dataclass(frozen=True)
class DistributionSummary:
    """One metric's scores over a run, never collapsed to a single mean.

    ``missing`` counts ``None`` scores (not measurable for that item); they are dropped
    before ``mean``/``median``/``std`` (population, ddof=0)/``min``/``max`` and the
    ``percentiles`` (``p5 p25 p50 p75 p95``, linear interpolation) are computed over the
    rest. An empty or all-``None`` input gives ``count=0`` and zeros, never a
    ``ZeroDivisionError``. ``mean`` and ``std`` are correctly rounded (``statistics.mean``
    and ``statistics.pstdev``; a retrieval report's ``mean`` is its metric, ``math.fsum``
    over the queries divided by their number, as trec_eval sums).

    ``exact`` is False when the summary comes from a streamed evaluation that kept no
    per-item scores and the metric took more than
    :data:`~ragmeter.aggregate.MAX_DISTINCT` distinct values: ``count``, ``missing``,
    ``mean``, ``std``, ``min`` and ``max`` are still exact, and each order statistic behind
    ``median`` and ``percentiles`` is within ``relative_error`` (0.001) of the exact one
    (see :mod:`ragmeter.aggregate`); ``relative_error`` is 0.0 when exact.

    >>> s = DistributionSummary.of([1.0, 0.0, None, 0.5])
    >>> s.count, s.missing, s.mean, s.median, s.exact
    (3, 1, 0.5, 0.5, True)
    >>> DistributionSummary.of([]).mean
    0.0
    """

    count: int
    missing: int
    mean: float
    median: float
    std: float
    min: float
    max: float
    percentiles: dict[str, float] = field(default_factory=dict)
    exact: bool = True
    relative_error: float = 0.0

    @classmethod
    def of(cls, scores: Iterable[float | None], *, mean: MeanRule = "exact") -> DistributionSummary:
        """Summarise raw per-item scores (``None`` = missing); ``mean="fsum"`` gives
        ``math.fsum(values) / n`` instead of the correctly rounded mean."""
        values: list[float] = []
        missing = 0
        for s in scores:
            if s is None:
                missing += 1
            else:
                values.append(float(s))
        return cls.from_stats(summarize_values(values, missing, mean=mean))

    @classmethod
    def of_distribution(
        cls, distribution: Distribution, *, mean: MeanRule = "exact"
    ) -> DistributionSummary:
        """Summarise a mergeable :class:`~ragmeter.aggregate.Distribution`."""
        return cls.from_stats(distribution.stats(mean=mean))

    @classmethod
    def from_stats(cls, stats: Mapping[str, Any]) -> DistributionSummary:
        """Build from a statistics mapping (:meth:`to_dict` output or an aggregate's)."""
        return cls(
            count=int(stats["count"]),
            missing=int(stats["missing"]),
            mean=float(stats["mean"]),
            median=float(stats["median"]),
            std=float(stats["std"]),
            min=float(stats["min"]),
            max=float(stats["max"]),
            percentiles={str(k): float(v) for k, v in dict(stats.get("percentiles", {})).items()},
            exact=bool(stats.get("exact", True)),
            relative_error=float(stats.get("relative_error", 0.0)),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return asdict(self)


class _Summaries(Mapping[str, DistributionSummary]):
    """Summaries per metric key, each computed the first time it is asked for."""

    def __init__(self, keys: Iterable[str], make: Callable[[str], DistributionSummary]) -> None:
        self._keys = list(dict.fromkeys(keys))
        self._known = set(self._keys)
        self._make = make
        self._done: dict[str, DistributionSummary] = {}

    def __getitem__(self, key: str) -> DistributionSummary:
        done = self._done.get(key)
        if done is None:
            if key not in self._known:
                raise KeyError(key)
            done = self._done[key] = self._make(key)
        return done

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"<summaries of {len(self)} metric keys>"


def _loaded_summaries(data: Mapping[str, Any]) -> dict[str, DistributionSummary]:
    """The saved summaries of a report that kept no per-item scores (a streamed one)."""
    loaded: dict[str, DistributionSummary] = {}
    for key, stats in dict(data.get("summaries") or {}).items():
        try:
            loaded[str(key)] = DistributionSummary.from_stats(stats)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"report summaries[{key!r}] cannot be read: {exc!r}") from None
    return loaded
