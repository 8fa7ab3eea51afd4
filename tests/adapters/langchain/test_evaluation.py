"""Captured samples scored by the core, checked against pytrec_eval and a JSONL round trip."""

from __future__ import annotations

import datetime

import pytest
from lc_testkit import assert_matches_trec_eval
from ragmeter_langchain import RagmeterCallbackHandler

from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.jsonl import read_jsonl


@pytest.fixture
def captured(make_chain, cranfield, judged_queries) -> RagmeterCallbackHandler:
    """The RAG chain run over 20 judged Cranfield queries, relevance passed as run metadata."""
    handler = RagmeterCallbackHandler()
    qids = list(judged_queries)
    configs = [
        {
            "callbacks": [handler],
            "max_concurrency": 4,
            "metadata": {
                "ragmeter_id": q,
                "ragmeter_relevance": cranfield.qrels[q],
                # half the references match the echo model's answer exactly
                "ragmeter_reference": f"answer: {judged_queries[q]}" if i % 2 else "no",
                "captured_at": datetime.date(2026, 1, 1),  # not JSON: stored as text
            },
        }
        for i, q in enumerate(qids)
    ]
    make_chain().batch([judged_queries[q] for q in qids], config=configs)
    return handler


def test_captured_run_scores_like_trec_eval(captured, cranfield, judged_queries):
    run = captured.to_run()
    assert run.keys() == judged_queries.keys()
    qrels = {q: cranfield.qrels[q] for q in judged_queries}
    report = evaluate_run(
        qrels, run, k_values=(5, 10), metrics=["ndcg", "recall", "precision", "map"]
    )
    assert_matches_trec_eval(report, qrels, run)
    # the relevance carried on the samples joins by ragmeter_id: same numbers, no qrels passed
    own = captured.evaluate_retrieval(
        k_values=(5, 10), metrics=["ndcg", "recall", "precision", "map"]
    )
    assert own.per_query == report.per_query


def test_evaluate_scores_the_answers(captured, judged_queries):
    report = captured.evaluate(metrics=["exact_match", "non_empty_rate"])
    assert report.n_samples == len(judged_queries)
    assert report.metrics["exact_match"] == 0.5
    assert report.metrics["non_empty_rate"] == 1.0


def test_to_jsonl_round_trips(captured, tmp_path):
    path = tmp_path / "samples.jsonl"
    assert captured.to_jsonl(path) == len(captured.samples)
    back = list(read_jsonl(path))
    assert back == captured.samples
    assert back[0].metadata["run_metadata"]["captured_at"] == "2026-01-01"
