"""``ragmeter traces``: production traces scored from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragmeter import cli
from ragmeter.traces import read

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_traces_with_qrels_print_trec_eval_numbers_and_the_counts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = DATA / "langchain" / "hybrid.jsonl"
    qrels = DATA / "langchain" / "qrels.tsv"
    code, out, err = invoke(
        capsys,
        "traces",
        str(path),
        "--qrels",
        str(qrels),
        "--join-key",
        "metadata.query_id",
        "--k",
        "5,10",
        "--json",
        "--html",
        str(tmp_path / "r.html"),
    )
    assert code == 0, err
    report = json.loads(out)
    expected = read(path, join_key="metadata.query_id").evaluate_retrieval(
        {q: dict(r) for q, r in _qrels(qrels).items()}, k_values=(5, 10)
    )
    assert report["metrics"] == expected.metrics
    assert report["extra"]["traces"]["joined"] == 5
    assert "read 5 traces: 5 runs, 5 joined to a query id, 0 not" in err
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def _qrels(path: Path) -> dict[str, dict[str, float]]:
    from ragmeter.io import read_qrels

    return {q: dict(r) for q, r in read_qrels(path).items()}


def test_traces_without_qrels_score_the_answers_and_an_unjoined_run_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(capsys, "traces", str(DATA / "haystack" / "basic.jsonl.gz"))
    assert code == 0, err
    assert "Traces: 5 runs scored (no qrels)" in out and "non_empty_rate" in out
    code, out, err = invoke(
        capsys,
        "traces",
        str(DATA / "haystack" / "basic.jsonl"),
        "--qrels",
        str(DATA / "haystack" / "qrels.tsv"),
        "--join-key",
        "no.such.key",
    )
    assert code == 1  # nothing joined: a clear error with the fix, never a mean of zeros
    assert "read 5 traces: 5 runs, 0 joined to a query id, 5 not" in err
    assert "none of the 5 captured sample ids" in err and "join_key=" in err


def test_a_bad_trace_file_exits_1_naming_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": []}\nnot json\n', encoding="utf-8")
    code, _, err = invoke(capsys, "traces", str(bad))
    assert code == 1
    assert "bad.jsonl:2: not valid JSON" in err
    code, _, err = invoke(capsys, "traces", str(tmp_path / "absent.jsonl"))
    assert code == 2 and "absent.jsonl" in err


def test_traces_take_judged_only_and_show_judged_at_k(capsys: pytest.CaptureFixture[str]) -> None:
    """-J scores the traces' rankings as trec_eval -J does (pytrec_eval as the oracle), and
    the JSON report carries judged@k like every retrieval report."""
    import pytrec_eval

    path = DATA / "langchain" / "hybrid.jsonl"
    qrels = _qrels(DATA / "langchain" / "qrels.tsv")
    args = ["traces", str(path), "--qrels", str(DATA / "langchain" / "qrels.tsv")]
    args += ["--join-key", "metadata.query_id", "--k", "10", "--json", "--per-query"]
    code, out, err = invoke(capsys, *args, "--judged-only")
    assert code == 0, err
    report = json.loads(out)
    assert "judged" in report and report["judged"]["judged_only"] is True
    run = read(path, join_key="metadata.query_id").to_run()
    scored = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    grades = {q: {d: int(g) for d, g in row.items()} for q, row in qrels.items()}
    oracle = pytrec_eval.RelevanceEvaluator(
        grades, {"ndcg_cut_10"}, judged_docs_only_flag=True
    ).evaluate(scored)
    for qid, values in oracle.items():
        assert report["per_query"][qid]["ndcg@10"] == pytest.approx(
            values["ndcg_cut_10"], abs=1e-12
        )
