"""query_engine_retriever and node_doc_id: LlamaIndex retrieval for ragmeter.evaluate_retrieval."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from ragmeter_llamaindex import node_doc_id, query_engine_retriever

from ragmeter.capture import content_doc_id
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_retrieval

pytrec_eval = pytest.importorskip("pytrec_eval")


def pytrec(
    run: dict[str, list[str]], qrels: dict[str, dict[str, float]], measures: set[str]
) -> Any:
    trec_run = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    trec_qrels = {q: {d: int(g) for d, g in row.items()} for q, row in qrels.items()}
    return pytrec_eval.RelevanceEvaluator(trec_qrels, measures).evaluate(trec_run)


def test_evaluate_retrieval_over_an_index_matches_pytrec_eval(index: Any, cranfield: Any) -> None:
    _, queries, qrels = cranfield
    report = evaluate_retrieval(
        query_engine_retriever(index), qrels, queries, k_values=(5, 10), metrics=["ndcg", "map"]
    )
    oracle = index.as_retriever(similarity_top_k=10)  # limit defaults to max(k_values)
    run = {q: [n.node.node_id for n in oracle.retrieve(t)] for q, t in queries.items()}
    ref = pytrec(run, qrels, {"ndcg_cut.5,10", "map_cut.10"})
    for qid in queries:
        assert report.per_query[qid]["ndcg@10"] == pytest.approx(ref[qid]["ndcg_cut_10"], abs=1e-12)
        assert report.per_query[qid]["ndcg@5"] == pytest.approx(ref[qid]["ndcg_cut_5"], abs=1e-12)
        assert report.per_query[qid]["map@10"] == pytest.approx(ref[qid]["map_cut_10"], abs=1e-12)


def test_limit_becomes_similarity_top_k(index: Any) -> None:
    retrieve = query_engine_retriever(index)
    assert len(retrieve("transonic flow", limit=7)) == 7
    assert len(retrieve("transonic flow", limit=2)) == 2
    retriever = index.as_retriever(similarity_top_k=3)
    on_retriever = query_engine_retriever(retriever)
    assert on_retriever("transonic flow", limit=6) == retrieve("transonic flow", limit=6)
    assert retriever.similarity_top_k == 3  # restored after the call
    assert len(on_retriever("transonic flow")) == 3


def test_limit_cuts_a_retriever_that_has_no_top_k(index: Any) -> None:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle

    inner = index.as_retriever(similarity_top_k=6)

    class Fixed(BaseRetriever):  # no similarity_top_k to set: returns its six nodes
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return inner.retrieve(query_bundle)

    retrieve = query_engine_retriever(Fixed())
    six = retrieve("transonic flow")
    assert len(six) == 6
    assert retrieve("transonic flow", limit=2) == six[:2]  # as in every adapter's retriever


def test_a_query_engine_s_retriever_is_used(index: Any) -> None:
    qe = index.as_query_engine(llm=MockLLM(max_tokens=1), similarity_top_k=4)
    assert query_engine_retriever(qe)("wing", limit=4) == query_engine_retriever(index)(
        "wing", limit=4
    )


def test_chunked_documents_score_as_their_sources(chunked: Any) -> None:
    index, nodes, queries, qrels = chunked
    source = {n.node_id: n.ref_doc_id for n in nodes}
    retrieve = query_engine_retriever(index, doc_id="ref_doc_id")
    ids = retrieve(next(iter(queries.values())), limit=20)
    assert len(ids) == 20 and len(set(ids)) < 20  # chunks of one document repeat its id
    report = evaluate_retrieval(
        retrieve, qrels, queries, k_values=(10,), metrics=["ndcg"], limit=20
    )
    oracle = index.as_retriever(similarity_top_k=20)
    run = {
        q: list(dict.fromkeys(source[n.node.node_id] for n in oracle.retrieve(t)))
        for q, t in queries.items()
    }
    ref = pytrec(run, qrels, {"ndcg_cut.10"})
    for qid in queries:
        assert report.per_query[qid]["ndcg@10"] == pytest.approx(ref[qid]["ndcg_cut_10"], abs=1e-12)


def test_node_doc_id_rules() -> None:
    node = TextNode(
        id_="c1",
        text="...",
        metadata={"doc": {"id": 12}, "file.name": "a.pdf"},
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="d1")},
    )
    assert node_doc_id(node) == "c1"
    assert node_doc_id(node, "ref_doc_id") == "d1"
    assert node_doc_id(node, "metadata.doc.id") == "12"
    assert node_doc_id(node, "metadata.file.name") == "a.pdf"  # a dotted key wins over a path
    assert node_doc_id(node, "metadata.missing") is None
    assert node_doc_id(node, lambda n: n.text + "!") == "...!"
    assert node_doc_id(node, "content") == content_doc_id("...")
    assert node_doc_id(TextNode(id_="d2", text="..."), "ref_doc_id") == "d2"  # no source
    with pytest.warns(DeprecationWarning, match=r"node_doc_id\(id_field=...\) is deprecated"):
        assert node_doc_id(node, id_field="ref_doc_id") == "d1"


def test_query_engine_retriever_takes_the_old_id_field_name(chunked: Any) -> None:
    index, _, queries, _ = chunked
    text = next(iter(queries.values()))
    with pytest.warns(DeprecationWarning, match=r"query_engine_retriever\(id_field=...\)"):
        old = query_engine_retriever(index, id_field="ref_doc_id")
    assert old(text, limit=5) == query_engine_retriever(index, doc_id="ref_doc_id")(text, limit=5)


def test_node_without_the_doc_id_is_an_error(embed_model: Any) -> None:
    from llama_index.core import VectorStoreIndex

    index = VectorStoreIndex([TextNode(id_="n1", text="wing")], embed_model=embed_model)
    with pytest.raises(
        InvalidInputError,
        match=r"node at rank 1 \(node_id 'n1'\) has no value for doc_id='metadata.paper'",
    ):
        query_engine_retriever(index, doc_id="metadata.paper")("wing")


def test_ref_doc_id_of_a_node_with_no_source_is_its_own_id() -> None:
    """A node split from nothing is its own document (IngestionPipeline's upserts use
    ``node.ref_doc_id or node.id_`` too)."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    plain = TextNode(id_="d7", text="a node built directly")
    assert plain.ref_doc_id is None  # LlamaIndex's own property has nothing to say
    assert node_doc_id(plain, "ref_doc_id") == "d7"
    whole = Document(id_="doc-1", text="a document indexed as it is")
    assert node_doc_id(whole, "ref_doc_id") == "doc-1"
    (chunk,) = SentenceSplitter().get_nodes_from_documents([whole])
    assert node_doc_id(chunk, "ref_doc_id") == "doc-1" != chunk.node_id
    # a SOURCE that is not one node is no id (LlamaIndex itself refuses it)
    odd = TextNode(
        id_="x", text="...", relationships={NodeRelationship.SOURCE: [RelatedNodeInfo(node_id="a")]}
    )
    assert node_doc_id(odd, "ref_doc_id") is None


def test_ref_doc_id_over_whole_document_nodes_scores_like_node_id(
    index: Any, cranfield: Any
) -> None:
    _, queries, qrels = cranfield
    by_ref = query_engine_retriever(index, doc_id="ref_doc_id")
    by_node = query_engine_retriever(index)
    for text in list(queries.values())[:5]:
        assert by_ref(text, limit=10) == by_node(text, limit=10)
    report = evaluate_retrieval(by_ref, qrels, queries, k_values=(10,), metrics=["ndcg"])
    ref = pytrec({q: by_node(t, limit=10) for q, t in queries.items()}, qrels, {"ndcg_cut.10"})
    for qid in queries:
        assert report.per_query[qid]["ndcg@10"] == pytest.approx(ref[qid]["ndcg_cut_10"], abs=1e-12)
    assert not report.warnings


def test_unsupported_object() -> None:
    with pytest.raises(
        InvalidInputError, match="must be a LlamaIndex index, a BaseRetriever or a query engine"
    ):
        query_engine_retriever({"not": "an index"})


def test_bad_limit(index: Any) -> None:
    with pytest.raises(InvalidInputError, match="limit must be an int >= 1, got 0"):
        query_engine_retriever(index)("wing", limit=0)
