"""as_retriever_fn: a LangChain retriever evaluated by ragmeter's evaluate_retrieval."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from lc_testkit import BM25Retriever, assert_matches_trec_eval
from ragmeter_langchain import RagmeterCallbackHandler, as_retriever_fn

from ragmeter.capture import content_doc_id
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_retrieval


def test_evaluate_retrieval_matches_trec_eval_and_the_captured_run(
    make_chain, bm25, cranfield, judged_queries
):
    qrels = {q: cranfield.qrels[q] for q in judged_queries}
    metrics = ["ndcg", "recall", "precision", "map"]
    report = evaluate_retrieval(
        as_retriever_fn(bm25, limit_kwarg="k"),
        qrels,
        judged_queries,
        k_values=(5, 10),
        metrics=metrics,
    )
    run = {q: bm25.rank(t, 10) for q, t in judged_queries.items()}
    assert_matches_trec_eval(report, qrels, run)

    handler = RagmeterCallbackHandler()
    for q, text in judged_queries.items():
        make_chain().invoke(text, config={"callbacks": [handler], "metadata": {"ragmeter_id": q}})
    captured = handler.evaluate_retrieval(qrels, k_values=(5, 10), metrics=metrics)
    assert captured.per_query == report.per_query


def test_limit_truncates_and_limit_kwarg_reaches_the_retriever(bm25):
    fn = as_retriever_fn(bm25)
    assert fn("wing flutter", limit=3) == bm25.rank("wing flutter")[:3]
    assert len(fn("wing flutter", limit=20)) == 10  # the retriever's own k
    deep = as_retriever_fn(bm25, limit_kwarg="k")
    assert deep("wing flutter", limit=20) == bm25.rank("wing flutter", 20)


def test_id_rules_match_the_handler(cranfield):
    no_ids = BM25Retriever(corpus=cranfield.corpus, with_ids=False)
    assert as_retriever_fn(no_ids)("nozzle") == no_ids.rank("nozzle")
    hashed = as_retriever_fn(no_ids, doc_id="content")("nozzle")
    assert hashed == [content_doc_id(cranfield.corpus[d]) for d in no_ids.rank("nozzle")]
    custom = as_retriever_fn(no_ids, doc_id=lambda d: "c" + d.metadata["doc_id"])
    assert custom("nozzle") == ["c" + d for d in no_ids.rank("nozzle")]


def test_any_runnable_returning_documents_works():
    fn = as_retriever_fn(RunnableLambda(lambda q: [Document(q, id="x"), Document("y")]))
    assert fn("hello") == ["x", content_doc_id("y")]


def test_errors():
    with pytest.raises(
        InvalidInputError, match="retriever must be a LangChain retriever or runnable"
    ):
        as_retriever_fn(lambda q: [])
    fn = as_retriever_fn(RunnableLambda(lambda q: []))
    with pytest.raises(InvalidInputError, match="limit must be an int >= 1, got 0"):
        fn("q", limit=0)
