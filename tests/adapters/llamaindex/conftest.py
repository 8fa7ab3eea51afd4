"""Fixtures: a real LlamaIndex pipeline over Cranfield, offline and deterministic.

``HashEmbedding`` is a hashed bag-of-words embedding (MockEmbedding gives every text the
same vector, so every score ties); ``MockLLM`` echoes its prompt (or says "text" n times).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.node_parser import SentenceSplitter

from ragmeter.datasets import load_cranfield

_WORD = re.compile(r"[a-z0-9]+")
DIM = 512
N_QUERIES = 20
N_CHUNKED_QUERIES = 8


def hash_embed(text: str, dim: int = DIM) -> list[float]:
    """L2-normalised counts of hashed lower-case words (stable across processes)."""
    vec = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
        vec[h % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


class HashEmbedding(BaseEmbedding):
    """A deterministic bag-of-words embedding: texts sharing words score higher."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return hash_embed(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return hash_embed(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return hash_embed(text)


@pytest.fixture(scope="session")
def cranfield() -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, float]]]:
    """(corpus, queries, qrels): the first N_QUERIES judged queries over a corpus subset.

    The subset keeps every document judged for those queries and every 8th other one
    (non-empty texts only), so indexing and search stay quick.
    """
    corpus, queries, qrels = load_cranfield()
    qids = [q for q in queries if any(g > 0 for g in qrels.get(q, {}).values())][:N_QUERIES]
    judged = {d for q in qids for d in qrels[q]}
    docs = {
        d: text
        for i, (d, text) in enumerate(corpus.items())
        if text.strip() and (d in judged or i % 8 == 0)
    }
    return docs, {q: queries[q] for q in qids}, {q: qrels[q] for q in qids}


@pytest.fixture(scope="session")
def embed_model() -> HashEmbedding:
    return HashEmbedding(model_name="hash-bow-512", embed_batch_size=256)


@pytest.fixture(scope="session")
def index(cranfield, embed_model) -> VectorStoreIndex:  # type: ignore[no-untyped-def]
    """One node per Cranfield document; node ids are the Cranfield doc ids."""
    from llama_index.core.schema import TextNode

    corpus = cranfield[0]
    nodes = [TextNode(id_=doc_id, text=text) for doc_id, text in corpus.items()]
    return VectorStoreIndex(nodes, embed_model=embed_model)


@pytest.fixture(scope="session")
def chunked(cranfield, embed_model):  # type: ignore[no-untyped-def]
    """(index, nodes, queries, qrels): documents split by SentenceSplitter into ~80-token chunks.

    Each chunk's ``ref_doc_id`` is its Cranfield doc id. Fewer queries and documents than
    ``cranfield`` (splitting is the slow part).
    """
    corpus, queries, qrels = cranfield
    qids = list(queries)[:N_CHUNKED_QUERIES]
    judged = {d for q in qids for d in qrels[q]}
    docs = [
        Document(id_=d, text=text)
        for i, (d, text) in enumerate(corpus.items())
        if d in judged or i % 10 == 0
    ]
    nodes = SentenceSplitter(chunk_size=80, chunk_overlap=0).get_nodes_from_documents(docs)
    index = VectorStoreIndex(nodes, embed_model=embed_model)
    return index, nodes, {q: queries[q] for q in qids}, {q: qrels[q] for q in qids}


@pytest.fixture(autouse=True)
def _no_leftover_handlers() -> Iterator[None]:
    """Every test leaves the root dispatcher's handlers as it found them."""
    root = get_dispatcher()
    events, spans = list(root.event_handlers), list(root.span_handlers)
    yield
    root.event_handlers, root.span_handlers = events, spans
