"""RagmeterCallbackHandler driven by real LangChain chains (offline)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import tracemalloc
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListLLM, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_core.tools import tool
from langchain_core.vectorstores import InMemoryVectorStore
from lc_testkit import PROMPT, BM25Retriever, EchoChatModel, format_docs
from ragmeter_langchain import RagmeterCallbackHandler

from ragmeter.capture import content_doc_id
from ragmeter.errors import InvalidInputError


def cfg(handler: RagmeterCallbackHandler, qid: str | None = None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"callbacks": [handler], **extra}
    if qid is not None:
        config.setdefault("metadata", {})["ragmeter_id"] = qid
    return config


def expected_ids(retriever: BM25Retriever, query: str) -> list[str]:
    """What the retriever really returns for ``query`` (run without the handler)."""
    return [d.id or "" for d in retriever.invoke(query)]


class FailingRetriever(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        raise ValueError(f"index offline for {query!r}")


class FusionRetriever(BaseRetriever):
    """An ensemble-style retriever: calls two retrievers as child runs, interleaves them."""

    first: BaseRetriever
    second: BaseRetriever

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        a = self.first.invoke(query, config={"callbacks": run_manager.get_child()})
        b = self.second.invoke(query, config={"callbacks": run_manager.get_child()})
        out: dict[str, Document] = {}
        for x, y in itertools.zip_longest(a, b):
            for d in (x, y):
                if d is not None:
                    out.setdefault(d.id or "", d)
        return list(out.values())


# -- one root run, one sample -------------------------------------------------------------


def test_invoke_captures_question_documents_answer_and_usage(make_chain, bm25, judged_queries):
    qid, question = next(iter(judged_queries.items()))
    handler = RagmeterCallbackHandler()
    answer = make_chain().invoke(
        question, config=cfg(handler, qid, tags=["eval"], metadata={"user": "ana"})
    )

    [sample] = handler.samples
    docs = bm25.invoke(question)
    assert sample.id == qid
    assert sample.user_input == question
    assert sample.retrieved_ids == [d.id for d in docs]
    assert sample.retrieved_contexts == [d.page_content for d in docs]
    assert sample.response == answer == f"answer: {question}"
    assert sample.error is None
    assert sample.latency_ms is not None and sample.latency_ms > 0
    reported = (
        (PROMPT | EchoChatModel())
        .invoke({"context": format_docs(docs), "question": question})
        .usage_metadata
    )
    assert reported is not None
    assert (sample.input_tokens, sample.output_tokens) == (
        reported["input_tokens"],
        reported["output_tokens"],
    )
    meta = sample.metadata
    assert meta["tags"] == ["eval"]
    assert meta["run_metadata"] == {"user": "ana"}  # ragmeter_id is consumed, not repeated
    assert meta["llm_calls"] == 1
    assert "retriever_calls" not in meta  # the stages replace it
    [retriever, context] = sample.stages or []
    assert (retriever.name, retriever.kind, retriever.depth) == ("BM25Retriever", "retriever", 0)
    assert retriever.query == question and retriever.ids == sample.retrieved_ids
    assert retriever.latency_ms is not None and retriever.error is None
    assert (context.name, context.kind, context.same_as) == ("context", "context", "BM25Retriever")
    assert context.ids == sample.retrieved_ids
    assert handler.to_run() == {qid: sample.retrieved_ids}
    assert handler.open_runs == 0 and len(handler) == 1


def test_sample_id_defaults_to_the_root_run_id(make_chain):
    handler = RagmeterCallbackHandler()
    run_id = uuid.uuid4()
    make_chain().invoke("lift of a wing", config={"callbacks": [handler], "run_id": run_id})
    [sample] = handler.samples
    assert sample.id == str(run_id) == sample.metadata["run_id"]


def test_references_and_relevance_come_from_run_metadata(make_chain):
    handler = RagmeterCallbackHandler()
    make_chain().invoke(
        "heat transfer",
        config={
            "callbacks": [handler],
            "metadata": {
                "ragmeter_id": "q9",
                "ragmeter_reference": "answer: heat transfer",
                "ragmeter_relevance": {"5": 2, "6": 1},
            },
        },
    )
    [sample] = handler.samples
    assert sample.reference == "answer: heat transfer"
    assert sample.relevance == {"5": 2.0, "6": 1.0}
    assert "run_metadata" not in sample.metadata
    assert handler.to_qrels() == {"q9": {"5": 2.0, "6": 1.0}}


def test_root_retriever_and_root_chat_model(bm25):
    handler = RagmeterCallbackHandler()
    docs = bm25.invoke("boundary layer", config=cfg(handler, "r"))
    EchoChatModel().invoke("what is drag?", config=cfg(handler, "m"))
    by_id = {s.id: s for s in handler.samples}
    assert by_id["r"].user_input == "boundary layer"
    assert by_id["r"].retrieved_ids == [d.id for d in docs]
    assert by_id["r"].response is None
    assert by_id["m"].user_input == "what is drag?"
    assert by_id["m"].response == "answer: what is drag?"
    assert by_id["m"].retrieved_ids is None


def test_text_completion_llm_and_a_tool_as_roots(bm25):
    handler = RagmeterCallbackHandler()
    llm_chain = ChatPromptTemplate.from_template("Q: {question}") | FakeListLLM(responses=["42"])
    llm_chain.invoke({"question": "how many?"}, config=cfg(handler, "llm"))

    @tool
    def search(query: str) -> str:
        """Search the Cranfield abstracts."""
        return format_docs(bm25.invoke(query))

    search.invoke({"query": "heat flux"}, config=cfg(handler, "tool"))
    by_id = {s.id: s for s in handler.samples}
    assert by_id["llm"].user_input == "how many?" and by_id["llm"].response == "42"
    assert by_id["tool"].user_input == "heat flux"
    assert by_id["tool"].retrieved_ids == expected_ids(bm25, "heat flux")
    assert by_id["tool"].response == format_docs(bm25.invoke("heat flux"))


def test_same_handler_attached_twice_records_once(make_chain):
    handler = RagmeterCallbackHandler()
    make_chain().with_config(callbacks=[handler]).invoke("shock waves", config=cfg(handler))
    assert len(handler.samples) == 1


# -- batch, async, streaming, threads ---------------------------------------------------------


def test_batch_with_max_concurrency_one_sample_per_input(make_chain, bm25, judged_queries):
    handler = RagmeterCallbackHandler()
    qids = list(judged_queries)
    configs = [cfg(handler, q, max_concurrency=3) for q in qids]
    answers = make_chain().batch([judged_queries[q] for q in qids], config=configs)

    assert sorted(s.id for s in handler.samples) == sorted(qids)
    for sample in handler.samples:
        question = judged_queries[sample.id]
        assert sample.user_input == question
        assert sample.retrieved_ids == expected_ids(bm25, question)
        assert sample.response == f"answer: {question}"
    assert answers == [f"answer: {judged_queries[q]}" for q in qids]
    assert handler.open_runs == 0


def test_ainvoke_concurrently_under_asyncio(make_chain, bm25, judged_queries):
    handler = RagmeterCallbackHandler()
    chain = make_chain()

    async def main() -> list[str]:
        return await asyncio.gather(
            *(chain.ainvoke(t, config=cfg(handler, q)) for q, t in judged_queries.items())
        )

    asyncio.run(main())
    assert len(handler.samples) == len(judged_queries)
    for sample in handler.samples:
        question = judged_queries[sample.id]
        assert sample.retrieved_ids == expected_ids(bm25, question)
        assert sample.response == f"answer: {question}"


def test_astream_tokens_reach_the_caller_and_sample_has_full_answer(make_chain, bm25):
    text = "Lift grows with the angle of attack until stall."
    llm = GenericFakeChatModel(messages=itertools.repeat(AIMessage(text)))
    chain = make_chain(llm=llm)
    handler = RagmeterCallbackHandler()

    async def collect(config: Any) -> list[str]:
        return [chunk async for chunk in chain.astream("angle of attack", config=config)]

    plain = asyncio.run(collect(None))
    chunks = asyncio.run(collect(cfg(handler, "s1")))
    assert chunks == plain and len(chunks) > 1  # the handler does not consume the stream
    [sample] = handler.samples
    assert sample.response == "".join(chunks) == text
    assert sample.user_input == "angle of attack"  # the streamed root reports its input at the end
    assert sample.retrieved_ids == expected_ids(bm25, "angle of attack")


def test_threads_sharing_one_handler(make_chain, bm25, judged_queries):
    handler = RagmeterCallbackHandler()
    chain = make_chain()
    jobs = [(f"{q}-{rep}", t) for rep in range(3) for q, t in judged_queries.items()]
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda job: chain.invoke(job[1], config=cfg(handler, job[0])), jobs))

    assert sorted(s.id for s in handler.samples) == sorted(j for j, _ in jobs)
    for sample in handler.samples:
        question = judged_queries[sample.id.rsplit("-", 1)[0]]
        assert sample.user_input == question
        assert sample.retrieved_ids == expected_ids(bm25, question)
        assert sample.response == f"answer: {question}"
        assert [s.name for s in sample.stages or []] == ["BM25Retriever", "context"]
    assert handler.open_runs == 0


# -- nested chains, several retrievers --------------------------------------------------------


def test_nested_chain_invoked_inside_a_step_joins_the_outer_sample(make_chain, bm25):
    inner = make_chain()
    outer = RunnableLambda(lambda q: q.strip().lower()) | RunnableLambda(
        lambda q, config: inner.invoke(q, config=config)
    )
    handler = RagmeterCallbackHandler()
    outer.invoke("  SUPERSONIC Flow ", config=cfg(handler, "n1"))
    [sample] = handler.samples
    assert sample.user_input == "  SUPERSONIC Flow "  # the root's input, not the inner one
    assert sample.retrieved_ids == expected_ids(bm25, "supersonic flow")
    assert sample.response == "answer: supersonic flow"


def test_two_sequential_retrievers_default_is_the_last(bm25, cranfield):
    first = bm25.with_config(run_name="first")
    second = BM25Retriever(corpus=cranfield.corpus, k=5).with_config(run_name="second")
    chain = (
        first
        | RunnableLambda(lambda docs: docs[0].page_content[:80])
        | {"context": second | format_docs, "question": RunnablePassthrough()}
        | PROMPT
        | EchoChatModel()
        | StrOutputParser()
    )
    question = "pressure distribution on cones"
    a = bm25.invoke(question)
    b = bm25.invoke(a[0].page_content[:80], k=5)

    def run(**options: Any) -> Any:
        handler = RagmeterCallbackHandler(**options)
        chain.invoke(question, config=cfg(handler, "t"))
        return handler.samples[0]

    default = run()
    assert default.retrieved_ids == [d.id for d in b]  # the last step before the prompt
    stages = {s.name: s for s in default.stages or []}
    assert list(stages) == ["first", "second", "context"]
    assert stages["first"].ids == [d.id for d in a] and stages["context"].same_as == "second"
    assert "capture_errors" not in default.metadata
    assert run(stage="first").retrieved_ids == [d.id for d in a]
    # the older options still work, deprecated
    with pytest.warns(DeprecationWarning, match=r"retrieval=.*stage="):
        assert run(retrieval="first").retrieved_ids == [d.id for d in a]
    merged = list(dict.fromkeys([d.id for d in a] + [d.id for d in b]))
    with pytest.warns(DeprecationWarning):
        assert run(retrieval="merge").retrieved_ids == merged
    with pytest.warns(DeprecationWarning, match="retriever_name="):
        assert run(retriever_name="first").retrieved_ids == [d.id for d in a]


def test_retriever_called_several_times_keeps_every_call(bm25):
    queries = ["wing", "wing flutter", "wing flutter at transonic speed"]

    def multi_query(question: str, config: Any) -> list[Document]:
        docs: list[Document] = []
        for q in queries:
            docs.extend(bm25.invoke(q, config=config))
        return docs

    handler = RagmeterCallbackHandler()
    RunnableLambda(multi_query).invoke("flutter", config=cfg(handler, "m"))
    [sample] = handler.samples
    assert sample.retrieved_ids == expected_ids(bm25, queries[-1])
    *calls, context = sample.stages or []
    assert [c.name for c in calls] == ["BM25Retriever", "BM25Retriever#2", "BM25Retriever#3"]
    assert [c.query for c in calls] == queries
    assert [c.ids for c in calls] == [expected_ids(bm25, q) for q in queries]
    assert context.same_as == "BM25Retriever#3"


def test_parallel_retrievers_are_picked_by_name(bm25, cranfield):
    other = BM25Retriever(corpus=cranfield.corpus, k=3).with_config(run_name="small")
    chain = RunnableParallel(big=bm25, small=other)
    handler = RagmeterCallbackHandler(stage="small")
    chain.invoke("jet noise", config=cfg(handler))
    [sample] = handler.samples
    assert sample.retrieved_ids == expected_ids(bm25, "jet noise")[:3]
    assert sorted(s.name for s in sample.stages or []) == ["BM25Retriever", "small"]
    with pytest.warns(DeprecationWarning, match="retriever_name="):
        old = RagmeterCallbackHandler(retriever_name="small")
    chain.invoke("jet noise", config=cfg(old))
    assert old.samples[0].retrieved_ids == expected_ids(bm25, "jet noise")[:3]


def test_unknown_stage_is_reported_not_raised(make_chain):
    handler = RagmeterCallbackHandler(stage="nope")
    make_chain().invoke("jet noise", config=cfg(handler))
    [sample] = handler.samples
    assert sample.retrieved_ids is None
    assert any(
        "'nope' is not a stage of this run (stages: BM25Retriever, context)" in e
        for e in sample.metadata["capture_errors"]
    )
    with pytest.warns(DeprecationWarning):
        old = RagmeterCallbackHandler(retriever_name="nope")
    make_chain().invoke("jet noise", config=cfg(old))
    assert any("'nope' matched no" in e for e in old.samples[0].metadata["capture_errors"])


def test_outermost_retriever_wins_over_the_ones_it_calls(bm25, cranfield):
    small = BM25Retriever(corpus=cranfield.corpus, k=4)
    fusion = FusionRetriever(first=bm25, second=small)
    handler = RagmeterCallbackHandler()
    fused = fusion.invoke("transonic wind tunnel", config=cfg(handler, "f"))
    [sample] = handler.samples
    assert sample.retrieved_ids == [d.id for d in fused]
    stages = [(s.name, s.kind, s.depth, s.inputs, s.same_as) for s in sample.stages or []]
    assert stages == [
        ("BM25Retriever", "retriever", 1, None, None),
        ("BM25Retriever#2", "retriever", 1, None, None),
        ("FusionRetriever", "fusion", 0, ["BM25Retriever", "BM25Retriever#2"], None),
        ("context", "context", 0, ["FusionRetriever"], "FusionRetriever"),
    ]


# -- errors and ids ------------------------------------------------------------------------


def test_retriever_that_raises_is_recorded_and_nothing_leaks(make_chain):
    handler = RagmeterCallbackHandler()
    chain = make_chain(retriever=FailingRetriever())
    with pytest.raises(ValueError, match="index offline"):
        chain.invoke("drag", config=cfg(handler, "bad"))
    [sample] = handler.samples
    assert sample.id == "bad"
    assert sample.error == "ValueError: index offline for 'drag'"
    assert sample.retrieved_ids is None and sample.response is None
    [stage] = sample.stages or []  # no context: nothing reached the model
    assert stage.error == "ValueError: index offline for 'drag'" and stage.ids is None
    assert handler.open_runs == 0 and not handler._runs.nodes

    make_chain().invoke("drag", config=cfg(handler, "good"))
    good = handler.samples[-1]
    assert good.error is None and [s.name for s in good.stages or []] == [
        "BM25Retriever",
        "context",
    ]
    assert "capture_errors" not in good.metadata
    assert handler.to_run().keys() == {"good"}


def test_failed_retriever_behind_a_fallback(make_chain, bm25):
    handler = RagmeterCallbackHandler()
    chain = make_chain(retriever=FailingRetriever().with_fallbacks([bm25]))
    chain.invoke("drag", config=cfg(handler, "fb"))
    [sample] = handler.samples
    assert sample.error is None
    assert sample.retrieved_ids == expected_ids(bm25, "drag")
    failed, used, context = sample.stages or []
    assert failed.name == "FailingRetriever" and (failed.error or "").startswith("ValueError")
    assert used.name == "BM25Retriever" and context.same_as == "BM25Retriever"


def test_documents_without_ids_use_metadata_then_content_hash(make_chain, cranfield, bm25):
    no_ids = BM25Retriever(corpus=cranfield.corpus, k=10, with_ids=False)
    by_meta = RagmeterCallbackHandler()
    make_chain(retriever=no_ids).invoke("viscous flow", config=cfg(by_meta))
    assert by_meta.samples[0].retrieved_ids == expected_ids(bm25, "viscous flow")

    by_hash = RagmeterCallbackHandler(doc_id="content")
    make_chain(retriever=no_ids).invoke("viscous flow", config=cfg(by_hash))
    sample = by_hash.samples[0]
    assert sample.retrieved_ids == [content_doc_id(t) for t in sample.retrieved_contexts or []]
    assert len(sample.retrieved_ids) == 10


def test_in_memory_vector_store_documents(make_chain):
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    texts = ["lift and drag", "heat transfer", "shock waves", "boundary layer"]
    store.add_documents([Document(t) for t in texts[:2]], ids=["d0", "d1"])
    store.add_texts(texts[2:])  # the store assigns uuids to these
    retriever = store.as_retriever(search_kwargs={"k": 4})
    handler = RagmeterCallbackHandler()
    make_chain(retriever=retriever).invoke("shock", config=cfg(handler))
    docs = retriever.invoke("shock")
    [sample] = handler.samples
    assert sample.retrieved_ids == [d.id for d in docs]
    assert sorted(sample.retrieved_contexts or []) == sorted(texts)


def test_doc_id_function_and_its_failures(make_chain, bm25, caplog):
    upper = RagmeterCallbackHandler(doc_id=lambda d: "D" + d.metadata["doc_id"])
    make_chain().invoke("wing", config=cfg(upper))
    assert upper.samples[0].retrieved_ids == ["D" + i for i in expected_ids(bm25, "wing")]

    ids = expected_ids(bm25, "wing")

    def broken(doc: Document) -> str:
        if doc.id == ids[0]:
            raise KeyError("no such field")
        return "x" + (doc.id or "")

    handler = RagmeterCallbackHandler(doc_id=broken)
    with caplog.at_level(logging.WARNING, logger="ragmeter_langchain"):
        answers = [make_chain().invoke("wing", config=cfg(handler)) for _ in range(2)]
    assert answers == ["answer: wing"] * 2  # the chain is untouched
    for sample in handler.samples:
        assert sample.retrieved_ids == [ids[0]] + ["x" + i for i in ids[1:]]
        [note] = sample.metadata["capture_errors"]
        assert "doc_id raised KeyError" in note and "1 of 10" in note
    assert len([r for r in caplog.records if r.name == "ragmeter_langchain"]) == 1


def test_user_code_that_runs_langchain_is_not_captured(make_chain, bm25):
    def lookup(doc: Document) -> str:
        # a user id function that itself invokes a retriever must not re-enter the handler
        return "L" + bm25.invoke(doc.page_content[:40])[0].metadata["doc_id"]

    handler = RagmeterCallbackHandler(doc_id=lookup)
    make_chain().invoke("wing", config=cfg(handler, "u"))
    [sample] = handler.samples
    assert [s.name for s in sample.stages or []] == ["BM25Retriever", "context"]
    assert all(i.startswith("L") for i in sample.retrieved_ids or [])
    assert "capture_errors" not in sample.metadata and handler.open_runs == 0


def test_bad_relevance_metadata_is_left_out_not_raised(make_chain):
    handler = RagmeterCallbackHandler()
    answer = make_chain().invoke(
        "wing", config=cfg(handler, "q", metadata={"ragmeter_relevance": {"d1": "high"}})
    )
    assert answer == "answer: wing"
    [sample] = handler.samples
    assert sample.id == "q" and sample.relevance is None
    assert any("relevance" in e for e in sample.metadata["capture_errors"])


# -- input / output keys -------------------------------------------------------------------


def test_dict_input_and_output_keys(bm25):
    chain = (
        RunnablePassthrough.assign(context=(lambda x: x["q"]) | bm25)
        | RunnablePassthrough.assign(
            answer=(lambda x: {"context": format_docs(x["context"]), "question": x["q"]})
            | PROMPT
            | EchoChatModel()
            | StrOutputParser()
        )
        | (lambda x: {"answer": x["answer"].upper(), "n": len(x["context"])})
    )

    handler = RagmeterCallbackHandler(input_key="q", output_key="answer")
    chain.invoke({"q": "cone drag", "lang": "en"}, config=cfg(handler))
    [sample] = handler.samples
    assert sample.user_input == "cone drag"
    assert sample.response == "ANSWER: CONE DRAG"  # the root output, not the model's text

    from_llm = RagmeterCallbackHandler(input_key=lambda x: x["q"] + "?", response_from="llm")
    chain.invoke({"q": "cone drag"}, config=cfg(from_llm))
    assert from_llm.samples[0].user_input == "cone drag?"
    assert from_llm.samples[0].response == "answer: cone drag"


def test_default_input_keys_and_a_missing_input_key(make_chain):
    chain = (lambda x: x["question"]) | make_chain()
    default = RagmeterCallbackHandler()
    chain.invoke({"question": "nozzle flow", "k": 3}, config=cfg(default))
    assert default.samples[0].user_input == "nozzle flow"

    missing = RagmeterCallbackHandler(input_key="query")
    chain.invoke({"question": "nozzle flow"}, config=cfg(missing))
    sample = missing.samples[0]
    assert sample.user_input is None and sample.response == "answer: nozzle flow"
    assert any("input_key 'query' is not in" in e for e in sample.metadata["capture_errors"])


# -- store surface, options, memory ----------------------------------------------------------


def test_clear_and_max_samples(make_chain):
    handler = RagmeterCallbackHandler(max_samples=2)
    for q in ["a1", "a2", "a3"]:
        make_chain().invoke("wing " + q, config=cfg(handler, q))
    assert [s.id for s in handler.samples] == ["a2", "a3"]
    assert handler.store.dropped == 1
    handler.clear()
    assert handler.samples == [] and handler.to_run() == {}


def test_max_open_runs_drops_the_oldest_unfinished_run(caplog):
    handler = RagmeterCallbackHandler(max_open_runs=1)
    first, second = uuid.uuid4(), uuid.uuid4()
    with caplog.at_level(logging.WARNING, logger="ragmeter_langchain"):
        handler.on_chain_start(None, "never ends", run_id=first)
        handler.on_chain_start(None, "ends", run_id=second)
        handler.on_chain_end("done", run_id=second)
        handler.on_chain_end("late", run_id=first)  # already dropped: ignored
    assert [s.user_input for s in handler.samples] == ["ends"]
    assert handler.dropped_runs == 1 and handler.open_runs == 0
    assert "max_open_runs" in caplog.text


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"retrieval": "best"}, "retrieval must be one of 'last', 'first', 'merge', got 'best'"),
        ({"response_from": "answer"}, "response_from must be 'llm' or 'output'"),
        ({"max_open_runs": 0}, "max_open_runs must be an int >= 1, got 0"),
    ],
)
def test_bad_options_raise(options: dict[str, Any], match: str):
    with pytest.raises(InvalidInputError, match=match):
        RagmeterCallbackHandler(**options)


class _TwoDocs(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document("a", id="1"), Document("b", id="2")]


@pytest.mark.slow
def test_memory_stays_bounded_across_many_invocations():
    chain = _TwoDocs() | RunnableLambda(lambda docs: docs[0].page_content)
    handler = RagmeterCallbackHandler(max_samples=5)
    for _ in range(1500):
        chain.invoke("q", config=cfg(handler))
    assert handler.open_runs == 0 and not handler._runs.nodes and not handler._runs.roots
    assert len(handler) == 5 and handler.store.dropped == 1495

    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(100):
            chain.invoke("q", config=cfg(handler))
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(400):
            chain.invoke("q", config=cfg(handler))
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # One retained run (root record, nodes, inputs, a sample) costs well over 1 kB.
    assert grown < 100_000, f"memory grew by {grown} bytes over 400 invocations"


def test_chunks_of_one_source_collapse_to_its_best_rank(make_chain, bm25, cranfield):
    # Ids by source: two chunks per Cranfield abstract share one doc id.
    class Chunked(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            out = []
            for d in bm25.rank(query, 4):
                text = cranfield.corpus[d]
                half = len(text) // 2
                out += [Document(text[:half], metadata={"doc_id": d})]
                out += [Document(text[half:], metadata={"doc_id": d})]
            return out

    handler = RagmeterCallbackHandler()
    make_chain(retriever=Chunked()).invoke("wing flutter", config=cfg(handler, "c"))
    [sample] = handler.samples
    top4 = bm25.rank("wing flutter", 4)
    assert sample.retrieved_ids == top4
    assert len(sample.retrieved_contexts or []) == 8  # every chunk the model saw
    assert (sample.stages or [])[0].ids == top4  # a stage's ranking: each doc at its best rank
    report = handler.evaluate_retrieval({"c": {top4[1]: 1}}, k_values=(2,), metrics=["recall"])
    assert report.metrics == {"recall@2": 1.0}
