"""What the model-scored metrics (judges, embeddings) share when they join a RAG report:
the report of the other metrics to add to, and how one metric's scores land in it."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from ragmeter.report import DatasetFingerprint, RagEvalReport
from ragmeter.schema import RagSample, sample_keys

__all__ = ["add_metric", "base_report"]


def base_report(
    coerced: Sequence[RagSample],
    other_metrics: Sequence[Any] | None,
    evaluate: Callable[..., RagEvalReport],
    kwargs: Mapping[str, Any],
) -> tuple[RagEvalReport, list[str], list[RagSample]]:
    """The report of ``other_metrics`` (``None``: ``evaluate``'s defaults; empty: a report
    with no metric yet), the samples' report ids (a repeated id is ``"<id>#2"``), and the
    samples renamed to those ids."""
    if other_metrics is None or other_metrics:
        chosen = None if other_metrics is None else list(other_metrics)
        report = evaluate(coerced, metrics=chosen, **kwargs)
    else:
        report = RagEvalReport(metrics={}, coverage={}, n_samples=len(coerced))
        report.per_sample = {sid: {} for sid in sample_keys([s.id for s in coerced])}
        report.skipped_lines = int(kwargs.get("skipped_lines", 0) or 0)
    report.set_dataset_fingerprint(partial(DatasetFingerprint.of_samples, coerced))
    ids = sample_keys([s.id for s in coerced])
    renamed = [
        s if s.id == sid else s.model_copy(update={"id": sid})
        for s, sid in zip(coerced, ids, strict=True)
    ]
    return report, ids, renamed


def add_metric(
    report: RagEvalReport,
    key: str,
    higher_is_better: bool,
    rows: Sequence[tuple[str, float | None, dict[str, Any]]],
    none_scored: str,
) -> None:
    """Put one metric's ``(sample id, score, detail)`` rows and its mean in ``report``; with
    no score at all, leave it out of ``metrics`` and say why (``none_scored``): never a 0.0
    that means "nothing was measured"."""
    values: list[float] = []
    for sid, value, info in rows:
        report.per_sample.setdefault(sid, {})[key] = value
        if value is not None:
            values.append(value)
        if info:
            report.details.setdefault(sid, {})[key] = info
    if values:
        report.metrics[key] = math.fsum(values) / len(values)
        report.coverage[key] = len(values)
        report.higher_is_better[key] = higher_is_better
    else:
        report.extra.setdefault("not_computed", {})[key] = none_scored
        report.warnings.append(f"{key}: {none_scored}")
