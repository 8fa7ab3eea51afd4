"""The CLI's streamed paths: `eval` holds no samples, `retrieval` scores a run file by query."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragmeter import cli
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.io.jsonl import write_jsonl
from ragmeter.io.scores import read_scores

DATA = Path(__file__).parents[1] / "data"

SAMPLES = [
    {"id": "a", "question": "q", "answer": "Paris", "reference": "Paris", "context": ["Paris"]},
    {"id": "b", "question": "q", "answer": "Lyon", "reference": "Nice", "context": ["x y"]},
    {"id": "a", "question": "q", "answer": "Nice", "reference": "Nice", "context": []},
]


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_eval_json_streams_and_keeps_scores_only_when_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "s.jsonl"
    write_jsonl(SAMPLES, data)
    expected = evaluate_rag(SAMPLES)
    code, out, err = invoke(capsys, "eval", str(data), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["metrics"] == expected.metrics and report["per_sample"] == {}
    assert report["extra"]["per_sample"] == "not kept"
    code, out, err = invoke(capsys, "eval", str(data), "--json", "--per-sample")
    assert json.loads(out)["per_sample"] == expected.per_sample
    scores = tmp_path / "out" / "scores.parquet"
    code, out, err = invoke(capsys, "eval", str(data), "--per-sample-out", str(scores))
    assert code == 0, err
    assert read_scores(scores) == expected.per_sample
    code, out, err = invoke(capsys, "eval", str(data), "--per-sample-out", "x.csv")
    assert code == 2 and "--per-sample-out: cannot tell the format" in err


def test_eval_reads_parquet(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    names = list(dict.fromkeys(k for s in SAMPLES for k in s))
    table = pa.table({n: [s.get(n) for s in SAMPLES] for n in names})
    pq.write_table(table, tmp_path / "s.parquet")
    code, out, err = invoke(capsys, "eval", str(tmp_path / "s.parquet"), "--json")
    assert code == 0, err
    assert json.loads(out)["metrics"] == evaluate_rag(SAMPLES).metrics
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"answer": [1.5]}), bad)
    code, out, err = invoke(capsys, "eval", str(bad))
    assert code == 1 and "bad.parquet: row 0: column 'answer'" in err


def test_retrieval_gives_one_report_for_grouped_and_scattered_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    qrels = str(DATA / "trec_eval/qrels.test")
    lines = (DATA / "trec_eval/results.test").read_text().splitlines()
    grouped = tmp_path / "grouped"
    order: dict[str, int] = {}
    for line in lines:
        order.setdefault(line.split()[0], len(order))
    grouped.write_text("\n".join(sorted(lines, key=lambda x: order[x.split()[0]])) + "\n")
    scattered = tmp_path / "scattered"
    scattered.write_text("\n".join([*lines[1:], lines[0]]) + "\n")
    outputs = []
    for run in (grouped, scattered):
        out_file = tmp_path / f"{run.name}.jsonl"
        code, out, err = invoke(
            capsys,
            "retrieval",
            "--qrels",
            qrels,
            "--run",
            str(run),
            "--json",
            "--per-query-out",
            str(out_file),
        )
        assert code == 0, err
        report = json.loads(out)
        assert read_scores(out_file) == report["per_query"]
        report["extra"].pop("per_query_file")
        outputs.append(report)
    assert outputs[0] == outputs[1]
