"""The retrieval metric registry: bare names (``"ndcg"``) to metric objects.

A metric object has a ``name`` and ``evaluate(judgements, ranked, k) -> float`` (one query,
one cut-off). The six built-ins are registered here; :func:`ragmeter.evaluate_run` computes
them in one fused pass per query and calls ``evaluate`` for anything registered by the user.
``"ndcg@10"`` is a *result key*, never a registry name.

>>> available_metrics()
('hit_rate', 'map', 'mrr', 'ndcg', 'precision', 'recall')
>>> get_metric("recall")
Recall()
>>> get_metric("recall@5")
Traceback (most recent call last):
...
ragmeter.errors.UnknownMetricError: no metric named 'recall@5'. Available: hit_rate, map, mrr,
ndcg, precision, recall. Registry names are bare: pass 'recall' and choose the cut-off ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from ragmeter.errors import InvalidInputError, UnknownMetricError
from ragmeter.metrics import ranking

if TYPE_CHECKING:
    from ragmeter.metrics.base import RagMetricRegistry
    from ragmeter.metrics.trec import TrecMeasures

__all__ = [
    "BUILTIN_METRICS",
    "METRICS",
    "RETRIEVAL_METRICS",
    "MetricRegistry",
    "RetrievalMetric",
    "available_metrics",
    "get_metric",
]


@runtime_checkable
class RetrievalMetric(Protocol):
    """What a registered metric provides: a bare ``name`` and a per-query score."""

    name: str

    def evaluate(self, judgements: Mapping[str, float], ranked: Sequence[str], k: int) -> float:
        """Score one query's ``ranked`` doc ids against its ``judgements`` at cut-off ``k``."""
        ...


@dataclass(frozen=True)
class _Builtin:
    """A built-in metric; ``evaluate_run`` computes these in its fused kernel."""

    name: ClassVar[str] = ""
    higher_is_better: ClassVar[bool] = True
    fn: ClassVar[Callable[..., float]]

    def evaluate(self, judgements: Mapping[str, float], ranked: Sequence[str], k: int) -> float:
        """Score one query at cut-off ``k`` (see :mod:`ragmeter.metrics.ranking`)."""
        return type(self).fn(ranked, judgements, k)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


@dataclass(frozen=True, repr=False)
class NDCG(_Builtin):
    """Graded NDCG@k with linear gain, trec_eval ``ndcg_cut_k``."""

    name: ClassVar[str] = "ndcg"
    fn = staticmethod(ranking.ndcg_at_k)


@dataclass(frozen=True, repr=False)
class Recall(_Builtin):
    """Recall@k, trec_eval ``recall_k``."""

    name: ClassVar[str] = "recall"
    fn = staticmethod(ranking.recall_at_k)


@dataclass(frozen=True, repr=False)
class Precision(_Builtin):
    """Precision@k dividing by k, trec_eval ``P_k``."""

    name: ClassVar[str] = "precision"
    fn = staticmethod(ranking.precision_at_k)


@dataclass(frozen=True, repr=False)
class MRR(_Builtin):
    """Reciprocal rank of the first relevant doc within k (``recip_rank`` when uncut)."""

    name: ClassVar[str] = "mrr"
    fn = staticmethod(ranking.reciprocal_rank)


@dataclass(frozen=True, repr=False)
class MAP(_Builtin):
    """Average precision within k over all relevant docs, trec_eval ``map_cut_k``."""

    name: ClassVar[str] = "map"
    fn = staticmethod(ranking.average_precision)


@dataclass(frozen=True, repr=False)
class HitRate(_Builtin):
    """1.0 if any relevant doc is in the top k, trec_eval ``success_k``."""

    name: ClassVar[str] = "hit_rate"
    fn = staticmethod(ranking.hit_rate_at_k)


class _FunctionMetric:
    """Wraps a plain ``fn(judgements, ranked, k) -> float`` as a metric object."""

    def __init__(self, name: str, fn: Callable[[Mapping[str, float], Sequence[str], int], float]):
        self.name = name
        self._fn = fn

    def evaluate(self, judgements: Mapping[str, float], ranked: Sequence[str], k: int) -> float:
        return float(self._fn(judgements, ranked, k))

    def __repr__(self) -> str:
        return f"FunctionMetric({self.name!r})"


class MetricRegistry(Mapping[str, RetrievalMetric]):
    """A name -> metric mapping that user code can extend with :meth:`register`.

    >>> reg = MetricRegistry()
    >>> @reg.register("first_is_relevant")
    ... def first(judgements, ranked, k):
    ...     return 1.0 if ranked[:1] and judgements.get(ranked[0], 0) > 0 else 0.0
    >>> reg["first_is_relevant"].evaluate({"d": 1}, ["d"], 1)
    1.0
    """

    def __init__(self) -> None:
        self._metrics: dict[str, RetrievalMetric] = {}

    def register(self, name_or_metric: Any, metric: Any = None, *, replace: bool = False) -> Any:
        """Register a metric.

        ``register(obj)`` registers an object with ``name`` and ``evaluate``;
        ``register("name", obj)`` registers ``obj`` (an instance, a class built with no
        arguments, or a function ``(judgements, ranked, k) -> float``) under ``name``;
        ``register("name")`` returns a decorator that does the same. Re-registering a
        taken name raises unless ``replace=True``. Returns what was decorated.
        """
        if isinstance(name_or_metric, str):
            name = name_or_metric
            if metric is None:

                def decorator(obj: Any) -> Any:
                    self._add(name, obj, replace)
                    return obj

                return decorator
            self._add(name, metric, replace)
            return metric
        obj = name_or_metric
        own_name = getattr(obj, "name", None)
        if not isinstance(own_name, str) or not own_name:
            raise InvalidInputError(
                f"cannot register {obj!r}: it has no string 'name'; "
                "use METRICS.register('name', obj)"
            )
        self._add(own_name, obj, replace)
        return obj

    def _add(self, name: str, obj: Any, replace: bool) -> None:
        if not name or "@" in name:
            raise InvalidInputError(
                f"metric name must be a non-empty bare name without '@', got {name!r}"
            )
        if name in self._metrics and not replace:
            raise InvalidInputError(
                f"a metric named {name!r} is already registered; pass replace=True to override it"
            )
        if isinstance(obj, type):
            obj = obj()
        if not hasattr(obj, "evaluate"):
            if not callable(obj):
                raise InvalidInputError(
                    f"cannot register {obj!r} as {name!r}: need an object with "
                    "evaluate(judgements, ranked, k) or a function of those arguments"
                )
            obj = _FunctionMetric(name, obj)
        self._metrics[name] = obj

    def unregister(self, name: str) -> None:
        """Remove a user-registered metric (built-ins cannot be removed)."""
        if name in BUILTIN_METRICS:
            raise InvalidInputError(f"{name!r} is a built-in metric and cannot be unregistered")
        self.get_metric(name)
        del self._metrics[name]

    def get_metric(self, name: str) -> RetrievalMetric:
        """The metric registered as ``name``; :class:`UnknownMetricError` otherwise."""
        try:
            return self._metrics[name]
        except (KeyError, TypeError):
            raise UnknownMetricError(name, self._metrics) from None

    def __getitem__(self, name: str) -> RetrievalMetric:
        return self.get_metric(name)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._metrics))

    def __len__(self) -> int:
        return len(self._metrics)

    def names(self) -> tuple[str, ...]:
        """Registered names, sorted."""
        return tuple(sorted(self._metrics))


BUILTIN_METRICS: tuple[str, ...] = ("hit_rate", "map", "mrr", "ndcg", "precision", "recall")

METRICS = MetricRegistry()
for _cls in (HitRate, MAP, MRR, NDCG, Precision, Recall):
    METRICS.register(_cls.name, _cls)
RETRIEVAL_METRICS = METRICS


MetricKind = Literal["retrieval", "rag", "trec", "embed"]


def available_metrics(kind: MetricKind = "retrieval") -> tuple[str, ...]:
    """The registered metric names of one kind, sorted: ``"retrieval"`` (scored on a run
    against qrels by :func:`ragmeter.evaluate_run`), ``"rag"`` (scored on each sample by
    :func:`ragmeter.evaluate_rag`), ``"trec"`` (every trec_eval measure, as
    ``evaluate_run(measures=[...])`` and ``ragmeter trec_eval`` take them) or ``"embed"``
    (the embedding metrics :func:`ragmeter.evaluate_rag` scores with an embedding model:
    :data:`ragmeter.embed.metrics.EMBED_METRICS`).

    >>> available_metrics("embed")
    ('semantic_context_precision', 'semantic_context_recall', 'semantic_similarity')
    """
    return tuple(sorted(_registry(kind)))


def get_metric(name: str, kind: MetricKind | None = None) -> Any:
    """The metric registered as ``name`` (bare, no ``@k``), from the one place names live.

    ``kind=None`` looks among the retrieval metrics (:data:`METRICS`), then the sample-level
    RAG metrics (:data:`ragmeter.metrics.base.RAG_METRICS`), then trec_eval's measures
    (:data:`ragmeter.metrics.trec.TREC_MEASURES`: ``bpref``, ``infAP``, ``Rprec``...), then the
    embedding metrics (``kind="embed"``: ``semantic_similarity``...); a name
    in two (the retrieval names ``ndcg``, ``recall``, ...: the RAG registry scores them per
    sample, trec_eval has its own ``map``) is the first one's unless ``kind`` says.
    Raises :class:`UnknownMetricError` naming every registered name when there is none (the
    retrieval names first, as seed 004 lists them).

    >>> get_metric("ndcg"), get_metric("faithfulness").name, get_metric("ndcg", kind="rag")
    (NDCG(), 'faithfulness', NdcgAtK(k=5))
    >>> get_metric("bpref"), get_metric("map", kind="trec")
    (TrecMeasure('bpref'), TrecMeasure('map'))
    >>> get_metric("semantic_similarity")
    SemanticSimilarity(embedder=default, threshold=None)
    """
    if kind is not None:
        if kind not in ("retrieval", "rag", "trec", "embed"):
            raise InvalidInputError(
                f"kind must be 'retrieval', 'rag', 'trec', 'embed' or None, got {kind!r}"
            )
        return _registry(kind).get_metric(name)
    for registry in (METRICS, _registry("rag"), _registry("trec"), _registry("embed")):
        if isinstance(name, str) and name in registry:
            return registry.get_metric(name)
    rag = ", ".join(n for n in _registry("rag") if n not in METRICS)
    trec = ", ".join(n for n in _registry("trec") if n not in METRICS)
    raise UnknownMetricError(
        name,
        METRICS,
        also=f" Sample-level RAG metrics: {rag}. trec_eval measures (kind='trec'): {trec}. "
        f"Embedding metrics (kind='embed'): {', '.join(_registry('embed'))}.",
    )


def _registry(kind: MetricKind) -> MetricRegistry | RagMetricRegistry | TrecMeasures:
    if kind == "retrieval":
        return METRICS
    if kind == "embed":
        from ragmeter.embed.metrics import EMBED_METRICS  # registered at its import

        return EMBED_METRICS
    if kind == "trec":
        from ragmeter.metrics.trec import TREC_MEASURES  # numpy: imported when asked

        return TREC_MEASURES
    from ragmeter.metrics.base import RAG_METRICS  # filled as ``import ragmeter`` loads them

    return RAG_METRICS
