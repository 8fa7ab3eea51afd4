"""Haystack's Sentence Transformers embedders through ``ragmeter_haystack.embedder``, offline.

A tiny Sentence Transformers model is built here (a ``StaticEmbedding``: a bag of word
vectors, mean-pooled, over a word-level ``tokenizers`` vocabulary with seeded random
weights), saved to a folder and loaded back by path with the network blocked, as a user
loads a downloaded model. The folder also holds a BERT ``config.json`` naming a
``BertModel`` architecture: that is what Haystack's ``SASEvaluator.warm_up`` reads to tell a
bi-encoder from a cross-encoder (a real bi-encoder's folder has one too).
"""

# No `from __future__ import annotations`: Haystack reads socket types from real annotations.
import asyncio
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from haystack import Document
from haystack.components.evaluators import SASEvaluator
from haystack_integrations.components.embedders.sentence_transformers import (
    SentenceTransformersDocumentEmbedder,
    SentenceTransformersTextEmbedder,
)
from ragas.embeddings import HuggingFaceEmbeddings as RagasHuggingFaceEmbeddings
from ragas.metrics.collections import SemanticSimilarity as RagasSemanticSimilarity
from ragmeter_haystack import embedder
from sentence_transformers import SentenceTransformer

from ragmeter.embed import SemanticSimilarity
from ragmeter.evaluation.rag import evaluate_rag

VOCABULARY = (
    "the a an of is in was and not no to by paris france france's capital berlin germany "
    "city largest founded 1887 1897 company river seine rhine flows through x y"
)
WORDS = VOCABULARY.split()


def build_static_model(folder: Path, dim: int = 24, seed: int = 7) -> Path:
    """Save a Sentence Transformers model (StaticEmbedding) to ``folder`` and return it."""
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    except ImportError:  # 5.x
        from sentence_transformers.models import StaticEmbedding
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import BertConfig

    vocab = {"[UNK]": 0, "[PAD]": 1, **{w: i + 2 for i, w in enumerate(dict.fromkeys(WORDS))}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    weights = np.random.default_rng(seed).normal(size=(len(vocab), dim)).astype(np.float32)
    model = SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=weights)])
    model.save(str(folder))
    BertConfig(architectures=["BertModel"]).save_pretrained(str(folder))
    return folder


@contextmanager
def no_network() -> Iterator[None]:
    """Refuse every outgoing connection and name lookup (sockets blocked) inside the block."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError(f"network blocked in this test: {args[:2]!r}")

    saved = (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo)
    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.getaddrinfo = refuse
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = saved  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    with no_network():
        return str(build_static_model(tmp_path_factory.mktemp("st") / "static-model"))


TEXTS = [
    "Paris is France's capital",
    "The capital is Paris",
    "Berlin is the capital of Germany",
    "the company was founded in 1887",
    "the company was not founded in 1897",
    "",
]


def test_text_and_document_embedders_load_offline_and_agree(model_path: str) -> None:
    with no_network():
        text = SentenceTransformersTextEmbedder(model=model_path, progress_bar=False)
        docs = SentenceTransformersDocumentEmbedder(model=model_path, progress_bar=False)
        by_text = asyncio.run(embedder(text).embed(TEXTS))
        by_docs = asyncio.run(embedder(docs).embed(TEXTS))
        own_text = [text.run(text=t)["embedding"] for t in TEXTS]
        own_docs = docs.run(documents=[Document(content=t) for t in TEXTS])["documents"]
    assert by_text == own_text
    assert by_docs == [d.embedding for d in own_docs]
    np.testing.assert_allclose(by_text, by_docs, rtol=1e-6, atol=1e-7)  # float32 batches
    assert len(by_text[0]) == 24


def test_identity_names_the_model_path_and_not_the_token(model_path: str) -> None:
    ident = embedder(SentenceTransformersTextEmbedder(model=model_path)).identity
    assert ident["class"] == "SentenceTransformersTextEmbedder"
    assert ident["model"] == model_path and ident["normalize_embeddings"] is False
    assert "token" not in ident and "device" not in ident and "batch_size" not in ident
    normalised = SentenceTransformersTextEmbedder(model=model_path, normalize_embeddings=True)
    assert embedder(normalised).identity != ident


# ragmeter's semantic_similarity == Haystack's SASEvaluator (bi-encoder) with the same model.
# SAS encodes with the model in float32 and takes ``util.cos_sim`` of float32 tensors;
# ragmeter takes the float64 cosine of the same float32 vectors: they agree to float32
# precision (1e-6), not to the last bit.
PAIRS = [
    ("The capital is Paris", "Paris is France's capital"),
    ("Paris", "Paris is the capital of France"),
    ("Berlin is the capital of Germany", "Paris is France's capital"),
    ("the company was founded in 1887", "the company was founded in 1897"),
    ("the Seine flows through Paris", "the Seine flows through Paris"),
    ("no", "the Rhine flows through Germany"),
]


def _ragmeter_scores(component: Any, threshold: float | None = None) -> list[float]:
    samples = [{"id": f"s{i}", "response": a, "reference": r} for i, (a, r) in enumerate(PAIRS)]
    metric = SemanticSimilarity(embedder=embedder(component), threshold=threshold)
    report = evaluate_rag(samples, metrics=[metric], embed_cache=None)
    return [report.per_sample[f"s{i}"]["semantic_similarity"] for i in range(len(PAIRS))]


def test_semantic_similarity_equals_sas_bi_encoder_per_sample(model_path: str) -> None:
    with no_network():
        sas = SASEvaluator(model=model_path)
        sas.warm_up()
        assert isinstance(sas._similarity_model, SentenceTransformer)  # the bi-encoder path
        theirs = sas.run(
            ground_truth_answers=[r for _, r in PAIRS], predicted_answers=[a for a, _ in PAIRS]
        )["individual_scores"]
        text = SentenceTransformersTextEmbedder(model=model_path, progress_bar=False)
        docs = SentenceTransformersDocumentEmbedder(model=model_path, progress_bar=False)
        by_text = _ragmeter_scores(text)
        by_docs = _ragmeter_scores(docs)
    assert by_text == pytest.approx(theirs, abs=1e-6)
    assert by_docs == pytest.approx(theirs, abs=1e-6)
    assert len({round(s, 4) for s in by_text}) > 3  # the samples really differ


def test_semantic_similarity_equals_ragas_on_the_same_sentence_transformers_model(
    model_path: str,
) -> None:
    # Ragas' current SemanticSimilarity (ragas.metrics.collections) with its own
    # HuggingFaceEmbeddings provider loading the same folder: the L2-normalised dot product.
    with no_network():
        ragas_model = RagasHuggingFaceEmbeddings(model=model_path, normalize_embeddings=False)
        metric = RagasSemanticSimilarity(embeddings=ragas_model)
        theirs = [asyncio.run(metric.ascore(reference=r, response=a)).value for a, r in PAIRS]
        ours = _ragmeter_scores(SentenceTransformersTextEmbedder(model=model_path))
        binary = [
            asyncio.run(
                RagasSemanticSimilarity(embeddings=ragas_model, threshold=0.6).ascore(
                    reference=r, response=a
                )
            ).value
            for a, r in PAIRS
        ]
        ours_binary = _ragmeter_scores(
            SentenceTransformersTextEmbedder(model=model_path), threshold=0.6
        )
    assert ours == pytest.approx(theirs, abs=1e-6)
    assert ours_binary == binary and 0.0 in binary and 1.0 in binary
