"""``drain()`` takes every finished sample exactly once, in every adapter, under threads.

Issue 13: copying ``samples`` then calling ``clear()`` lost 1,685 of 4,000 samples in
LangChain, 2,854 of 6,000 in Haystack and 460 of 1,200 in LlamaIndex. Here 8 threads finish
100,000 runs through each adapter's own callback layer (LangChain callbacks, LlamaIndex span
and event hooks, Haystack tracer spans: the framework's dispatch is left out so the count
stays large) while another thread drains; then a smaller count goes through the real
frameworks. Not one sample may be lost or returned twice.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from ragmeter.capture import capture
from ragmeter.schema import RagSample

THREADS = 8
RUNS = 100_000
DOC_IDS = [f"d{i}" for i in range(10)]
TEXTS = [f"text of document {i}" for i in range(10)]


def drain_while(adapter: Any, work: Callable[[int, int], None], per_thread: int) -> list[RagSample]:
    """Run ``work(thread, i)`` ``per_thread`` times on each of 8 threads while draining."""
    done = threading.Event()
    drained: list[RagSample] = []

    def drainer() -> None:
        while not done.is_set():
            drained.extend(adapter.drain())
        drained.extend(adapter.drain())

    def producer(t: int) -> None:
        for i in range(per_thread):
            work(t, i)

    thread = threading.Thread(target=drainer)
    thread.start()
    try:
        with ThreadPoolExecutor(max_workers=THREADS) as pool:
            list(pool.map(producer, range(THREADS)))
    finally:
        done.set()
        thread.join()
    return drained


def assert_none_lost(drained: list[RagSample], per_thread: int) -> None:
    ids = [s.id for s in drained]
    expected = {f"{t}-{i}" for t in range(THREADS) for i in range(per_thread)}
    assert len(ids) == len(expected) and set(ids) == expected  # none lost, none twice


# -- the adapters' callback layers, 100k runs ---------------------------------------------------


def _langchain_callbacks() -> tuple[Any, Callable[[int, int], None]]:
    from langchain_core.documents import Document
    from ragmeter_langchain import RagmeterCallbackHandler

    handler = RagmeterCallbackHandler()
    docs = [Document(t, id=d) for d, t in zip(DOC_IDS, TEXTS, strict=True)]

    def work(t: int, i: int) -> None:
        root, child = uuid.uuid4(), uuid.uuid4()
        with capture(id=f"{t}-{i}"):
            handler.on_chain_start({}, "q", run_id=root, name="rag")
            handler.on_retriever_start({}, "q", run_id=child, parent_run_id=root, name="bm25")
            handler.on_retriever_end(docs, run_id=child, parent_run_id=root)
            handler.on_chain_end("answer", run_id=root)

    return handler, work


def _llamaindex_hooks() -> tuple[Any, Callable[[int, int], None]]:
    from llama_index.core.instrumentation.events.retrieval import (
        RetrievalEndEvent,
        RetrievalStartEvent,
    )
    from llama_index.core.query_engine import CustomQueryEngine
    from llama_index.core.schema import NodeWithScore, TextNode
    from ragmeter_llamaindex import RagmeterEventHandler

    class Engine(CustomQueryEngine):
        def custom_query(self, query_str: str) -> str:
            return "answer"

    engine = Engine()
    handler = RagmeterEventHandler()  # driven directly: not attached to a dispatcher
    nodes = [
        NodeWithScore(node=TextNode(id_=d, text=x), score=1.0)
        for d, x in zip(DOC_IDS, TEXTS, strict=True)
    ]
    spans = handler._spans
    local = threading.local()  # one pair of events per thread, re-pointed at each run's span

    def work(t: int, i: int) -> None:
        if not hasattr(local, "events"):
            local.events = (
                RetrievalStartEvent(str_or_query_bundle="q"),
                RetrievalEndEvent(str_or_query_bundle="q", nodes=nodes),
            )
        start, end = local.events
        query = f"Engine.query-{uuid.uuid4()}"
        retrieve = f"VectorIndexRetriever.retrieve-{uuid.uuid4()}"
        start.span_id = end.span_id = retrieve
        with capture(id=f"{t}-{i}"):
            spans.span_enter(query, None, instance=engine, parent_id=None)
            spans.span_enter(retrieve, None, instance=None, parent_id=query)
            handler.handle(start)
            handler.handle(end)
            spans.span_exit(retrieve, None, instance=None, result=nodes)
            spans.span_exit(query, None, instance=engine, result="answer")

    return handler, work


def _haystack_spans() -> tuple[Any, Callable[[int, int], None]]:
    from haystack import Document
    from ragmeter_haystack import RagmeterTracer

    tracer = RagmeterTracer()  # driven directly: not Haystack's active tracer
    docs = [Document(id=d, content=x) for d, x in zip(DOC_IDS, TEXTS, strict=True)]
    retriever_tags = {
        "haystack.component.name": "retriever",
        "haystack.component.type": "InMemoryBM25Retriever",
        "haystack.component.output_spec": {"documents": {}},
    }

    def work(t: int, i: int) -> None:
        with capture(id=f"{t}-{i}"), tracer.trace("haystack.pipeline.run", tags={}) as pipeline:
            component = tracer.trace(
                "haystack.component.run", tags=retriever_tags, parent_span=pipeline
            )
            with component as span:
                span.set_content_tag("haystack.component.input", {"query": "q"})
                span.set_content_tag("haystack.component.output", {"documents": docs})

    return tracer, work


LAYERS = {
    "langchain": _langchain_callbacks,
    "llamaindex": _llamaindex_hooks,
    "haystack": _haystack_spans,
}


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(LAYERS))
def test_drain_loses_no_sample_of_100k_runs_on_8_threads(framework: str) -> None:
    adapter, work = LAYERS[framework]()
    per_thread = RUNS // THREADS
    drained = drain_while(adapter, work, per_thread)
    assert_none_lost(drained, per_thread)
    assert all(s.retrieved_ids == DOC_IDS for s in drained[:: RUNS // 100])
    assert len(adapter) == 0 and adapter.samples == []


# -- the real frameworks, fewer runs ------------------------------------------------------------


def test_drain_with_real_langchain_chains() -> None:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda
    from ragmeter_langchain import RagmeterCallbackHandler

    class Fixed(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [Document(x, id=d) for d, x in zip(DOC_IDS, TEXTS, strict=True)]

    chain = Fixed() | RunnableLambda(lambda docs: docs[0].page_content)
    handler = RagmeterCallbackHandler()

    def work(t: int, i: int) -> None:
        with handler.capture(id=f"{t}-{i}"):
            chain.invoke("q")

    assert_none_lost(drain_while(handler, work, 60), 60)


def test_drain_with_real_llamaindex_queries() -> None:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.schema import TextNode
    from ragmeter_llamaindex import RagmeterEventHandler

    nodes = [TextNode(id_=d, text=x) for d, x in zip(DOC_IDS, TEXTS, strict=True)]
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=10)
    with RagmeterEventHandler() as handler:

        def work(t: int, i: int) -> None:
            with handler.capture(id=f"{t}-{i}"):
                engine.query("q")

        drained = drain_while(handler, work, 25)
    assert_none_lost(drained, 25)
    assert all(sorted(s.retrieved_ids or []) == DOC_IDS for s in drained)


def test_drain_with_real_haystack_pipelines() -> None:
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from ragmeter_haystack import RagmeterRecorder, RagmeterTracer

    store = InMemoryDocumentStore()
    store.write_documents([Document(id=d, content=x) for d, x in zip(DOC_IDS, TEXTS, strict=True)])
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=10))
    recorder = RagmeterRecorder(pipe)

    def recorded(t: int, i: int) -> None:
        recorder.run({"retriever": {"query": "document"}}, sample_id=f"{t}-{i}")

    assert_none_lost(drain_while(recorder, recorded, 40), 40)
    with RagmeterTracer() as tracer:

        def traced(t: int, i: int) -> None:
            with tracer.capture(id=f"{t}-{i}"):
                pipe.run({"retriever": {"query": "document"}})

        drained = drain_while(tracer, traced, 40)
    assert_none_lost(drained, 40)
    assert all(sorted(s.retrieved_ids or []) == DOC_IDS for s in drained)
