"""Stages of a LlamaIndex hybrid engine: a vector retriever and a keyword retriever fused by a
``QueryFusionRetriever`` (reciprocal rank fusion), re-ranked by a custom node postprocessor.

Each stage's ranking is computed again without ragmeter (the retrievers, the fusion and the
postprocessor called directly; all deterministic) and scored by pytrec_eval: the handler's
stages must equal them and score the same to 0.0, per query. The context (what reached the
LLM) is the postprocessed list.
"""

from __future__ import annotations

from typing import Any

import pytrec_eval
from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from ragmeter_llamaindex import RagmeterEventHandler

from ragmeter.capture import capture


class KeywordRetriever(BaseRetriever):
    """Nodes sharing the most words with the query, ties by node id."""

    def __init__(self, nodes: list[TextNode], top_k: int = 15) -> None:
        super().__init__()
        self._nodes = {n.node_id: n for n in nodes}
        self._words = {n.node_id: set(n.text.lower().split()) for n in nodes}
        self._top_k = top_k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        terms = set(query_bundle.query_str.lower().split())
        ranked = sorted(self._words, key=lambda d: (-len(terms & self._words[d]), d))
        return [
            NodeWithScore(node=self._nodes[d], score=float(len(terms & self._words[d])))
            for d in ranked[: self._top_k]
        ]


class ShortFirst(BaseNodePostprocessor):
    """A custom reranker: the shorter texts of the top 12 first, then cut to 8."""

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return sorted(nodes[:12], key=lambda n: (len(n.node.get_content()), n.node.node_id))[:8]


def build(cranfield: Any, embed_model: Any) -> tuple[Any, dict[str, Any]]:
    corpus, _, _ = cranfield
    nodes = [TextNode(id_=d, text=t) for d, t in corpus.items()]
    dense = VectorStoreIndex(nodes, embed_model=embed_model).as_retriever(similarity_top_k=15)
    keyword = KeywordRetriever(nodes)
    fusion = QueryFusionRetriever(
        [dense, keyword],
        llm=MockLLM(),
        mode="reciprocal_rerank",
        num_queries=1,
        similarity_top_k=12,
        use_async=False,
    )
    engine = RetrieverQueryEngine.from_args(
        fusion, llm=MockLLM(max_tokens=2), node_postprocessors=[ShortFirst()]
    )
    return engine, {"dense": dense, "keyword": keyword, "fusion": fusion}


def independent(parts: dict[str, Any], questions: dict[str, str]) -> dict[str, dict[str, Any]]:
    runs: dict[str, dict[str, list[str]]] = {n: {} for n in ("dense", "keyword", "fusion")}
    runs["ShortFirst"] = {}
    for qid, text in questions.items():
        for name in ("dense", "keyword", "fusion"):
            runs[name][qid] = [n.node.node_id for n in parts[name].retrieve(text)]
        fused = parts["fusion"].retrieve(text)
        post = ShortFirst().postprocess_nodes(fused, query_bundle=QueryBundle(text))
        runs["ShortFirst"][qid] = [n.node.node_id for n in post]
    runs["context"] = runs["ShortFirst"]
    return runs


def test_every_stage_of_a_fused_reranked_engine_matches_pytrec_eval(
    cranfield: Any, embed_model: Any
) -> None:
    _, queries, qrels = cranfield
    engine, parts = build(cranfield, embed_model)
    expected = independent(parts, queries)
    handler = RagmeterEventHandler(stage_names=parts)
    with handler:
        for qid, text in queries.items():
            with capture(id=qid, relevance=qrels[qid]):
                engine.query(text)
    sample = handler.samples[0]
    shape = [(s.name, s.kind, s.depth, s.inputs, s.same_as) for s in sample.stages or []]
    assert shape == [
        ("dense", "retriever", 1, None, None),
        ("keyword", "retriever", 1, None, None),
        ("fusion", "fusion", 0, ["dense", "keyword"], None),
        ("ShortFirst", "reranker", 0, ["fusion"], None),
        ("context", "context", 0, ["ShortFirst"], "ShortFirst"),
    ]
    assert "capture_errors" not in sample.metadata
    for name, run in expected.items():
        assert handler.to_run(stage=name) == run, name
        judged = {q: {d: int(g) for d, g in qrels[q].items()} for q in run}
        scored = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
        oracle = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut_10", "recall_15"}).evaluate(
            scored
        )
        report = handler.evaluate_retrieval(
            stage=name, k_values=(10, 15), metrics=["ndcg", "recall"]
        )
        for qid, row in oracle.items():
            assert report.per_query[qid]["ndcg@10"] - row["ndcg_cut_10"] == 0.0, (name, qid)
            assert report.per_query[qid]["recall@15"] - row["recall_15"] == 0.0, (name, qid)
    assert handler.to_run() == expected["ShortFirst"]  # scored by default: what reached the LLM
    table = handler.evaluate_retrieval(stages=True, k_values=(10,), metrics=["ndcg"])
    assert table.stages == ["dense", "keyword", "fusion", "ShortFirst", "context"]
    assert table["ShortFirst"].against == "fusion"
    assert table["fusion"].against in ("dense", "keyword")


def test_stages_are_named_after_their_class_without_stage_names(
    cranfield: Any, embed_model: Any
) -> None:
    _, queries, _ = cranfield
    engine, _ = build(cranfield, embed_model)
    with RagmeterEventHandler() as handler:
        engine.query(next(iter(queries.values())))
    names = [s.name for s in handler.samples[0].stages or []]
    assert names == [
        "VectorIndexRetriever",
        "KeywordRetriever",
        "QueryFusionRetriever",
        "ShortFirst",
        "context",
    ]
