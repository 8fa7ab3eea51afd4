"""Benchmark: what capturing costs in each adapter, per captured sample, side by side.

Target (issue 18): <= 30 µs per query end to end against a do-nothing handler/tracer in each
framework on a 10-document pipeline, and <= 1 KB of memory per stored 10-document sample,
also after the samples were read (the adapters keep ids and texts, never the framework's
objects, and hold a built sample only while its reader does).

For each framework one small RAG pipeline that retrieves 10 documents (no real model, no
network) runs in one process under several setups; every run goes through all of them back
to back, in rotating order, so each comparison is between runs microseconds apart:

* **none**: nothing attached (the framework's own time);
* **noop**: a do-nothing handler/tracer (what the framework spends dispatching events to
  *any* handler: LangChain ``BaseCallbackHandler``, LlamaIndex event + span handler,
  Haystack ``Tracer``);
* **ragmeter**: the adapter (LangChain ``RagmeterCallbackHandler``, LlamaIndex
  ``RagmeterEventHandler``, Haystack ``RagmeterTracer`` and ``RagmeterRecorder``), each run
  with a sample id: attached once and each run inside ``capture(id=...)`` (the setup a
  service uses), and **scope only**: not attached, each ``capture()`` scope attaching the
  adapter while it runs (the shortest way to write it);
* **framework tracer**: the framework's own (LangChain ``collect_runs``, LlamaIndex
  ``SimpleSpanHandler``, Haystack ``LoggingTracer``).

Columns (CPU time of this process, ``time.process_time``: on a shared machine it is much
steadier than wall-clock time): **median µs** per run, its ratio to **none** and to
**noop**, and **+ vs noop µs**, the median of the per-run differences to the do-nothing
setup: what capturing costs a real pipeline, end to end. **own µs** is the adapter's own
work per captured sample, measured without the framework: the events (LangChain callbacks,
LlamaIndex spans and events, Haystack spans and content tags) of one run are recorded once
and replayed to a fresh handler, each replay inside a ``capture(id=...)`` scope, minus the
same replay to the do-nothing handler (best of 7). The replay runs with warm caches; inside
a real pipeline the same code runs with the framework's code and data in the caches, which
is why **+ vs noop** is larger. **read µs** is what building a stored sample costs when it
is first read (``drain()``): work the capture defers. **KB/sample** is the memory each
stored, not yet read sample holds (tracemalloc, 1,000-2,000 runs with ids given by
``capture(id=...)`` from a list made up front, minus the same runs with the do-nothing
handler), **KB after read** the same once every stored sample was read and dropped; the
framework tracers' retained memory is shown for comparison (``collect_runs`` and
``SimpleSpanHandler`` keep every run/span; the logging tracer keeps nothing).

    python benchmarks/bench_capture.py                 # all three, 600 runs each, ~3 minutes
    python benchmarks/bench_capture.py --only haystack --runs 2000
"""

# No `from __future__ import annotations`: Haystack reads a component's socket types from its
# real (not string) annotations.
import argparse
import contextlib
import gc
import itertools
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from ragmeter.capture import capture

Setup = Callable[[], contextlib.AbstractContextManager[Callable[[int], Any]]]
"""A setup: entering it attaches what is measured and yields ``run(i)``."""

TARGET_US = 30.0
TARGET_KB = 1.0
N_DOCS = 10
IDS = [f"q{i}" for i in range(200_000)]
"""Sample ids, made up front: a dataset's query ids exist whether or not anything captures."""
ROWS = [{f"d{(i + j) % 50}": 1 + j % 2 for j in range(10)} for i in range(2_000)]
"""Qrels rows (10 judged docs each), made up front like the ids: the memory measurement gives
each run its relevance, as an evaluation does."""


BLOCK = 1
"""Runs per setup in a row (``--block``): 1 interleaves run by run; more runs each setup for a
block of that many runs after 3 untimed ones, the setups rotating from block to block."""


def paired(setups: dict[str, Setup], runs: int) -> dict[str, list[float]]:
    """Seconds of each run under each setup, the k-th run of every setup on the same query.

    With ``BLOCK == 1`` every run goes through all setups back to back (the order rotating
    from run to run), so each difference compares runs microseconds apart; the first tenth
    of the runs warms up and is not kept. With ``BLOCK > 1`` each setup runs a block of
    ``BLOCK`` timed runs after 3 untimed ones (the code just switched to is warm again), the
    order rotating from block to block; the first round warms up. Entering a setup
    (attaching its handler) is never timed."""
    names = list(setups)
    times: dict[str, list[float]] = {n: [] for n in names}
    if BLOCK <= 1:
        warm = max(10, runs // 10)
        for i in range(warm + runs):
            order = names[i % len(names) :] + names[: i % len(names)]
            for name in order:
                with setups[name]() as run:
                    start = time.process_time()
                    run(i)
                    took = time.process_time() - start
                if i >= warm:
                    times[name].append(took)
        return times
    settle = 3
    for r in range(1 + max(1, runs // BLOCK)):
        base = r * (BLOCK + settle)
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            with setups[name]() as run:
                for w in range(settle):
                    run(base + w)
                for k in range(BLOCK):
                    start = time.process_time()
                    run(base + settle + k)
                    took = time.process_time() - start
                    if r > 0:
                        times[name].append(took)
    return times


def e2e_us(times: dict[str, list[float]], name: str) -> float:
    """Median per-run difference of setup ``name`` to the do-nothing handler, in µs."""
    return statistics.median(t - n for t, n in zip(times[name], times["noop"], strict=True)) * 1e6


def report(title: str, times: dict[str, list[float]], rows: dict[str, dict[str, str]]) -> None:
    med = {n: statistics.median(ts) for n, ts in times.items()}
    print(f"\n{title}")
    header = (
        f"  {'setup':<22}{'median µs':>11}{'/ none':>8}{'/ noop':>8}{'+ vs noop µs':>14}"
        f"{'own µs':>9}{'read µs':>9}{'KB/sample':>11}{'KB after read':>15}"
    )
    print(header)
    for name, ts in times.items():
        extra = rows.get(name, {})
        diff = statistics.median(t - n for t, n in zip(ts, times["noop"], strict=True))
        print(
            f"  {name:<22}{med[name] * 1e6:>11.1f}"
            f"{med[name] / med['none']:>8.3f}{med[name] / med['noop']:>8.3f}{diff * 1e6:>14.1f}"
            f"{extra.get('own', ''):>9}{extra.get('read', ''):>9}{extra.get('kb', ''):>11}"
            f"{extra.get('kb_read', ''):>15}"
        )


READ: list[float | None] = []
"""Seconds per sample to build the samples a replay stored (they are built when read)."""


def read_cost(adapter: Any, n: int) -> float | None:
    """Seconds per sample for ``adapter.drain()`` (building ``n`` stored samples), if it can."""
    drain = getattr(adapter, "drain", None)
    if drain is None:
        return None
    start = time.process_time()
    got = drain()
    if len(got) != n:
        raise RuntimeError(f"the replay stored {len(got)} samples, not {n}")
    return (time.process_time() - start) / n


def best_of(fn: Callable[[], float], repeats: int = 7) -> float:
    return min(fn() for _ in range(repeats))


def retained_kb(setup: Setup, n: int = 2000) -> float:
    """KB still allocated per run after ``n`` runs under ``setup`` (tracemalloc)."""
    return kept_kb(setup, None, n)[0]


def kept_kb(setup: Setup, adapter: Any, n: int = 2000) -> tuple[float, float]:
    """KB per run still allocated after ``n`` runs under ``setup``, and again after every
    stored sample of ``adapter`` was read (built, looked at, dropped) -- tracemalloc."""
    with setup() as run:
        for i in range(50):  # warm up caches and lazy imports
            run(-i - 1)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(n):
                run(i)
            gc.collect()
            stored = tracemalloc.get_traced_memory()[0] - before
            read = stored
            if adapter is not None:
                seen = sum(len(s.retrieved_ids or ()) for s in adapter.samples)
                if seen == 0:
                    raise RuntimeError("the adapter stored no ranking: nothing was captured")
                gc.collect()
                read = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    return stored / n / 1024, read / n / 1024


# -- LangChain -----------------------------------------------------------------------------


def langchain(runs: int) -> dict[str, float]:
    from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough
    from langchain_core.tracers.context import collect_runs
    from ragmeter_langchain import RagmeterCallbackHandler

    docs = [Document(f"document {i} about wings and lift", id=f"d{i}") for i in range(N_DOCS)]

    class Fixed(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return list(docs)

    class Noop(BaseCallbackHandler):
        run_inline = True

        def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
            pass

    prompt = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{question}")])
    llm = GenericFakeChatModel(messages=itertools.repeat(AIMessage("lift comes from the wing")))
    chain = (
        {"context": Fixed(), "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    )
    ids = IDS

    def invoke_with(handler: Any) -> Setup:
        @contextlib.contextmanager
        def setup() -> Iterator[Callable[[int], Any]]:
            def run(i: int) -> Any:
                config: dict[str, Any] = {"metadata": {"ragmeter_id": ids[i % len(ids)]}}
                if handler is not None:
                    config["callbacks"] = [handler]
                return chain.invoke("question", config=config)

            yield run

        return setup

    ragmeter = RagmeterCallbackHandler(max_samples=1000)

    @contextlib.contextmanager
    def scoped() -> Iterator[Callable[[int], Any]]:
        def run(i: int) -> Any:
            with ragmeter.capture(id=ids[i % len(ids)]):
                return chain.invoke("question")

        yield run

    @contextlib.contextmanager
    def collected() -> Iterator[Callable[[int], Any]]:
        with collect_runs() as collector:

            def run(i: int) -> Any:
                metadata = {"ragmeter_id": ids[i % len(ids)]}
                return chain.invoke("question", config={"metadata": metadata})

            yield run
        collector.traced_runs.clear()

    setups: dict[str, Setup] = {
        "none": invoke_with(None),
        "noop": invoke_with(Noop()),
        "ragmeter": invoke_with(ragmeter),
        "ragmeter (capture())": scoped,
        "collect_runs": collected,
    }
    times = paired(setups, runs)

    # own work: the events of one invocation replayed to a fresh handler
    class Recorder(BaseCallbackHandler):
        run_inline = True

        def __init__(self) -> None:
            self.events: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

        def __getattribute__(self, name: str) -> Any:
            if name.startswith("on_"):
                events = object.__getattribute__(self, "events")
                return lambda *a, **k: events.append((name, a, k))
            return object.__getattribute__(self, name)

    rec = Recorder()
    chain.invoke("question", config={"callbacks": [rec], "metadata": {"ragmeter_id": "q"}})
    events = [(n, a, k) for n, a, k in rec.events if n != "on_llm_new_token"]

    def replay(make: Callable[[], Any], n: int = 1000) -> float:
        handler = make()
        calls = [(getattr(handler, name), a, k) for name, a, k in events]
        start = time.process_time()
        for i in range(n):
            with capture(id=IDS[i]):
                for method, a, k in calls:
                    method(*a, **k)
        took = (time.process_time() - start) / n
        READ.append(read_cost(handler, n))
        return took

    READ.clear()
    own = best_of(lambda: replay(RagmeterCallbackHandler)) - best_of(lambda: replay(Noop))
    read = min(r for r in READ if r is not None)

    # memory per stored sample, end to end: ids given with capture(), minus a do-nothing handler
    kb_handler = RagmeterCallbackHandler()

    @contextlib.contextmanager
    def scoped_fresh() -> Iterator[Callable[[int], Any]]:
        def run(i: int) -> Any:
            with kb_handler.capture(id=ids[i], relevance=ROWS[i % len(ROWS)]):
                return chain.invoke("question")

        yield run

    noop_kb = retained_kb(invoke_with(Noop()), n=1000)
    stored, after_read = kept_kb(scoped_fresh, kb_handler, n=1000)
    kb, kb_read = stored - noop_kb, after_read - noop_kb
    with collect_runs() as collector:
        kb_collect = retained_kb(invoke_with(None), n=1000)
    collector.traced_runs.clear()
    kb_none = retained_kb(invoke_with(None), n=1000)
    report(
        f"LangChain (retriever of {N_DOCS} docs -> prompt -> fake chat model -> parser), "
        f"{runs} invocations per setup",
        times,
        {
            "ragmeter": {
                "own": f"{own * 1e6:.1f}",
                "read": f"{read * 1e6:.1f}",
                "kb": f"{kb:.2f}",
                "kb_read": f"{kb_read:.2f}",
            },
            "collect_runs": {"kb": f"{kb_collect - kb_none:.2f}"},
        },
    )
    return {
        "own_us": own * 1e6,
        "e2e_us": e2e_us(times, "ragmeter (capture())"),
        "read_us": read * 1e6,
        "kb": kb,
        "kb_read": kb_read,
    }


# -- LlamaIndex ----------------------------------------------------------------------------


def llamaindex(runs: int) -> dict[str, float]:
    import hashlib
    import math
    import re

    from llama_index.core import VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.dispatcher import instrument_tags
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.span import SimpleSpan
    from llama_index.core.instrumentation.span_handlers import BaseSpanHandler, SimpleSpanHandler
    from llama_index.core.llms import MockLLM
    from llama_index.core.schema import TextNode
    from ragmeter_llamaindex import RagmeterEventHandler

    from ragmeter.datasets import load_cranfield

    class HashEmbedding(BaseEmbedding):
        def _embed(self, text: str) -> list[float]:
            vec = [0.0] * 64
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            return [v / norm for v in vec]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._embed(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._embed(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._embed(text)

    corpus, queries, _ = load_cranfield()
    texts = [(d, " ".join(t.split()[:25])) for d, t in corpus.items() if t.strip()][:200]
    index = VectorStoreIndex(
        [TextNode(id_=d, text=t) for d, t in texts], embed_model=HashEmbedding()
    )
    engine = index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=N_DOCS)
    qs = list(queries.values())
    root = get_dispatcher()

    class NoopEvents(BaseEventHandler):
        @classmethod
        def class_name(cls) -> str:
            return "NoopEvents"

        def handle(self, event: Any, **kwargs: Any) -> None:
            pass

    class NoopSpans(BaseSpanHandler[SimpleSpan]):
        def span_enter(self, *args: Any, **kwargs: Any) -> None:
            pass

        def span_exit(self, *args: Any, **kwargs: Any) -> None:
            pass

        def span_drop(self, *args: Any, **kwargs: Any) -> None:
            pass

        def new_span(self, *args: Any, **kwargs: Any) -> None:
            return None

        def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
            return None

        def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
            return None

    before = (list(root.event_handlers), list(root.span_handlers))

    def attached(
        events: list[Any],
        spans: list[Any],
        *,
        scoped: Any = None,
        attach: bool = True,
        judged: bool = False,
    ) -> Setup:
        @contextlib.contextmanager
        def setup() -> Iterator[Callable[[int], Any]]:
            root.event_handlers = [*before[0], *events]
            root.span_handlers = [*before[1], *spans]
            if scoped is not None and attach:  # attached once, as a service would
                scoped.attach()
            try:
                if scoped is not None:

                    def run(i: int) -> Any:
                        rel = ROWS[i % len(ROWS)] if judged else None
                        with scoped.capture(id=IDS[i], relevance=rel):
                            return engine.query(qs[i % len(qs)])

                else:

                    def run(i: int) -> Any:
                        with instrument_tags({"ragmeter_id": IDS[i]}):
                            return engine.query(qs[i % len(qs)])

                yield run
            finally:
                if scoped is not None:
                    scoped.detach()
                root.event_handlers, root.span_handlers = before

        return setup

    ragmeter = RagmeterEventHandler(max_samples=1000)
    simple = SimpleSpanHandler()
    setups: dict[str, Setup] = {
        "none": attached([], []),
        "noop": attached([NoopEvents()], [NoopSpans()]),
        "ragmeter": attached([ragmeter], [ragmeter._spans]),
        "ragmeter (capture())": attached([], [], scoped=ragmeter),
        "ragmeter (scope only)": attached([], [], scoped=ragmeter, attach=False),
        "SimpleSpanHandler": attached([], [simple]),
    }
    times = paired(setups, runs)
    simple.completed_spans.clear()

    # own work: the spans and events of one query replayed to a fresh handler
    recorded: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    class RecordSpans(NoopSpans):
        def span_enter(self, *args: Any, **kwargs: Any) -> None:
            recorded.append(("span_enter", args, kwargs))

        def span_exit(self, *args: Any, **kwargs: Any) -> None:
            recorded.append(("span_exit", args, kwargs))

        def span_drop(self, *args: Any, **kwargs: Any) -> None:
            recorded.append(("span_drop", args, kwargs))

    class RecordEvents(NoopEvents):
        def handle(self, event: Any, **kwargs: Any) -> None:
            recorded.append(("handle", (event,), kwargs))

    with attached([RecordEvents()], [RecordSpans()])() as run:
        run(0)

    def replay(events: Any, spans: Any, n: int = 500) -> float:
        calls = [(getattr(spans if m != "handle" else events, m), a, k) for m, a, k in recorded]
        start = time.process_time()
        for i in range(n):
            with capture(id=IDS[i]):
                for method, a, k in calls:
                    method(*a, **k)
        took = (time.process_time() - start) / n
        READ.append(read_cost(events, n))
        return took

    def fresh_ragmeter() -> float:
        handler = RagmeterEventHandler()
        return replay(handler, handler._spans)

    READ.clear()
    own = best_of(fresh_ragmeter) - best_of(lambda: replay(NoopEvents(), NoopSpans()))
    read = min(r for r in READ if r is not None)

    kb_handler = RagmeterEventHandler()
    noop_kb = retained_kb(attached([NoopEvents()], [NoopSpans()]), n=1000)
    stored, after_read = kept_kb(
        attached([], [], scoped=kb_handler, judged=True), kb_handler, n=1000
    )
    kb, kb_read = stored - noop_kb, after_read - noop_kb
    kb_simple = retained_kb(attached([], [SimpleSpanHandler()]), n=1000) - retained_kb(
        attached([], []), n=1000
    )
    report(
        f"LlamaIndex (VectorStoreIndex top-{N_DOCS} + MockLLM query engine), "
        f"{runs} queries per setup",
        times,
        {
            "ragmeter": {
                "own": f"{own * 1e6:.1f}",
                "read": f"{read * 1e6:.1f}",
                "kb": f"{kb:.2f}",
                "kb_read": f"{kb_read:.2f}",
            },
            "SimpleSpanHandler": {"kb": f"{kb_simple:.2f}"},
        },
    )
    return {
        "own_us": own * 1e6,
        "e2e_us": e2e_us(times, "ragmeter (capture())"),
        "read_us": read * 1e6,
        "kb": kb,
        "kb_read": kb_read,
    }


# -- Haystack ------------------------------------------------------------------------------


def haystack(runs: int) -> dict[str, float]:
    from haystack import Document, Pipeline, component
    from haystack.components.builders import ChatPromptBuilder
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.dataclasses import ChatMessage
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack.tracing.logging_tracer import LoggingTracer
    from haystack.tracing.tracer import (
        NullSpan,
        Tracer,
        disable_tracing,
        enable_tracing,
    )
    from ragmeter_haystack import RagmeterRecorder, RagmeterTracer

    from ragmeter.datasets import load_cranfield

    @component
    class FakeChat:
        @component.output_types(replies=list[ChatMessage])
        def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
            meta = {"usage": {"prompt_tokens": 100, "completion_tokens": 10}}
            return {"replies": [ChatMessage.from_assistant("lift from the wing", meta=meta)]}

    corpus, queries, _ = load_cranfield()
    store = InMemoryDocumentStore()
    store.write_documents(
        [Document(id=d, content=t) for d, t in list(corpus.items())[:200] if t.strip()]
    )
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=N_DOCS))
    pipe.add_component(
        "prompt_builder",
        ChatPromptBuilder(
            template=[ChatMessage.from_user("{{ documents|length }} docs. {{ question }}")],
            required_variables=["question", "documents"],
        ),
    )
    pipe.add_component("llm", FakeChat())
    pipe.connect("retriever.documents", "prompt_builder.documents")
    pipe.connect("prompt_builder.prompt", "llm.messages")
    qs = list(queries.values())

    def data(i: int) -> dict[str, Any]:
        q = qs[i % len(qs)]
        return {"retriever": {"query": q}, "prompt_builder": {"question": q}}

    class NoopTracer(Tracer):
        def trace(self, operation_name: str, tags: Any = None, parent_span: Any = None) -> Any:
            return contextlib.nullcontext(NullSpan())

        def current_span(self) -> Any:
            return None

    current: ContextVar[Any] = ContextVar("bench_span", default=None)

    class ReferenceSpan(NullSpan):
        """Keeps a reference to what it is given and nothing else: the least a tracer that
        reads the pipeline can do."""

        def __init__(self, log: list[Any]) -> None:
            self.log = log
            self.token: Any = None

        def set_content_tag(self, key: str, value: Any) -> None:
            self.log.append((key, value))

        def __enter__(self) -> "ReferenceSpan":
            self.token = current.set(self)
            return self

        def __exit__(self, *exc: object) -> None:
            current.reset(self.token)
            self.log.append(None)

    class ReferenceTracer(Tracer):
        def trace(self, operation_name: str, tags: Any = None, parent_span: Any = None) -> Any:
            parent = current.get()
            log = parent.log if parent is not None else []
            log.append((operation_name, tags))
            return ReferenceSpan(log)

        def current_span(self) -> Any:
            return current.get()

    def traced(
        tracer: Any, *, scoped: Any = None, attach: bool = True, judged: bool = False
    ) -> Setup:
        @contextlib.contextmanager
        def setup() -> Iterator[Callable[[int], Any]]:
            if tracer is None:
                disable_tracing()
            elif isinstance(tracer, RagmeterTracer):
                disable_tracing()
                if attach:
                    tracer.attach()  # attached once, as a service would
            else:
                enable_tracing(tracer)
            try:
                if scoped is not None:

                    def run(i: int) -> Any:
                        rel = ROWS[i % len(ROWS)] if judged else None
                        with scoped.capture(id=IDS[i], relevance=rel):
                            return pipe.run(data(i))

                else:

                    def run(i: int) -> Any:
                        return pipe.run(data(i))

                yield run
            finally:
                if isinstance(tracer, RagmeterTracer):
                    tracer.detach()
                disable_tracing()

        return setup

    recorder = RagmeterRecorder(pipe, generator="llm", max_samples=1000)

    @contextlib.contextmanager
    def recorded() -> Iterator[Callable[[int], Any]]:
        disable_tracing()
        yield lambda i: recorder.run(data(i), sample_id=IDS[i])

    tracer = RagmeterTracer(max_samples=1000)
    setups: dict[str, Setup] = {
        "none": traced(None),
        "noop": traced(NoopTracer()),
        "ragmeter tracer": traced(tracer, scoped=tracer),
        "ragmeter (scope only)": traced(tracer, scoped=tracer, attach=False),
        "ragmeter recorder": recorded,
        "LoggingTracer": traced(LoggingTracer()),
        "references only": traced(ReferenceTracer()),
    }
    times = paired(setups, runs)

    # own work: the spans and content tags of one run replayed to a fresh tracer
    script: list[tuple[str, Any, Any]] = []

    class RecordingSpan(NullSpan):
        def set_content_tag(self, key: str, value: Any) -> None:
            script.append(("content", key, value))

    class RecordingTracer(Tracer):
        @contextlib.contextmanager
        def trace(self, operation_name: str, tags: Any = None, parent_span: Any = None) -> Any:
            script.append(("enter", operation_name, tags))
            yield RecordingSpan()
            script.append(("exit", None, None))

        def current_span(self) -> Any:
            return None

    with traced(RecordingTracer())() as run:
        run(0)

    def replay(make: Callable[[], Any], n: int = 1000) -> float:
        target = make()
        start = time.process_time()
        for i in range(n):
            stack: list[Any] = []
            with capture(id=IDS[i]):
                for kind, a, b in script:
                    if kind == "enter":
                        parent = stack[0][1] if stack else None
                        cm = target.trace(a, tags=b, parent_span=parent)
                        stack.append((cm, cm.__enter__()))
                    elif kind == "content":
                        stack[-1][1].set_content_tag(a, b)
                    else:
                        cm, _ = stack.pop()
                        cm.__exit__(None, None, None)
        took = (time.process_time() - start) / n
        READ.append(read_cost(target, n))
        return took

    READ.clear()
    own = best_of(lambda: replay(RagmeterTracer)) - best_of(lambda: replay(NoopTracer))
    read = min(r for r in READ if r is not None)

    kb_owner = RagmeterTracer()
    stored, after_read = kept_kb(traced(kb_owner, scoped=kb_owner, judged=True), kb_owner)
    kb_noop = min(retained_kb(traced(NoopTracer())) for _ in range(2))  # the 2nd, warm
    kb_tracer, kb_read = stored - kb_noop, after_read - kb_noop
    kb_rec = RagmeterRecorder(pipe, generator="llm")
    kb_recorder = kept_kb(_recorder_setup(kb_rec, data), kb_rec)[1] - min(
        retained_kb(traced(None)) for _ in range(2)
    )
    report(
        f"Haystack (BM25 top-{N_DOCS} -> ChatPromptBuilder -> fake chat generator), "
        f"{runs} runs per setup",
        times,
        {
            "ragmeter tracer": {
                "own": f"{own * 1e6:.1f}",
                "read": f"{read * 1e6:.1f}",
                "kb": f"{kb_tracer:.2f}",
                "kb_read": f"{kb_read:.2f}",
            },
            "ragmeter recorder": {"kb_read": f"{kb_recorder:.2f}"},
        },
    )
    return {
        "own_us": own * 1e6,
        "e2e_us": e2e_us(times, "ragmeter tracer"),
        "read_us": read * 1e6,
        "kb": kb_tracer,
        "kb_read": kb_read,
    }


def _recorder_setup(recorder: Any, data: Callable[[int], Any]) -> Setup:
    @contextlib.contextmanager
    def setup() -> Iterator[Callable[[int], Any]]:
        yield lambda i: recorder.run(data(i), sample_id=IDS[i], relevance=ROWS[i % len(ROWS)])

    return setup


FRAMEWORKS: dict[str, Callable[[int], dict[str, float]]] = {
    "langchain": langchain,
    "llamaindex": llamaindex,
    "haystack": haystack,
}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=600)
    parser.add_argument("--only", choices=sorted(FRAMEWORKS), action="append")
    parser.add_argument(
        "--block",
        type=int,
        default=1,
        help="runs per setup in a row (1: interleave run by run; 20: blocks of 20 runs)",
    )
    args = parser.parse_args(argv)
    global BLOCK
    BLOCK = args.block
    out: dict[str, dict[str, float]] = {}
    for name in args.only or list(FRAMEWORKS):
        out[name] = FRAMEWORKS[name](args.runs)
    print(
        f"\nTargets: <= {TARGET_US:.0f} µs per query end to end against a do-nothing "
        f"handler, <= {TARGET_KB:.0f} KB per stored sample, also after the samples were read."
    )
    for name, row in out.items():
        ok = row["e2e_us"] <= TARGET_US and max(row["kb"], row["kb_read"]) <= TARGET_KB
        print(
            f"  {name:<11} +{row['e2e_us']:5.1f} µs end to end (own work {row['own_us']:.1f} µs)"
            f"   {row['kb']:.2f} KB stored, {row['kb_read']:.2f} KB after read   "
            f"{'met' if ok else 'NOT met'}   (building a sample when read: "
            f"{row['read_us']:.1f} µs)"
        )
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
