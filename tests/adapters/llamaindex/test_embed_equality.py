"""ragmeter's ``semantic_similarity`` with a LlamaIndex model equals LlamaIndex's own
``SemanticSimilarityEvaluator`` and Ragas' ``SemanticSimilarity`` with the same model object,
per sample, and the thresholded scores agree with their pass/fail.

Oracles: ``SemanticSimilarityEvaluator(embed_model=...)`` (``aget_text_embedding`` per text,
``similarity`` in its default cosine mode, ``passing = score >= similarity_threshold``) and
``ragas.metrics.SemanticSimilarity`` over ``LlamaIndexEmbeddingsWrapper`` (dot product of the
L2-normalised vectors; with a threshold, ``score >= threshold`` as 0/1). All three compute in
float64 on the same vectors: they agree to 1e-12.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.evaluation import SemanticSimilarityEvaluator
from ragas.dataset_schema import SingleTurnSample
from ragmeter_llamaindex import embedder

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
        "ignore:LlamaIndexEmbeddingsWrapper is deprecated:DeprecationWarning"
    ),
    pytest.mark.filterwarnings("ignore:Importing SemanticSimilarity from 'ragas.metrics'"),
]


class WordHashEmbedding(BaseEmbedding):
    """A small deterministic model: bag-of-words vectors (each word hashed into ``dim``
    buckets), so paraphrases score high and cosines differ between samples
    (``MockEmbedding`` gives every text the same vector)."""

    dim: int = 32

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for word in re.findall(r"\w+", text.lower()):
            vector[hashlib.sha256(word.encode()).digest()[0] % self.dim] += 1.0
        return vector

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


def _ragmeter(model: BaseEmbedding, threshold: float | None = None) -> list[float]:
    samples: list[dict[str, Any]] = [
        {"id": f"s{i}", "response": a, "reference": r} for i, (a, r) in enumerate(PAIRS)
    ]
    metric = SemanticSimilarity(embedder=embedder(model), threshold=threshold)
    report = evaluate_rag(samples, metrics=[metric], embed_cache=None)
    return [report.per_sample[f"s{i}"]["semantic_similarity"] for i in range(len(PAIRS))]


def _llamaindex(model: BaseEmbedding, threshold: float = 0.8) -> list[tuple[float, bool]]:
    evaluator = SemanticSimilarityEvaluator(embed_model=model, similarity_threshold=threshold)
    results = [evaluator.evaluate(response=a, reference=r) for a, r in PAIRS]
    return [(float(res.score), bool(res.passing)) for res in results]  # type: ignore[arg-type]


def _ragas(model: BaseEmbedding, threshold: float | None = None) -> list[float]:
    # Ragas' legacy metric: the one that takes a framework's model through a wrapper
    # (imported here: pytest's collection would trip the wrapper's deprecation warning).
    from ragas.embeddings import LlamaIndexEmbeddingsWrapper
    from ragas.metrics import SemanticSimilarity as RagasSemanticSimilarity

    metric = RagasSemanticSimilarity(
        embeddings=LlamaIndexEmbeddingsWrapper(model), threshold=threshold
    )

    async def all_scores() -> list[float]:
        return [
            await metric.single_turn_ascore(SingleTurnSample(response=a, reference=r))
            for a, r in PAIRS
        ]

    return asyncio.run(all_scores())


def test_semantic_similarity_equals_llamaindex_and_ragas_per_sample() -> None:
    model = WordHashEmbedding()
    ours = _ragmeter(model)
    assert ours == pytest.approx([score for score, _ in _llamaindex(model)], abs=1e-12)
    assert ours == pytest.approx(_ragas(model), abs=1e-12)
    assert len(set(ours)) > 3  # the samples really differ


def test_mock_embedding_scores_one_everywhere_as_llamaindex_does() -> None:
    model = MockEmbedding(embed_dim=8)  # one constant vector for every text
    ours = _ragmeter(model)
    assert ours == pytest.approx([score for score, _ in _llamaindex(model)], abs=1e-12)
    assert ours == pytest.approx([1.0] * len(PAIRS))


@pytest.mark.parametrize("threshold", [0.5, 0.8, 0.95])
def test_thresholded_scores_are_llamaindex_passing_and_ragas_binary(threshold: float) -> None:
    model = WordHashEmbedding()
    ours = _ragmeter(model, threshold)
    assert ours == [float(passing) for _, passing in _llamaindex(model, threshold)]
    assert ours == _ragas(model, threshold)
    assert set(ours) <= {0.0, 1.0}


def test_threshold_at_a_samples_own_cosine_passes_it_in_all_three() -> None:
    model = WordHashEmbedding()
    scores = _llamaindex(model)
    boundary = sorted(score for score, _ in scores)[2]
    ours = _ragmeter(model, boundary)
    k = [score for score, _ in scores].index(boundary)
    assert ours[k] == 1.0  # `>=`: a cosine equal to the threshold passes
    assert ours == [float(passing) for _, passing in _llamaindex(model, boundary)]
    assert ours == _ragas(model, boundary)
