"""Scores written back as Phoenix annotations, and Phoenix span exports read back."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ragmeter.errors import InvalidInputError
from ragmeter.io.otel import iter_otlp_json
from ragmeter.traces import (
    annotation_records,
    document_annotations,
    read,
    span_annotations,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
QRELS = {
    "q1": {"d1": 2, "d2": 1, "d3": 0},
    "q2": {"d4": 2, "d5": 1, "d6": 1},
    "q3": {"d7": 2, "d8": 1, "d9": 1},
    "q4": {"d19": 2, "d20": 1, "d21": 0},
    "q5": {"d16": 2, "d17": 1, "d18": 0},
}

# Phoenix's documented annotation columns (span and document annotations)
SPAN_COLUMNS = ["span_id", "annotation_name", "annotator_kind", "score"]
DOCUMENT_COLUMNS = [
    "span_id",
    "document_position",
    "annotation_name",
    "annotator_kind",
    "score",
    "label",
]


def test_span_scores_are_written_back_to_each_runs_span() -> None:
    traces = read(DATA / "llamaindex" / "rerank.jsonl", join_key="session.id")
    report = traces.evaluate_retrieval(QRELS, k_values=(5,))
    frame = span_annotations(report, traces.samples, metrics=["ndcg@5", "map"])
    assert list(frame.columns) == SPAN_COLUMNS
    assert len(frame) == 10 and set(frame["annotator_kind"]) == {"CODE"}
    spans = {s.metadata["span_id"]: s.id for s in traces.samples}
    for row in frame.itertuples():
        assert row.score == report.per_query[spans[row.span_id]][row.annotation_name]
    legacy = frame[frame.annotation_name == "map"].set_index("span_id")[["score"]]
    assert legacy.index.name == "span_id" and len(legacy) == 5  # SpanEvaluations' shape
    records = annotation_records(report, traces.samples, metrics=["map"])
    assert records[0]["result"]["score"] == report.per_query[spans[records[0]["span_id"]]]["map"]
    assert records[0]["metadata"]["source"] == "ragmeter"


def test_every_document_of_the_context_is_judged_on_its_retriever_span() -> None:
    traces = read(DATA / "llamaindex" / "rerank.jsonl", join_key="session.id")
    frame = document_annotations(traces.samples, QRELS)
    assert list(frame.columns) == DOCUMENT_COLUMNS
    spans = {s.span_id: s for s in iter_otlp_json(DATA / "llamaindex" / "rerank.jsonl")}
    for sample in traces.samples:
        rows = frame[frame.span_id.isin([sample.metadata["stage_span_ids"]["OverlapRerank"]])]
        assert list(rows.document_position) == list(range(len(sample.retrieved_ids or [])))
        span = spans[rows.span_id.iloc[0]]
        assert span.kind == "RERANKER"  # the context is the reranker's output
        for row, doc in zip(rows.itertuples(), sample.retrieved_ids or [], strict=True):
            grade = QRELS[sample.id].get(doc)
            assert (row.score if not pd.isna(row.score) else None) == (
                grade if grade is None else float(grade)
            )
            assert row.label == (
                "unjudged" if grade is None else "relevant" if grade > 0 else "not relevant"
            )
    retriever = document_annotations(traces.samples, QRELS, stage="BM25Retriever")
    assert len(retriever) == 25  # 5 documents a query from the retriever span


def test_write_back_needs_samples_read_from_traces() -> None:
    traces = read(DATA / "langchain" / "basic.jsonl", join_key="session.id")
    report = traces.evaluate_retrieval(QRELS, k_values=(5,))
    plain = [s.model_copy(update={"metadata": {}}) for s in traces.samples]
    with pytest.raises(InvalidInputError, match="metadata\\['span_id'\\]"):
        span_annotations(report, plain)


def _phoenix_frame(path: Path) -> pd.DataFrame:
    """A Phoenix span export as its client returns it: one row per span, nested attributes."""
    rows: list[dict[str, Any]] = []
    for span in iter_otlp_json(path):
        row: dict[str, Any] = {
            "context.trace_id": span.trace_id,
            "context.span_id": span.span_id,
            "parent_id": span.parent_id,
            "name": span.name,
            "span_kind": span.kind,
            "start_time": pd.Timestamp(span.start, unit="ns", tz="UTC"),
            "end_time": pd.Timestamp(span.end, unit="ns", tz="UTC"),
            "status_code": "OK",
            "status_message": "",
        }
        documents: dict[str, dict[int, dict[str, Any]]] = {}
        for key, value in span.attributes.items():
            match = re.match(
                r"^(retrieval\.documents|reranker\.(?:in|out)put_documents)\.(\d+)\.(.+)$", key
            )
            if match:
                documents.setdefault(match[1], {}).setdefault(int(match[2]), {})[match[3]] = value
            elif key != "openinference.span.kind":
                row[f"attributes.{key}"] = value
        for key, docs in documents.items():
            row[f"attributes.{key}"] = [docs[i] for i in sorted(docs)]
        rows.append(row)
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "framework,file", [("llamaindex", "rerank.jsonl"), ("haystack", "hybrid.jsonl")]
)
def test_a_phoenix_span_export_reads_as_the_otlp_file(
    framework: str, file: str, tmp_path: Path
) -> None:
    frame = _phoenix_frame(DATA / framework / file)
    from_file = read(DATA / framework / file, join_key="session.id")
    from_frame = read(frame, join_key="session.id")
    key = lambda s: s.id  # noqa: E731
    a = sorted(from_file.samples, key=key)
    b = sorted(from_frame.samples, key=key)
    assert [s.model_dump(exclude={"latency_ms", "stages"}) for s in a] == [
        s.model_dump(exclude={"latency_ms", "stages"}) for s in b
    ]
    assert [[(t.name, t.ids) for t in s.stages or ()] for s in a] == [
        [(t.name, t.ids) for t in s.stages or ()] for s in b
    ]
    pytest.importorskip("pyarrow")
    parquet = tmp_path / "spans.parquet"
    frame.to_parquet(parquet)
    assert sorted(
        s.retrieved_ids or [] for s in read(parquet, join_key="session.id").samples
    ) == sorted(s.retrieved_ids or [] for s in a)
    with pytest.raises(InvalidInputError, match="not a Phoenix span export"):
        read(frame.drop(columns=["context.span_id"]))
