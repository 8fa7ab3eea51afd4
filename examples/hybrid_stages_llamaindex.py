"""A hybrid LlamaIndex query engine scored stage by stage: a vector retriever and a keyword
retriever fused by ``QueryFusionRetriever`` (reciprocal rank fusion), then a reranking node
postprocessor.

``RagmeterEventHandler`` records each retriever call as a stage (the fusion retriever's
members inside it), the postprocessor's re-ranked list as one more stage, and ``context``:
the response's source nodes, what reached the LLM, scored by default.
``stage_names={...}`` names the stages after your variables. Offline: Cranfield ships with
ragmeter; the embedding and LLM come from ``examples/llamaindex_rag.py``.

    python examples/hybrid_stages_llamaindex.py          # 60 queries
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from ragmeter_llamaindex import RagmeterEventHandler

sys.path.insert(0, str(Path(__file__).parent))
from llamaindex_rag import FirstSentenceLLM, HashEmbedding

from ragmeter.datasets import load_cranfield
from ragmeter.stages import StageReport

_WORD = re.compile(r"[a-z0-9]+")


class KeywordRetriever(BaseRetriever):
    """Nodes sharing the most distinct words with the query (ties by id)."""

    def __init__(self, nodes: list[TextNode], top_k: int = 20) -> None:
        super().__init__()
        self._nodes = {n.node_id: n for n in nodes}
        self._words = {n.node_id: set(_WORD.findall(n.text.lower())) for n in nodes}
        self._top_k = top_k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        terms = set(_WORD.findall(query_bundle.query_str.lower()))
        overlap = {d: len(terms & words) for d, words in self._words.items()}
        best = sorted(overlap, key=lambda d: (-overlap[d], d))[: self._top_k]
        return [NodeWithScore(node=self._nodes[d], score=float(overlap[d])) for d in best]


class ShorterFirst(BaseNodePostprocessor):
    """A stand-in reranker: the shorter texts of the fused top 10 first."""

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return sorted(nodes[:10], key=lambda n: (len(n.node.get_content()), n.node.node_id))


def main(n_queries: int = 60) -> tuple[RagmeterEventHandler, StageReport]:
    corpus, queries, qrels = load_cranfield()
    nodes = [TextNode(id_=d, text=t) for d, t in corpus.items() if t.strip()]
    dense = VectorStoreIndex(nodes, embed_model=HashEmbedding()).as_retriever(similarity_top_k=20)
    keyword = KeywordRetriever(nodes)
    fusion = QueryFusionRetriever(
        [dense, keyword],
        llm=FirstSentenceLLM(),
        mode="reciprocal_rerank",
        num_queries=1,  # the question itself, no generated variants
        similarity_top_k=15,
        use_async=False,
    )
    engine = RetrieverQueryEngine.from_args(
        fusion, llm=FirstSentenceLLM(), node_postprocessors=[ShorterFirst()]
    )
    handler = RagmeterEventHandler(stage_names={"dense": dense, "keyword": keyword, "rrf": fusion})
    for qid in list(qrels)[:n_queries]:
        with handler.capture(id=qid, relevance=qrels[qid]):
            engine.query(queries[qid])
    report = handler.evaluate_retrieval(stages=True, k_values=(10, 20))
    print(report)
    return handler, report


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
