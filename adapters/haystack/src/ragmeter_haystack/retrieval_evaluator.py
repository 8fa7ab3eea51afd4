"""``RagmeterRetrievalEvaluator``: trec_eval-exact retrieval metrics as a Haystack component."""

# No `from __future__ import annotations` here: Haystack 2.x reads a component's socket
# types from its real (not string) annotations.
import logging
import math
from collections.abc import Sequence
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from ragmeter.capture import doc_id_problem
from ragmeter.errors import InvalidInputError, check_k
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.metrics.registry import get_metric
from ragmeter_haystack._documents import (
    UNMATCHABLE,
    check_field,
    check_grade_field,
    qrels_row,
    ranked_ids,
)

__all__ = ["DEFAULT_K_VALUES", "DEFAULT_METRICS", "RagmeterRetrievalEvaluator"]

logger = logging.getLogger("ragmeter_haystack")


def comparison_hint(field: str) -> str:
    """How to fix ids that never match, given ``document_comparison_field``."""
    return (
        f"Haystack: documents are matched on document_comparison_field={field!r}. Ground-truth "
        "Documents built from text (Document(content=...)) get a hash of it as their id, not "
        "the store's id; Haystack's own Document*Evaluators compare 'content' by default: "
        "pass RagmeterRetrievalEvaluator(document_comparison_field='content') or "
        "'meta.<key>'."
    )


DEFAULT_METRICS: tuple[str, ...] = ("ndcg", "recall", "precision", "mrr", "map", "hit_rate")
DEFAULT_K_VALUES: tuple[int, ...] = (1, 3, 5, 10)
_UNCUT = ("map", "mrr")


@component
class RagmeterRetrievalEvaluator:
    """Score retrieved documents against ground truth with trec_eval's conventions.

    Every number is computed by :func:`ragmeter.evaluation.retrieval.evaluate_run`, so it
    matches ``trec_eval`` / ``pytrec_eval`` to the last digit:

    * **Graded relevance.** A ground-truth document's grade is ``Document.score`` (or
      ``meta[<key>]`` with ``relevance_field="meta.<key>"``); when no document of a question
      has one, every ground-truth document is relevant with grade 1. A grade of 0 or below
      means *judged non-relevant*. NDCG uses linear gain.
    * **Cut-offs.** Every metric is reported at every ``k`` in ``k_values`` (``"ndcg@10"``),
      plus uncut ``"map"`` and ``"mrr"``. Precision@k divides by k; recall@k and AP by all
      relevant documents; the ideal DCG of NDCG@k is cut at k.
    * **Averaging.** ``score`` and ``metrics`` are means over the questions with at least one
      relevant ground-truth document. A question without one cannot be scored: its entry in
      ``individual_scores`` is ``nan`` (so ``EvaluationRunResult`` reports still work and
      pandas sees a missing value), its ``individual_metrics`` entry is ``None``, and it is
      left out of every mean.
    * **Duplicates.** A document retrieved twice counts once, at its best (first) rank; the
      later copy is dropped from the ranking (chunks of one source sharing a ``meta`` id are
      normal, not a retriever bug). A retrieved document without a value for
      ``document_comparison_field`` keeps its rank and matches nothing.

    ``score`` is the mean of ``score_metric`` (NDCG@10 by default) and ``individual_scores``
    its per-question values, the shape ``haystack.evaluation.EvaluationRunResult`` reads;
    ``metrics`` holds the mean of every ``metric@k`` and ``individual_metrics`` the
    per-question rows. All values are plain Python floats. ``warnings`` lists what could make
    the numbers wrong (each also logged on ``ragmeter_haystack``): retrieved ids that never,
    or for most questions never, appear in any ground truth (the comparison field probably
    differs: Haystack's own evaluators compare ``"content"``), and retrieved documents
    without a value for the comparison field.

    Usage example (Haystack's own NDCG example, which gives the same number here):

    >>> from haystack import Document
    >>> evaluator = RagmeterRetrievalEvaluator(document_comparison_field="content")
    >>> result = evaluator.run(
    ...     ground_truth_documents=[[Document(content="France", score=1.0),
    ...                              Document(content="Paris", score=0.5)]],
    ...     retrieved_documents=[[Document(content="France"), Document(content="Germany"),
    ...                           Document(content="Paris")]],
    ... )
    >>> round(result["score"], 4)  # NDCG@10
    0.9502
    >>> result["metrics"]["recall@1"], result["metrics"]["mrr"]
    (0.5, 1.0)
    """

    def __init__(
        self,
        metrics: Sequence[str] = DEFAULT_METRICS,
        k_values: Sequence[int] = DEFAULT_K_VALUES,
        document_comparison_field: str = "id",
        *,
        relevance_field: str = "score",
        score_metric: str | None = None,
        relevance_level: float | None = None,
    ) -> None:
        """Create the evaluator.

        :param metrics: Registered ragmeter retrieval metrics, bare names (``"ndcg"``,
            ``"recall"``, ``"precision"``, ``"mrr"``, ``"map"``, ``"hit_rate"``, or any metric
            registered with ``ragmeter.metrics.registry``).
        :param k_values: Cut-offs; each metric is reported at each of them.
        :param document_comparison_field: What identifies a document: ``"id"``,
            ``"content"`` or ``"meta.<key>"`` (nested keys with dots).
        :param relevance_field: Where a ground-truth grade lives: ``"score"`` or ``"meta.<key>"``.
        :param score_metric: The result key reported as ``score`` (``"ndcg@10"``, ``"map"``...).
            ``None``: ``"ndcg@10"`` when produced, else the first metric at the largest k.
        :param relevance_level: ``None``: grade > 0 is relevant; else grade >= this
            (``trec_eval -l``).
        :raises ValueError: On an unknown metric, a ``k`` below 1, a bad field, or a
            ``score_metric`` that these metrics and cut-offs do not produce.
        """
        if isinstance(metrics, str):
            metrics = [metrics]
        self.metrics = [str(m) for m in metrics]
        if not self.metrics:
            raise InvalidInputError("metrics is empty: name at least one metric, e.g. ['ndcg']")
        for name in self.metrics:
            get_metric(name)
        if isinstance(k_values, int):
            k_values = [k_values]
        self.k_values = [check_k(k, name="every k in k_values") for k in k_values]
        if not self.k_values:
            raise InvalidInputError("k_values is empty: give at least one cut-off, e.g. [10]")
        self.document_comparison_field = check_field(document_comparison_field)
        self.relevance_field = check_grade_field(relevance_field)
        produced = [f"{m}@{k}" for m in self.metrics for k in self.k_values]
        produced += [m for m in self.metrics if m in _UNCUT]
        self.score_metric = score_metric
        if score_metric is None:
            top = max(self.k_values)
            self._score_key = "ndcg@10" if "ndcg@10" in produced else f"{self.metrics[0]}@{top}"
        elif score_metric not in produced:
            raise InvalidInputError(
                f"score_metric {score_metric!r} is not among the keys these metrics and k_values "
                f"produce: {', '.join(produced)}. Add its metric/cut-off or pick one of those."
            )
        else:
            self._score_key = score_metric
        self.relevance_level = relevance_level

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component: the saved config is exactly the init arguments."""
        return default_to_dict(
            self,
            metrics=list(self.metrics),
            k_values=list(self.k_values),
            document_comparison_field=self.document_comparison_field,
            relevance_field=self.relevance_field,
            score_metric=self.score_metric,
            relevance_level=self.relevance_level,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RagmeterRetrievalEvaluator":
        """Rebuild the component from :meth:`to_dict` output."""
        return default_from_dict(cls, data)

    @component.output_types(
        score=float,
        individual_scores=list[float],
        metrics=dict[str, float],
        individual_metrics=list[dict[str, float] | None],
        warnings=list[str],
    )
    def run(
        self,
        ground_truth_documents: list[list[Document]],
        retrieved_documents: list[list[Document]],
    ) -> dict[str, Any]:
        """Score each question's retrieved documents against its ground-truth documents.

        :param ground_truth_documents: One list of relevant documents per question.
        :param retrieved_documents: One ranked list (best first) per question.
        :returns: ``score`` (mean ``score_metric``), ``individual_scores`` (one per question,
            ``nan`` for a question with no relevant ground truth), ``metrics`` (mean of every
            ``metric@k``), ``individual_metrics`` (one dict per question, or ``None``) and
            ``warnings`` (plain-English cautions about the numbers; also logged).
        :raises ValueError: When the two lists differ in length, a question mixes graded and
            ungraded ground truth, a ground-truth document lacks the comparison field, or no
            question has a relevant ground-truth document.
        """
        n = len(ground_truth_documents)
        if n != len(retrieved_documents):
            raise InvalidInputError(
                f"ground_truth_documents has {n} lists but retrieved_documents has "
                f"{len(retrieved_documents)}: give one list per question in both, in the same order"
            )
        if n == 0:
            raise InvalidInputError(
                "ground_truth_documents and retrieved_documents are empty: nothing to evaluate"
            )
        field = self.document_comparison_field
        qrels = {
            str(i): qrels_row(gt, index=i, field=field, grade_field=self.relevance_field)
            for i, gt in enumerate(ground_truth_documents)
        }
        run = {str(i): ranked_ids(ret, field=field) for i, ret in enumerate(retrieved_documents)}
        report = evaluate_run(
            qrels,
            run,
            k_values=self.k_values,
            metrics=self.metrics,
            relevance_level=self.relevance_level,
        )
        warnings = list(report.warnings)
        found = {q: [d for d in ids if not d.startswith(UNMATCHABLE)] for q, ids in run.items()}
        problem = doc_id_problem(
            found, qrels, comparison_hint(field), truth="the ground-truth documents"
        )
        if problem is not None:  # names the fix, unlike the generic note of evaluate_run
            warnings = [w for w in warnings if "(doc_ids)" not in w] + [problem]
        retrieved = sum(len(ids) for ids in run.values())
        unmatchable = retrieved - sum(len(ids) for ids in found.values())
        if unmatchable:
            warnings.append(
                f"{unmatchable} of {retrieved} retrieved documents have no value for "
                f"document_comparison_field={field!r}; they keep their rank and match nothing"
            )
        for warning in warnings:
            logger.warning("%s", warning)
        rows: list[dict[str, float] | None] = []
        for i in range(n):
            row = report.per_query.get(str(i))
            rows.append(
                None if row is None else {k: float(row[k]) for k in report.metrics if k in row}
            )
        key = self._score_key
        if key not in report.metrics:
            raise InvalidInputError(
                f"score_metric {key!r} could not be computed (its metric failed; see the "
                f"warnings: {report.warnings})"
            )
        return {
            "score": float(report.metrics[key]),
            "individual_scores": [math.nan if row is None else row[key] for row in rows],
            "metrics": {k: float(v) for k, v in report.metrics.items()},
            "individual_metrics": rows,
            "warnings": warnings,
        }
