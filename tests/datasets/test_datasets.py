"""The bundled Cranfield collection equals the public copy and reproduces trec_eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.beir import read_beir
from ragmeter.io.trec import TREC_ORDERING, read_trec_run

CRANFIELD = Path(__file__).resolve().parents[1] / "data" / "cranfield_beir"


def test_load_cranfield_equals_the_beir_copy() -> None:
    corpus, queries, qrels = load_cranfield()
    expected = read_beir(CRANFIELD)
    assert corpus == expected.corpus
    assert queries == expected.queries
    assert qrels == expected.qrels
    assert (len(corpus), len(queries), len(qrels)) == (1400, 225, 225)
    assert {g for j in qrels.values() for g in j.values()} <= {1, 2, 3, 4}


def test_load_cranfield_bm25_run_equals_the_trec_copy() -> None:
    run = load_cranfield_bm25_run()
    expected = read_trec_run(CRANFIELD / "bm25.run")
    assert dict(run) == dict(expected)
    assert run.scores == expected.scores
    assert run.ordering == TREC_ORDERING
    assert sum(map(len, run.values())) == 22471


def test_every_call_returns_fresh_copies() -> None:
    corpus, _, qrels = load_cranfield()
    corpus["1"] = "changed"
    qrels["1"]["184"] = 0
    again_corpus, _, again_qrels = load_cranfield()
    assert again_corpus["1"] != "changed"
    assert again_qrels["1"]["184"] == 3
    run = load_cranfield_bm25_run()
    run["1"].clear()
    assert len(load_cranfield_bm25_run()["1"]) == 100


def test_bm25_ndcg_at_10_equals_trec_eval() -> None:
    expected = json.loads((CRANFIELD / "bm25.expected.fullprec.json").read_text())["mean"]
    _, _, qrels = load_cranfield()
    report = evaluate_run(qrels, load_cranfield_bm25_run())
    assert report.primary == pytest.approx(expected["ndcg_cut_10"], abs=1e-12)
    assert round(report.primary or 0.0, 4) == 0.3458  # bm25.trec_eval.txt
    assert report.metrics["map"] == pytest.approx(expected["map"], abs=1e-12)
    assert report.metrics["mrr"] == pytest.approx(expected["recip_rank"], abs=1e-12)
    assert report.n_queries == 225
