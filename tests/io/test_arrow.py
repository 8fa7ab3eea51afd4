"""Parquet and Arrow in and out: samples by record batch, score files, runs and qrels as tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragmeter.errors import DataFormatError, InvalidInputError, MissingDependencyError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io import read_qrels
from ragmeter.io.arrow import (
    qrels_from_arrow,
    qrels_to_arrow,
    read_parquet,
    run_from_arrow,
    run_to_arrow,
    samples_from_arrow,
)
from ragmeter.io.jsonl import read_jsonl, write_jsonl
from ragmeter.io.scores import read_scores, write_scores
from ragmeter.io.trec import read_trec_run

DATA = Path(__file__).parents[1] / "data"

RAG_EVAL = [
    {
        "id": "s1",
        "question": "capital?",
        "answer": "Paris is in France. Lyon is big",
        "context": ["Paris is in France", "the capital"],
        "retrieved": ["Paris is in France", "x"],
        "golden_documents": ["Paris is in France"],
    },
    {"id": "s2", "question": "q", "answer": "four", "reference": "four", "context": []},
]


def _table(rows: list[dict[str, Any]]) -> Any:
    names = list(dict.fromkeys(k for row in rows for k in row))
    return pa.table({name: [row.get(name) for row in rows] for name in names})


def test_parquet_samples_score_like_jsonl(tmp_path: Path) -> None:
    jsonl = tmp_path / "s.jsonl"
    write_jsonl(RAG_EVAL, jsonl)
    parquet = tmp_path / "s.parquet"
    pq.write_table(_table(RAG_EVAL), parquet)
    from_jsonl = evaluate_rag(read_jsonl(jsonl), k_values=2, per_sample=True)
    reader = read_parquet(parquet, batch_size=1)
    assert reader.num_rows == 2
    from_parquet = evaluate_rag(reader, k_values=2, per_sample=True)
    assert from_parquet.to_dict() == from_jsonl.to_dict()
    assert [s.model_dump() for s in read_parquet(parquet)] == [
        s.model_dump() for s in read_jsonl(jsonl)
    ]


def test_relevance_as_a_map_column_and_unknown_columns_in_metadata(tmp_path: Path) -> None:
    table = pa.table(
        {
            "id": ["a", "b"],
            "retrieved_ids": [["d1", "d2"], ["d3"]],
            "relevance": pa.array(
                [[("d2", 2.0)], [("d3", 1.0), ("d4", 1.0)]],
                type=pa.map_(pa.string(), pa.float64()),
            ),
            "team": ["x", None],
        }
    )
    samples = list(samples_from_arrow(table))
    assert samples[0].relevance == {"d2": 2.0}
    assert samples[0].metadata == {"team": "x"} and samples[1].metadata == {}
    report = evaluate_rag(iter(samples), metrics=["recall"], k_values=1)
    assert report.metrics == {"recall@1": 0.25}


def test_bad_rows_name_the_row_and_the_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(
        pa.table(
            {"id": ["a", "b", "c"], "answer": ["x", "y", "z"], "latency_ms": [1.0, -5.0, 2.0]}
        ),
        path,
    )
    with pytest.raises(DataFormatError, match=r"bad\.parquet: row 1: column 'latency_ms'") as e:
        list(read_parquet(path, batch_size=2))
    assert isinstance(e.value, InvalidInputError)
    reader = read_parquet(path, skip_errors=True)
    assert [s.id for s in reader] == ["a", "c"]
    assert [row for row, _ in reader.skipped] == [1]
    report = evaluate_rag(reader, metrics=["latency_ms"])
    assert report.skipped_lines == 1 and report.n_samples == 2
    alias = tmp_path / "alias.parquet"
    pq.write_table(pa.table({"answer": [3]}), alias)
    with pytest.raises(DataFormatError, match=r"row 0: column 'answer': Input should be"):
        list(read_parquet(alias))
    not_parquet = tmp_path / "no.parquet"
    not_parquet.write_text("nope")
    with pytest.raises(DataFormatError, match="not a readable Parquet file"):
        list(read_parquet(not_parquet))
    with pytest.raises(FileNotFoundError):
        read_parquet(tmp_path / "missing.parquet")


def test_score_files_in_both_formats_round_trip(tmp_path: Path) -> None:
    report = evaluate_rag(RAG_EVAL, k_values=2)
    for name in ("scores.parquet", "scores.jsonl.gz"):
        assert write_scores(report, tmp_path / name) == 2
        assert read_scores(tmp_path / name) == report.per_sample
    table = pq.read_table(tmp_path / "scores.parquet")
    assert table.schema.field("faithfulness").type == pa.float64()
    details = table.column("details").to_pylist()
    assert [json.loads(d) for d in details] == [report.details["s1"], report.details["s2"]]
    qrels = read_qrels(DATA / "trec_eval/qrels.test")
    retrieval = evaluate_run(qrels, read_trec_run(DATA / "trec_eval/results.test"))
    write_scores(retrieval, tmp_path / "per_query.parquet")
    assert read_scores(tmp_path / "per_query.parquet") == retrieval.per_query
    assert "details" not in pq.read_table(tmp_path / "per_query.parquet").schema.names


def test_runs_and_qrels_as_tables() -> None:
    run = read_trec_run(DATA / "trec_eval/results.test")
    again = run_from_arrow(run_to_arrow(run))
    assert again == run and list(again) == list(run)
    assert again.scores == run.scores
    qrels = read_qrels(DATA / "trec_eval/qrels.test")
    assert qrels_from_arrow(qrels_to_arrow(qrels)) == qrels
    ties = run_from_arrow(
        pa.table({"query_id": ["q", "q", "q"], "doc_id": ["a", "c", "b"], "score": [1, 2, 2]})
    )
    assert ties == {"q": ["c", "b", "a"]}  # score descending, ties by doc id descending
    ints = qrels_from_arrow(pa.table({"query_id": [1], "doc_id": [7], "relevance": [1]}))
    assert ints == {"1": {"7": 1}}


@pytest.mark.parametrize(
    ("table", "pattern"),
    [
        (
            {"query_id": ["q"], "doc_id": ["a"], "score": [float("nan")]},
            r"the run row 0, column 'score': a score must be a finite number, got nan",
        ),
        (
            {"query_id": ["q", "q"], "doc_id": ["a", "a"], "score": [1.0, 0.5]},
            r"the run row 1: doc 'a' is listed twice for query 'q'",
        ),
        (
            {"query_id": [1.5], "doc_id": ["a"], "score": [1.0]},
            r"the run row 0, column 'query_id': an id must be a string",
        ),
        ({"qid": ["q"], "doc_id": ["a"], "score": [1.0]}, r"the run has no column 'query_id'"),
    ],
)
def test_run_tables_refuse_bad_rows(table: dict[str, list[Any]], pattern: str) -> None:
    with pytest.raises(InvalidInputError, match=pattern):
        run_from_arrow(pa.table(table))


def test_qrels_tables_refuse_bad_grades_and_conflicts() -> None:
    with pytest.raises(InvalidInputError, match=r"row 0, column 'relevance'.*got inf"):
        qrels_from_arrow(
            pa.table({"query_id": ["q"], "doc_id": ["a"], "relevance": [float("inf")]})
        )
    with pytest.raises(InvalidInputError, match=r"row 1: doc 'a' is judged twice .* \(row 0\)"):
        qrels_from_arrow(
            pa.table({"query_id": ["q", "q"], "doc_id": ["a", "a"], "relevance": [1, 2]})
        )
    same = qrels_from_arrow(
        pa.table({"query_id": ["q", "q"], "doc_id": ["a", "a"], "relevance": [1, 1]})
    )
    assert same == {"q": {"a": 1}} and "1 qrels row(s) repeat" in same.warnings[0]


def test_without_pyarrow_the_error_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def no_pyarrow(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ragmeter\[parquet\]'"):
        run_from_arrow(None)
    with pytest.raises(MissingDependencyError, match="ragmeter\\[parquet\\]"):
        evaluate_rag(RAG_EVAL, per_sample="scores.parquet")
