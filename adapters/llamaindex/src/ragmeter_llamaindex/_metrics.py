"""ragmeter's retrieval metrics as a LlamaIndex ``BaseRetrievalMetric`` plug-in.

The numbers are computed by :func:`ragmeter.evaluation.retrieval.evaluate_run` (trec_eval
conventions), never here. They differ from LlamaIndex's built-in ``HitRate``/``MRR``/
``Precision``/``Recall``/``AveragePrecision``/``NDCG`` on purpose:

* a doc id retrieved twice (several chunks of one source) counts once, at its best rank;
  the built-ins count every copy, so their NDCG and AP can exceed 1.0;
* NDCG is graded (``relevance``) with linear gain and an ideal ranking cut at ``k``; the
  built-in is binary with an ideal over ``len(expected_ids)`` positions, whatever ``k``;
* precision@k divides by ``k`` (trec_eval ``P_k``); the built-in divides by the number of
  distinct ids retrieved;
* every metric has an explicit cut-off ``k``; ``map`` and ``mrr`` may also be uncut.

A metric also watches the ids it is given: when, after five queries, not one retrieved id
was among any query's expected ids (``RetrieverEvaluator`` passes chunk node ids, the
expected ids often name documents), each result's ``metadata["warning"]`` says so and names
``id_map``, and the ``ragmeter_llamaindex`` logger logs it once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.evaluation.retrieval.metrics_base import (
    BaseRetrievalMetric,
    RetrievalMetricResult,
)

from ragmeter.capture import IdWatch
from ragmeter.errors import InvalidInputError, check_k
from ragmeter.evaluation.retrieval import dedupe_best_rank, evaluate_run
from ragmeter.metrics.registry import get_metric

__all__ = ["RagmeterRetrievalMetric"]

_UNCUT = ("map", "mrr")

ID_MAP_HINT = (
    "LlamaIndex: RetrieverEvaluator passes node ids (a chunk's own id once documents are "
    "split); if expected_ids name documents, pass RagmeterRetrievalMetric(..., id_map={n.node_id: "
    "n.ref_doc_id for n in nodes}) (or a function) to score chunks as their source documents."
)


def _grade(value: object, query: str, doc: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidInputError(
            f"relevance[{query!r:.80}][{doc!r}] must be a number (a grade), got {value!r}"
        )
    return float(value)


class RagmeterRetrievalMetric(BaseRetrievalMetric):
    """One ragmeter retrieval metric at one cut-off, for ``RetrieverEvaluator``.

    ``metric`` is a ragmeter registry name (``"ndcg"``, ``"recall"``, ``"precision"``,
    ``"mrr"``, ``"map"``, ``"hit_rate"`` or one you registered); ``k`` the cut-off (``None``
    only for ``map``/``mrr``: trec_eval's uncut ``map``/``recip_rank``). ``metric_name``
    (the key in ``RetrievalEvalResult.metric_dict``) is ``"ndcg@10"``, ``"map"`` ...

    ``relevance`` gives graded judgements as ``{query_text: {doc_id: grade}}`` (``compute``
    receives no keyword arguments, so they live on the metric); a query it does not cover
    is judged from ``expected_ids``, each with grade 1. ``id_map`` renames ids before
    scoring, on both sides (retrieved, expected and ``relevance`` ids): ``RetrieverEvaluator``
    reports node ids, so ``{node.node_id: node.ref_doc_id for node in nodes}`` scores chunks
    as their source documents. A mapping keeps ids it does not know; a function is called
    on every id, expected ones included. Retrieved ids are then de-duplicated to their best
    rank (a document retrieved as three chunks counts once).

    ``retrieved_ids`` are scored in list order (the order ``RetrieverEvaluator`` passes, the
    retriever's), ties included: ``compute`` receives no scores, so nothing is re-sorted, and
    ids whose nodes scored equal keep their order (trec_eval would break such ties by doc id).

    Raises :class:`~ragmeter.errors.UnknownMetricError` for an unknown ``metric`` and
    :class:`~ragmeter.errors.InvalidInputError` for a bad ``k`` (at construction), and
    :class:`~ragmeter.errors.InvalidInputError` from ``compute`` for a query with no
    relevant document (LlamaIndex's built-ins raise ``ValueError`` there too).

    >>> m = RagmeterRetrievalMetric(metric="ndcg", k=3)
    >>> m.metric_name
    'ndcg@3'
    >>> round(m.compute(query="q", expected_ids=["d2"], retrieved_ids=["d1", "d2"]).score, 4)
    0.6309
    >>> graded = RagmeterRetrievalMetric(metric="ndcg", k=2, relevance={"q": {"d1": 1, "d2": 3}})
    >>> round(graded.compute(query="q", expected_ids=[], retrieved_ids=["d1", "d2"]).score, 4)
    0.7967
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    metric: str = Field(default="ndcg", description="ragmeter registry name, e.g. 'ndcg'.")
    k: int | None = Field(default=10, description="Cut-off; None only for map/mrr.")
    relevance: dict[str, dict[str, float]] | None = Field(
        default=None, description="Graded judgements {query_text: {doc_id: grade}}."
    )
    id_map: Mapping[str, str] | Callable[[str], str] | None = Field(
        default=None, description="Renames node ids before scoring (e.g. node -> source doc)."
    )
    relevance_level: float | None = Field(
        default=None, description="Grade a doc needs to count as relevant (None: > 0)."
    )
    _watch: IdWatch = PrivateAttr()

    def __init__(
        self,
        metric: str = "ndcg",
        k: int | None = 10,
        *,
        relevance: Mapping[str, Mapping[str, float]] | None = None,
        id_map: Mapping[str, str] | Callable[[str], str] | None = None,
        relevance_level: float | None = None,
    ) -> None:
        get_metric(metric)
        if k is None:
            if metric not in _UNCUT:
                raise InvalidInputError(
                    f"k=None (no cut-off) exists only for 'map' and 'mrr', not {metric!r}; "
                    "give k, e.g. the retriever's similarity_top_k"
                )
        else:
            check_k(k)
        rel: dict[str, dict[str, float]] | None = None
        if relevance is not None:
            rel = {}
            for query, row in relevance.items():
                if not isinstance(row, Mapping):
                    raise InvalidInputError(
                        f"relevance[{query!r:.80}] must be a mapping {{doc_id: grade}}, "
                        f"got {type(row).__name__}"
                    )
                rel[str(query)] = {str(d): _grade(g, query, d) for d, g in row.items()}
        fields: dict[str, Any] = {
            "metric": metric,
            "k": k,
            "relevance": rel,
            "id_map": id_map,
            "relevance_level": relevance_level,
        }
        super().__init__(**fields)
        self._watch = IdWatch(ID_MAP_HINT, logger=logging.getLogger("ragmeter_llamaindex"))

    @property
    def metric_name(self) -> str:  # type: ignore[override]
        """The result key: ``"<metric>@<k>"``, or the bare name when uncut."""
        return self.metric if self.k is None else f"{self.metric}@{self.k}"

    def _rename(self, ids: list[str]) -> list[str]:
        id_map = self.id_map
        if id_map is None:
            return [str(i) for i in ids]
        if callable(id_map):
            return [str(id_map(i)) for i in ids]
        return [str(id_map.get(i, i)) for i in ids]

    def judgements(self, query: str | None, expected_ids: list[str] | None) -> dict[str, float]:
        """The qrels row used for ``query``: ``relevance[query]``, else grade 1 per expected id."""
        if self.relevance is not None and query is not None and query in self.relevance:
            row = self.relevance[query]
            if self.id_map is None:
                return {str(d): float(g) for d, g in row.items()}
            out: dict[str, float] = {}
            for doc, grade in zip(self._rename(list(row)), row.values(), strict=True):
                out[doc] = max(out.get(doc, float(grade)), float(grade))
            return out
        return {doc: 1.0 for doc in self._rename(list(expected_ids or []))}

    def compute(
        self,
        query: str | None = None,
        expected_ids: list[str] | None = None,
        retrieved_ids: list[str] | None = None,
        expected_texts: list[str] | None = None,
        retrieved_texts: list[str] | None = None,
        **kwargs: Any,
    ) -> RetrievalMetricResult:
        """Score one query; ``metadata`` gives the key, the counts and the repeats dropped.

        ``metadata["warning"]`` is set while the retrieved ids have never matched any
        expected id (after five queries; see the module docstring).
        """
        judgements = self.judgements(query, expected_ids)
        level = self.relevance_level
        n_relevant = sum(1 for g in judgements.values() if (g > 0 if level is None else g >= level))
        if n_relevant == 0:
            raise InvalidInputError(
                f"query {query!r:.80} has no relevant document (expected_ids={expected_ids!r:.80}"
                f"{', and no grade > 0 in relevance' if self.relevance else ''}), so "
                f"{self.metric_name} is undefined; trec_eval leaves such queries out of the mean"
            )
        retrieved = self._rename(list(retrieved_ids or []))
        ranked = dedupe_best_rank(retrieved)
        report = evaluate_run(
            {"q": judgements},
            {"q": ranked},
            k_values=(self.k if self.k is not None else 1,),
            metrics=[self.metric],
            relevance_level=level,
        )
        key = self.metric_name
        if key not in report.metrics:
            raise InvalidInputError(
                f"the {self.metric!r} metric produced no score for query {query!r:.80}: "
                + "; ".join(report.warnings)
            )
        metadata: dict[str, Any] = {
            "metric": key,
            "n_relevant": n_relevant,
            "n_retrieved": len(ranked),
            "duplicates_removed": len(retrieved) - len(ranked),
        }
        warning = self._watch.observe(ranked, judgements)
        if warning is not None:
            metadata["warning"] = warning
        return RetrievalMetricResult(score=report.metrics[key], metadata=metadata)
