"""Any number of observers at once, in any order: a property test over the real frameworks.

Hypothesis interleaves, on three observers of one framework, attaching and detaching them,
opening and closing their own ``capture()`` scopes and scopes shared by every observer,
nested in any order, running a real pipeline, and draining each observer. After every step:

* no exception reaches the pipeline's caller;
* each observer holds exactly the runs it saw, in order: the runs made while it was attached
  (LangChain: passed in ``callbacks``) or inside one of its own scopes, each with the id of
  the innermost scope that is its own or everyone's (another observer's scope never
  relabels it);
* once everything is closed and detached, the framework is exactly as it was (Haystack's
  tracer, LlamaIndex's dispatcher handlers, LangChain's configure hook).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ragmeter.capture import capture

DOCS = {"d1": "wing flutter at high speed", "d2": "heat transfer in a nozzle"}
N_OBSERVERS = 3


# -- one small real pipeline per framework ------------------------------------------------------


class LangChainDriver:
    explicit_attach = False  # "attached" means: passed in the run's callbacks

    def __init__(self) -> None:
        from langchain_core.callbacks import CallbackManagerForRetrieverRun
        from langchain_core.documents import Document
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.runnables import RunnableLambda

        class Fixed(BaseRetriever):
            def _get_relevant_documents(
                self, query: str, *, run_manager: CallbackManagerForRetrieverRun
            ) -> list[Document]:
                return [Document(DOCS[d], id=d) for d in DOCS]

        self.chain = Fixed() | RunnableLambda(lambda docs: docs[0].page_content)

    def observer(self) -> Any:
        from ragmeter_langchain import RagmeterCallbackHandler

        return RagmeterCallbackHandler()

    def attach(self, observer: Any) -> None:
        pass

    def detach(self, observer: Any) -> None:
        pass

    def run(self, question: str, attached: list[Any]) -> Any:
        return self.chain.invoke(question, config={"callbacks": list(attached)})

    def state(self) -> Any:
        from ragmeter_langchain._handler import _ACTIVE

        return _ACTIVE.get()


class HaystackDriver:
    explicit_attach = True

    def __init__(self) -> None:
        from haystack import Document, Pipeline
        from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
        from haystack.document_stores.in_memory import InMemoryDocumentStore

        store = InMemoryDocumentStore()
        store.write_documents([Document(id=d, content=t) for d, t in DOCS.items()])
        self.pipe = Pipeline()
        self.pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store))

    def observer(self) -> Any:
        from ragmeter_haystack import RagmeterTracer

        return RagmeterTracer()

    def attach(self, observer: Any) -> None:
        observer.attach()

    def detach(self, observer: Any) -> None:
        observer.detach()

    def run(self, question: str, attached: list[Any]) -> Any:
        return self.pipe.run({"retriever": {"query": question}})

    def state(self) -> Any:
        from haystack.tracing import tracer

        return tracer.actual_tracer


class LlamaIndexDriver:
    explicit_attach = True

    def __init__(self) -> None:
        from llama_index.core import VectorStoreIndex
        from llama_index.core.embeddings import MockEmbedding
        from llama_index.core.llms import MockLLM
        from llama_index.core.schema import TextNode

        nodes = [TextNode(id_=d, text=t) for d, t in DOCS.items()]
        index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
        self.engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=2)

    def observer(self) -> Any:
        from ragmeter_llamaindex import RagmeterEventHandler

        return RagmeterEventHandler()

    def attach(self, observer: Any) -> None:
        observer.attach()

    def detach(self, observer: Any) -> None:
        observer.detach()

    def run(self, question: str, attached: list[Any]) -> Any:
        return self.engine.query(question)

    def state(self) -> Any:
        from llama_index.core.instrumentation import get_dispatcher

        root = get_dispatcher()
        return (tuple(map(id, root.event_handlers)), tuple(map(id, root.span_handlers)))


DRIVERS = {"langchain": LangChainDriver, "haystack": HaystackDriver, "llamaindex": LlamaIndexDriver}

ANONYMOUS = None  # a run with no scope: its id is the framework's own (a uuid, a run id)


class Observers(RuleBasedStateMachine):
    """Three observers of one framework, driven in any order (see the module docstring)."""

    driver: Any = None

    def __init__(self) -> None:
        super().__init__()
        self.before = self.driver.state()
        self.observers = [self.driver.observer() for _ in range(N_OBSERVERS)]
        self.attached = [False] * N_OBSERVERS
        self.scopes: list[tuple[int | None, str, contextlib.ExitStack]] = []  # owner, id
        self.expected: list[list[str | None]] = [[] for _ in range(N_OBSERVERS)]
        self.counter = 0

    # -- what the model says ---------------------------------------------------------------

    def listening(self, i: int) -> bool:
        own_scope = any(owner == i for owner, _, _ in self.scopes)
        return self.attached[i] or own_scope

    def id_for(self, i: int) -> str | None:
        for owner, ident, _ in reversed(self.scopes):
            if owner is None or owner == i:
                return ident
        return ANONYMOUS

    # -- steps -----------------------------------------------------------------------------

    @rule(i=st.integers(0, N_OBSERVERS - 1))
    def attach(self, i: int) -> None:
        self.driver.attach(self.observers[i])
        self.attached[i] = True

    @rule(i=st.integers(0, N_OBSERVERS - 1))
    def detach(self, i: int) -> None:
        self.driver.detach(self.observers[i])
        self.attached[i] = False

    @precondition(lambda self: len(self.scopes) < 4)
    @rule(owner=st.one_of(st.none(), st.integers(0, N_OBSERVERS - 1)))
    def open_scope(self, owner: int | None) -> None:
        self.counter += 1
        ident = f"s{self.counter}"
        stack = contextlib.ExitStack()
        if owner is None:
            stack.enter_context(capture(id=ident))
        else:
            stack.enter_context(self.observers[owner].capture(id=ident))
        self.scopes.append((owner, ident, stack))

    @precondition(lambda self: bool(self.scopes))
    @rule()
    def close_scope(self) -> None:
        _, _, stack = self.scopes.pop()
        stack.close()

    @rule()
    def run(self) -> None:
        self.counter += 1
        explicit = [o for o, on in zip(self.observers, self.attached, strict=True) if on]
        self.driver.run(f"wing flutter {self.counter}", explicit)  # never raises
        for i in range(N_OBSERVERS):
            if self.listening(i):
                self.expected[i].append(self.id_for(i))

    @rule(i=st.integers(0, N_OBSERVERS - 1))
    def drain(self, i: int) -> None:
        got = [s.id for s in self.observers[i].drain()]
        want, self.expected[i] = self.expected[i], []
        assert len(got) == len(want), (i, got, want)
        for mine, theirs in zip(got, want, strict=True):
            if theirs is not ANONYMOUS:
                assert mine == theirs, (i, got, want)
            else:
                assert not mine.startswith("s"), (i, got, want)

    @invariant()
    def holds_what_it_saw(self) -> None:
        for i, observer in enumerate(self.observers):
            assert len(observer) == len(self.expected[i])

    def teardown(self) -> None:
        while self.scopes:
            self.scopes.pop()[2].close()
        for observer in self.observers:
            self.driver.detach(observer)
        assert self.driver.state() == self.before  # the framework is as it was


def _machine(name: str) -> Any:
    driver = DRIVERS[name]()

    class Machine(Observers):
        pass

    Machine.driver = driver
    Machine.__name__ = f"Observers_{name}"
    return Machine


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(DRIVERS))
def test_observers_compose_in_any_order(framework: str) -> None:
    run_state_machine_as_test(
        _machine(framework),
        settings=settings(
            max_examples=150,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


@contextlib.contextmanager
def _two_tracers() -> Iterator[tuple[Any, Any]]:
    from ragmeter_haystack import RagmeterTracer

    a, b = RagmeterTracer(), RagmeterTracer()
    try:
        yield a, b
    finally:
        a.detach()
        b.detach()


def test_two_haystack_tracers_a_run_inside_one_scope_raises_nothing() -> None:
    """Issue 18's case: ``a.attach(); b.attach()`` then a run inside ``a.capture(...)`` raised
    ``RecursionError`` out of ``Pipeline.run``; the scopes of two tracers shared ids."""
    from haystack.tracing import tracer

    driver = HaystackDriver()
    before = tracer.actual_tracer
    with _two_tracers() as (a, b):
        a.attach()
        b.attach()
        with a.capture(id="for-a"), b.capture(id="for-b"):
            driver.run("wing", [])
        with a.capture(id="only-a"):
            driver.run("wing", [])
        a.detach()  # out of order: b stays attached, a is gone
        driver.run("wing", [])
        assert [s.id for s in a.samples] == ["for-a", "only-a"]
        ids = [s.id for s in b.samples]
        assert ids[:2] == ["for-b", ids[1]] and ids[1] != "only-a" and len(ids) == 3
        b.detach()
    assert tracer.actual_tracer is before
