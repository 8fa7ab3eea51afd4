"""Real Haystack pipelines over the bundled Cranfield collection, offline (no model, no network)."""

# No `from __future__ import annotations` here: Haystack 2.x reads a component's socket
# types from its real (not string) annotations.
import os
import sys
from typing import Any

import pytest

# Tests run offline: Haystack's usage telemetry must not try to phone home.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
if "haystack.telemetry._telemetry" in sys.modules:  # imported before this conftest
    sys.modules["haystack.telemetry._telemetry"].telemetry = None

pytest.importorskip("haystack")

from haystack import Document, Pipeline, component
from haystack.components.builders import ChatPromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

from ragmeter.datasets import load_cranfield

TEMPLATE = (
    "Answer from the context.\n"
    "Context:\n{% for doc in documents %}{{ doc.content }}\n{% endfor %}"
    "Question: {{ question }}"
)


def answer_from_context(messages: list[ChatMessage]) -> str:
    """The fake model's answer: the first 12 words of the first context document."""
    text = messages[-1].text or ""
    context = text.split("Context:\n", 1)[-1].split("\nQuestion:", 1)[0]
    first = context.strip().split("\n", 1)[0]
    return " ".join(first.split()[:12])


try:  # Haystack >= 3 ships a mock chat generator
    from haystack.components.generators.chat import MockChatGenerator

    def make_generator() -> Any:
        return MockChatGenerator(response_fn=answer_from_context)

except ImportError:  # Haystack 2.x: a small fake with the same interface

    @component
    class FakeChatGenerator:
        """Answers with ``answer_from_context``; reports usage like OpenAI's generator."""

        @component.output_types(replies=list[ChatMessage])
        def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
            text = answer_from_context(messages)
            reply = ChatMessage.from_assistant(
                text, meta={"usage": {"prompt_tokens": 7, "completion_tokens": len(text.split())}}
            )
            return {"replies": [reply]}

        @component.output_types(replies=list[ChatMessage])
        async def run_async(self, messages: list[ChatMessage]) -> dict[str, Any]:
            return self.run(messages)

    def make_generator() -> Any:
        return FakeChatGenerator()


@pytest.fixture(scope="session")
def cranfield() -> Any:
    """``(corpus, queries, qrels)`` of the bundled Cranfield collection."""
    return load_cranfield()


@pytest.fixture(scope="session")
def store(cranfield: Any) -> InMemoryDocumentStore:
    """Cranfield's 1,400 abstracts, ids kept, in Haystack's in-memory BM25 store."""
    corpus, _, _ = cranfield
    document_store = InMemoryDocumentStore()
    document_store.write_documents([Document(id=i, content=t) for i, t in corpus.items()])
    return document_store


def build_rag(store: InMemoryDocumentStore, *, top_k: int = 10, cls: Any = Pipeline) -> Any:
    """BM25 retriever -> ChatPromptBuilder -> fake chat generator."""
    pipe = cls()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=top_k))
    pipe.add_component(
        "prompt_builder",
        ChatPromptBuilder(
            template=[ChatMessage.from_user(TEMPLATE)], required_variables=["question", "documents"]
        ),
    )
    pipe.add_component("llm", make_generator())
    pipe.connect("retriever.documents", "prompt_builder.documents")
    pipe.connect("prompt_builder.prompt", "llm.messages")
    return pipe


@pytest.fixture
def rag(store: InMemoryDocumentStore) -> Pipeline:
    """A fresh BM25 RAG pipeline over Cranfield."""
    return build_rag(store)


@pytest.fixture
def make_rag(store: InMemoryDocumentStore) -> Any:
    """``make_rag(top_k=10)``: build another RAG pipeline over the Cranfield store."""
    return lambda top_k=10: build_rag(store, top_k=top_k)


def _rag_input(question: str) -> dict[str, Any]:
    return {"retriever": {"query": question}, "prompt_builder": {"question": question}}


@pytest.fixture
def rag_input() -> Any:
    """``rag_input(question)``: the RAG pipeline's input for one question."""
    return _rag_input


@pytest.fixture
def async_rag(store: InMemoryDocumentStore) -> Any:
    """The RAG pipeline as a class with ``run_async`` (3.x ``Pipeline``, 2.x ``AsyncPipeline``)."""
    if hasattr(Pipeline, "run_async"):
        return build_rag(store)
    from haystack import AsyncPipeline

    return build_rag(store, cls=AsyncPipeline)
