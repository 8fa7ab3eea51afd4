"""ragmeter's answer metrics as a LlamaIndex ``BaseEvaluator`` (works under ``BatchEvalRunner``).

The scores come from :func:`ragmeter.evaluation.rag.evaluate_rag` on one
:class:`~ragmeter.schema.RagSample`; nothing is computed here. No LLM is called.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.evaluation import BaseEvaluator, EvaluationResult

from ragmeter.capture import IdWatch
from ragmeter.errors import InvalidInputError, check_k
from ragmeter.schema import RagSample, coerce_sample
from ragmeter_llamaindex._retriever import DocId, check_doc_id, node_doc_id

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


def _resolve(metrics: Sequence[str] | str) -> list[str]:
    from ragmeter.evaluation import rag  # noqa: F401  (registers the built-in answer metrics)
    from ragmeter.metrics.base import RAG_METRICS

    names = [metrics] if isinstance(metrics, str) else list(metrics)
    if not names:
        raise InvalidInputError("metrics is empty: name at least one metric, e.g. ['token_f1']")
    out: list[str] = []
    for name in names:
        RAG_METRICS.get_metric(name)
        if name not in out:
            out.append(name)
    return out


class RagmeterEvaluator(BaseEvaluator):
    """Deterministic, reference-based answer metrics for LlamaIndex evaluation loops.

    ``metrics`` are ragmeter answer-metric names (``"token_f1"``, ``"exact_match"``,
    ``"context_recall"``, ``"context_precision"``, ``"faithfulness"`` ...; see
    :func:`ragmeter.evaluation.rag.evaluate_rag`); the first is the headline and becomes
    ``EvaluationResult.score``. ``k`` is the cut-off of retrieval names (``"precision"``
    is reported as ``"precision@5"``). ``passing_threshold`` (optional) sets
    ``passing = score >= passing_threshold``.

    Ground truth comes as keyword arguments: ``reference=`` (the answer), ``references=``
    (further acceptable answers), ``reference_contexts=`` (gold passages), and for the
    retrieval names ``retrieved_ids=`` with ``reference_ids=`` or ``relevance=``;
    ``sample_id=`` names the sample. ``BatchEvalRunner`` forwards them from its keyword
    lists, e.g. ``runner.aevaluate_responses(queries, responses=responses,
    reference=answers)``.

    ``evaluate_response``/``aevaluate_response`` (what ``BatchEvalRunner.evaluate_queries``
    calls) read ``retrieved_ids`` from the response's source nodes, in order, by ``doc_id``
    (``"node_id"``, ``"ref_doc_id"``, ``"metadata.<key>"``, ``"content"`` or a function;
    each id kept at its best rank) unless you pass ``retrieved_ids=``, so
    ``runner.evaluate_queries(engine, queries=qs, reference_ids=[[...], ...])`` scores
    ``"ndcg"`` and the other retrieval metrics.

    A metric the inputs do not allow (``token_f1`` without a ``reference``) is ``None`` in
    the result's ``metrics`` with the reason in ``not_computed``; if it is the headline, the
    result has ``invalid_result=True`` and that reason, never a misleading 0. Nothing is
    raised for that, so a batch keeps going. When, after five samples, not one
    ``retrieved_ids`` entry was among any sample's ``reference_ids``/``relevance`` ids, the
    ids name documents differently: each result says so in ``details["warnings"]`` and its
    ``feedback`` (logged once on ``ragmeter_llamaindex``). Raises
    :class:`~ragmeter.errors.UnknownMetricError` for an unknown metric (at construction)
    and :class:`~ragmeter.errors.InvalidInputError` for an unknown keyword argument or an
    invalid value (e.g. ``reference=3``).
    """

    def __init__(
        self,
        metrics: Sequence[str] | str = ("token_f1",),
        *,
        k: int = 5,
        passing_threshold: float | None = None,
        doc_id: DocId = "node_id",
    ) -> None:
        self.metrics = _resolve(metrics)
        self.k = check_k(k)
        self.passing_threshold = passing_threshold
        self.doc_id = check_doc_id(doc_id)
        self._watch = IdWatch(
            IDS_HINT, truth="the reference ids", logger=logging.getLogger("ragmeter_llamaindex")
        )

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
        for name in self.metrics:
            try:
                report = evaluate_rag([sample], metrics=[name], k=self.k)
            except InvalidInputError as exc:
                key = _report_key(name, self.k)
                scores[key] = None
                reasons[key] = str(exc)
                continue
            for key in report.metrics:
                scores[key] = report.per_sample[sample.id].get(key)
            details.update(report.details.get(sample.id, {}))
        judged = sample.relevance_map()
        if sample.retrieved_ids is not None and judged is not None:
            warning = self._watch.observe(sample.retrieved_ids, judged)
            if warning is not None:
                details["warnings"] = [warning]
        headline = next(iter(scores))
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


def _report_key(name: str, k: int) -> str:
    """The key ``evaluate_rag`` reports ``name`` under (``"precision"`` -> ``"precision@5"``)."""
    from ragmeter.metrics.base import RAG_METRICS

    metric: Any = RAG_METRICS.get_metric(name)
    at = getattr(metric, "at", None)
    if callable(at):
        metric = at(k)
    key = getattr(metric, "key", None)
    return key if isinstance(key, str) and key else name


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
