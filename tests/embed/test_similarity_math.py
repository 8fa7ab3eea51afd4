"""The cosine, best-match and threshold math of the embedding metrics, against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist
from scipy.spatial.distance import cosine as scipy_cosine_distance

from ragmeter.embed.similarity import (
    best_matches,
    check_threshold,
    cosine,
    passes,
    sentences,
)
from ragmeter.errors import InvalidInputError
from ragmeter.metrics.faithfulness import extract_claims

# magnitudes where scipy's own formula neither underflows nor overflows (the oracle's range)
finite = st.one_of(
    st.just(0.0),
    st.floats(min_value=1e-3, max_value=1e3),
    st.floats(min_value=-1e3, max_value=-1e-3),
)


def vectors(n: int) -> st.SearchStrategy[list[float]]:
    return st.lists(finite, min_size=n, max_size=n)


@given(st.integers(1, 12).flatmap(lambda n: st.tuples(vectors(n), vectors(n))))
@settings(max_examples=300, deadline=None)
def test_cosine_is_one_minus_scipy_cosine_distance(pair: tuple[list[float], list[float]]) -> None:
    a, b = pair
    ours = cosine(a, b)
    assert -1.0 <= ours <= 1.0
    if not any(a) or not any(b):
        assert ours == 0.0  # defined for a zero vector (scipy gives NaN)
        return
    expected = 1.0 - scipy_cosine_distance(a, b)
    assert ours == pytest.approx(expected, abs=1e-9)


@given(st.integers(1, 8).flatmap(lambda n: st.tuples(vectors(n), vectors(n))))
@settings(max_examples=200, deadline=None)
def test_cosine_is_the_dot_of_normalised_vectors_and_symmetric(
    pair: tuple[list[float], list[float]],
) -> None:
    a, b = (np.asarray(v) for v in pair)
    if not a.any() or not b.any():
        return
    normalised = float(np.dot(a / np.linalg.norm(a), b / np.linalg.norm(b)))
    assert cosine(a, b) == pytest.approx(normalised, abs=1e-9)
    assert cosine(a, b) == pytest.approx(cosine(b, a), abs=1e-12)


@given(
    st.integers(1, 6).flatmap(
        lambda d: st.tuples(
            st.lists(vectors(d), min_size=1, max_size=6),
            st.lists(vectors(d), min_size=1, max_size=6),
        )
    )
)
@settings(max_examples=200, deadline=None)
def test_best_matches_is_the_row_max_of_scipy_cdist(
    pair: tuple[list[list[float]], list[list[float]]],
) -> None:
    rows, cols = (np.asarray(m, dtype=np.float64) for m in pair)
    ours = best_matches(rows, cols)
    with np.errstate(invalid="ignore", divide="ignore"):
        sims = 1.0 - cdist(rows, cols, metric="cosine")
    zero_row = ~rows.any(axis=1)
    zero_col = ~cols.any(axis=1)
    sims[zero_row, :] = 0.0  # our convention: a cosine with a zero vector is 0
    sims[:, zero_col] = 0.0
    expected = np.clip(sims, -1, 1).max(axis=1)
    assert ours == pytest.approx(expected.tolist(), abs=1e-9)


@given(
    st.integers(1, 8).flatmap(lambda n: st.tuples(vectors(n), vectors(n))),
    st.sampled_from([1e-300, 1e-150, 1e150, 1e300]),
)
@settings(max_examples=200, deadline=None)
def test_cosine_does_not_change_when_a_vector_is_scaled_by_tiny_or_huge_factors(
    pair: tuple[list[float], list[float]], factor: float
) -> None:
    a, b = pair
    scaled = [x * factor for x in a]
    if any(scaled) != any(a):  # the factor underflowed every component to 0
        return
    assert cosine(scaled, b) == pytest.approx(cosine(a, b), abs=1e-9)
    assert best_matches(np.asarray([scaled]), np.asarray([b])) == pytest.approx(
        [cosine(a, b)], abs=1e-9
    )


def test_best_matches_without_columns_is_zero_for_each_row() -> None:
    assert best_matches(np.ones((2, 3)), np.zeros((0, 3))) == [0.0, 0.0]


def test_threshold_is_inclusive_as_ragas_and_llamaindex_use_it() -> None:
    assert passes(0.8, 0.8) and not passes(math.nextafter(0.8, 0), 0.8)


@pytest.mark.parametrize("bad", [1.5, -1.01, "0.5", True, float("nan")])
def test_a_threshold_outside_minus_one_one_is_refused(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="threshold must be a cosine in"):
        check_threshold(bad)


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_sentences_are_the_faithfulness_claims_or_the_whole_text(text: str) -> None:
    got = sentences(text)
    if not text.strip():
        assert got == []
    else:
        assert got == (extract_claims(text.strip()) or [text.strip()])
