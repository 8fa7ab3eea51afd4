"""ragmeter's deterministic sample metrics as MLflow GenAI scorers (no LLM, no network).

Each function returns a scorer for ``mlflow.genai.evaluate(data=..., scorers=[...])``; it
scores every row with the ragmeter metric of the same name, so its assessment equals
:func:`ragmeter.evaluate_rag`'s score for that row as a sample. How a row (``inputs``,
``outputs``, ``expectations``, and the retrieval spans of its ``trace``) becomes a sample is
described in :mod:`ragmeter.mlflow._sample`: the answer metrics read
``expectations["expected_response"]``, the context metrics the documents of the trace's
``RETRIEVER`` spans, the retrieval metrics those documents' ``metadata["doc_uri"]`` against
``expectations["expected_retrieved_context"]`` (or ``expectations["relevance"]``, graded).
A row without what a metric needs gets no assessment from it (ragmeter skips such a sample
rather than scoring it 0), so MLflow's ``<name>/mean`` is ragmeter's mean.

Names follow MLflow's (``ndcg_at_5``, as :func:`ragmeter.mlflow.log_report` names
``ndcg@5``). Importing this module needs no MLflow; making a scorer does
(``pip install 'ragmeter[mlflow]'``).

Usage (an app traced with a ``RETRIEVER`` span; no LLM is called)::

    from ragmeter.mlflow import scorers

    mlflow.genai.evaluate(
        data=[{"inputs": {"question": "Who?"},
               "expectations": {"expected_response": "Rollo",
                                "expected_retrieved_context": [{"doc_uri": "d7"}]}}],
        predict_fn=app,
        scorers=[scorers.exact_match(), scorers.token_f1(), scorers.faithfulness(),
                 scorers.context_recall(), scorers.ndcg(k=10)],
    )  # metrics: exact_match/mean, token_f1/mean, ..., ndcg_at_10/mean
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragmeter.errors import InvalidInputError, MissingDependencyError, check_k
from ragmeter.evaluation.sample_retrieval import SampleRetrievalMetric
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.mlflow._names import metric_name

if TYPE_CHECKING:
    from ragmeter.mlflow._scorer import RagmeterScorer

__all__ = [
    "context_precision",
    "context_recall",
    "exact_match",
    "faithfulness",
    "faithfulness_strict",
    "groundedness",
    "hit_rate",
    "latency_ms",
    "map",
    "mrr",
    "ndcg",
    "non_empty_rate",
    "precision",
    "recall",
    "scorer",
    "token_f1",
    "total_tokens",
]

DEFAULT_K = 5
"""The cut-off of a retrieval scorer when none is given (:func:`ragmeter.evaluate_rag`'s)."""


def scorer(metric: str, *, k: int | None = None, name: str | None = None) -> RagmeterScorer:
    """An MLflow scorer running the registered ragmeter sample metric ``metric``.

    ``k`` is the cut-off of a retrieval metric (``ndcg``, ``recall``, ``precision``,
    ``mrr``, ``map``, ``hit_rate``; default 5) and is refused for the others; ``name`` is
    the assessment's name (default: the MLflow spelling of the result key, ``"ndcg_at_5"``).
    Raises :class:`~ragmeter.errors.UnknownMetricError` for a name not registered and
    :class:`~ragmeter.errors.MissingDependencyError` without MLflow.
    """
    found = RAG_METRICS.get_metric(metric)
    if metric == "cost_usd":
        raise InvalidInputError(
            "cost_usd needs token prices, which an MLflow scorer does not take; score "
            "total_tokens, or compute the cost from the report of ragmeter.evaluate_rag"
        )
    key = metric
    if isinstance(found, SampleRetrievalMetric):
        k = check_k(DEFAULT_K if k is None else k)
        key = f"{metric}@{k}"
    elif k is not None:
        raise InvalidInputError(f"k is the cut-off of a retrieval metric; {metric!r} takes none")
    try:
        from ragmeter.mlflow._scorer import RagmeterScorer
    except ImportError:
        raise MissingDependencyError("mlflow", "mlflow") from None
    return RagmeterScorer(name=name or metric_name(key), metric=metric, k=k)


def exact_match(*, name: str | None = None) -> RagmeterScorer:
    """1.0 when the normalised response equals a normalised expected response, else 0.0."""
    return scorer("exact_match", name=name)


def token_f1(*, name: str | None = None) -> RagmeterScorer:
    """SQuAD token F1 of the response against the expected response(s), the best one."""
    return scorer("token_f1", name=name)


def context_recall(*, name: str | None = None) -> RagmeterScorer:
    """Share of the expected response's distinct tokens found in the retrieved text."""
    return scorer("context_recall", name=name)


def context_precision(*, name: str | None = None) -> RagmeterScorer:
    """Share of the retrieved documents sharing a token with the expected response."""
    return scorer("context_precision", name=name)


def faithfulness(*, name: str | None = None) -> RagmeterScorer:
    """Share of the response's claims whose content words (80%) occur in the retrieved text."""
    return scorer("faithfulness", name=name)


def faithfulness_strict(*, name: str | None = None) -> RagmeterScorer:
    """:func:`faithfulness` with a claim backed by one passage (words, numbers, negation)."""
    return scorer("faithfulness_strict", name=name)


def groundedness(*, name: str | None = None) -> RagmeterScorer:
    """Share of the response's distinct words that occur in the retrieved documents."""
    return scorer("groundedness", name=name)


def non_empty_rate(*, name: str | None = None) -> RagmeterScorer:
    """1.0 when the row retrieved anything (a document's text or id), else 0.0."""
    return scorer("non_empty_rate", name=name)


def latency_ms(*, name: str | None = None) -> RagmeterScorer:
    """The trace's execution duration in milliseconds (lower is better)."""
    return scorer("latency_ms", name=name)


def total_tokens(*, name: str | None = None) -> RagmeterScorer:
    """Input plus output tokens of the trace's ``token_usage`` (lower is better)."""
    return scorer("total_tokens", name=name)


def ndcg(*, k: int = DEFAULT_K, name: str | None = None) -> RagmeterScorer:
    """Graded NDCG@k (trec_eval ``ndcg_cut_k``) of the retrieved ``doc_uri`` ranking."""
    return scorer("ndcg", k=k, name=name)


def recall(*, k: int = DEFAULT_K, name: str | None = None) -> RagmeterScorer:
    """Recall@k (trec_eval ``recall_k``) of the retrieved ``doc_uri`` ranking."""
    return scorer("recall", k=k, name=name)


def precision(*, k: int = DEFAULT_K, name: str | None = None) -> RagmeterScorer:
    """Precision@k, dividing by k (trec_eval ``P_k``)."""
    return scorer("precision", k=k, name=name)


def mrr(*, k: int = DEFAULT_K, name: str | None = None) -> RagmeterScorer:
    """Reciprocal rank of the first relevant document within k."""
    return scorer("mrr", k=k, name=name)


def map(*, k: int = DEFAULT_K, name: str | None = None) -> RagmeterScorer:
    """Average precision within k over all relevant documents (trec_eval ``map_cut_k``)."""
    return scorer("map", k=k, name=name)


def hit_rate(*, k: int = DEFAULT_K, name: str | None = None) -> RagmeterScorer:
    """1.0 if a relevant document is in the top k (trec_eval ``success_k``)."""
    return scorer("hit_rate", k=k, name=name)
