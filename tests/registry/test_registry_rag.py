"""RAG reports in the registry: per-sample scores (``None`` included) and details read back
bit for bit; a judged report records its judge, prompt hash and tokens; a streamed report
that kept no rows still saves its means and intervals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ragmeter
from ragmeter.judge import FunctionJudge
from ragmeter.judge.metrics import Faithfulness
from ragmeter.registry import IncomparableRunsError, Registry
from ragmeter.report import RagEvalReport, RetrievalEvalReport

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"

SAMPLES = [
    {"id": "s1", "user_input": "capital of France?", "response": "Paris", "reference": "Paris",
     "retrieved_contexts": ["Paris is the capital of France."]},
    {"id": "s2", "user_input": "2 + 2?", "response": "five", "reference": "four",
     "retrieved_contexts": ["Two and two make four."]},
    {"id": "s3", "user_input": "largest ocean?", "response": "the Pacific",
     "retrieved_contexts": ["The Pacific is the largest ocean."]},
]  # fmt: skip


@pytest.fixture(autouse=True)
def _outside_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_a_rag_report_reads_back_bit_for_bit(tmp_path: Path) -> None:
    report = ragmeter.evaluate_rag(SAMPLES)
    assert any(None in row.values() for row in report.per_sample.values())  # s3: no reference
    registry = Registry(tmp_path / "runs.sqlite")
    record = report.save(name="rag", registry=registry)
    assert record.kind == "rag" and record.judge_model is None and record.tokens is None
    loaded = registry.load_report("rag")
    assert isinstance(loaded, RagEvalReport)
    assert json.dumps(loaded.per_sample) == json.dumps(report.per_sample)
    assert loaded.details == report.details and loaded.coverage == report.coverage
    assert loaded.metrics == report.metrics
    assert loaded.dataset_fingerprint == report.dataset_fingerprint
    for key, row in record.metrics.items():
        assert row.mean == report.metrics[key]
        assert row.n == report.coverage[key]


def test_a_judged_report_records_its_judge(tmp_path: Path) -> None:
    def verdict(messages: object) -> str:
        return '{"score": 0.75, "reason": "fine"}'

    judged = [
        ragmeter.evaluate_rag(
            SAMPLES,
            metrics=[Faithfulness(judge=FunctionJudge(verdict, model=model))],
            judge_cache=None,
        )
        for model in ("judge-a", "judge-b")
    ]
    registry = Registry(tmp_path / "runs.sqlite")
    a, b = (registry.save(r, name="judged") for r in judged)
    assert a.judge_model == "judge-a" and b.judge_model == "judge-b"
    assert a.judge_prompt_hash is not None and a.judge_prompt_hash == b.judge_prompt_hash
    settings = judged[0].extra["judges"]["judge_faithfulness"]
    assert settings["model"] == "judge-a" and len(settings["prompt_sha256"]) == 64
    verdict_ab = registry.comparability(a, b)
    assert not verdict_ab.comparable
    assert verdict_ab.reasons == ["judges.judge_faithfulness.model judge-a vs judge-b"]
    error = IncomparableRunsError.between(a.id, b.id, verdict_ab.reasons, len(verdict_ab.common))
    assert "common_queries=True" in str(error) and error.reasons == verdict_ab.reasons


def test_a_streamed_report_without_rows_saves_its_means(tmp_path: Path) -> None:
    qrels = ragmeter.read_trec_qrels(DATA / "qrels.test")
    report = ragmeter.evaluate_run_file(qrels, DATA / "results.test", per_query=False)
    kept = ragmeter.evaluate_run_file(qrels, DATA / "results.test")
    registry = Registry(tmp_path / "runs.sqlite")
    record = registry.save(report, name="streamed")
    full = registry.save(kept, name="kept")
    assert record.metrics == full.metrics  # the same means, intervals and n from the summaries
    loaded = registry.load_report("streamed")
    assert isinstance(loaded, RetrievalEvalReport) and loaded.per_query == {}
    assert loaded.metrics == report.metrics
    assert loaded.summary("ndcg@10").std == report.summary("ndcg@10").std
    assert registry.scored_ids("streamed") == [] and registry.scored_ids("kept") == list(
        kept.per_query
    )
