"""The fast paths of the embedding runner give what the one-pair paths give: the vectorised
cosines (against scipy and :func:`~ragmeter.embed.similarity.cosine`), a whole run's
``semantic_similarity`` in one pass (against the per-sample ``compute``), texts sent in order
of length, and an embedder's own ``max_concurrency``."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist

from ragmeter.embed import EmbedOptions, SemanticSimilarity, run_embeddings
from ragmeter.embed.protocol import as_floats, max_concurrency
from ragmeter.embed.runner import text_length
from ragmeter.embed.similarity import cosine, cosines
from ragmeter.schema import RagSample

from .conftest import CountingEmbedder, bow

# magnitudes where scipy's own formula neither underflows nor overflows (the oracle's range)
component = st.one_of(
    st.just(0.0),
    st.floats(min_value=1e-3, max_value=1e3),
    st.floats(min_value=-1e3, max_value=-1e-3),
)


@st.composite
def matrices_and_pairs(draw: Any) -> tuple[list[list[float]], list[int], list[int]]:
    dim, rows = draw(st.integers(1, 8)), draw(st.integers(1, 6))
    matrix = draw(st.lists(st.lists(component, min_size=dim, max_size=dim), min_size=rows))
    index = st.integers(0, len(matrix) - 1)
    pairs = draw(st.lists(st.tuples(index, index), max_size=20))
    return matrix, [a for a, _ in pairs], [b for _, b in pairs]


@given(matrices_and_pairs())
@settings(max_examples=300, deadline=None)
def test_cosines_of_many_pairs_are_scipys_and_the_one_pair_cosines(
    case: tuple[list[list[float]], list[int], list[int]],
) -> None:
    matrix, left, right = case
    got = cosines(np.asarray(matrix), left, right)
    assert len(got) == len(left)
    with np.errstate(all="ignore"):
        scipy = 1.0 - cdist(np.asarray(matrix), np.asarray(matrix), "cosine")
    for a, b, value in zip(left, right, got, strict=True):
        assert value == pytest.approx(cosine(matrix[a], matrix[b]), abs=1e-12)
        if any(matrix[a]) and any(matrix[b]):
            assert value == pytest.approx(scipy[a, b], abs=1e-9)
            if a == b:
                assert value == 1.0  # a vector's cosine with itself, exactly
        else:
            assert value == 0.0  # a zero vector (scipy gives NaN)


def test_cosines_over_more_pairs_than_one_pass_holds() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(50, 16))
    left, right = rng.integers(0, 50, 9000).tolist(), rng.integers(0, 50, 9000).tolist()
    expected = 1.0 - cdist(matrix, matrix, "cosine")[left, right]
    assert np.max(np.abs(np.asarray(cosines(matrix, left, right)) - expected)) < 1e-12


WORDS = ["paris", "capital", "france", "lyon", "river", "1887", "not", "big"]
text = st.lists(st.sampled_from(WORDS), max_size=5).map(" ".join)


@st.composite
def samples(draw: Any) -> list[RagSample]:
    out = []
    for i in range(draw(st.integers(1, 12))):
        refs = draw(st.lists(text.filter(str.strip), min_size=1, max_size=3))
        response = draw(st.one_of(text, st.just("   "), st.just("zero")))
        out.append(
            RagSample(id=f"q{i}", response=response, reference=refs[0], references=refs[1:] or None)
        )
    return out


def vectors_of(batch: list[RagSample]) -> dict[str, list[float]]:
    """bow vectors of every text; the text "zero" has a zero vector."""
    texts = {t for s in batch for t in SemanticSimilarity().texts(s)}
    return {t: [0.0] * len(bow(t)) if t == "zero" else bow(t) for t in texts}


@given(samples(), st.sampled_from([None, 0.0, 0.5, 1.0]))
@settings(max_examples=200, deadline=None)
def test_one_pass_over_all_samples_scores_as_each_sample_alone(
    batch: list[RagSample], threshold: float | None
) -> None:
    metric = SemanticSimilarity(threshold=threshold)
    vectors = vectors_of(batch)
    many = metric.compute_many(batch, vectors)
    assert len(many) == len(batch)
    for sample, (value, notes, detail) in zip(batch, many, strict=True):
        alone, alone_notes, alone_detail = metric.compute(sample, vectors)
        assert value == pytest.approx(alone, abs=1e-12)
        assert notes == alone_notes
        assert (detail is None) == (alone_detail is None)
        if detail is not None and alone_detail is not None:
            assert detail["cosine"] == pytest.approx(alone_detail["cosine"], abs=1e-12)
        if threshold is None and sample.response and sample.response.strip():
            refs = [r for r in sample.all_references() if r.strip()]
            m = np.asarray([vectors[sample.response]] + [vectors[r] for r in refs])
            if m[0].any() and m[1:].any(axis=1).all():
                best = 1.0 - cdist(m[:1], m[1:], "cosine").min()
                assert value == pytest.approx(best, abs=1e-9)  # scipy's, best reference


def test_texts_go_to_the_model_shortest_first() -> None:
    embedder = CountingEmbedder()
    batch = [
        RagSample(id=f"q{i}", response="word " * (i % 7 + 1), reference="ref " * (i % 5 + 2))
        for i in range(30)
    ]
    run_embeddings(batch, [SemanticSimilarity(embedder)], options=EmbedOptions(batch_size=3))
    sent = embedder.texts
    assert sorted(sent) == sorted({t for s in batch for t in SemanticSimilarity().texts(s)})
    assert [text_length(t) for t in sent] == sorted(text_length(t) for t in sent)


class OneAtATime(CountingEmbedder):
    """An embedder that takes one call at a time, and slow calls."""

    max_concurrency = 1


def test_an_embedder_that_takes_one_call_at_a_time_gets_one_and_waits_outside_the_timeout() -> None:
    embedder = OneAtATime(delay=0.05)
    batch = [RagSample(id=f"q{i}", response=f"answer {i}", reference="ref") for i in range(12)]
    run = run_embeddings(
        batch,
        [SemanticSimilarity(embedder)],
        options=EmbedOptions(batch_size=2, concurrency=4, timeout=0.2),
    )
    assert embedder.calls == 7 and embedder.max_in_flight == 1
    # 7 calls of 0.05 s one after another: the last waited 0.3 s, more than the timeout
    assert all(row["semantic_similarity"] is not None for row in run.scores.values())
    assert max_concurrency(embedder) == 1 and max_concurrency(CountingEmbedder()) is None


@pytest.mark.parametrize("bad", [0, True, 1.5, "1"])
def test_a_max_concurrency_that_is_no_positive_int_is_ignored(bad: Any) -> None:
    holder = type("E", (), {"max_concurrency": bad})()
    assert max_concurrency(holder) is None


def test_vectors_become_python_floats_whatever_the_framework_gave() -> None:
    f32 = np.asarray([[0.1, 0.2], [0.3, -0.4]], dtype=np.float32)
    got = as_floats(f32)
    assert got == [[float(x) for x in row] for row in f32]
    assert all(type(x) is float for row in got for x in row)
    assert as_floats([[1], (2, 3)]) == [[1.0], [2.0, 3.0]]  # ragged: the runner names it
    assert asyncio.run(_embed_f32(f32)) == got


async def _embed_f32(f32: Any) -> list[list[float]]:
    from ragmeter.embed import FunctionEmbedder

    return await FunctionEmbedder(lambda ts: f32[: len(ts)], model="f32").embed(["a", "b"])
