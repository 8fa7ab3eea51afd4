"""``ragmeter_langchain.embedder``: a LangChain ``Embeddings`` model as a ragmeter embedder.

The oracle is the model itself: the bridge's vectors must be the ones LangChain's own
``embed_documents`` gives, in order, whichever of the sync/async paths the model implements.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings, FakeEmbeddings
from langchain_openai import OpenAIEmbeddings
from ragmeter_langchain import LangChainEmbedder, embedder

from ragmeter.embed import Embedder
from ragmeter.errors import InvalidTypeError, RagmeterError

TEXTS = ["Paris is France's capital", "The capital is Paris", "", "1887", "not Y", "x " * 50]


class SyncOnly(Embeddings):
    """A sync-only model (no async override): LangChain runs it in an executor thread."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.threads.append(threading.get_ident())
        self.calls.append(list(texts))
        return [[float(len(t)), float(t.count(" "))] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        raise AssertionError("documents, not queries, are embedded")


class AsyncNative(SyncOnly):
    """A model with its own async path; the sync path must not be used."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the async path must be used")

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[float(len(t)), 1.0] for t in texts]


def test_vectors_are_the_models_own_in_order() -> None:
    model = DeterministicFakeEmbedding(size=16)
    e = embedder(model)
    assert isinstance(e, Embedder) and isinstance(e, LangChainEmbedder)
    got = asyncio.run(e.embed(TEXTS))
    assert got == model.embed_documents(TEXTS)
    # order: each text alone gives the same vector as in the batch
    assert [asyncio.run(e.embed([t]))[0] for t in TEXTS] == got
    assert asyncio.run(e.embed(TEXTS[::-1])) == got[::-1]


def test_fake_embeddings_give_vectors_of_the_models_size() -> None:
    got = asyncio.run(embedder(FakeEmbeddings(size=7)).embed(TEXTS))
    assert len(got) == len(TEXTS) and {len(v) for v in got} == {7}
    assert all(isinstance(x, float) for v in got for x in v)


def test_sync_only_model_runs_off_the_event_loop_thread() -> None:
    model = SyncOnly()

    async def go() -> tuple[list[list[float]], int]:
        return await embedder(model).embed(TEXTS), threading.get_ident()

    got, loop_thread = asyncio.run(go())
    assert got == model.embed_documents(TEXTS)
    assert model.calls[0] == TEXTS  # one call for the whole batch
    assert model.threads[0] != loop_thread


def test_async_model_uses_its_async_path() -> None:
    model = AsyncNative()
    got = asyncio.run(embedder(model).embed(TEXTS))
    assert got == [[float(len(t)), 1.0] for t in TEXTS]
    assert model.calls == [TEXTS]


def test_identity_names_model_and_dimensions_and_drops_secrets() -> None:
    model = OpenAIEmbeddings(
        api_key="sk-very-secret",  # type: ignore[arg-type]
        model="text-embedding-3-small",
        dimensions=256,
        default_headers={"Authorization": "Bearer sk-very-secret", "X-Team": "rag"},
    )
    ident = embedder(model).identity
    assert ident["framework"] == "langchain" and ident["class"] == "OpenAIEmbeddings"
    assert ident["model"] == "text-embedding-3-small" and ident["dimensions"] == 256
    text = json.dumps(ident)  # JSON-ready, as a cache key must be
    assert "sk-very-secret" not in text and "api_key" not in text
    assert ident["default_headers"] == {"X-Team": "rag"}
    assert "max_retries" not in ident and "chunk_size" not in ident  # transport, not model
    # the same settings give the same identity (no object addresses inside)
    again = OpenAIEmbeddings(
        api_key="sk-other",  # type: ignore[arg-type]
        model="text-embedding-3-small",
        dimensions=256,
        default_headers={"Authorization": "Bearer sk-other", "X-Team": "rag"},
        max_retries=9,
    )
    assert embedder(again).identity == ident
    other = OpenAIEmbeddings(
        api_key="sk-x",  # type: ignore[arg-type]
        model="text-embedding-3-small",
        dimensions=512,
    )
    assert embedder(other).identity != ident


def test_identity_of_fake_model_distinguishes_sizes() -> None:
    a = embedder(DeterministicFakeEmbedding(size=8)).identity
    b = embedder(DeterministicFakeEmbedding(size=9)).identity
    assert a != b and a["size"] == 8


def test_model_errors_surface_unchanged() -> None:
    class Failing(SyncOnly):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise ConnectionError("rate limited by the provider")

    with pytest.raises(ConnectionError, match="rate limited"):
        asyncio.run(embedder(Failing()).embed(["a"]))


def test_wrong_number_of_vectors_is_named() -> None:
    class Short(SyncOnly):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0]]

    with pytest.raises(RagmeterError, match=r"Short\.aembed_documents returned 1 vectors for 2"):
        asyncio.run(embedder(Short()).embed(["a", "b"]))


def test_not_an_embeddings_model_is_refused() -> None:
    with pytest.raises(InvalidTypeError, match="Embeddings model, got str"):
        embedder("text-embedding-3-small")  # type: ignore[arg-type]
