"""Scores written back next to the traces: Phoenix annotation frames and annotation records.

* :func:`span_annotations`: one row per run span and metric (``span_id``,
  ``annotation_name``, ``annotator_kind="CODE"``, ``score``), the frame Phoenix's client logs
  with ``client.spans.log_span_annotations_dataframe(dataframe=...)``; one metric's rows,
  indexed by ``span_id``, are the older ``SpanEvaluations(eval_name, dataframe)``.
* :func:`document_annotations`: one row per retrieved document of a stage's retriever span
  (``span_id``, ``document_position`` = the document's zero-based place in that span's
  ranking, ``score`` = its grade in the qrels, ``label`` ``relevant`` / ``not relevant`` /
  ``unjudged``), Phoenix's document annotations (``DocumentEvaluations``).
* :func:`annotation_records`: the same span scores as plain dicts in the shape of Phoenix's
  span annotation API (``span_id``, ``name``, ``annotator_kind``, ``result: {score}``).

Samples read from traces carry ``metadata["span_id"]`` (the run's span) and
``metadata["stage_span_ids"]`` (each stage's span).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragmeter._version import __version__
from ragmeter.errors import InvalidInputError
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.schema import CONTEXT, RagSample, sample_keys

__all__ = ["annotation_records", "document_annotations", "span_annotations"]


def _rows_by_key(
    report: RetrievalEvalReport | RagEvalReport,
) -> Mapping[str, Mapping[str, float | None]]:
    rows = report.per_query if isinstance(report, RetrievalEvalReport) else report.per_sample
    if not rows:
        raise InvalidInputError(
            "the report keeps no per-query (per-sample) scores to write back: score with "
            "per_query=True (per_sample=True)"
        )
    return rows


def _span_of(samples: Iterable[RagSample]) -> dict[str, str]:
    """Each sample's key in a report (repeats ``"<id>#2"``...) -> its run span id."""
    listed = list(samples)
    spans: dict[str, str] = {}
    for key, sample in zip(sample_keys([s.id for s in listed]), listed, strict=True):
        span = sample.metadata.get("span_id")
        if isinstance(span, str):
            spans[key] = span
    if not spans:
        raise InvalidInputError(
            "none of the samples carries metadata['span_id']: only samples read from traces "
            "(ragmeter.traces.read or SpanProcessor) can be written back to their spans"
        )
    return spans


def annotation_records(
    report: RetrievalEvalReport | RagEvalReport,
    samples: Iterable[RagSample],
    *,
    metrics: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The report's per-query (per-sample) scores as span annotation records, one per run
    span and metric: ``{"span_id", "name", "annotator_kind": "CODE", "result": {"score"},
    "metadata": {"source": "ragmeter", "version"}}``. A score the metric did not compute for
    a run (NaN or absent) is left out."""
    spans = _span_of(samples)
    records: list[dict[str, Any]] = []
    for key, row in _rows_by_key(report).items():
        span = spans.get(key)
        if span is None:
            continue
        for name, value in row.items():
            if metrics is not None and name not in metrics:
                continue
            if not isinstance(value, (int, float)) or (
                isinstance(value, float) and math.isnan(value)
            ):
                continue
            records.append(
                {
                    "span_id": span,
                    "name": name,
                    "annotator_kind": "CODE",
                    "result": {"score": float(value)},
                    "metadata": {"source": "ragmeter", "version": __version__},
                }
            )
    return records


def span_annotations(
    report: RetrievalEvalReport | RagEvalReport,
    samples: Iterable[RagSample],
    *,
    metrics: Sequence[str] | None = None,
) -> Any:
    """:func:`annotation_records` as a pandas DataFrame with Phoenix's columns: ``span_id``,
    ``annotation_name``, ``annotator_kind``, ``score``."""
    import pandas as pd

    records = annotation_records(report, samples, metrics=metrics)
    return pd.DataFrame(
        {
            "span_id": [r["span_id"] for r in records],
            "annotation_name": [r["name"] for r in records],
            "annotator_kind": [r["annotator_kind"] for r in records],
            "score": [r["result"]["score"] for r in records],
        }
    )


def document_annotations(
    samples: Iterable[RagSample],
    qrels: Mapping[str, Mapping[str, float]] | None = None,
    *,
    stage: str = CONTEXT,
    name: str = "relevance",
    relevance_level: float | None = None,
) -> Any:
    """Each retrieved document of ``stage`` (default: what reached the LLM) judged against
    ``qrels`` (default: the samples' own relevance), as a pandas DataFrame with Phoenix's
    document columns: ``span_id`` (the stage's retriever or reranker span),
    ``document_position`` (zero-based), ``annotation_name``, ``annotator_kind``, ``score``
    (the grade; empty when unjudged) and ``label`` (``relevant`` when the grade is ``>=
    relevance_level``, or ``> 0`` by default; ``not relevant``; ``unjudged``)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    listed = list(samples)
    for key, sample in zip(sample_keys([s.id for s in listed]), listed, strict=True):
        judged = (
            qrels.get(sample.id, qrels.get(key)) if qrels is not None else sample.relevance_map()
        )
        found = _stage_span(sample, stage)
        if found is None:
            continue
        span, ids, positions = found
        for position, doc in zip(positions, ids, strict=True):
            grade = None if judged is None else judged.get(doc)
            rows.append(
                {
                    "span_id": span,
                    "document_position": position,
                    "annotation_name": name,
                    "annotator_kind": "CODE",
                    "score": None if grade is None else float(grade),
                    "label": _label(grade, relevance_level),
                }
            )
    columns = [
        "span_id",
        "document_position",
        "annotation_name",
        "annotator_kind",
        "score",
        "label",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    # an unjudged document has no score: None, not NaN (NaN is not JSON: an upload fails)
    frame["score"] = pd.Series([row["score"] for row in rows], dtype=object)
    return frame


def _stage_span(sample: RagSample, stage: str) -> tuple[str, list[str], list[int]] | None:
    """The span a stage's ranking came from, its doc ids, and each id's position in the
    span's own document list (they differ when the span repeated a doc id)."""
    spans = sample.metadata.get("stage_span_ids") or {}
    for entry in sample.stages or ():
        if entry.name != stage or entry.ids is None:
            continue
        own = entry.same_as if entry.same_as is not None else entry.name
        span = spans.get(own)
        if not isinstance(span, str):
            return None
        ids = list(entry.ids)
        positions = (sample.metadata.get("stage_positions") or {}).get(own) or range(len(ids))
        return span, ids, list(positions)
    return None


def _label(grade: float | None, level: float | None) -> str:
    if grade is None:
        return "unjudged"
    relevant = grade > 0 if level is None else grade >= level
    return "relevant" if relevant else "not relevant"
