"""The MLflow GenAI scorer that runs one ragmeter sample metric on each evaluation row."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from mlflow.entities import Feedback, Trace
from mlflow.genai.scorers import Scorer

from ragmeter.evaluation.sample_retrieval import SampleRetrievalMetric
from ragmeter.metrics.base import RAG_METRICS, RagMetric
from ragmeter.mlflow._sample import row_sample

__all__ = ["RagmeterScorer", "resolve_metric"]


@lru_cache(maxsize=256)
def resolve_metric(metric: str, k: int | None) -> RagMetric:
    """The registered ragmeter metric ``metric`` (at cut-off ``k`` for a retrieval metric)."""
    found = RAG_METRICS.get_metric(metric)
    if isinstance(found, SampleRetrievalMetric) and k is not None:
        return found.at(k)
    return found


class RagmeterScorer(Scorer):  # type: ignore[misc]  # mypy does not follow mlflow
    """One ragmeter metric as an MLflow scorer (make one with :mod:`ragmeter.mlflow.scorers`).

    ``metric`` is a name registered in :data:`ragmeter.metrics.base.RAG_METRICS` and ``k``
    the cut-off of a retrieval metric. Each row becomes a :class:`~ragmeter.schema.RagSample`
    (:func:`ragmeter.mlflow._sample.row_sample`) and the score is the metric's ``score`` of
    it, the number :func:`ragmeter.evaluate_rag` gives that sample; ``None`` (no
    assessment, left out of the mean) when the row lacks what the metric needs. A metric
    with per-sample detail (faithfulness' supported and unsupported claims) returns a
    ``Feedback`` whose rationale is that detail as JSON.
    """

    metric: str
    k: int | None = None

    def __call__(  # None: no assessment (MLflow allows it, its annotation does not)
        self,
        *,
        inputs: Any = None,
        outputs: Any = None,
        expectations: dict[str, Any] | None = None,
        trace: Trace | None = None,
        session: list[Trace] | None = None,
    ) -> float | Feedback | None:
        sample = row_sample(inputs=inputs, outputs=outputs, expectations=expectations, trace=trace)
        metric = resolve_metric(self.metric, self.k)
        both = getattr(metric, "score_and_detail", None)  # evaluate_rag's path when there is one
        if callable(both):
            value, detail = both(sample)
        else:
            value, detail = (metric.score(sample) if metric.applies_to(sample) else None), None
        if value is None or not detail:
            return value
        return Feedback(value=value, rationale=json.dumps(detail, ensure_ascii=False))
