"""ragmeter's answer metrics as a LlamaIndex ``BaseEvaluator`` (works under ``BatchEvalRunner``).

The scores come from :func:`ragmeter.evaluation.rag.evaluate_rag` on one
:class:`~ragmeter.schema.RagSample`; nothing is computed here. No LLM is called.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.evaluation import BaseEvaluator, EvaluationResult

from ragmeter.capture import IdWatch
from ragmeter.errors import InvalidInputError, NoScorableQueriesError, check_k
from ragmeter.schema import RagSample, coerce_sample
from ragmeter_llamaindex._retriever import UNSET, DocId, check_doc_id, node_doc_id

__all__ = ["RagmeterEvaluationResult", "RagmeterEvaluator"]

_SAMPLE_KWARGS = frozenset(
    {
        "reference",
        "references",
        "reference_contexts",
        "reference_ids",
        "relevance",
        "retrieved_ids",
        "sample_id",
    }
)

IDS_HINT = (
    "LlamaIndex: retrieved_ids= and reference_ids=/relevance= must name documents the same "
    "way; a retrieved node's own id is a chunk id once documents are split, its source "
    "document's id is node.ref_doc_id."
)


class RagmeterEvaluationResult(EvaluationResult):
    """An ``EvaluationResult`` that also carries every metric and its details.

    ``score`` is the first metric the evaluator lists; ``metrics`` maps each metric's report
    key (``"token_f1"``, ``"precision@5"``) to its score, ``None`` when the inputs do not
    allow it, and ``not_computed`` says why; ``details`` holds per-metric extras such as
    faithfulness' ``unsupported_claims``; ``feedback`` says all of it as text.
    """

    metrics: dict[str, float | None] = Field(default_factory=dict)
    not_computed: dict[str, str] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)


DEFAULT_K = 5
"""The cut-off of bare retrieval names when neither ``k`` nor ``k_values`` is given."""

UNCUT = ("map", "mrr")
"""Retrieval names that also exist without a cut-off: trec_eval's ``map`` and ``recip_rank``."""

_CUT = re.compile(r"[1-9][0-9]*")


@dataclass(frozen=True)
class _Retrieval:
    """A retrieval metric at cut-off ``k`` (``None``: uncut), reported under :attr:`key`."""

    name: str
    k: int | None

    @property
    def key(self) -> str:
        return self.name if self.k is None else f"{self.name}@{self.k}"


@dataclass(frozen=True)
class _Answer:
    """An answer metric (no cut-off), scored by ``evaluate_rag`` and reported under ``key``."""

    name: str
    key: str


_Plan = _Answer | _Retrieval


def _cutoffs(k: Any, k_values: Iterable[int] | int | None) -> tuple[int, ...]:
    """The cut-offs of bare retrieval names, in the order given (``()``: none, ``k=None``)."""
    if k_values is None:
        if k is UNSET:
            return (DEFAULT_K,)
        return () if k is None else (check_k(k),)
    if k is not UNSET:
        raise InvalidInputError(
            "RagmeterEvaluator: pass k= (one cut-off, or None for none) or k_values= (several), "
            f"not both; got k={k!r}, k_values={k_values!r}"
        )
    values = [k_values] if isinstance(k_values, int) else list(k_values)
    if not values:
        raise InvalidInputError(
            "k_values is empty: give at least one cut-off, e.g. (5, 10), or k=None for none"
        )
    return tuple(dict.fromkeys(check_k(v, name=f"k_values[{i}]") for i, v in enumerate(values)))


def _plan(metrics: Sequence[str] | str, cutoffs: tuple[int, ...]) -> list[_Plan]:
    """What each name means, in order, one entry per result key (repeats dropped).

    A bare retrieval name is reported at every cut-off (``"ndcg"`` -> ``ndcg@5``,
    ``ndcg@10``), except ``"map"``, which is trec_eval's uncut ``map`` unless a cut-off is
    written (``"map@10"``: ``map_cut_10``); with no cut-offs (``k=None``) ``"mrr"`` is uncut
    too (``recip_rank``). ``"<name>@<k>"`` is that metric at ``k`` only.
    """
    from ragmeter.evaluation import rag  # noqa: F401  (registers the built-in answer metrics)
    from ragmeter.evaluation.sample_retrieval import SampleRetrievalMetric
    from ragmeter.metrics.base import RAG_METRICS

    names = [metrics] if isinstance(metrics, str) else list(metrics)
    if not names:
        raise InvalidInputError("metrics is empty: name at least one metric, e.g. ['token_f1']")
    plan: dict[str, _Plan] = {}
    for i, raw in enumerate(names):
        if not isinstance(raw, str):
            raise InvalidInputError(
                f"metrics[{i}] must be a metric name (a str such as 'ndcg@10'), got "
                f"{type(raw).__name__}: {raw!r:.80}"
            )
        items: list[_Plan]
        if raw in RAG_METRICS or "@" not in raw:
            metric = RAG_METRICS.get_metric(raw)
            if not isinstance(metric, SampleRetrievalMetric):
                key = getattr(metric, "key", None)
                items = [_Answer(raw, key if isinstance(key, str) and key else raw)]
            elif raw == "map" or (not cutoffs and raw in UNCUT):
                items = [_Retrieval(raw, None)]
            elif not cutoffs:
                raise InvalidInputError(
                    f"metric {raw!r} needs a cut-off and k=None asks for none (only 'map' and "
                    f"'mrr' exist uncut, trec_eval's map and recip_rank): write '{raw}@10', or "
                    "give k= or k_values="
                )
            else:
                items = [_Retrieval(raw, cut) for cut in cutoffs]
        else:
            base, _, cut = raw.partition("@")
            metric = RAG_METRICS.get_metric(base)
            if not isinstance(metric, SampleRetrievalMetric):
                raise InvalidInputError(
                    f"metric {raw!r}: {base!r} has no cut-off (only retrieval metrics such as "
                    f"ndcg, recall, precision, mrr, map and hit_rate do); write {base!r}"
                )
            if not _CUT.fullmatch(cut):
                raise InvalidInputError(
                    f"metric {raw!r}: the cut-off after '@' must be a whole number >= 1, as in "
                    f"'{base}@10'; got {cut!r}"
                )
            items = [_Retrieval(base, int(cut))]
        for item in items:
            plan.setdefault(item.key, item)
    return list(plan.values())


class RagmeterEvaluator(BaseEvaluator):
    """Deterministic, reference-based answer and retrieval metrics for LlamaIndex evaluation loops.

    ``metrics`` are ragmeter metric names (``"token_f1"``, ``"exact_match"``,
    ``"context_recall"``, ``"context_precision"``, ``"faithfulness"`` ...; see
    :func:`ragmeter.evaluation.rag.evaluate_rag`) and retrieval names, bare (``"ndcg"``,
    ``"recall"``, ``"precision"``, ``"mrr"``, ``"map"``, ``"hit_rate"``) or spelled as the
    results spell them (``"ndcg@10"``: that metric at that cut-off only). Each gives one or
    more keys of the result's ``metrics``, in the order named (:attr:`keys`); the first key
    is the headline and becomes ``EvaluationResult.score``.

    Cut-offs: a bare retrieval name is reported at every cut-off of ``k_values`` (``(5,
    10)`` gives ``"ndcg@5"`` then ``"ndcg@10"``; the order given is kept, so the first one
    is the headline's). ``k=10`` is the one-cut-off shorthand for ``k_values=(10,)``; with
    neither, the cut-off is 5. ``"map"`` is trec_eval's uncut ``map`` over the whole
    ranking, whatever the cut-offs; ``"map@10"`` is ``map_cut_10``. ``k=None`` asks for no
    cut-off: then ``"mrr"`` is trec_eval's uncut ``recip_rank`` (reported as ``"mrr"``), a
    written cut-off (``"ndcg@10"``) still applies, and any other bare retrieval name is an
    error. ``passing_threshold`` (optional) sets ``passing = score >= passing_threshold``.

    Ground truth comes as keyword arguments: ``reference=`` (the answer), ``references=``
    (further acceptable answers), ``reference_contexts=`` (gold passages), and for the
    retrieval names ``retrieved_ids=`` with ``reference_ids=`` or ``relevance=`` (graded);
    ``sample_id=`` names the sample. ``BatchEvalRunner`` forwards them from its keyword
    lists, e.g. ``runner.aevaluate_responses(queries, responses=responses,
    reference=answers)``.

    ``evaluate_response``/``aevaluate_response`` (what ``BatchEvalRunner.evaluate_queries``
    calls) read ``retrieved_ids`` from the response's source nodes by ``doc_id``
    (``"node_id"``, ``"ref_doc_id"``, ``"metadata.<key>"``, ``"content"`` or a function;
    each id kept at its best rank) unless you pass ``retrieved_ids=``, so
    ``runner.evaluate_queries(engine, queries=qs, reference_ids=[[...], ...])`` scores
    ``"ndcg"`` and the other retrieval metrics. **A ranking is scored in list order**: the
    order of ``source_nodes`` (after any node postprocessor, e.g. ``LongContextReorder``)
    or of ``retrieved_ids=``, ties included. Nodes are never re-sorted by their score (as
    trec_eval re-sorts a run file, ties by doc id), so equal scores keep the order LlamaIndex
    gave them. Retrieval numbers are :func:`ragmeter.evaluation.retrieval.evaluate_run`'s
    (trec_eval conventions) on that one ranking.

    A metric the inputs do not allow (``token_f1`` without a ``reference``, ``ndcg@5``
    without ``reference_ids``, or with no relevant one) is ``None`` in the result's
    ``metrics`` with the reason in ``not_computed``; if it is the headline, the result has
    ``invalid_result=True`` and that reason, never a misleading 0. Nothing is raised for
    that, so a batch keeps going. When, after five samples, not one ``retrieved_ids`` entry
    was among any sample's ``reference_ids``/``relevance`` ids, the ids name documents
    differently: each result says so in ``details["warnings"]`` and its ``feedback`` (logged
    once on ``ragmeter_llamaindex``). Raises :class:`~ragmeter.errors.UnknownMetricError` for
    an unknown metric and :class:`~ragmeter.errors.InvalidInputError` for a malformed name
    (``"ndcg@0"``, ``"ndcg@x"``, ``"token_f1@5"``) or bad cut-offs (at construction), and
    for an unknown keyword argument or an invalid value (e.g. ``reference=3``).

    >>> e = RagmeterEvaluator(metrics=["ndcg", "map", "mrr@3"], k_values=(5, 10))
    >>> e.keys
    ['ndcg@5', 'ndcg@10', 'map', 'mrr@3']
    >>> r = e.evaluate(retrieved_ids=["d3", "d1", "d2"], reference_ids=["d1", "d9"])
    >>> r.score == r.metrics["ndcg@5"], r.metrics["map"], r.metrics["mrr@3"]
    (True, 0.25, 0.5)
    >>> RagmeterEvaluator(metrics=["mrr", "ndcg@10"], k=None).keys
    ['mrr', 'ndcg@10']
    """

    def __init__(
        self,
        metrics: Sequence[str] | str = ("token_f1",),
        *,
        k_values: Iterable[int] | int | None = None,
        k: int | None = UNSET,
        passing_threshold: float | None = None,
        doc_id: DocId = "node_id",
    ) -> None:
        self.k_values: tuple[int, ...] = _cutoffs(k, k_values)
        """The cut-offs of bare retrieval names, in order; ``()`` for ``k=None``."""
        self._plan = _plan(metrics, self.k_values)
        names = [metrics] if isinstance(metrics, str) else list(metrics)
        self.metrics: list[str] = list(dict.fromkeys(names))
        """The metric names as given (repeats dropped)."""
        self.keys: list[str] = [item.key for item in self._plan]
        """The result keys, in the order of ``metrics``; the first is the headline."""
        self.passing_threshold = passing_threshold
        self.doc_id = check_doc_id(doc_id)
        self._watch = IdWatch(
            IDS_HINT, truth="the reference ids", logger=logging.getLogger("ragmeter_llamaindex")
        )

    @property
    def k(self) -> int | None:
        """The first cut-off (the one ``k=`` gave), ``None`` with ``k=None``."""
        return self.k_values[0] if self.k_values else None

    def _get_prompts(self) -> dict[str, Any]:
        return {}

    def _update_prompts(self, prompts: Any) -> None:
        return None

    def __repr__(self) -> str:
        return f"RagmeterEvaluator(metrics={self.metrics!r})"

    def evaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> RagmeterEvaluationResult:
        """Score one answer (synchronously; no event loop is needed)."""
        return self._score(query, response, contexts, kwargs)

    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> RagmeterEvaluationResult:
        """Score one answer (CPU-only and quick, so it runs inline)."""
        return self._score(query, response, contexts, kwargs)

    def evaluate_response(
        self, query: str | None = None, response: Any = None, **kwargs: Any
    ) -> RagmeterEvaluationResult:
        """Score a query engine's ``Response``: its text, its source nodes' texts as contexts
        and their ids (by ``doc_id``) as ``retrieved_ids``."""
        text, contexts = self._from_response(response, kwargs)
        return self._score(query, text, contexts, kwargs)

    async def aevaluate_response(
        self, query: str | None = None, response: Any = None, **kwargs: Any
    ) -> RagmeterEvaluationResult:
        """:meth:`evaluate_response` for ``BatchEvalRunner`` (runs inline)."""
        text, contexts = self._from_response(response, kwargs)
        return self._score(query, text, contexts, kwargs)

    def _from_response(
        self, response: Any, kwargs: dict[str, Any]
    ) -> tuple[str | None, list[str] | None]:
        if response is None:
            return None, None
        text = getattr(response, "response", None)
        nodes = list(getattr(response, "source_nodes", None) or [])
        contexts = [n.node.get_content() for n in nodes]
        if kwargs.get("retrieved_ids") is None:
            ids: list[str] = []
            for rank, scored in enumerate(nodes):
                found = node_doc_id(scored, self.doc_id)
                if found is None:
                    raise InvalidInputError(
                        f"the source node at rank {rank + 1} (node_id "
                        f"{scored.node.node_id!r}) has no value for doc_id={self.doc_id!r}; "
                        "use 'node_id', 'ref_doc_id' or a metadata key every node has"
                    )
                ids.append(found)
            kwargs["retrieved_ids"] = list(dict.fromkeys(ids))
        return (text if isinstance(text, str) else None), contexts

    def _sample(
        self,
        query: str | None,
        response: str | None,
        contexts: Sequence[str] | None,
        kwargs: dict[str, Any],
    ) -> RagSample:
        unknown = sorted(set(kwargs) - _SAMPLE_KWARGS)
        if unknown:
            raise InvalidInputError(
                f"RagmeterEvaluator got unexpected keyword argument(s) {unknown}; it accepts "
                f"{sorted(_SAMPLE_KWARGS)}"
            )
        fields: dict[str, Any] = {
            k: v for k, v in kwargs.items() if v is not None and k != "sample_id"
        }
        if isinstance(fields.get("references"), str):
            fields["references"] = [fields["references"]]
        if kwargs.get("sample_id") is not None:
            fields["id"] = kwargs["sample_id"]
        return coerce_sample(
            {
                "user_input": query,
                "response": response,
                "retrieved_contexts": list(contexts) if contexts is not None else None,
                **fields,
            }
        )

    def _score(
        self,
        query: str | None,
        response: str | None,
        contexts: Sequence[str] | None,
        kwargs: dict[str, Any],
    ) -> RagmeterEvaluationResult:
        from ragmeter.evaluation.rag import evaluate_rag

        sample = self._sample(query, response, contexts, kwargs)
        scores: dict[str, float | None] = {}
        reasons: dict[str, str] = {}
        details: dict[str, Any] = {}
        retrieval = _retrieval_scores(
            sample, [item for item in self._plan if isinstance(item, _Retrieval)]
        )
        for item in self._plan:
            if isinstance(item, _Retrieval):
                value = retrieval[item.key]
                if isinstance(value, str):
                    scores[item.key], reasons[item.key] = None, value
                else:
                    scores[item.key] = value
                continue
            try:
                report = evaluate_rag([sample], metrics=[item.name])
            except InvalidInputError as exc:
                scores[item.key] = None
                reasons[item.key] = str(exc)
                continue
            for key in report.metrics:
                scores[key] = report.per_sample[sample.id].get(key)
            details.update(report.details.get(sample.id, {}))
        judged = sample.relevance_map()
        if sample.retrieved_ids is not None and judged is not None:
            warning = self._watch.observe(sample.retrieved_ids, judged)
            if warning is not None:
                details["warnings"] = [warning]
        headline = self.keys[0]
        score = scores[headline]
        passing = None
        if score is not None and self.passing_threshold is not None:
            passing = score >= self.passing_threshold
        return RagmeterEvaluationResult(
            query=query,
            contexts=list(contexts) if contexts is not None else None,
            response=response,
            score=score,
            passing=passing,
            feedback=_feedback(scores, reasons, details),
            invalid_result=score is None,
            invalid_reason=reasons.get(headline),
            metrics=scores,
            not_computed=reasons,
            details=details,
        )


def _retrieval_scores(sample: RagSample, items: Sequence[_Retrieval]) -> dict[str, float | str]:
    """Each item's score on the sample's ranking (list order), or why there is none.

    One :func:`~ragmeter.evaluation.retrieval.evaluate_run` call scores every name at every
    cut-off (the uncut ``map``/``mrr`` come with it), as ``evaluate_rag`` scores a sample.
    """
    from ragmeter.evaluation.retrieval import evaluate_run
    from ragmeter.evaluation.sample_retrieval import sample_ranking

    if not items:
        return {}
    ranking = sample_ranking(sample)
    if ranking is None:
        missing = "retrieved_ids" if sample.retrieved_ids is None else "reference_ids/relevance"
        return {
            item.key: f"{item.key} needs retrieved_ids= with reference_ids= or relevance= "
            "(evaluate_response reads retrieved_ids from the response's source nodes); this "
            f"sample has no {missing}"
            for item in items
        }
    ranked, judgements = ranking
    cutoffs = sorted({item.k for item in items if item.k is not None}) or [1]
    try:
        report = evaluate_run(
            {"q": judgements},
            {"q": ranked},
            k_values=cutoffs,
            metrics=list(dict.fromkeys(item.name for item in items)),
        )
    except NoScorableQueriesError:
        return {
            item.key: f"{item.key}: the sample has no relevant judgement (grade > 0) in its "
            "reference_ids/relevance, so there is nothing to score (trec_eval leaves such a "
            "query out)"
            for item in items
        }
    except InvalidInputError as exc:  # a ranking that repeats an id, a bad grade ...
        return {item.key: f"{item.key}: {exc}" for item in items}
    row = report.per_query["q"]
    out: dict[str, float | str] = {}
    for item in items:
        value = row.get(item.key)
        out[item.key] = (
            value
            if value is not None
            else f"the {item.name!r} metric produced no score: " + "; ".join(report.warnings)
        )
    return out


def _feedback(
    scores: dict[str, float | None], reasons: dict[str, str], details: dict[str, Any]
) -> str:
    lines = ["; ".join(f"{k}={'n/a' if v is None else f'{v:.4f}'}" for k, v in scores.items())]
    for name, detail in details.items():
        if name == "warnings":
            lines.extend(f"warning: {w}" for w in detail)
        elif isinstance(detail, dict) and "unsupported_claims" in detail:
            lines.append(f"{name}: unsupported claims: {detail['unsupported_claims']!r}")
        else:
            lines.append(f"{name}: {detail!r}")
    lines.extend(f"{key} not computed: {why}" for key, why in reasons.items())
    return "\n".join(lines)
