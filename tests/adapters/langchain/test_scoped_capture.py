"""Issue 13 in LangChain: scoped ids, record="tagged", run_dataset, one doc_id vocabulary.

Every test drives real LangChain runnables (the Cranfield BM25 retriever and the echo chat
model of ``lc_testkit``), offline.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from lc_testkit import BM25Retriever, assert_matches_trec_eval
from ragmeter_langchain import RagmeterCallbackHandler, as_retriever_fn

from ragmeter.capture import DatasetReport, capture, content_doc_id, current_scope
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io import read_qrels

DATA = Path(__file__).resolve().parents[2] / "data"


def expected_ids(retriever: BM25Retriever, query: str) -> list[str]:
    return [d.id or "" for d in retriever.invoke(query)]


# -- 1. scoped capture --------------------------------------------------------------------


def test_capture_scope_attaches_the_handler_and_names_the_sample(
    make_chain: Any, bm25: BM25Retriever, judged_queries: dict[str, str], cranfield: Any
) -> None:
    handler = RagmeterCallbackHandler()
    chain = make_chain()
    qid, question = next(iter(judged_queries.items()))
    with handler.capture(id=qid, relevance=cranfield.qrels[qid], reference="lift") as scope:
        assert current_scope() is scope
        answer = chain.invoke(question)  # no callbacks, no metadata in the config
    chain.invoke("not captured: outside the scope")
    (sample,) = handler.samples
    assert sample.id == qid and sample.reference == "lift"
    assert sample.relevance == {d: float(g) for d, g in cranfield.qrels[qid].items()}
    assert sample.retrieved_ids == expected_ids(bm25, question)
    assert sample.response == answer
    report = handler.evaluate_retrieval()  # judged by the relevance the scope carried
    assert_matches_trec_eval(report, {qid: sample.relevance}, handler.to_run())


def test_run_metadata_wins_over_a_scope_of_every_observer(make_chain: Any) -> None:
    handler = RagmeterCallbackHandler()
    with capture(id="scoped", reference="from scope"):
        make_chain().invoke(
            "drag", config={"callbacks": [handler], "metadata": {"ragmeter_id": "own"}}
        )
    (sample,) = handler.samples
    assert sample.id == "own" and sample.reference == "from scope"


def test_a_handlers_own_scope_wins_over_run_metadata_meant_for_another(
    make_chain: Any,
) -> None:
    mine, theirs = RagmeterCallbackHandler(), RagmeterCallbackHandler()
    with mine.capture(id="mine", reference="from scope"):
        make_chain().invoke(
            "drag", config={"callbacks": [theirs], "metadata": {"ragmeter_id": "theirs"}}
        )
    assert [s.id for s in mine.samples] == ["mine"]  # not relabelled by the other's id
    assert [s.id for s in theirs.samples] == ["theirs"]
    assert mine.samples[0].reference == "from scope" and theirs.samples[0].reference is None


def test_scopes_in_threads_and_asyncio_tasks_never_mix(
    make_chain: Any, bm25: BM25Retriever, judged_queries: dict[str, str]
) -> None:
    handler = RagmeterCallbackHandler()
    chain = make_chain()

    def one(item: tuple[str, str]) -> None:
        with handler.capture(id=item[0]):
            chain.invoke(item[1])

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(one, judged_queries.items()))

    async def aone(qid: str, question: str) -> None:
        with handler.capture(id=f"a{qid}"):
            await asyncio.sleep(0)
            await chain.ainvoke(question)

    async def main() -> None:
        await asyncio.gather(*(aone(q, t) for q, t in judged_queries.items()))

    asyncio.run(main())
    by_id = {s.id: s for s in handler.samples}
    assert len(by_id) == 2 * len(judged_queries)
    for qid, question in judged_queries.items():
        for key in (qid, f"a{qid}"):
            assert by_id[key].user_input == question
            assert by_id[key].retrieved_ids == expected_ids(bm25, question)


def test_batch_inside_one_scope_gives_repeated_ids(make_chain: Any) -> None:
    handler = RagmeterCallbackHandler()
    with handler.capture(id="q"):
        make_chain().batch(["wing flutter", "heat transfer"])
    assert sorted(handler.to_run()) == ["q", "q#2"]


def test_a_batch_scope_gives_each_batch_input_its_own_id_and_qrels(
    make_chain: Any, bm25: BM25Retriever, cranfield: Any, judged_queries: dict[str, str]
) -> None:
    handler = RagmeterCallbackHandler()
    batch = dict(list(judged_queries.items())[:8])
    with handler.capture(batch=batch, qrels=cranfield.qrels):
        make_chain().batch(list(batch.values()), config={"max_concurrency": 4})
    by_id = {s.id: s for s in handler.samples}
    assert sorted(by_id) == sorted(batch)
    for qid, question in batch.items():
        assert by_id[qid].user_input == question
        assert by_id[qid].retrieved_ids == expected_ids(bm25, question)
        assert by_id[qid].relevance == {d: float(g) for d, g in cranfield.qrels[qid].items()}
    report = handler.evaluate_retrieval()  # judged by the qrels the batch scope carried
    assert_matches_trec_eval(report, {q: by_id[q].relevance for q in batch}, handler.to_run())


def test_a_bad_scope_value_is_refused_before_the_chain_runs() -> None:
    handler = RagmeterCallbackHandler()
    with pytest.raises(InvalidInputError, match=r"capture\(\): .*relevance.*NaN"):
        handler.capture(id="q", relevance={"d": float("nan")})


# -- record="tagged" ----------------------------------------------------------------------


def test_record_tagged_keeps_only_runs_with_an_id(make_chain: Any) -> None:
    handler = RagmeterCallbackHandler(record="tagged")
    chain = make_chain()
    chain.invoke("untagged", config={"callbacks": [handler]})
    chain.invoke("tagged", config={"callbacks": [handler], "metadata": {"ragmeter_id": "m"}})
    with handler.capture(id="s"):
        chain.invoke("scoped")
    with handler.capture(reference="ground truth but no id"):
        chain.invoke("still untagged")
    assert sorted(s.id for s in handler.samples) == ["m", "s"]
    assert handler.open_runs == 0 and not handler._runs.nodes  # ignored runs leave nothing
    with pytest.raises(InvalidInputError, match="record must be one of 'all', 'tagged'"):
        RagmeterCallbackHandler(record="some")


# -- run_dataset ----------------------------------------------------------------------------


def test_run_dataset_over_queries_scores_like_trec_eval(
    make_chain: Any, bm25: BM25Retriever, judged_queries: dict[str, str], cranfield: Any
) -> None:
    handler = RagmeterCallbackHandler()
    report = handler.run_dataset(
        make_chain(), judged_queries, qrels=cranfield.qrels, concurrency=4, progress=False
    )
    assert isinstance(report, DatasetReport) and report.failed == {} and report.uncaptured == []
    assert [s.id for s in report.samples] == list(judged_queries)  # dataset order
    run = {q: expected_ids(bm25, t) for q, t in judged_queries.items()}
    assert handler.to_run() == run
    assert report.retrieval is not None and report.retrieval.n_queries == len(judged_queries)
    judged = {q: cranfield.qrels[q] for q in judged_queries}
    assert_matches_trec_eval(report.retrieval, judged, run)
    assert report.primary == report.retrieval.primary
    assert report.answers is None  # no reference answers in the dataset
    assert "20 samples captured" in str(report)


def test_run_dataset_over_a_beir_directory_with_a_progress_bar(
    cranfield: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = {
        json.loads(line)["_id"]: json.loads(line)["text"]
        for line in (DATA / "cranfield_beir" / "corpus.jsonl").read_text().splitlines()
    }
    retriever = BM25Retriever(corpus=corpus, k=10)
    chain = retriever | RunnableLambda(lambda docs: docs[0].page_content)
    handler = RagmeterCallbackHandler()
    report = handler.run_dataset(
        chain, DATA / "cranfield_beir", k_values=(10,), metrics=["ndcg"], concurrency=2
    )
    qrels = read_qrels(DATA / "cranfield_beir")
    assert report.retrieval is not None and report.retrieval.n_queries == len(qrels)
    reference = evaluate_run(qrels, handler.to_run(), k_values=(10,), metrics=["ndcg"])
    assert report.retrieval.metrics == reference.metrics
    assert "LangChain" in capsys.readouterr().err  # rich's bar went to stderr


def test_run_dataset_goes_on_past_a_failing_query_and_scores_answers(
    make_chain: Any, tmp_path: Path
) -> None:
    from ragmeter.io.jsonl import write_jsonl

    def guard(question: str) -> str:
        if "explode" in question:
            raise ValueError("index offline")
        return question

    chain = RunnableLambda(guard) | make_chain()
    write_jsonl(
        [
            {"id": "a", "user_input": "wing flutter", "reference": "answer: wing flutter"},
            {"id": "b", "user_input": "explode now", "reference": "x"},
            {"id": "c", "user_input": "heat transfer", "reference": "answer: heat"},
        ],
        tmp_path / "set.jsonl",
    )
    handler = RagmeterCallbackHandler()
    report = handler.run_dataset(chain, tmp_path / "set.jsonl", progress=False)
    assert report.failed == {"b": "ValueError: index offline"}
    assert [s.id for s in report.samples] == ["a", "b", "c"]
    assert report.samples[1].error == "ValueError: index offline"
    assert report.retrieval is None  # the dataset judges no document
    assert report.answers is not None
    assert report.answers.per_sample["a"]["exact_match"] == 1.0
    assert report.answers.per_sample["c"]["exact_match"] == 0.0


def test_arun_dataset_with_bounded_concurrency(
    make_chain: Any, bm25: BM25Retriever, judged_queries: dict[str, str], cranfield: Any
) -> None:
    handler = RagmeterCallbackHandler()
    report = asyncio.run(
        handler.arun_dataset(
            make_chain(), judged_queries, qrels=cranfield.qrels, concurrency=3, progress=False
        )
    )
    assert handler.to_run() == {q: expected_ids(bm25, t) for q, t in judged_queries.items()}
    assert report.retrieval is not None and report.retrieval.n_queries == len(judged_queries)


def test_run_dataset_refuses_bad_arguments(make_chain: Any) -> None:
    handler = RagmeterCallbackHandler()
    with pytest.raises(InvalidInputError, match="concurrency must be an int >= 1, got 0"):
        handler.run_dataset(make_chain(), {"q": "x"}, concurrency=0, progress=False)
    with pytest.raises(InvalidInputError, match=r"needs a LangChain runnable with \.invoke\(\)"):
        handler.run_dataset(object(), {"q": "x"}, progress=False)


# -- 5. one doc_id vocabulary ---------------------------------------------------------------


def test_doc_id_rules_in_the_handler(cranfield: Any) -> None:
    no_ids = BM25Retriever(corpus=cranfield.corpus, k=5, with_ids=False)
    docs = no_ids.invoke("nozzle")

    def ids_with(**options: Any) -> list[str]:
        handler = RagmeterCallbackHandler(**options)
        with handler.capture(id="q"):
            no_ids.invoke("nozzle")
        return handler.samples[0].retrieved_ids or []

    by_meta = [d.metadata["doc_id"] for d in docs]
    assert ids_with() == by_meta  # Document.id, else metadata["doc_id"]
    assert ids_with(doc_id="metadata.doc_id") == by_meta
    assert ids_with(doc_id="content") == [content_doc_id(d.page_content) for d in docs]
    assert ids_with(doc_id="id") == [content_doc_id(d.page_content) for d in docs]
    assert ids_with(doc_id=lambda d: "x" + d.metadata["doc_id"]) == ["x" + d for d in by_meta]
    with pytest.warns(DeprecationWarning, match=r"RagmeterCallbackHandler\(id_key=...\)"):
        assert ids_with(id_key=None) == [content_doc_id(d.page_content) for d in docs]
    with pytest.raises(InvalidInputError, match="doc_id must be None"):
        RagmeterCallbackHandler(doc_id="doc_id")


class PartlySourced(BaseRetriever):
    """Two documents; only the first has ``metadata["src"]``."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document("a", id="d1", metadata={"src": "s1"}), Document("b", id="d2")]


def test_a_missing_metadata_key_falls_back_and_is_noted() -> None:
    handler = RagmeterCallbackHandler(doc_id="metadata.src")
    with handler.capture(id="q"):
        PartlySourced().invoke("q")
    (sample,) = handler.samples
    assert sample.retrieved_ids == ["s1", "d2"]
    assert sample.metadata["capture_errors"] == [
        "doc_id: 1 of 2 retrieved document(s) had no metadata['src'] (doc_id); their "
        "Document.id (else a content hash) was used instead"
    ]


def test_as_retriever_fn_takes_the_same_doc_id(cranfield: Any) -> None:
    no_ids = BM25Retriever(corpus=cranfield.corpus, k=5, with_ids=False)
    fn = as_retriever_fn(no_ids, doc_id="content")
    assert fn("nozzle") == [content_doc_id(d.page_content) for d in no_ids.invoke("nozzle")]
    with pytest.warns(DeprecationWarning, match=r"as_retriever_fn\(id_key=...\)"):
        old = as_retriever_fn(no_ids, id_key="doc_id")
    assert old("nozzle") == as_retriever_fn(no_ids)("nozzle")
