"""``RagmeterAnswerEvaluator``: ragmeter's deterministic answer metrics as a Haystack component."""

# No `from __future__ import annotations` here: Haystack 2.x reads a component's socket
# types from its real (not string) annotations.
import logging
import math
from collections.abc import Sequence
from typing import Any

from haystack import component, default_from_dict, default_to_dict

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.schema import RagSample

__all__ = ["DEFAULT_ANSWER_METRICS", "RagmeterAnswerEvaluator"]

logger = logging.getLogger("ragmeter_haystack")

DEFAULT_ANSWER_METRICS: tuple[str, ...] = ("token_f1", "exact_match")


@component
class RagmeterAnswerEvaluator:
    """Score generated answers with ragmeter's answer metrics (no LLM, deterministic).

    Each question becomes a :class:`~ragmeter.schema.RagSample` (``user_input``,
    ``response``, ``reference``, ``retrieved_contexts``) and every number is computed by
    :func:`ragmeter.evaluation.rag.evaluate_rag`. A metric needs certain inputs (e.g.
    ``exact_match`` and ``token_f1`` a ground-truth answer, ``faithfulness`` contexts);
    a question without them is not scored by that metric: its ``individual_scores`` entry
    is ``nan`` (its ``individual_metrics`` value ``None``) and it is left out of the mean.
    ``score`` is the mean of ``score_metric`` (the first metric by default); ``metrics``
    the mean of each metric. Plain Python floats.

    Usage example:

    >>> evaluator = RagmeterAnswerEvaluator(metrics=["token_f1", "exact_match"])
    >>> result = evaluator.run(
    ...     questions=["Capital of France?", "Largest planet?"],
    ...     predicted_answers=["Paris.", "The planet Jupiter"],
    ...     ground_truth_answers=["Paris", "Jupiter"],
    ... )
    >>> result["individual_scores"]  # token_f1 (articles and punctuation normalised away)
    [1.0, 0.6666666666666666]
    >>> result["metrics"]["exact_match"]
    0.5
    """

    def __init__(
        self,
        metrics: Sequence[str] = DEFAULT_ANSWER_METRICS,
        *,
        score_metric: str | None = None,
    ) -> None:
        """Create the evaluator.

        :param metrics: ragmeter answer metric names (``ragmeter.metrics.base.RAG_METRICS``):
            ``token_f1`` and ``exact_match`` (need ``ground_truth_answers``),
            ``context_recall`` and ``context_precision`` (``ground_truth_answers`` and
            ``contexts``), ``faithfulness`` and ``groundedness`` (``contexts``),
            ``abstained``, ``non_empty_rate``...
        :param score_metric: The metric reported as ``score``; default the first of ``metrics``.
        :raises ValueError: When ``metrics`` is empty, names an unknown metric, or
            ``score_metric`` is not among them.
        """
        if isinstance(metrics, str):
            metrics = [metrics]
        self.metrics = [str(m) for m in metrics]
        if not self.metrics:
            raise InvalidInputError("metrics is empty: name at least one metric, e.g. ['token_f1']")
        for name in self.metrics:
            RAG_METRICS.get_metric(name)
        if score_metric is not None and score_metric not in self.metrics:
            raise InvalidInputError(
                f"score_metric {score_metric!r} is not one of metrics {self.metrics}: add it there"
            )
        self.score_metric = score_metric

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component: the saved config is exactly the init arguments."""
        return default_to_dict(self, metrics=list(self.metrics), score_metric=self.score_metric)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RagmeterAnswerEvaluator":
        """Rebuild the component from :meth:`to_dict` output."""
        return default_from_dict(cls, data)

    @component.output_types(
        score=float,
        individual_scores=list[float],
        metrics=dict[str, float],
        individual_metrics=list[dict[str, float | None]],
    )
    def run(
        self,
        questions: list[str],
        predicted_answers: list[str],
        ground_truth_answers: list[str] | None = None,
        contexts: list[list[str]] | None = None,
    ) -> dict[str, Any]:
        """Score each predicted answer.

        :param questions: One question per sample.
        :param predicted_answers: The generated answer per question.
        :param ground_truth_answers: The expected answer per question (optional; ``None``
            entries allowed).
        :param contexts: The context texts handed to the generator, per question (optional).
        :returns: ``score``, ``individual_scores`` (``nan`` where ``score_metric`` did not
            apply), ``metrics`` (mean per metric) and ``individual_metrics`` (one dict per
            question).
        :raises ValueError: When the lists differ in length from ``questions``, are empty, or
            a metric gets none of the inputs it needs (e.g. ``token_f1`` without
            ``ground_truth_answers``); the message names the missing input.
        """
        n = len(questions)
        if n == 0:
            raise InvalidInputError("questions is empty: nothing to evaluate")
        for name, values in (
            ("predicted_answers", predicted_answers),
            ("ground_truth_answers", ground_truth_answers),
            ("contexts", contexts),
        ):
            if values is not None and len(values) != n:
                raise InvalidInputError(
                    f"{name} has {len(values)} items but questions has {n}: give one per question"
                )
        samples = [
            RagSample.model_validate(
                {
                    "id": str(i),
                    "user_input": questions[i],
                    "response": predicted_answers[i],
                    "reference": None if ground_truth_answers is None else ground_truth_answers[i],
                    "retrieved_contexts": None if contexts is None else list(contexts[i]),
                }
            )
            for i in range(n)
        ]
        try:
            report = evaluate_rag(samples, metrics=self.metrics)
        except InvalidInputError as exc:
            raise InvalidInputError(
                f"{exc} (here a sample's reference is ground_truth_answers, its "
                "retrieved_contexts are contexts and its response is predicted_answers)"
            ) from None
        for warning in report.warnings:
            logger.warning("%s", warning)
        rows: list[dict[str, float | None]] = []
        for i in range(n):
            row = report.per_sample.get(str(i)) or {}
            rows.append({m: _float_or_none(row.get(m)) for m in report.metrics})
        name = self.score_metric if self.score_metric is not None else self.metrics[0]
        keys = [k for k in report.metrics if k == name or k.startswith(name + "@")]
        if not keys:
            raise InvalidInputError(
                f"score_metric {name!r} could not be computed: {report.warnings or 'no detail'}"
            )
        key = keys[0]
        return {
            "score": float(report.metrics[key]),
            "individual_scores": [_nan_if_none(row.get(key)) for row in rows],
            "metrics": {k: float(v) for k, v in report.metrics.items()},
            "individual_metrics": rows,
        }


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value


def _float_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)
