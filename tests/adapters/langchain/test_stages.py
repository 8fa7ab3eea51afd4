"""Stages of LangChain hybrid chains, each ranking recomputed without ragmeter and scored by
pytrec_eval: an ``EnsembleRetriever`` of two retrievers, a ``ContextualCompressionRetriever``
with a custom compressor, and reciprocal rank fusion in a lambda marked with
``ragmeter_langchain.stage``. The handler's stage rankings must equal them and score the
same to 0.0, per query; the context is the last step before the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import pytrec_eval
from langchain_classic.retrievers import ContextualCompressionRetriever, EnsembleRetriever
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnableParallel
from lc_testkit import BM25Retriever, EchoChatModel, rag_chain
from ragmeter_langchain import RagmeterCallbackHandler, stage

N = 25


class KeywordRetriever(BaseRetriever):
    """Documents sharing the most words with the query, ties by id."""

    corpus: dict[str, str]
    k: int = 10

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        terms = set(query.lower().split())
        words = {d: set(t.lower().split()) for d, t in self.corpus.items()}
        ranked = sorted(words, key=lambda d: (-len(terms & words[d]), d))[: self.k]
        return [Document(self.corpus[d], id=d) for d in ranked]


class ShortFirst(BaseDocumentCompressor):
    """A custom compressor: the shorter texts of the top 8 first, cut to 6."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Any = None
    ) -> list[Document]:
        return sorted(documents[:8], key=lambda d: (len(d.page_content), str(d.id)))[:6]


def rrf(out: dict[str, list[Document]]) -> list[Document]:
    score: dict[str, float] = {}
    docs: dict[str, Document] = {}
    for ranking in out.values():
        for rank, doc in enumerate(ranking, 1):
            score[str(doc.id)] = score.get(str(doc.id), 0.0) + 1 / (60 + rank)
            docs[str(doc.id)] = doc
    return [docs[d] for d in sorted(score, key=lambda d: (-score[d], d))][:10]


@pytest.fixture(scope="module")
def parts(cranfield: Any) -> dict[str, Any]:
    bm25 = BM25Retriever(corpus=cranfield.corpus, k=10)
    keyword = KeywordRetriever(corpus=cranfield.corpus)
    return {"bm25": bm25, "keyword": keyword}


def questions(cranfield: Any) -> dict[str, str]:
    qids = [q for q in cranfield.qrels if q in cranfield.queries][:N]
    return {q: cranfield.queries[q] for q in qids}


def ids(docs: Sequence[Document]) -> list[str]:
    return list(dict.fromkeys(str(d.id) for d in docs))


def check(handler: RagmeterCallbackHandler, cranfield: Any, expected: dict[str, Any]) -> None:
    for name, run in expected.items():
        assert handler.to_run(stage=name) == run, name
        judged = {q: {d: int(g) for d, g in cranfield.qrels[q].items()} for q in run}
        scored = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.items()}
        oracle = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut_10", "recall_10"}).evaluate(
            scored
        )
        report = handler.evaluate_retrieval(
            judged, stage=name, k_values=(10,), metrics=["ndcg", "recall"]
        )
        for qid, row in oracle.items():
            assert report.per_query[qid]["ndcg@10"] - row["ndcg_cut_10"] == 0.0, (name, qid)
            assert report.per_query[qid]["recall@10"] - row["recall_10"] == 0.0, (name, qid)


def run_all(chain: Any, handler: RagmeterCallbackHandler, qs: dict[str, str]) -> None:
    for qid, text in qs.items():
        with handler.capture(id=qid):
            chain.invoke(text)


def test_an_ensemble_retriever_is_a_fusion_stage_over_its_members(
    cranfield: Any, parts: dict[str, Any]
) -> None:
    ensemble = EnsembleRetriever(retrievers=[parts["bm25"], parts["keyword"]], weights=[0.5, 0.5])
    qs = questions(cranfield)
    expected = {
        "BM25Retriever": {q: ids(parts["bm25"].invoke(t)) for q, t in qs.items()},
        "KeywordRetriever": {q: ids(parts["keyword"].invoke(t)) for q, t in qs.items()},
        "EnsembleRetriever": {q: ids(ensemble.invoke(t)) for q, t in qs.items()},
    }
    expected["context"] = expected["EnsembleRetriever"]
    handler = RagmeterCallbackHandler()
    run_all(rag_chain(ensemble, EchoChatModel()), handler, qs)
    sample = handler.samples[0]
    shape = [(s.name, s.kind, s.depth, s.inputs) for s in sample.stages or []]
    assert shape == [
        ("BM25Retriever", "retriever", 1, None),
        ("KeywordRetriever", "retriever", 1, None),
        ("EnsembleRetriever", "fusion", 0, ["BM25Retriever", "KeywordRetriever"]),
        ("context", "context", 0, ["EnsembleRetriever"]),
    ]
    check(handler, cranfield, expected)
    table = handler.evaluate_retrieval(
        {q: cranfield.qrels[q] for q in qs}, stages=True, k_values=(10,), metrics=["ndcg"]
    )
    assert table["EnsembleRetriever"].against in ("BM25Retriever", "KeywordRetriever")
    assert table["context"].same_as == "EnsembleRetriever"


def test_a_compression_retriever_reranks_its_base_retriever(
    cranfield: Any, parts: dict[str, Any]
) -> None:
    compressed = ContextualCompressionRetriever(
        base_compressor=ShortFirst(), base_retriever=parts["bm25"]
    )
    qs = questions(cranfield)
    expected = {
        "BM25Retriever": {q: ids(parts["bm25"].invoke(t)) for q, t in qs.items()},
        "ContextualCompressionRetriever": {q: ids(compressed.invoke(t)) for q, t in qs.items()},
    }
    expected["context"] = expected["ContextualCompressionRetriever"]
    handler = RagmeterCallbackHandler()
    run_all(rag_chain(compressed, EchoChatModel()), handler, qs)
    shape = [(s.name, s.kind, s.depth) for s in handler.samples[0].stages or []]
    assert shape == [
        ("BM25Retriever", "retriever", 1),
        ("ContextualCompressionRetriever", "reranker", 0),
        ("context", "context", 0),
    ]
    check(handler, cranfield, expected)


def test_fusion_in_a_lambda_marked_as_a_stage_is_the_context(
    cranfield: Any, parts: dict[str, Any]
) -> None:
    both = RunnableParallel(
        bm25=parts["bm25"].with_config(run_name="bm25"),
        keyword=parts["keyword"].with_config(run_name="keyword"),
    )
    fused = both | RunnableLambda(rrf) | stage("rrf")
    qs = questions(cranfield)
    expected = {
        "bm25": {q: ids(parts["bm25"].invoke(t)) for q, t in qs.items()},
        "keyword": {q: ids(parts["keyword"].invoke(t)) for q, t in qs.items()},
        "rrf": {q: ids(fused.invoke(t)) for q, t in qs.items()},
    }
    expected["context"] = expected["rrf"]
    marked = RagmeterCallbackHandler()
    run_all(rag_chain(fused, EchoChatModel()), marked, qs)
    assert [s.name for s in marked.samples[0].stages or []][-2:] == ["rrf", "context"]
    assert all("capture_errors" not in s.metadata for s in marked.samples)
    check(marked, cranfield, expected)
    # unmarked, the fused list cannot be seen: no context, every sample noted, never a guess
    plain = RagmeterCallbackHandler()
    run_all(rag_chain(both | RunnableLambda(rrf), EchoChatModel()), plain, qs)
    assert all(s.retrieved_ids is None for s in plain.samples)
    report = plain.evaluate_retrieval({q: cranfield.qrels[q] for q in qs}, k_values=(10,))
    assert report.extra["capture"]["no_context"] == N
    assert any("(no_context)" in w and "stage('fused')" in w for w in report.warnings)


def test_named_members_of_an_ensemble_inside_a_chain_are_nested_in_it(
    cranfield: Any, parts: dict[str, Any]
) -> None:
    """LangChain reports the members of an ``EnsembleRetriever`` named with ``.with_config``
    as siblings of the ensemble; they ran inside it, so they are stages inside it."""
    dense = parts["bm25"].with_config(run_name="dense")
    sparse = parts["keyword"].with_config(run_name="sparse")
    ensemble = EnsembleRetriever(retrievers=[dense, sparse])
    qs = dict(list(questions(cranfield).items())[:5])
    handler = RagmeterCallbackHandler()
    run_all(rag_chain(ensemble, EchoChatModel()), handler, qs)
    sample = handler.samples[0]
    shape = [(s.name, s.kind, s.depth, s.inputs) for s in sample.stages or []]
    assert shape == [
        ("dense", "retriever", 1, None),
        ("sparse", "retriever", 1, None),
        ("EnsembleRetriever", "fusion", 0, ["dense", "sparse"]),
        ("context", "context", 0, ["EnsembleRetriever"]),
    ]
    assert handler.to_run() == {q: ids(ensemble.invoke(t)) for q, t in qs.items()}
