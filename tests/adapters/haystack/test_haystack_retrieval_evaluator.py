"""RagmeterRetrievalEvaluator: trec_eval parity, conventions, serialisation, errors."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("haystack")
from haystack import Document, Pipeline
from haystack.core.serialization import component_from_dict, component_to_dict
from haystack.evaluation import EvaluationRunResult
from ragmeter_haystack import RagmeterRetrievalEvaluator

from ragmeter.errors import InvalidInputError, NoScorableQueriesError, UnknownMetricError

pytrec_eval = pytest.importorskip("pytrec_eval")

D = Document


def _gt(ids: dict[str, float] | list[str]) -> list[Document]:
    if isinstance(ids, dict):
        return [D(id=i, score=g) for i, g in ids.items()]
    return [D(id=i) for i in ids]


def _ret(ids: list[str]) -> list[Document]:
    return [D(id=i) for i in ids]


def test_hand_computed_graded_ndcg_and_binary_default() -> None:
    ev = RagmeterRetrievalEvaluator(k_values=[3])
    out = ev.run(
        ground_truth_documents=[_gt({"a": 2, "b": 1}), _gt(["c"])],
        retrieved_documents=[_ret(["x", "a", "b"]), _ret(["c", "y"])],
    )
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    idcg = 2 + 1 / math.log2(3)
    assert out["individual_metrics"][0]["ndcg@3"] == pytest.approx(dcg / idcg, abs=1e-12)
    assert out["individual_metrics"][1]["ndcg@3"] == 1.0
    assert out["individual_metrics"][0]["precision@3"] == pytest.approx(2 / 3)
    assert out["individual_metrics"][0]["mrr"] == 0.5
    assert out["score"] == out["metrics"]["ndcg@3"]  # no @10 asked: ndcg at the largest k


def test_default_score_is_ndcg_at_10_and_outputs_are_plain_floats() -> None:
    out = RagmeterRetrievalEvaluator().run(
        ground_truth_documents=[_gt(["a"]), _gt(["b", "c"])],
        retrieved_documents=[_ret(["a"]), _ret(["c", "z", "b"])],
    )
    assert out["score"] == out["metrics"]["ndcg@10"]
    assert out["individual_scores"] == [r["ndcg@10"] for r in out["individual_metrics"]]
    assert type(out["score"]) is float
    assert all(type(v) is float for v in out["metrics"].values())
    assert all(type(v) is float for v in out["individual_scores"])
    assert all(type(v) is float for row in out["individual_metrics"] for v in row.values())
    assert set(out["metrics"]) >= {f"{m}@{k}" for m in ("ndcg", "recall") for k in (1, 3, 5, 10)}
    assert {"map", "mrr"} <= set(out["metrics"])


def test_matches_pytrec_eval_on_cranfield_bm25(cranfield: Any) -> None:
    """Ground truth from Cranfield's graded qrels, rankings from its bundled BM25 run."""
    from ragmeter.datasets import load_cranfield_bm25_run

    _, _, qrels = cranfield
    run = load_cranfield_bm25_run()
    qids = sorted(set(qrels) & set(run))[:60]
    ev = RagmeterRetrievalEvaluator(k_values=[5, 10])
    out = ev.run(
        ground_truth_documents=[_gt({d: float(g) for d, g in qrels[q].items()}) for q in qids],
        retrieved_documents=[_ret(list(run[q])) for q in qids],
    )
    trec_run = {q: {d: float(len(run[q]) - r) for r, d in enumerate(run[q])} for q in qids}
    trec_qrels = {q: {d: int(g) for d, g in qrels[q].items()} for q in qids}
    measures = {"ndcg_cut_10", "recall_10", "P_5", "map", "recip_rank", "map_cut_10"}
    ref = pytrec_eval.RelevanceEvaluator(trec_qrels, measures).evaluate(trec_run)
    for i, q in enumerate(qids):
        row = out["individual_metrics"][i]
        assert row["ndcg@10"] == pytest.approx(ref[q]["ndcg_cut_10"], abs=1e-12)
        assert row["recall@10"] == pytest.approx(ref[q]["recall_10"], abs=1e-12)
        assert row["precision@5"] == pytest.approx(ref[q]["P_5"], abs=1e-12)
        assert row["map"] == pytest.approx(ref[q]["map"], abs=1e-12)
        assert row["map@10"] == pytest.approx(ref[q]["map_cut_10"], abs=1e-12)
        assert row["mrr"] == pytest.approx(ref[q]["recip_rank"], abs=1e-12)
    mean = sum(ref[q]["ndcg_cut_10"] for q in qids) / len(qids)
    assert out["score"] == pytest.approx(mean, abs=1e-12)


def test_unscorable_questions_are_none() -> None:
    ev = RagmeterRetrievalEvaluator(k_values=[1], score_metric="ndcg@1")
    out = ev.run(
        ground_truth_documents=[_gt(["a"]), [], _gt({"b": 0.0})],
        retrieved_documents=[_ret(["x", "a"]), _ret(["a"]), _ret(["b"])],
    )
    assert out["individual_scores"][0] == 0.0
    assert all(math.isnan(v) for v in out["individual_scores"][1:])
    assert out["individual_metrics"][2] is None
    assert out["individual_metrics"][1] is None
    assert out["score"] == 0.0
    assert out["metrics"]["mrr"] == 0.5


def test_duplicates_in_retrieved_list_count_once_at_best_rank() -> None:
    ev = RagmeterRetrievalEvaluator(k_values=[3])
    dup = ev.run(
        ground_truth_documents=[_gt(["a", "b"])], retrieved_documents=[_ret(["a", "a", "b"])]
    )
    dedup = ev.run(ground_truth_documents=[_gt(["a", "b"])], retrieved_documents=[_ret(["a", "b"])])
    assert dup["metrics"] == dedup["metrics"]
    assert dup["metrics"]["ndcg@3"] == 1.0


def test_duplicate_ground_truth_keeps_highest_grade() -> None:
    ev = RagmeterRetrievalEvaluator(k_values=[2], document_comparison_field="meta.src")
    gt = [
        [
            D(content="x", meta={"src": "s1"}, score=1.0),
            D(content="y", meta={"src": "s1"}, score=3.0),
            D(content="z", meta={"src": "s2"}, score=2.0),
        ]
    ]
    ret = [[D(content="q", meta={"src": "s2"}), D(content="r", meta={"src": "s1"})]]
    out = ev.run(ground_truth_documents=gt, retrieved_documents=ret)
    ideal = 3 + 2 / math.log2(3)
    assert out["metrics"]["ndcg@2"] == pytest.approx((2 + 3 / math.log2(3)) / ideal, abs=1e-12)


def test_comparison_fields_content_and_nested_meta() -> None:
    gt = [[D(content="Paris", meta={"src": {"url": "u1"}})]]
    ret = [
        [
            D(content="Berlin", meta={"src": {"url": "u2"}}),
            D(content="Paris", meta={"src": {"url": "u1"}}),
        ]
    ]
    for field in ("content", "meta.src.url"):
        out = RagmeterRetrievalEvaluator(document_comparison_field=field).run(
            ground_truth_documents=gt, retrieved_documents=ret
        )
        assert out["metrics"]["mrr"] == 0.5, field


def test_retrieved_document_without_the_field_keeps_its_rank_and_matches_nothing() -> None:
    ev = RagmeterRetrievalEvaluator(k_values=[2], document_comparison_field="meta.file")
    out = ev.run(
        ground_truth_documents=[[D(content="a", meta={"file": "f1"})]],
        retrieved_documents=[[D(content="b"), D(content="a", meta={"file": "f1"})]],
    )
    assert out["metrics"]["mrr"] == 0.5
    assert out["metrics"]["precision@2"] == 0.5


def test_grade_from_a_meta_key() -> None:
    ev = RagmeterRetrievalEvaluator(
        k_values=[2], relevance_field="meta.grade", score_metric="ndcg@2"
    )
    gt = [[D(id="a", meta={"grade": 1}), D(id="b", meta={"grade": 3})]]
    out = ev.run(ground_truth_documents=gt, retrieved_documents=[_ret(["a", "b"])])
    assert out["score"] == pytest.approx((1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3)), abs=1e-12)


def test_relevance_level_raises_the_threshold() -> None:
    ev = RagmeterRetrievalEvaluator(k_values=[2], relevance_level=2, score_metric="ndcg@2")
    out = ev.run(
        ground_truth_documents=[_gt({"a": 1, "b": 2})], retrieved_documents=[_ret(["a", "b"])]
    )
    assert out["metrics"]["mrr"] == 0.5  # only b (grade >= 2) is relevant


# -- inside Haystack -----------------------------------------------------------------------


def test_inside_an_evaluation_pipeline_and_evaluation_run_result() -> None:
    pipe = Pipeline()
    pipe.add_component("ragmeter", RagmeterRetrievalEvaluator(k_values=[1, 10]))
    gt = [_gt(["a"]), _gt(["b"]), []]
    ret = [_ret(["a"]), _ret(["x", "b"]), _ret(["a"])]
    results = pipe.run({"ragmeter": {"ground_truth_documents": gt, "retrieved_documents": ret}})
    out = results["ragmeter"]
    assert out["individual_scores"][:2] == [1.0, pytest.approx(1 / math.log2(3))]
    run_result = EvaluationRunResult(
        run_name="bm25",
        inputs={"question": ["q1", "q2", "q3"]},
        results={
            "ragmeter": {"score": out["score"], "individual_scores": out["individual_scores"]}
        },
    )
    report = run_result.aggregated_report()
    assert report["metrics"] == ["ragmeter"]
    assert report["score"] == [out["score"]]
    detailed = run_result.detailed_report()
    assert detailed["ragmeter"][:2] == out["individual_scores"][:2]
    assert math.isnan(detailed["ragmeter"][2])  # the unscorable question: nan, not 0


def test_to_dict_is_the_init_arguments_and_round_trips() -> None:
    ev = RagmeterRetrievalEvaluator(
        metrics=["ndcg", "map"],
        k_values=[5],
        document_comparison_field="meta.file_id",
        relevance_field="meta.grade",
        score_metric="map",
        relevance_level=2,
    )
    data = component_to_dict(ev, "ev")
    assert data == {
        "type": "ragmeter_haystack.retrieval_evaluator.RagmeterRetrievalEvaluator",
        "init_parameters": {
            "metrics": ["ndcg", "map"],
            "k_values": [5],
            "document_comparison_field": "meta.file_id",
            "relevance_field": "meta.grade",
            "score_metric": "map",
            "relevance_level": 2,
        },
    }
    back = component_from_dict(RagmeterRetrievalEvaluator, data, "ev")
    assert component_to_dict(back, "ev") == data
    assert RagmeterRetrievalEvaluator.from_dict(ev.to_dict()).to_dict() == ev.to_dict()


# -- errors --------------------------------------------------------------------------------


def test_length_mismatch_names_both_inputs() -> None:
    with pytest.raises(
        ValueError, match="ground_truth_documents has 2 lists but retrieved_documents has 1"
    ):
        RagmeterRetrievalEvaluator().run(
            ground_truth_documents=[_gt(["a"]), _gt(["b"])], retrieved_documents=[_ret(["a"])]
        )


def test_mixed_graded_and_ungraded_ground_truth() -> None:
    gt = [_gt(["a"]), [D(id="a", score=1.0), D(id="b")]]
    with pytest.raises(
        InvalidInputError, match=r"ground_truth_documents\[1\] mixes graded and ungraded"
    ):
        RagmeterRetrievalEvaluator().run(ground_truth_documents=gt, retrieved_documents=[[], []])


def test_ground_truth_without_the_comparison_field() -> None:
    ev = RagmeterRetrievalEvaluator(document_comparison_field="meta.file_id")
    with pytest.raises(ValueError, match=r"ground_truth_documents\[0\]\[0\] has no value for"):
        ev.run(ground_truth_documents=[[D(content="a")]], retrieved_documents=[[]])


def test_non_numeric_grade() -> None:
    ev = RagmeterRetrievalEvaluator(relevance_field="meta.grade")
    with pytest.raises(ValueError, match=r"ground_truth_documents\[0\]: a grade must be a number"):
        ev.run(
            ground_truth_documents=[[D(id="a", meta={"grade": "high"})]], retrieved_documents=[[]]
        )


def test_empty_input() -> None:
    with pytest.raises(ValueError, match="empty: nothing to evaluate"):
        RagmeterRetrievalEvaluator().run(ground_truth_documents=[], retrieved_documents=[])


def test_no_question_with_relevant_ground_truth() -> None:
    with pytest.raises(NoScorableQueriesError, match="no query in qrels has a relevant judgement"):
        RagmeterRetrievalEvaluator().run(
            ground_truth_documents=[[]], retrieved_documents=[_ret(["a"])]
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"document_comparison_field": "meta."},
            "document_comparison_field must be 'id', 'content'",
        ),
        ({"document_comparison_field": "score"}, "document_comparison_field must be"),
        ({"relevance_field": "grade"}, "relevance_field must be 'score'"),
        ({"k_values": [0]}, "every k in k_values must be an int >= 1"),
        ({"k_values": []}, "k_values is empty"),
        ({"metrics": []}, "metrics is empty"),
        ({"k_values": [5], "score_metric": "ndcg@10"}, "score_metric 'ndcg@10' is not among"),
        ({"metrics": ["recall"], "score_metric": "map"}, "score_metric 'map' is not among"),
    ],
)
def test_bad_init_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RagmeterRetrievalEvaluator(**kwargs)


def test_unknown_metric_is_refused_at_init() -> None:
    with pytest.raises(UnknownMetricError, match="no metric named 'ndcg@10'"):
        RagmeterRetrievalEvaluator(metrics=["ndcg@10"])


# -- ids that never match (issue 12) ---------------------------------------------------------

TEXTS = {
    "d1": "wing flutter at high speed",
    "d2": "heat transfer in a nozzle",
    "d3": "shock waves over a wedge",
}


def _from_store() -> list[list[Document]]:
    """What a retriever over a store written with the corpus ids returns, for two questions."""
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore()
    store.write_documents([D(id=i, content=t) for i, t in TEXTS.items()])
    retriever = InMemoryBM25Retriever(document_store=store, top_k=2)
    return [retriever.run(query=q)["documents"] for q in ("wing flutter", "nozzle heat")]


def test_ids_that_never_match_the_ground_truth_warn_naming_the_field(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # ground truth written the way Haystack's own evaluators expect it: by content (its
    # Document.id is then a hash of the text, not the store's id)
    truth = [[D(content=TEXTS["d1"])], [D(content=TEXTS["d2"])]]
    retrieved = _from_store()
    with caplog.at_level("WARNING", logger="ragmeter_haystack"):
        out = RagmeterRetrievalEvaluator(k_values=[2]).run(
            ground_truth_documents=truth, retrieved_documents=retrieved
        )
    assert out["score"] == 0.0
    [warning] = [w for w in out["warnings"] if "none of the" in w]
    assert "document_comparison_field='id'" in warning
    assert "document_comparison_field='content'" in warning
    assert not any("(doc_ids)" in w and "[run]" in w for w in out["warnings"])  # ours only
    assert any("document_comparison_field='content'" in r.getMessage() for r in caplog.records)
    fixed = RagmeterRetrievalEvaluator(k_values=[2], document_comparison_field="content").run(
        ground_truth_documents=truth, retrieved_documents=retrieved
    )
    assert fixed["score"] == 1.0 and fixed["warnings"] == []


def test_most_questions_matching_nothing_is_a_warning() -> None:
    out = RagmeterRetrievalEvaluator(k_values=[2]).run(
        ground_truth_documents=[_gt(["a"]), _gt(["b"]), _gt(["c"])],
        retrieved_documents=[_ret(["a"]), _ret(["x"]), _ret(["y"])],
    )
    assert any("only 1 of 3 judged queries" in w for w in out["warnings"])


def test_retrieved_documents_without_the_field_are_counted_in_a_warning() -> None:
    out = RagmeterRetrievalEvaluator(k_values=[2], document_comparison_field="meta.src").run(
        ground_truth_documents=[[D(id="g", meta={"src": "a"})]],
        retrieved_documents=[[D(id="r1", meta={"src": "a"}), D(id="r2"), D(id="r3")]],
    )
    assert any(
        "2 of 3 retrieved documents have no value for document_comparison_field='meta.src'" in w
        for w in out["warnings"]
    )


def test_warnings_is_an_output_of_the_component_in_a_pipeline() -> None:
    pipe = Pipeline()
    pipe.add_component("ragmeter", RagmeterRetrievalEvaluator(k_values=[1]))
    out = pipe.run(
        {"ragmeter": {"ground_truth_documents": [_gt(["a"])], "retrieved_documents": [_ret(["a"])]}}
    )["ragmeter"]
    assert out["warnings"] == [] and out["score"] == 1.0
