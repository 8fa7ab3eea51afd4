"""``ragmeter_llamaindex.embedder``: a LlamaIndex ``BaseEmbedding`` as a ragmeter embedder.

The oracle is the model itself: the bridge's vectors must be the ones LlamaIndex's own
``get_text_embedding`` / ``get_text_embedding_batch`` give, in order, across its batching.
"""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.embeddings import MockEmbedding
from pydantic import PrivateAttr
from ragmeter_llamaindex import LlamaIndexEmbedder, embedder

from ragmeter.embed import Embedder
from ragmeter.errors import InvalidTypeError, RagmeterError

TEXTS = ["Paris is France's capital", "The capital is Paris", "", "1887", "not Y", "x " * 50]


class HashEmbedding(BaseEmbedding):
    """A small deterministic model: each vector comes from the text's SHA-256, so cosine
    values differ between texts (``MockEmbedding`` gives one constant vector)."""

    dim: int = 8
    api_key: str = ""
    _batches: list[list[str]] = PrivateAttr(default_factory=list)

    def _vector(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        return [b / 255.0 - 0.5 for b in digest[: self.dim]]

    def _get_query_embedding(self, query: str) -> list[float]:
        raise AssertionError("texts, not queries, are embedded")

    async def _aget_query_embedding(self, query: str) -> list[float]:
        raise AssertionError("texts, not queries, are embedded")

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._batches.append(list(texts))
        return [self._vector(t) for t in texts]


def test_vectors_are_the_models_own_in_order_across_its_batches() -> None:
    model = HashEmbedding(embed_batch_size=2)
    e = embedder(model)
    assert isinstance(e, Embedder) and isinstance(e, LlamaIndexEmbedder)
    got = asyncio.run(e.embed(TEXTS))
    assert got == [model.get_text_embedding(t) for t in TEXTS]
    assert got == model.get_text_embedding_batch(TEXTS)
    assert model._batches == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:6]]  # the model's own batching
    assert asyncio.run(e.embed(TEXTS[::-1])) == got[::-1]


def test_mock_embedding_gives_its_constant_vectors() -> None:
    model = MockEmbedding(embed_dim=5)
    got = asyncio.run(embedder(model).embed(TEXTS))
    assert got == model.get_text_embedding_batch(TEXTS)
    assert {len(v) for v in got} == {5}


def test_identity_names_class_and_settings_and_drops_secrets() -> None:
    ident = embedder(HashEmbedding(model_name="hash-8", dim=8, api_key="sk-secret")).identity
    assert ident == {
        "framework": "llamaindex",
        "class": "HashEmbedding",
        "model_name": "hash-8",
        "dim": 8,
    }
    assert "sk-secret" not in json.dumps(ident)
    batch_only = embedder(HashEmbedding(model_name="hash-8", embed_batch_size=3)).identity
    assert batch_only == ident  # batching changes calls, not vectors
    assert (
        embedder(MockEmbedding(embed_dim=8)).identity
        != embedder(MockEmbedding(embed_dim=9)).identity
    )


def test_model_errors_surface_unchanged() -> None:
    class Failing(HashEmbedding):
        async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            raise TimeoutError("the embedding endpoint timed out")

    with pytest.raises(TimeoutError, match="timed out"):
        asyncio.run(embedder(Failing()).embed(["a"]))


def test_wrong_number_of_vectors_is_named() -> None:
    class Short(HashEmbedding):
        async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [[1.0]]

    with pytest.raises(RagmeterError, match=r"Short\.aget_text_embedding_batch returned 1 "):
        asyncio.run(embedder(Short(embed_batch_size=10)).embed(["a", "b"]))


def test_not_an_embedding_model_is_refused() -> None:
    with pytest.raises(InvalidTypeError, match="BaseEmbedding, got str"):
        embedder("text-embedding-3-small")  # type: ignore[arg-type]
