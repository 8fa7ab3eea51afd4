"""``ragmeter_haystack.embedder``: a Haystack text or document embedder as a ragmeter embedder.

The oracle is the component itself: the bridge's vectors must be the ones its own ``run``
returns (Haystack's ``MockTextEmbedder``/``MockDocumentEmbedder``: deterministic, no model).
"""

# No `from __future__ import annotations`: Haystack reads socket types from real annotations.
import asyncio
import json
import threading
import time
from typing import Any

import pytest
from haystack import Document, component
from haystack.components.embedders import (
    MockDocumentEmbedder,
    MockTextEmbedder,
    OpenAIDocumentEmbedder,
    OpenAITextEmbedder,
)
from haystack.utils import Secret
from ragmeter_haystack import HaystackEmbedder, embedder

from ragmeter.embed import Embedder
from ragmeter.errors import InvalidTypeError, RagmeterError

TEXTS = ["Paris is France's capital", "The capital is Paris", "", "1887", "not Y", "x " * 50]


@component
class SyncTextEmbedder:
    """A sync-only text embedder that must be warmed up (like a local model) and counts."""

    def __init__(self, model: str = "len-model") -> None:
        self.model = model
        self.warm_ups = 0
        self.threads: list[int] = []
        self.loaded = False

    def warm_up(self) -> None:
        self.warm_ups += 1
        self.loaded = True

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, Any]:
        if not self.loaded:
            raise RuntimeError("not warmed up")
        self.threads.append(threading.get_ident())
        return {"embedding": [float(len(text)), float(text.count("a")), 1.0]}


def test_text_embedder_vectors_are_its_own_in_order() -> None:
    comp = MockTextEmbedder(dimension=12, prefix="passage: ")
    e = embedder(comp)
    assert isinstance(e, Embedder) and isinstance(e, HaystackEmbedder) and e.kind == "text"
    got = asyncio.run(e.embed(TEXTS))
    assert got == [comp.run(text=t)["embedding"] for t in TEXTS]
    assert asyncio.run(e.embed(TEXTS[::-1])) == got[::-1]


def test_document_embedder_vectors_are_its_own_in_order() -> None:
    comp = MockDocumentEmbedder(dimension=12)
    e = embedder(comp)
    assert e.kind == "documents"
    got = asyncio.run(e.embed(TEXTS))
    docs = comp.run(documents=[Document(content=t) for t in TEXTS])["documents"]
    assert got == [d.embedding for d in docs]
    # a text and a document mock of the same settings agree (Haystack's own contract)
    assert got == asyncio.run(embedder(MockTextEmbedder(dimension=12)).embed(TEXTS))
    # duplicates in one batch keep their places
    a, b = (comp.run(documents=[Document(content=t)])["documents"][0].embedding for t in "ab")
    assert asyncio.run(e.embed(["a", "b", "a"])) == [a, b, a]


def test_sync_component_is_warmed_up_once_and_runs_off_the_loop_thread() -> None:
    comp = SyncTextEmbedder()
    e = embedder(comp)

    async def go() -> int:
        await asyncio.gather(e.embed(TEXTS[:3]), e.embed(TEXTS[3:]), e.embed(TEXTS))
        return threading.get_ident()

    loop_thread = asyncio.run(go())
    assert comp.warm_ups == 1
    assert loop_thread not in comp.threads and len(comp.threads) == 2 * len(TEXTS)
    assert asyncio.run(e.embed(["banana"])) == [[6.0, 3.0, 1.0]]


@component
class SlowDocumentEmbedder:
    """A sync-only document embedder (like a local model) that records overlapping runs."""

    def __init__(self) -> None:
        self.running = 0
        self.most_at_once = 0
        self.guard = threading.Lock()

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, Any]:
        with self.guard:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(0.02)
        with self.guard:
            self.running -= 1
        out = [
            Document(content=d.content, embedding=[float(len(d.content or ""))]) for d in documents
        ]
        return {"documents": out}


def test_a_component_without_run_async_runs_once_at_a_time_and_says_so() -> None:
    comp = SlowDocumentEmbedder()
    e = embedder(comp)
    assert e.max_concurrency == 1  # the runner then sends one batch at a time
    assert embedder(MockDocumentEmbedder(dimension=4)).max_concurrency is None  # run_async

    async def go() -> list[list[list[float]]]:
        return await asyncio.gather(*(e.embed([t, t + "!"]) for t in TEXTS))

    got = asyncio.run(go())  # even called at once, its run() never overlaps itself
    assert comp.most_at_once == 1
    assert got == [[[float(len(t))], [float(len(t) + 1)]] for t in TEXTS]


def test_identity_is_class_and_init_parameters_without_secrets() -> None:
    comp = OpenAITextEmbedder(
        api_key=Secret.from_token("sk-very-secret"),
        model="text-embedding-3-small",
        dimensions=256,
        timeout=3.0,
    )
    ident = embedder(comp).identity
    assert ident["framework"] == "haystack" and ident["class"] == "OpenAITextEmbedder"
    assert ident["model"] == "text-embedding-3-small" and ident["dimensions"] == 256
    text = json.dumps(ident)
    assert "sk-very-secret" not in text and "api_key" not in text and "timeout" not in text
    from_env = OpenAITextEmbedder(
        api_key=Secret.from_env_var("OPENAI_API_KEY", strict=False),
        model="text-embedding-3-small",
        dimensions=256,
    )
    assert embedder(from_env).identity == ident  # the key's source is no part of the model
    docs = OpenAIDocumentEmbedder(
        api_key=Secret.from_token("sk-x"), model="text-embedding-3-small", batch_size=7
    )
    assert "batch_size" not in embedder(docs).identity
    mock = embedder(MockDocumentEmbedder(dimension=4, progress_bar=True)).identity
    assert mock["dimension"] == 4 and "progress_bar" not in mock
    assert (
        embedder(MockTextEmbedder(dimension=5)).identity
        != embedder(MockTextEmbedder(dimension=4)).identity
    )


def test_model_errors_surface_unchanged() -> None:
    def boom(text: str) -> list[float]:
        raise ConnectionError("embedding service unreachable")

    with pytest.raises(ConnectionError, match="unreachable"):
        asyncio.run(embedder(MockTextEmbedder(embedding_fn=boom)).embed(["a"]))


def test_a_document_embedder_that_loses_documents_is_named() -> None:
    @component
    class Lossy:
        @component.output_types(documents=list[Document])
        def run(self, documents: list[Document]) -> dict[str, Any]:
            return {"documents": documents[:1]}

    with pytest.raises(RagmeterError, match=r"Lossy\.run returned 1 vectors for 2 texts"):
        asyncio.run(embedder(Lossy()).embed(["a", "b"]))

    @component
    class NoVector:
        @component.output_types(documents=list[Document])
        def run(self, documents: list[Document]) -> dict[str, Any]:
            return {"documents": documents}

    with pytest.raises(RagmeterError, match=r"NoVector\.run gave no embedding for the text 'a'"):
        asyncio.run(embedder(NoVector()).embed(["a"]))


def test_a_component_that_is_no_embedder_is_refused() -> None:
    @component
    class Upper:
        @component.output_types(out=str)
        def run(self, query: str) -> dict[str, Any]:
            return {"out": query.upper()}

    with pytest.raises(InvalidTypeError, match="got Upper"):
        embedder(Upper())
    with pytest.raises(InvalidTypeError, match="got str"):
        embedder("text-embedding-3-small")
