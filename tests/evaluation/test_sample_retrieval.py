"""Retrieval metrics on samples: always evaluate_run's numbers; rag-eval's texts-as-ids case."""

from __future__ import annotations

import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st
from rag_eval.retrieval import precision_at_k as rag_eval_precision_at_k

from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run
from ragmeter.errors import DuplicateDocumentError, InvalidInputError, UnknownMetricError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.evaluation.sample_retrieval import (
    NdcgAtK,
    PrecisionAtK,
    RecallAtK,
    sample_ranking,
)
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.schema import RagSample

NAMES = ["ndcg", "recall", "precision", "mrr", "map", "hit_rate"]


def _cranfield_samples() -> tuple[
    list[RagSample], dict[str, dict[str, float]], dict[str, list[str]]
]:
    _, _, qrels = load_cranfield()
    run = load_cranfield_bm25_run()
    samples = [
        RagSample(id=qid, retrieved_ids=list(run.get(qid, [])), relevance=dict(judged))
        for qid, judged in qrels.items()
    ]
    return samples, qrels, dict(run)


def test_cranfield_samples_give_evaluate_run_numbers() -> None:
    samples, qrels, run = _cranfield_samples()
    report = evaluate_rag(samples, metrics=NAMES, k_values=10)
    expected = evaluate_run(qrels, run, k_values=(10,), metrics=NAMES)
    for name in NAMES:
        key = f"{name}@10"
        assert report.metrics[key] == pytest.approx(expected.metrics[key], abs=1e-15)
        assert report.coverage[key] == expected.n_queries
        assert report.scores(key) == expected.scores(key)
    assert report.extra["k"] == 10


def test_cranfield_against_pytrec_eval() -> None:
    samples, qrels, _ = _cranfield_samples()
    run = load_cranfield_bm25_run()
    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items()},
        {"ndcg_cut.10", "P.10", "recall.10"},
    )
    oracle = evaluator.evaluate(run.scores)
    report = evaluate_rag(samples, metrics=["ndcg", "precision", "recall"], k_values=10)
    compared = 0
    for qid, row in oracle.items():
        ours = report.per_sample[qid]
        if ours["ndcg@10"] is None:
            continue
        assert ours["ndcg@10"] == pytest.approx(row["ndcg_cut_10"], abs=1e-12)
        assert ours["precision@10"] == pytest.approx(row["P_10"], abs=1e-12)
        assert ours["recall@10"] == pytest.approx(row["recall_10"], abs=1e-12)
        compared += 1
    assert compared > 200


def test_graded_and_binary_relevance_on_one_sample() -> None:
    graded = RagSample(retrieved_ids=["d1", "d2", "d3"], relevance={"d3": 2, "d1": 1})
    assert RecallAtK(k=2).score(graded) == 0.5
    assert PrecisionAtK(k=3).score(graded) == pytest.approx(2 / 3)
    binary = RagSample(retrieved_ids=["x", "d1"], reference_ids=["d1"])
    assert NdcgAtK(k=2).score(binary) == pytest.approx(0.6309297535714575)
    assert RecallAtK(k=1).score(binary) == 0.0


def test_rag_eval_readme_precision() -> None:
    retrieved = ["Paris is the capital of France.", "Lyon is in France."]
    golden = ["Paris is the capital of France."]
    sample = RagSample(retrieved=retrieved, golden_documents=golden)
    assert PrecisionAtK(k=1).score(sample) == rag_eval_precision_at_k(retrieved, golden, k=1) == 1.0
    assert PrecisionAtK(k=5).score(sample) == rag_eval_precision_at_k(retrieved, golden, k=5) == 0.2


_TEXTS = st.sampled_from(["A", "B", "C", "D", "E", "Paris.", ""])


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXTS, max_size=8), st.lists(_TEXTS, min_size=1, max_size=4), st.integers(1, 6))
def test_texts_as_ids_equal_rag_eval_precision(
    retrieved: list[str], golden: list[str], k: int
) -> None:
    # set semantics: a text retrieved twice fills a slot once and wastes the other
    sample = RagSample(retrieved_texts=retrieved, reference_contexts=golden)
    assert PrecisionAtK(k=k).score(sample) == rag_eval_precision_at_k(retrieved, golden, k=k)


def test_repeated_text_wastes_a_slot() -> None:
    sample = RagSample(retrieved_texts=["A", "A", "B"], reference_contexts=["A", "B"])
    assert PrecisionAtK(k=2).score(sample) == 0.5  # not 1.0 as de-duplication would give
    assert RecallAtK(k=3).score(sample) == 1.0
    ranked, qrels = sample_ranking(sample)  # type: ignore[misc]
    assert ranked[0] == "A" and ranked[2] == "B" and ranked[1] not in qrels


def test_ids_win_over_texts_and_nothing_to_rank() -> None:
    both = RagSample(
        retrieved_ids=["d1"], reference_ids=["d1"], retrieved_texts=["x"], reference_contexts=["y"]
    )
    assert PrecisionAtK(k=1).score(both) == 1.0
    assert sample_ranking(RagSample(retrieved_ids=["d1"])) is None
    assert PrecisionAtK(k=1).score(RagSample(retrieved_texts=["x"])) is None
    assert not PrecisionAtK().applies_to(RagSample(retrieved_ids=["d1"]))


def test_difference_from_rag_eval_empty_golden_is_skipped() -> None:
    # rag-eval scores golden_documents == [] as precision 0.0; evaluate_run averages only
    # over queries with a relevant judgement, so ragmeter skips the sample.
    assert rag_eval_precision_at_k(["A"], [], k=1) == 0.0
    assert PrecisionAtK(k=1).score(RagSample(retrieved=["A"], golden_documents=[])) is None
    report = evaluate_rag(
        [
            RagSample(id="s1", retrieved=["A"], golden_documents=[]),
            RagSample(id="s2", retrieved=["A"], golden_documents=["A"]),
        ],
        metrics=["precision"],
        k_values=1,
    )
    assert report.metrics == {"precision@1": 1.0}
    assert report.coverage == {"precision@1": 1}
    assert report.per_sample["s1"]["precision@1"] is None


def test_errors() -> None:
    dup = RagSample(id="q7", retrieved_ids=["d1", "d1"], reference_ids=["d1"])
    with pytest.raises(DuplicateDocumentError, match="query 'q7' returns the same doc id"):
        PrecisionAtK().score(dup)
    with pytest.raises(DuplicateDocumentError, match="'d1'"):
        evaluate_rag([dup], metrics=["precision"])
    with pytest.raises(InvalidInputError, match="k must be an int >= 1, got 0"):
        PrecisionAtK(k=0)
    with pytest.raises(UnknownMetricError, match="no metric named 'precision@5'"):
        evaluate_rag([RagSample(retrieved_ids=["d"], reference_ids=["d"])], metrics=["precision@5"])
    no_relevant = RagSample(retrieved_ids=["d1"], relevance={"d1": 0})
    with pytest.raises(InvalidInputError, match="no sample has a relevant judgement"):
        evaluate_rag([no_relevant], metrics=["ndcg"])


def test_registry_objects_and_cutoffs() -> None:
    for name in NAMES:
        metric = RAG_METRICS[name]
        assert metric.key == f"{name}@5"  # type: ignore[attr-defined]
        assert metric.at(3).key == f"{name}@3"  # type: ignore[attr-defined]
    assert repr(PrecisionAtK(k=3)) == "PrecisionAtK(k=3)"
    sample = RagSample(id="s", retrieved_ids=["a", "b", "c"], reference_ids=["c"])
    report = evaluate_rag([sample], metrics=["hit_rate", PrecisionAtK(k=3)], k_values=2)
    assert report.metrics == {"hit_rate@2": 0.0, "precision@3": pytest.approx(1 / 3)}


def test_the_old_module_path_still_imports_with_a_deprecation_warning() -> None:
    import importlib
    import sys

    import pytest

    from ragmeter.evaluation import sample_retrieval

    sys.modules.pop("ragmeter.metrics.sample_retrieval", None)
    with pytest.warns(DeprecationWarning, match="moved to ragmeter.evaluation.sample_retrieval"):
        old = importlib.import_module("ragmeter.metrics.sample_retrieval")
    assert old.NdcgAtK is sample_retrieval.NdcgAtK
    assert old.__all__ == sample_retrieval.__all__
