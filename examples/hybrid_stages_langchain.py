"""A hybrid LangChain chain scored stage by stage: two retrievers side by side, reciprocal
rank fusion in your own code, a reranking step, a prompt.

LangChain reports the retriever calls but not what a lambda makes of them, so the fused and
the reranked lists are marked with ``ragmeter_langchain.stage``; the handler keeps every
ranking as a stage of the sample, and the last marked step before the prompt is the
``context`` (what reached the model), scored by default. Without the marks no context could
be identified (the two retrievers run side by side) and every sample would say so.
Offline: Cranfield ships with ragmeter; the retriever and chat model come from
``examples/langchain_rag.py``.

    python examples/hybrid_stages_langchain.py          # 60 queries
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnableParallel
from ragmeter_langchain import RagmeterCallbackHandler, stage

sys.path.insert(0, str(Path(__file__).parent))
from langchain_rag import FirstSentenceChatModel, KeywordRetriever, build_chain

from ragmeter.datasets import load_cranfield
from ragmeter.stages import StageReport

_WORD = re.compile(r"[a-z0-9]+")


class OverlapRetriever(BaseRetriever):
    """Documents sharing the most distinct words with the query (ties by id)."""

    corpus: dict[str, str]
    k: int = 20

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        terms = set(_WORD.findall(query.lower()))
        overlap = {d: len(terms & set(_WORD.findall(t.lower()))) for d, t in self.corpus.items()}
        best = sorted(overlap, key=lambda d: (-overlap[d], d))[: self.k]
        return [Document(self.corpus[d], id=d) for d in best]


def rrf(rankings: dict[str, list[Document]]) -> list[Document]:
    """Reciprocal rank fusion (k = 60) of the rankings, ties by doc id, top 15."""
    score: dict[str, float] = {}
    docs: dict[str, Document] = {}
    for ranking in rankings.values():
        for rank, doc in enumerate(ranking, 1):
            score[str(doc.id)] = score.get(str(doc.id), 0.0) + 1 / (60 + rank)
            docs[str(doc.id)] = doc
    return [docs[d] for d in sorted(score, key=lambda d: (-score[d], d))][:15]


def shorter_first(docs: list[Document]) -> list[Document]:
    """A stand-in reranker: the shorter abstracts of the fused top 10 first."""
    return sorted(docs[:10], key=lambda d: (len(d.page_content), str(d.id)))


def main(n_queries: int = 60) -> tuple[RagmeterCallbackHandler, StageReport]:
    corpus, queries, qrels = load_cranfield()
    both = RunnableParallel(
        bm25=KeywordRetriever(corpus=corpus, k=20).with_config(run_name="bm25"),
        overlap=OverlapRetriever(corpus=corpus).with_config(run_name="overlap"),
    )
    retrieve = (
        both
        | RunnableLambda(rrf)
        | stage("rrf")  # the fused list
        | stage("rerank", shorter_first, kind="reranker")  # the reranked one
    )
    chain = build_chain(retrieve, FirstSentenceChatModel())
    handler = RagmeterCallbackHandler()
    for qid in list(qrels)[:n_queries]:
        with handler.capture(id=qid, relevance=qrels[qid]):
            chain.invoke(queries[qid])
    report = handler.evaluate_retrieval(stages=True, k_values=(10, 20))
    print(report)
    return handler, report


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
