"""The agreement statistics fill_holes reports, against scikit-learn and SciPy on generated
grades and scores; the stratified sample; the strict grade parser."""

from __future__ import annotations

import math
import warnings
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion

from ragmeter.errors import InvalidInputError, VerdictError
from ragmeter.judge import parse_grade
from ragmeter.stats import cohen_kappa, confusion_matrix, kendall_tau, stratified_sample

_grades = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=60)


def _same(ours: float, theirs: float) -> bool:
    if math.isnan(theirs):
        return math.isnan(ours)
    return ours == pytest.approx(theirs, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(_grades, st.sampled_from([None, "linear", "quadratic"]))
def test_kappa_is_scikit_learns(pairs: list[tuple[int, int]], weights: str | None) -> None:
    first = [a for a, _ in pairs]
    second = [b for _, b in pairs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns when kappa is undefined
        theirs = float(cohen_kappa_score(first, second, weights=weights))
    assert _same(cohen_kappa(first, second, weights=weights), theirs)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(_grades)
def test_confusion_matrix_is_scikit_learns(pairs: list[tuple[int, int]]) -> None:
    first = [a for a, _ in pairs]
    second = [b for _, b in pairs]
    labels, matrix = confusion_matrix(first, second)
    fixed, full = confusion_matrix(first, second, labels=[0, 1, 2, 3, 4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns when only one label occurs
        assert labels == sorted(set(first) | set(second))
        assert matrix == sk_confusion(first, second, labels=labels).tolist()
        assert full == sk_confusion(first, second, labels=fixed).tolist()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]), st.floats(0, 1)),
        min_size=2,
        max_size=25,
    )
)
def test_kendall_tau_is_scipys_tau_b(pairs: list[tuple[float, float]]) -> None:
    x = [a for a, _ in pairs]
    y = [b for _, b in pairs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy warns on a constant input
        theirs = float(kendalltau(x, y).statistic)
    assert _same(kendall_tau(x, y), theirs)


def test_undefined_statistics_are_nan_and_bad_arguments_refused() -> None:
    assert math.isnan(cohen_kappa([2, 2, 2], [2, 2, 2], weights="linear"))
    assert math.isnan(kendall_tau([1.0], [2.0])) and math.isnan(kendall_tau([1, 1], [1, 2]))
    with pytest.raises(InvalidInputError, match="same length, got 2 and 1"):
        cohen_kappa([1, 2], [1])
    with pytest.raises(InvalidInputError, match="weights must be None, 'linear' or 'quadratic'"):
        cohen_kappa([1], [1], weights="cubic")  # type: ignore[arg-type]


def test_stratified_sample_spreads_over_grades_and_is_seeded() -> None:
    pool = [(f"q{i % 7}", f"d{i}", g) for i, g in enumerate([0] * 50 + [1] * 30 + [2] * 4)]
    sample = stratified_sample(pool, 30, seed=1)
    assert Counter(g for _, _, g in sample) == {0: 13, 1: 13, 2: 4}
    assert sample == stratified_sample(list(reversed(pool)), 30, seed=1)
    assert sample != stratified_sample(pool, 30, seed=2)
    assert set(sample) <= set(pool) and len(set(sample)) == 30
    assert stratified_sample(pool, 1000) == sorted(pool)
    assert stratified_sample(pool, 0) == [] and stratified_sample([], 5) == []


@pytest.mark.parametrize(
    ("reply", "grade"),
    [
        ('{"grade": 3}', 3),
        ('{"grade": 0, "reason": "off topic"}', 0),
        ('```json\n{"grade": 2}\n```', 2),
        ('{"score": 1}', 1),
        (" 2 ", 2),
        ("2.0", 2),
        ("##final score: 3", 3),
        ("Final score: 0", 0),
    ],
)
def test_parse_grade_accepts(reply: str, grade: int) -> None:
    assert parse_grade(reply) == grade


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("", "not a JSON grade"),
        ("Relevant.", "not a JSON grade"),
        ('{"relevance": 2}', "no 'grade' field"),
        ('{"grade": "2"}', "grade is not a number"),
        ('{"grade": true}', "grade is not a number"),
        ("1.5", "is not one of 0, 1, 2, 3"),
        ("4", "is not one of 0, 1, 2, 3"),
        ("-1", "is not one of 0, 1, 2, 3"),
        ("##final score: high", "not a JSON grade"),
    ],
)
def test_parse_grade_refuses(reply: str, why: str) -> None:
    with pytest.raises(VerdictError, match=why):
        parse_grade(reply)
