"""``ragmeter stages`` and the stage table in ``ragmeter report --html``: every stage of
captured samples, scored as pytrec_eval scores it, and what each step gained or lost."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import pytrec_eval

import ragmeter
from ragmeter import cli
from ragmeter.io.jsonl import write_jsonl
from ragmeter.stages import evaluate_stages


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def staged() -> tuple[list[dict[str, Any]], dict[str, dict[str, list[str]]]]:
    """Cranfield samples as an adapter captures them: BM25's top 20, a shuffled top 10 as
    the reranker (what reached the model), and the qrels on each sample."""
    _, _, qrels = ragmeter.load_cranfield()
    bm25 = ragmeter.load_cranfield_bm25_run()
    samples = []
    runs: dict[str, dict[str, list[str]]] = {"bm25": {}, "rerank": {}}
    for qid in list(qrels)[:60]:
        top = list(bm25[qid][:20])
        reranked = top[:10]
        random.Random(qid).shuffle(reranked)
        runs["bm25"][qid], runs["rerank"][qid] = top, reranked
        samples.append(
            {
                "id": qid,
                "relevance": qrels[qid],
                "retrieved_ids": reranked,
                "stages": [
                    {"name": "bm25", "ids": top},
                    {"name": "rerank", "kind": "reranker", "ids": reranked, "inputs": ["bm25"]},
                    {"name": "context", "kind": "context", "ids": reranked, "same_as": "rerank"},
                ],
            }
        )
    return samples, runs


@pytest.fixture
def samples_file(tmp_path: Path, staged: Any) -> Path:
    path = tmp_path / "captured.jsonl"
    write_jsonl(staged[0], path)
    return path


def test_the_stage_table_is_printed_with_each_step_against_what_it_consumed(
    capsys: pytest.CaptureFixture[str], samples_file: Path, staged: Any
) -> None:
    code, out, err = invoke(capsys, "stages", str(samples_file), "--k", "10,20")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Stages over 60 judged queries")
    header = lines[1].split()
    assert header[:3] == ["stage", "kind", "samples"] and "ndcg@10" in header
    rows = {line.split()[0]: line for line in lines[3:]}
    assert list(rows) == ["bm25", "rerank", "context"]
    report = evaluate_stages(staged[0], k_values=(10, 20))
    rerank = report["rerank"]
    assert rerank.comparison is not None and f"{rerank.comparison.mean_diff:+.4f}" in rows["rerank"]
    assert "= rerank" in rows["context"] and " bm25 " in rows["rerank"]


def test_json_holds_every_stage_scored_as_pytrec_eval_does(
    capsys: pytest.CaptureFixture[str], samples_file: Path, staged: Any
) -> None:
    code, out, _ = invoke(capsys, "stages", str(samples_file), "--json", "--metrics", "ndcg")
    assert code == 0
    data = json.loads(out)
    by_stage = {row["stage"]: row for row in data["stages"]}
    _, _, qrels = ragmeter.load_cranfield()
    for name, run in staged[1].items():
        judged = {q: {d: int(g) for d, g in qrels[q].items()} for q in run}
        scored = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
        oracle = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut_10"}).evaluate(scored)
        mean = sum(row["ndcg_cut_10"] for row in oracle.values()) / len(oracle)
        assert by_stage[name]["metrics"]["ndcg@10"] == pytest.approx(mean, abs=1e-12)
    assert by_stage["rerank"]["against"] == "bm25"
    assert by_stage["rerank"]["comparison"]["n"] == 60


def test_html_writes_the_stage_page(
    capsys: pytest.CaptureFixture[str], samples_file: Path, tmp_path: Path
) -> None:
    page = tmp_path / "stages.html"
    code, _, err = invoke(capsys, "stages", str(samples_file), "--html", str(page))
    assert code == 0 and f"wrote {page}" in err
    text = page.read_text(encoding="utf-8")
    assert "default-src 'none'" in text and "<script" not in text  # static, offline
    assert "<td>rerank</td>" in text and "<td>= rerank</td>" in text


def test_the_rag_report_page_carries_the_stage_table(
    capsys: pytest.CaptureFixture[str], samples_file: Path, tmp_path: Path
) -> None:
    page = tmp_path / "rag.html"
    code, out, err = invoke(capsys, "report", str(samples_file), "--html", str(page))
    assert code == 0, err
    assert "3 stages" in out
    text = page.read_text(encoding="utf-8")
    assert 'id="stages"' in text and "<td>bm25</td>" in text


def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, samples_file: Path
) -> None:
    code, _, err = invoke(capsys, "stages", str(tmp_path / "nope.jsonl"))
    assert code == 1 and err.startswith("ragmeter: error: ") and "nope.jsonl" in err
    plain = tmp_path / "plain.jsonl"
    write_jsonl([{"id": "q1", "retrieved_ids": ["d1"], "relevance": {"d1": 1}}], plain)
    code, _, err = invoke(capsys, "stages", str(plain))
    assert code == 1 and "carries stages" in err
    code, _, err = invoke(capsys, "stages", str(samples_file), "--stage", "dense")
    assert code == 1 and "stages ['dense'] are not stages of these samples" in err
    code, _, err = invoke(capsys, "stages", str(samples_file), "--missing-queries", "some")
    assert code == 2 and "--missing-queries must be 'zero' or 'skip'" in err
