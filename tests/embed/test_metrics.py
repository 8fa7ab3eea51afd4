"""The three embedding metrics, scored through evaluate_rag with a deterministic embedder and
checked against scipy's cosine over the same vectors (computed here, independently)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cosine as cosine_distance

from ragmeter.embed import (
    FunctionEmbedder,
    SemanticContextPrecision,
    SemanticContextRecall,
    SemanticSimilarity,
    run_embeddings,
)
from ragmeter.errors import EmbedderOutputError, InvalidInputError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.metrics.faithfulness import extract_claims
from ragmeter.schema import RagSample


def scipy_cos(a: list[float], b: list[float]) -> float:
    if not any(a) or not any(b):
        return 0.0
    return float(1.0 - cosine_distance(a, b))


SAMPLES = [
    {
        "id": "paris",
        "response": "The capital is Paris",
        "reference": "Paris is France's capital",
        "retrieved_contexts": [
            "Paris is the capital of France. It has many museums.",
            "Berlin is the capital of Germany.",
            "",
        ],
    },
    {
        "id": "water",
        "response": "Water boils at 100 degrees.",
        "references": ["At sea level water boils at 100 C.", "Water boils at 212 F."],
        "retrieved_contexts": ["Water boils at 100 degrees Celsius at sea level."],
    },
    {"id": "no-reference", "response": "anything", "retrieved_contexts": ["text"]},
]


def test_semantic_similarity_is_scipys_cosine_best_over_references(embedder: Any, vec: Any) -> None:
    report = evaluate_rag(SAMPLES, metrics=[SemanticSimilarity(embedder)], embed_cache=None)
    for raw in SAMPLES[:2]:
        sample = RagSample.model_validate(raw)
        refs = sample.all_references()
        expected = max(scipy_cos(vec(sample.response), vec(r)) for r in refs)
        assert report.per_sample[sample.id]["semantic_similarity"] == pytest.approx(expected)
    assert report.per_sample["no-reference"]["semantic_similarity"] is None
    assert report.coverage["semantic_similarity"] == 2
    values = [report.per_sample[s]["semantic_similarity"] for s in ("paris", "water")]
    assert report.metrics["semantic_similarity"] == pytest.approx(np.mean(values))


@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.9])
def test_a_threshold_turns_the_cosine_into_one_or_zero_inclusively(
    embedder: Any, vec: Any, threshold: float
) -> None:
    metric = SemanticSimilarity(embedder, threshold=threshold)
    report = evaluate_rag(SAMPLES[:1], metrics=[metric], embed_cache=None)
    cos = scipy_cos(vec(SAMPLES[0]["response"]), vec(SAMPLES[0]["reference"]))
    assert report.per_sample["paris"]["semantic_similarity"] == (1.0 if cos >= threshold else 0.0)
    assert report.details["paris"]["semantic_similarity"]["cosine"] == pytest.approx(cos)


def test_a_threshold_equal_to_the_cosine_passes() -> None:
    # the same vector for every text: the cosine is exactly 1.0
    same = FunctionEmbedder(lambda texts: [[1.0, 2.0]] * len(texts), model="same")
    score = SemanticSimilarity(same, threshold=1.0).score(RagSample(response="a", reference="b"))
    assert score == 1.0


def expected_recall(sample: dict[str, Any], vec: Any, threshold: float) -> float:
    refs = RagSample.model_validate(sample).all_references()
    wanted = [s for r in refs for s in (extract_claims(r) or [r.strip()])]
    found = [s for c in sample["retrieved_contexts"] if c.strip() for s in extract_claims(c)]
    hits = sum(max(scipy_cos(vec(w), vec(f)) for f in found) >= threshold for w in wanted)
    return hits / len(wanted)


def expected_precision(sample: dict[str, Any], vec: Any, threshold: float) -> float:
    targets = [*RagSample.model_validate(sample).all_references(), sample["response"]]
    contexts = sample["retrieved_contexts"]
    hits = sum(
        c.strip() != "" and max(scipy_cos(vec(c), vec(t)) for t in targets) >= threshold
        for c in contexts
    )
    return hits / len(contexts)


@pytest.mark.parametrize("threshold", [0.2, 0.5, 0.8])
def test_context_recall_and_precision_follow_their_definitions(
    embedder: Any, vec: Any, threshold: float
) -> None:
    metrics = [
        SemanticContextRecall(embedder, threshold=threshold),
        SemanticContextPrecision(embedder, threshold=threshold),
    ]
    report = evaluate_rag(SAMPLES, metrics=metrics, embed_cache=None)
    for sample in SAMPLES[:2]:
        row = report.per_sample[str(sample["id"])]
        assert row["semantic_context_recall"] == pytest.approx(
            expected_recall(sample, vec, threshold)
        )
        assert row["semantic_context_precision"] == pytest.approx(
            expected_precision(sample, vec, threshold)
        )
    row = report.per_sample["no-reference"]
    assert row["semantic_context_recall"] is None  # needs a reference
    # precision needs a reference *or* an answer: the answer is enough
    assert row["semantic_context_precision"] == pytest.approx(
        expected_precision({**SAMPLES[2], "references": []}, vec, threshold)
    )


def test_context_metrics_default_to_the_documented_threshold() -> None:
    from ragmeter.embed import DEFAULT_MATCH_THRESHOLD

    assert SemanticContextRecall().threshold == DEFAULT_MATCH_THRESHOLD == 0.8
    assert SemanticContextPrecision().threshold == DEFAULT_MATCH_THRESHOLD
    assert SemanticSimilarity().threshold is None
    with pytest.raises(InvalidInputError, match="semantic_context_recall needs a threshold"):
        SemanticContextRecall(threshold=None)


VOCAB = ["cats", "sleep", "dogs", "bark", "birds", "fly", "the", "sun"]


def one_hot_words(texts: list[str]) -> list[list[float]]:
    return [[float(w in t.lower().split()) for w in VOCAB] for t in texts]


WORDS = FunctionEmbedder(one_hot_words, model="one-hot-words")


@given(
    st.lists(st.sampled_from(["Cats sleep.", "Dogs bark.", "Birds fly."]), min_size=1),
    st.lists(st.sampled_from(["Cats sleep.", "Dogs bark. The sun.", "", "zzz"]), min_size=1),
    st.floats(min_value=-1.0, max_value=1.0),
)
@settings(max_examples=60, deadline=None)
def test_recall_and_precision_are_shares_of_their_units(
    reference: list[str], contexts: list[str], threshold: float
) -> None:
    sample = {
        "id": "s",
        "response": "",
        "reference": " ".join(reference),
        "retrieved_contexts": contexts,
    }
    metrics = [
        SemanticContextRecall(WORDS, threshold=threshold),
        SemanticContextPrecision(WORDS, threshold=threshold),
    ]
    run = run_embeddings([RagSample.model_validate(sample)], metrics)
    recall = run.scores["s"]["semantic_context_recall"]
    precision = run.scores["s"]["semantic_context_precision"]
    assert recall is not None and precision is not None
    wanted = list(dict.fromkeys(extract_claims(sample["reference"])))
    assert recall * len(wanted) == pytest.approx(round(recall * len(wanted)))
    assert precision * len(contexts) == pytest.approx(round(precision * len(contexts)))
    if not any(c.strip() for c in contexts):
        assert recall == 0.0 and precision == 0.0
        assert run.notes["s"]["semantic_context_recall"] == ["no context has text (scored 0.0)"]
    if threshold <= -1.0:
        # every cosine reaches -1: each unit with text matches
        assert precision == sum(bool(c.strip()) for c in contexts) / len(contexts)


def test_an_empty_answer_scores_zero_with_a_note_and_is_not_embedded(embedder: Any) -> None:
    samples = [{"id": "e", "response": "  ", "reference": "Paris"}]
    report = evaluate_rag(samples, metrics=[SemanticSimilarity(embedder)], embed_cache=None)
    assert report.per_sample["e"]["semantic_similarity"] == 0.0
    assert report.coverage["semantic_similarity"] == 1
    assert report.details["e"]["semantic_similarity"]["notes"] == [
        "empty answer (scored 0.0, not embedded)"
    ]
    assert report.extra["embed_notes"] == {
        "semantic_similarity: empty answer (scored 0.0, not embedded)": 1
    }
    assert "  " not in embedder.texts and embedder.texts == ["Paris"]


def test_a_zero_vector_scores_zero_with_a_note() -> None:
    zero_for_x = FunctionEmbedder(
        lambda ts: [[0.0, 0.0] if t == "x" else [1.0, 1.0] for t in ts], model="zero-x"
    )
    samples = [{"id": "z", "response": "x", "reference": "y"}]
    report = evaluate_rag(samples, metrics=[SemanticSimilarity(zero_for_x)], embed_cache=None)
    assert report.per_sample["z"]["semantic_similarity"] == 0.0
    assert report.details["z"]["semantic_similarity"]["notes"] == [
        "zero vector (its cosine is 0.0)"
    ]
    assert any("zero vector" in w for w in report.warnings)


@pytest.mark.parametrize(
    ("vectors", "match"),
    [
        (lambda ts: [[1.0, float("nan")] for _ in ts], "NaN or infinite value .* sample 'q1'"),
        (lambda ts: [[1.0] * (1 + len(t) % 2) for t in ts], "vector of length .* sample 'q1'"),
        (lambda ts: [[1.0, 2.0]] * (len(ts) + 1), "returned 3 vectors for a batch of 2 texts"),
        (lambda ts: [[] for _ in ts], "an empty vector"),
    ],
)
def test_vectors_that_cannot_be_trusted_are_a_clear_error_naming_model_and_sample(
    vectors: Any, match: str
) -> None:
    bad = FunctionEmbedder(vectors, model="broken-model")
    samples = [{"id": "q1", "response": "ab", "reference": "abc"}]
    with pytest.raises(EmbedderOutputError, match="embedding model 'broken-model' .*" + match):
        evaluate_rag(samples, metrics=[SemanticSimilarity(bad)], embed_cache=None)


def test_a_metric_no_sample_can_be_scored_on_is_refused_naming_what_it_needs(
    embedder: Any,
) -> None:
    with pytest.raises(
        InvalidInputError,
        match="semantic_context_recall needs a non-blank "
        "reference and retrieved_contexts on a sample; none of the 1 samples",
    ):
        evaluate_rag(
            [{"response": "a", "reference": "b"}],
            metrics=[SemanticContextRecall(embedder)],
            embed_cache=None,
        )
    assert embedder.calls == 0


def test_an_object_that_is_not_an_embedder_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"needs an embedder with \.identity"):
        SemanticSimilarity(lambda texts: texts)  # type: ignore[arg-type]


def test_score_on_one_sample_equals_the_batched_run(embedder: Any) -> None:
    metric = SemanticSimilarity(embedder)
    sample = RagSample.model_validate(SAMPLES[1])
    alone = metric.score(sample)
    report = evaluate_rag(SAMPLES, metrics=[metric], embed_cache=None)
    assert alone == report.per_sample["water"]["semantic_similarity"]
    assert metric.score(RagSample(response="a")) is None
