"""ragmeter's ``semantic_similarity`` with a LangChain model equals Ragas' own
``SemanticSimilarity`` with the same model object, per sample.

Oracle: Ragas (``ragas.metrics.SemanticSimilarity`` over ``LangchainEmbeddingsWrapper``),
which embeds each text with the model's ``aembed_documents`` and takes the dot product of
the L2-normalised vectors; ragmeter takes the cosine of the raw vectors. Both are float64
on the same float vectors, so they agree to 1e-12.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from ragas.dataset_schema import SingleTurnSample
from ragmeter_langchain import embedder

from ragmeter.embed import SemanticSimilarity
from ragmeter.evaluation.rag import evaluate_rag

PAIRS = [
    ("The capital is Paris", "Paris is France's capital"),
    ("Paris", "Paris is the capital of France."),
    ("Berlin is the capital of Germany", "Paris is France's capital"),
    ("The company was founded in 1887.", "The company was founded in 1897."),
    ("The Seine flows through Paris", "The Seine flows through Paris"),
    ("no idea", "The Rhine flows through Germany"),
]

pytestmark = [
    pytest.mark.filterwarnings(
        "ignore:LangchainEmbeddingsWrapper is deprecated:DeprecationWarning"
    ),
    pytest.mark.filterwarnings("ignore:Importing SemanticSimilarity from 'ragas.metrics'"),
]


class WordHashEmbeddings(Embeddings):
    """Bag-of-words vectors (each word hashed into 32 buckets), so paraphrases score high
    and thresholds split the samples (``DeterministicFakeEmbedding`` gives random vectors)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vector = [0.0] * 32
            for word in re.findall(r"\w+", text.lower()):
                vector[hashlib.sha256(word.encode()).digest()[0] % 32] += 1.0
            out.append(vector)
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _samples() -> list[dict[str, Any]]:
    return [
        {"id": f"s{i}", "response": answer, "reference": reference}
        for i, (answer, reference) in enumerate(PAIRS)
    ]


def _ragas(model: Embeddings, threshold: float | None = None) -> list[float]:
    # Ragas' legacy metric: the one that takes a framework's model through a wrapper
    # (imported here: pytest's collection would trip the wrapper's deprecation warning).
    from ragas.embeddings import LangchainEmbeddingsWrapper
    from ragas.metrics import SemanticSimilarity as RagasSemanticSimilarity

    metric = RagasSemanticSimilarity(
        embeddings=LangchainEmbeddingsWrapper(model), threshold=threshold
    )

    async def all_scores() -> list[float]:
        return [
            await metric.single_turn_ascore(SingleTurnSample(response=a, reference=r))
            for a, r in PAIRS
        ]

    return asyncio.run(all_scores())


def _ragmeter(model: Embeddings, threshold: float | None = None) -> list[float]:
    report = evaluate_rag(
        _samples(),
        metrics=[SemanticSimilarity(embedder=embedder(model), threshold=threshold)],
        embed_cache=None,
    )
    return [report.per_sample[f"s{i}"]["semantic_similarity"] for i in range(len(PAIRS))]


@pytest.mark.parametrize(
    "model", [DeterministicFakeEmbedding(size=48), WordHashEmbeddings()], ids=type
)
def test_semantic_similarity_equals_ragas_per_sample(model: Embeddings) -> None:
    ours = _ragmeter(model)
    theirs = _ragas(model)
    assert ours == pytest.approx(theirs, abs=1e-12)
    assert len(set(ours)) > 3  # the samples really differ


@pytest.mark.parametrize("threshold", [0.5, 0.8, 0.95])
def test_thresholded_scores_equal_ragas_binary_scores(threshold: float) -> None:
    model = WordHashEmbeddings()
    ours = _ragmeter(model, threshold)
    theirs = _ragas(model, threshold)
    assert ours == theirs  # both: 1.0 when cosine >= threshold, else 0.0
    assert set(ours) <= {0.0, 1.0}


def test_threshold_at_a_samples_own_cosine_passes_it_in_both() -> None:
    # `>=` in both: a threshold equal to a sample's cosine passes that sample.
    model = WordHashEmbeddings()
    cosines = _ragmeter(model)
    boundary = sorted(cosines)[2]
    ours = _ragmeter(model, boundary)
    assert ours == _ragas(model, boundary)
    assert ours[cosines.index(boundary)] == 1.0
