"""RagmeterRetrievalMetric: a BaseRetrievalMetric for RetrieverEvaluator, vs pytrec_eval."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from llama_index.core.evaluation import RetrieverEvaluator
from llama_index.core.evaluation.retrieval.metrics import (
    MRR,
    NDCG,
    AveragePrecision,
    HitRate,
    Precision,
    Recall,
)
from llama_index.core.evaluation.retrieval.metrics_base import BaseRetrievalMetric
from ragmeter_llamaindex import RagmeterRetrievalMetric

from ragmeter.errors import InvalidInputError, UnknownMetricError

pytrec_eval = pytest.importorskip("pytrec_eval")

# ragmeter metric name, k -> pytrec_eval measure
MEASURES: list[tuple[str, int | None, str]] = [
    ("ndcg", 10, "ndcg_cut_10"),
    ("ndcg", 3, "ndcg_cut_3"),
    ("recall", 10, "recall_10"),
    ("precision", 5, "P_5"),
    ("map", None, "map"),
    ("map", 10, "map_cut_10"),
    ("mrr", None, "recip_rank"),
    ("hit_rate", 5, "success_5"),
]


def trec(
    run: dict[str, list[str]], qrels: dict[str, dict[str, float]], keys: set[str]
) -> dict[str, dict[str, float]]:
    """pytrec_eval's ``keys`` (``"ndcg_cut_3"``, ``"map"`` ...) over a ranked-list run.

    Scores descend with rank, so pytrec_eval's ordering is the list's.
    """
    measures = set()
    for key in keys:
        name, _, k = key.rpartition("_")
        measures.add(f"{name}.{k}" if k.isdigit() else key)
    trec_run = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    trec_qrels = {q: {d: int(g) for d, g in row.items()} for q, row in qrels.items()}
    return pytrec_eval.RelevanceEvaluator(trec_qrels, measures).evaluate(trec_run)  # type: ignore[no-any-return]


def test_is_a_llamaindex_retrieval_metric() -> None:
    m = RagmeterRetrievalMetric(metric="ndcg", k=10)
    assert isinstance(m, BaseRetrievalMetric)
    assert m.metric_name == "ndcg@10"
    assert RagmeterRetrievalMetric(metric="map", k=None).metric_name == "map"
    assert RagmeterRetrievalMetric("mrr", 5).metric_name == "mrr@5"


def test_retriever_evaluator_matches_pytrec_eval_graded(index: Any, cranfield: Any) -> None:
    _, queries, qrels = cranfield
    relevance = {queries[q]: qrels[q] for q in queries}
    metrics = [RagmeterRetrievalMetric(m, k, relevance=relevance) for m, k, _ in MEASURES]
    evaluator = RetrieverEvaluator(
        metrics=metrics, retriever=index.as_retriever(similarity_top_k=10)
    )
    results = asyncio.run(_evaluate_all(evaluator, queries, qrels))
    run = {q: r.retrieved_ids for q, r in results.items()}
    assert all(len(ids) == 10 for ids in run.values())
    ref = trec(run, qrels, {measure for _, _, measure in MEASURES})
    for qid, result in results.items():
        for name, k, measure in MEASURES:
            key = name if k is None else f"{name}@{k}"
            assert result.metric_dict[key].score == pytest.approx(ref[qid][measure], abs=1e-12), (
                qid,
                key,
            )
    # the graded relevance matters: binary judgements give a different NDCG somewhere
    binary = RagmeterRetrievalMetric("ndcg", 10)
    diffs = [
        abs(
            binary.compute(q, list(qrels[qid]), run[qid]).score
            - results[qid].metric_dict["ndcg@10"].score
        )
        for qid, q in queries.items()
    ]
    assert max(diffs) > 1e-3


async def _evaluate_all(
    evaluator: RetrieverEvaluator, queries: dict[str, str], qrels: dict[str, dict[str, float]]
) -> dict[str, Any]:
    out = {}
    for qid, text in queries.items():
        expected = [d for d, g in qrels[qid].items() if g > 0]
        out[qid] = await evaluator.aevaluate(query=text, expected_ids=expected)
    return out


def test_expected_ids_count_grade_one_when_relevance_does_not_cover_the_query() -> None:
    m = RagmeterRetrievalMetric("ndcg", 3, relevance={"other query": {"d1": 3}})
    got = m.compute(query="q", expected_ids=["d2", "d3"], retrieved_ids=["d1", "d2", "d3"]).score
    ref = trec({"q": ["d1", "d2", "d3"]}, {"q": {"d2": 1, "d3": 1}}, {"ndcg_cut_3"})
    assert got == pytest.approx(ref["q"]["ndcg_cut_3"])
    # with relevance for this query, expected_ids are ignored
    m2 = RagmeterRetrievalMetric("ndcg", 3, relevance={"q": {"d1": 3}})
    assert m2.compute(query="q", expected_ids=["d2"], retrieved_ids=["d1", "d2"]).score == 1.0


# -- the conventions that differ from LlamaIndex's built-ins (the worked example in the docs) --


def test_duplicates_inflate_llamaindex_builtins_but_not_ours() -> None:
    # three chunks retrieved; two come from source doc "d1", the only relevant doc
    retrieved, expected = ["d1", "d1", "d2"], ["d1"]
    li_ndcg = NDCG().compute(expected_ids=expected, retrieved_ids=retrieved).score
    li_ap = AveragePrecision().compute(expected_ids=expected, retrieved_ids=retrieved).score
    li_hits = (
        HitRate(use_granular_hit_rate=True)
        .compute(expected_ids=expected, retrieved_ids=retrieved)
        .score
    )
    assert li_ndcg == pytest.approx(1 + 1 / math.log2(3))  # 1.6309: above 1
    assert li_ap == 2.0  # (1/1 + 2/2) / 1
    assert li_hits == 2.0
    ref = trec({"q": ["d1", "d2"]}, {"q": {"d1": 1}}, {"ndcg_cut_10", "map", "success_10"})["q"]
    ours = {
        name: RagmeterRetrievalMetric(name, k).compute("q", expected, retrieved)
        for name, k in [("ndcg", 10), ("map", None), ("hit_rate", 10)]
    }
    assert ours["ndcg"].score == ref["ndcg_cut_10"] == 1.0
    assert ours["map"].score == ref["map"] == 1.0
    assert ours["hit_rate"].score == ref["success_10"] == 1.0
    assert ours["ndcg"].metadata["duplicates_removed"] == 1


def test_binary_versus_graded_ndcg() -> None:
    retrieved = ["d1", "d2"]
    li = NDCG().compute(expected_ids=["d1", "d2"], retrieved_ids=retrieved).score
    ours = RagmeterRetrievalMetric("ndcg", 2, relevance={"q": {"d1": 1, "d2": 3}})
    got = ours.compute(query="q", expected_ids=["d1", "d2"], retrieved_ids=retrieved).score
    assert li == 1.0  # binary: both relevant, both retrieved
    ideal = 3 + 1 / math.log2(3)
    assert got == pytest.approx((1 + 3 / math.log2(3)) / ideal)  # 0.7967: d2 deserved rank 1
    assert got == pytest.approx(
        trec({"q": retrieved}, {"q": {"d1": 1, "d2": 3}}, {"ndcg_cut_2"})["q"]["ndcg_cut_2"]
    )


def test_ideal_dcg_size() -> None:
    # five relevant docs, a top-2 retriever returns two of them, first
    expected, retrieved = ["a", "b", "c", "d", "e"], ["a", "b"]
    li = NDCG().compute(expected_ids=expected, retrieved_ids=retrieved).score
    idcg5 = sum(1 / math.log2(i + 2) for i in range(5))
    assert li == pytest.approx((1 + 1 / math.log2(3)) / idcg5)  # 0.5531
    ours = RagmeterRetrievalMetric("ndcg", 2).compute("q", expected, retrieved).score
    assert ours == 1.0  # ideal cut at k=2 too
    ref = trec({"q": retrieved}, {"q": dict.fromkeys(expected, 1)}, {"ndcg_cut_2"})
    assert ours == ref["q"]["ndcg_cut_2"]


def test_precision_divides_by_k_not_by_what_came_back() -> None:
    expected, retrieved = ["a"], ["a", "x"]
    li = Precision().compute(expected_ids=expected, retrieved_ids=retrieved).score
    ours = RagmeterRetrievalMetric("precision", 10).compute("q", expected, retrieved).score
    assert li == 0.5
    assert ours == 0.1 == trec({"q": retrieved}, {"q": {"a": 1}}, {"P_10"})["q"]["P_10"]


def test_agrees_with_builtins_where_conventions_coincide() -> None:
    expected, retrieved = ["b", "d"], ["a", "b", "c"]
    assert RagmeterRetrievalMetric("recall", 3).compute("q", expected, retrieved).score == (
        Recall().compute(expected_ids=expected, retrieved_ids=retrieved).score
    )
    assert RagmeterRetrievalMetric("mrr", None).compute("q", expected, retrieved).score == (
        MRR().compute(expected_ids=expected, retrieved_ids=retrieved).score
    )


def test_id_map_scores_chunks_as_their_source_documents(chunked: Any) -> None:
    index, nodes, queries, qrels = chunked
    node_to_doc = {n.node_id: n.ref_doc_id for n in nodes}
    assert len(node_to_doc) > len(set(node_to_doc.values()))  # documents really were chunked
    metrics = [
        RagmeterRetrievalMetric(
            "ndcg", 10, relevance={queries[q]: qrels[q] for q in queries}, id_map=node_to_doc
        ),
        RagmeterRetrievalMetric("recall", 10, id_map=lambda i: node_to_doc.get(i, i)),
    ]
    evaluator = RetrieverEvaluator(
        metrics=metrics, retriever=index.as_retriever(similarity_top_k=20)
    )
    results = asyncio.run(_evaluate_all(evaluator, queries, qrels))
    run = {}
    for qid, r in results.items():
        docs = [node_to_doc[n] for n in r.retrieved_ids]
        run[qid] = list(dict.fromkeys(docs))
    assert any(len(ids) < 20 for ids in run.values())  # some documents came back twice
    ref = trec(run, qrels, {"ndcg_cut_10", "recall_10"})
    for qid, r in results.items():
        assert r.metric_dict["ndcg@10"].score == pytest.approx(ref[qid]["ndcg_cut_10"], abs=1e-12)
        assert r.metric_dict["recall@10"].score == pytest.approx(ref[qid]["recall_10"], abs=1e-12)


# -- errors --


def test_unknown_metric() -> None:
    with pytest.raises(UnknownMetricError, match="Registry names are bare: pass 'ndcg'"):
        RagmeterRetrievalMetric("ndcg@10")


def test_bad_k() -> None:
    with pytest.raises(InvalidInputError, match="k must be an int >= 1, got 0"):
        RagmeterRetrievalMetric("ndcg", 0)
    with pytest.raises(InvalidInputError, match=r"k=None .* for 'map' and 'mrr', not 'recall'"):
        RagmeterRetrievalMetric("recall", None)


def test_bad_relevance() -> None:
    with pytest.raises(InvalidInputError, match=r"relevance\['q'\]\['d1'\] must be a number"):
        RagmeterRetrievalMetric("ndcg", 10, relevance={"q": {"d1": "high"}})
    with pytest.raises(InvalidInputError, match=r"relevance\['q'\] must be a mapping"):
        RagmeterRetrievalMetric("ndcg", 10, relevance={"q": ["d1"]})  # type: ignore[dict-item]


def test_query_without_relevant_documents() -> None:
    m = RagmeterRetrievalMetric("ndcg", 10, relevance={"q": {"d1": 0}})
    with pytest.raises(InvalidInputError, match="query 'q' has no relevant document"):
        m.compute(query="q", expected_ids=[], retrieved_ids=["d1"])
    with pytest.raises(InvalidInputError, match="has no relevant document"):
        RagmeterRetrievalMetric("ndcg", 10).compute(
            query="q2", expected_ids=[], retrieved_ids=["d1"]
        )


def test_empty_retrieval_scores_zero() -> None:
    assert RagmeterRetrievalMetric("recall", 5).compute("q", ["d1"], []).score == 0.0


# -- ids that never match (issue 12) ---------------------------------------------------------


def test_node_ids_against_document_ids_warn_naming_id_map(
    chunked: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """RetrieverEvaluator passes chunk node ids; expected ids naming documents never match."""
    index, nodes, queries, qrels = chunked
    forgot = RagmeterRetrievalMetric("ndcg", 10)
    evaluator = RetrieverEvaluator(
        metrics=[forgot], retriever=index.as_retriever(similarity_top_k=10)
    )
    with caplog.at_level("WARNING", logger="ragmeter_llamaindex"):
        results = asyncio.run(_evaluate_all(evaluator, queries, qrels))
    scored = [r.metric_dict["ndcg@10"] for r in results.values()]
    assert all(m.score == 0.0 for m in scored)
    warned = [m.metadata["warning"] for m in scored if "warning" in m.metadata]
    assert len(warned) == len(queries) - 4  # from the 5th query on
    assert "id_map=" in warned[0] and "none of the doc ids retrieved for 5 queries" in warned[0]
    assert len([r for r in caplog.records if "id_map=" in r.getMessage()]) == 1  # logged once
    node_to_doc = {n.node_id: n.ref_doc_id for n in nodes}
    mapped = RagmeterRetrievalMetric("ndcg", 10, id_map=node_to_doc)
    evaluator = RetrieverEvaluator(
        metrics=[mapped], retriever=index.as_retriever(similarity_top_k=10)
    )
    results = asyncio.run(_evaluate_all(evaluator, queries, qrels))
    assert not any("warning" in r.metric_dict["ndcg@10"].metadata for r in results.values())
    assert any(r.metric_dict["ndcg@10"].score > 0 for r in results.values())
