"""Real LangChain building blocks for the adapter tests (imported by conftest and the tests):
a BM25 retriever over the bundled Cranfield collection, a chat model that answers from its
prompt, and the canonical RAG chain.

Everything runs offline; nothing here fakes LangChain itself (the retriever and the chat
model are ordinary ``BaseRetriever`` / ``BaseChatModel`` subclasses).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

import pytest
import pytrec_eval
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnablePassthrough
from pydantic import ConfigDict, PrivateAttr

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25Retriever(BaseRetriever):
    """Okapi BM25 (k1=0.9, b=0.4) over an in-memory ``{doc_id: text}`` corpus.

    Ties are broken by doc id so rankings are deterministic. ``with_ids=False`` returns
    documents without ``Document.id`` (their id lives only in ``metadata["doc_id"]``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    corpus: dict[str, str]
    k: int = 10
    with_ids: bool = True
    _postings: dict[str, list[tuple[str, int]]] = PrivateAttr(default_factory=dict)
    _norm: dict[str, float] = PrivateAttr(default_factory=dict)
    _idf: dict[str, float] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        lengths: dict[str, int] = {}
        postings: dict[str, list[tuple[str, int]]] = {}
        for doc_id, text in self.corpus.items():
            tf = Counter(tokenize(text))
            lengths[doc_id] = sum(tf.values())
            for term, f in tf.items():
                postings.setdefault(term, []).append((doc_id, f))
        self._postings = postings
        n = len(self.corpus)
        avg = sum(lengths.values()) / max(n, 1)
        self._norm = {d: 0.9 * (1 - 0.4 + 0.4 * n_ / avg) for d, n_ in lengths.items()}
        self._idf = {
            t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in postings.items()
        }

    def rank(self, query: str, k: int | None = None) -> list[str]:
        scores: dict[str, float] = {}
        idfs, postings, norm = self._idf, self._postings, self._norm
        for term in set(tokenize(query)):
            idf = idfs.get(term)
            if idf is None:
                continue
            for doc_id, f in postings[term]:
                scores[doc_id] = scores.get(doc_id, 0.0) + idf * f * 1.9 / (f + norm[doc_id])
        ranked = sorted(scores, key=lambda d: (-scores[d], d))
        return ranked[: k if k is not None else self.k]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        return [
            Document(self.corpus[d], id=d if self.with_ids else None, metadata={"doc_id": d})
            for d in self.rank(query, k)
        ]


class EchoChatModel(BaseChatModel):
    """Answers ``"answer: <the last human message>"`` and reports word counts as usage."""

    @property
    def _llm_type(self) -> str:
        return "echo-chat-model"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        question = [m for m in messages if m.type == "human"][-1].text
        prompt_words = sum(len(str(m.text).split()) for m in messages)
        text = f"answer: {question}"
        message = AIMessage(
            text,
            usage_metadata={
                "input_tokens": prompt_words,
                "output_tokens": len(text.split()),
                "total_tokens": prompt_words + len(text.split()),
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Answer from the context.\n\n{context}"), ("human", "{question}")]
)


def rag_chain(retriever: Runnable[Any, Any], llm: Runnable[Any, Any]) -> Runnable[Any, str]:
    """The canonical LCEL RAG chain: retrieve -> prompt -> model -> string."""
    return (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | PROMPT
        | llm
        | StrOutputParser()
    )


TREC = {
    "ndcg@5": "ndcg_cut_5",
    "ndcg@10": "ndcg_cut_10",
    "recall@10": "recall_10",
    "precision@5": "P_5",
    "precision@10": "P_10",
    "map": "map",
}


def trec_per_query(qrels: dict[str, dict[str, float]], run: dict[str, list[str]]) -> Any:
    scored = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    ints = {q: {d: int(g) for d, g in row.items()} for q, row in qrels.items()}
    return pytrec_eval.RelevanceEvaluator(ints, set(TREC.values())).evaluate(scored)


def assert_matches_trec_eval(report: Any, qrels: dict[str, dict[str, float]], run: Any) -> None:
    expected = trec_per_query(qrels, run)
    assert set(report.per_query) == set(expected)
    for qid, row in expected.items():
        for ours, theirs in TREC.items():
            assert report.per_query[qid][ours] == pytest.approx(row[theirs], abs=1e-12), (qid, ours)
