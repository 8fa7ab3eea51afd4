"""trec_eval's measures as registry entries: a name, what it means, and a per-query score.

:data:`TREC_MEASURES` is what :func:`ragmeter.metrics.get_metric` and
:func:`ragmeter.metrics.available_metrics` (``kind="trec"``) list: one :class:`TrecMeasure`
per trec_eval measure, with its convention in one line and its ``-m`` parameter kind.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from ragmeter.errors import InvalidInputError, UnknownMetricError
from ragmeter.metrics.trec._spec import MEASURES, MeasureSpec

__all__ = ["TREC_MEASURES", "TrecMeasure", "TrecMeasures"]

_MEANINGS: dict[str, str] = {
    "runid": "the run's name (the last column of the results file's last line); summary only",
    "num_q": "number of queries averaged over",
    "num_ret": "documents retrieved (summed over queries)",
    "num_rel": "relevant documents in the qrels (summed)",
    "num_rel_ret": "relevant documents retrieved (summed)",
    "map": "average precision over the whole ranking, divided by R (all relevant docs)",
    "gm_map": "geometric mean of AP over queries (each AP floored at 1e-5)",
    "Rprec": "precision after R documents (R = the query's relevant docs)",
    "bpref": "binary preference: relevant docs ranked above judged non-relevant ones; "
    "unjudged docs ignored",
    "recip_rank": "1 / rank of the first relevant document (0 if none)",
    "iprec_at_recall": "interpolated precision at recall levels (default 0, 0.1, ..., 1)",
    "P": "precision at cut-off k, divided by k even when fewer came back",
    "relstring": "the relevance of the first k retrieved docs as a string (per query only)",
    "recall": "relevant docs in the top k / R",
    "infAP": "inferred AP (Yilmaz and Aslam 2006): AP estimated from incomplete judgements",
    "gm_bpref": "geometric mean of bpref over queries",
    "Rprec_mult": "precision after x * R documents",
    "utility": "a * rel_ret + b * nonrel_ret + c * rel_not_ret + d * nonrel_not_ret "
    "(default 1, -1, 0, 0)",
    "11pt_avg": "mean interpolated precision at 11 recall levels",
    "binG": "G with binary gains",
    "G": "normalized cumulated gain over the whole ranking (Kekalainen and Jarvelin)",
    "dcg": "discounted cumulated gain (gains from the grades unless given level=gain)",
    "ideal_dcg": "DCG of the ideal ranking",
    "ndcg": "normalized DCG over the whole ranking (gains from the grades unless given)",
    "ndcg_rel": "NDCG averaged over the ranks of relevant docs",
    "Rndcg": "NDCG averaged over the first R ranks",
    "ndcg_cut": "NDCG at cut-off k (linear gains, log2 discount: ragmeter's ndcg@k)",
    "map_cut": "AP over the top k, divided by R",
    "relative_P": "precision at k divided by the best precision possible at k (min(k, R))",
    "success": "1 if a relevant doc is in the top k, else 0",
    "set_P": "precision of the whole retrieved set",
    "set_relative_P": "set precision relative to the best possible (R vs retrieved)",
    "set_recall": "recall of the whole retrieved set",
    "set_map": "set precision times set recall",
    "set_F": "F-measure of set precision and recall (beta 1 by default)",
    "num_nonrel_judged_ret": "judged non-relevant documents retrieved (summed)",
    "rbp": "rank-biased precision (Moffat and Zobel 2008), persistence p (default 0.8)",
    "rbp_resid": "RBP's residual: the most unjudged docs could add",
    "unj": "share of the top k that is unjudged (1 - Judged@k at full depth k)",
}


@dataclass(frozen=True)
class TrecMeasure:
    """One trec_eval measure as a registry entry: ``name`` as ``-m`` takes it, ``meaning``
    (its convention in one line, trec_eval 10.0's definition), ``params`` (the kind of
    ``.params`` it takes: ``long_cuts`` like ``P.5,10``, ``double_cuts``, ``doubles``,
    ``pairs`` like ``ndcg.1=0.5,2=1``, or ``none``), ``summary`` (how the ``all`` line is
    made: mean, sum, geometric mean...) and ``default`` (its default parameters).

    >>> from ragmeter.metrics.registry import get_metric
    >>> m = get_metric("bpref", kind="trec")
    >>> m.meaning.split(":")[0], m.evaluate({"d1": 1, "d2": 0}, ["d2", "new", "d1"])
    ('binary preference', 0.0)
    >>> get_metric("P", kind="trec").evaluate({"d1": 1}, ["x", "d1"], k=2)
    0.5
    """

    spec: MeasureSpec
    meaning: str

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def params(self) -> str:
        return self.spec.params

    @property
    def summary(self) -> str:
        return self.spec.summary

    @property
    def default(self) -> tuple[float, ...]:
        return self.spec.default

    def evaluate(
        self, judgements: Mapping[str, float], ranked: Sequence[str], k: int | None = None
    ) -> float:
        """This measure on one query (``ranked`` best first); ``k`` is the cut-off of a
        cut-off measure (its first default when ``None``) and ignored by the others. A
        geometric mean (``gm_map``) of one query is its value (floored at 1e-5, as
        trec_eval floors it); ``num_q``, ``relstring`` and ``runid`` are not scores of a
        query and raise :class:`~ragmeter.errors.InvalidInputError`."""
        from ragmeter.metrics.trec._engine import evaluate

        if self.summary in ("count", "string", "runid"):
            raise InvalidInputError(
                f"{self.name} is not a score of one query ({self.meaning}); "
                "use ragmeter.metrics.trec.evaluate for it"
            )
        request = self.name
        if k is not None and self.params == "long_cuts":
            request = f"{self.name}.{k}"
        result = evaluate({"q": dict(judgements)}, {"q": list(ranked)}, [request])  # type: ignore[arg-type]  # grades are checked there
        value = float(result.per_query["q"][result.names[0]])
        return math.exp(value) if self.summary == "gm" else value  # gm_*: its log per query

    def __repr__(self) -> str:
        return f"TrecMeasure({self.name!r})"


class TrecMeasures(Mapping[str, TrecMeasure]):
    """trec_eval's measures by name (read-only; iterates in trec_eval's print order)."""

    def __init__(self, measures: Sequence[MeasureSpec]) -> None:
        self._items = {m.name: TrecMeasure(m, _MEANINGS.get(m.name, "")) for m in measures}

    def __getitem__(self, name: str) -> TrecMeasure:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def get_metric(self, name: str) -> TrecMeasure:
        """The measure ``name`` (as ``-m`` takes it, no parameters), or
        :class:`~ragmeter.errors.UnknownMetricError` listing them all."""
        if isinstance(name, str) and name in self._items:
            return self._items[name]
        raise UnknownMetricError(name, list(self._items))


TREC_MEASURES = TrecMeasures(MEASURES)
"""Every trec_eval measure ragmeter computes (``ragmeter.metrics.trec.evaluate``)."""
