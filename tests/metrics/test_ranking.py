"""The ranking primitives: seed examples, hand-computed cases, conventions, and oracles.

Oracles: pytrec_eval (trec_eval) per measure on generated single-query cases, and the seed
package ``ef.evaluation`` (whose primitives seed 000 specifies) where its conventions agree
(no negative grades: ef counts a negative grade as a negative gain, trec_eval ignores it).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ef.evaluation as ef
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.ranking import (
    average_precision,
    dcg_at_k,
    hit_rate_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
)

# --------------------------------------------------------------------------- seed 000 examples


def test_seed_000_doctest_examples_hold_verbatim() -> None:
    assert round(dcg_at_k(["d1", "x", "d2"], {"d1": 1.0, "d2": 1.0}, 3), 4) == 1.5
    assert ndcg_at_k(["d1", "d2"], {"d1": 1.0, "d2": 1.0}, 2) == 1.0
    assert round(ndcg_at_k(["x", "d1"], {"d1": 1.0}, 2), 4) == 0.6309
    assert recall_at_k(["d1", "x", "d2"], {"d1": 1.0, "d2": 1.0}, 2) == 0.5
    assert recall_at_k(["d1", "x", "d2"], {"d1": 1.0, "d2": 1.0}, 3) == 1.0
    assert precision_at_k(["d1", "x", "d2"], {"d1": 1.0, "d2": 1.0}, 2) == 0.5
    assert reciprocal_rank(["x", "d1", "d2"], {"d1": 1.0}) == 0.5
    assert reciprocal_rank(["x", "d1"], {"d1": 1.0}, k=1) == 0.0
    assert average_precision(["d1", "x", "d2"], {"d1": 1.0, "d2": 1.0}) == 0.8333333333333333


# --------------------------------------------------------------------------- hand-computed

RANKED = ["a", "x", "b", "y", "c"]
GRADED = {"a": 1, "b": 3, "c": 2, "z": 1, "n": 0}  # z relevant but never retrieved


def test_dcg_is_linear_gain_over_log2_rank_plus_one() -> None:
    want = 1 / math.log2(2) + 3 / math.log2(4) + 2 / math.log2(6)
    assert dcg_at_k(RANKED, GRADED, 5) == pytest.approx(want, abs=1e-15)
    assert dcg_at_k(RANKED, GRADED, 2) == pytest.approx(1.0)


def test_ndcg_ideal_uses_every_judged_positive_grade_cut_at_k() -> None:
    dcg3 = 1 + 3 / 2
    ideal3 = 3 + 2 / math.log2(3) + 1 / 2  # grades 3, 2, 1 (of 3, 2, 1, 1)
    assert ndcg_at_k(RANKED, GRADED, 3) == pytest.approx(dcg3 / ideal3, abs=1e-15)
    ideal10 = 3 + 2 / math.log2(3) + 1 / 2 + 1 / math.log2(5)
    dcg10 = 1 + 3 / 2 + 2 / math.log2(6)
    assert ndcg_at_k(RANKED, GRADED, 10) == pytest.approx(dcg10 / ideal10, abs=1e-15)


def test_recall_precision_hit_rate_by_hand() -> None:
    assert recall_at_k(RANKED, GRADED, 3) == 2 / 4
    assert recall_at_k(RANKED, GRADED, 5) == 3 / 4
    assert precision_at_k(RANKED, GRADED, 3) == 2 / 3
    assert hit_rate_at_k(RANKED, GRADED, 1) == 1.0
    assert hit_rate_at_k(["x", "y", "a"], GRADED, 2) == 0.0


def test_average_precision_divides_by_all_relevant_docs() -> None:
    # relevant at ranks 1, 3, 5; four relevant docs in all
    assert average_precision(RANKED, GRADED) == pytest.approx((1 / 1 + 2 / 3 + 3 / 5) / 4)
    assert average_precision(RANKED, GRADED, k=3) == pytest.approx((1 / 1 + 2 / 3) / 4)
    many = {f"d{i}": 1 for i in range(20)}
    perfect = [f"d{i}" for i in range(20)]
    assert average_precision(perfect, many, k=5) == 0.25  # caps at 5/20


def test_precision_divides_by_k_even_when_fewer_docs_come_back() -> None:
    assert precision_at_k(["d1"], {"d1": 1.0}, 10) == 0.1
    assert precision_at_k([], {"d1": 1.0}, 10) == 0.0


def test_reciprocal_rank_uncut_looks_at_the_whole_ranking() -> None:
    ranked = [f"x{i}" for i in range(999)] + ["d"]
    assert reciprocal_rank(ranked, {"d": 1}) == 1 / 1000
    assert reciprocal_rank(ranked, {"d": 1}, k=999) == 0.0


# --------------------------------------------------------------------------- conventions

ALL_CUT: dict[str, Callable[..., float]] = {
    "dcg": dcg_at_k,
    "ndcg": ndcg_at_k,
    "recall": recall_at_k,
    "precision": precision_at_k,
    "hit_rate": hit_rate_at_k,
}
ALL_OPTIONAL_K: dict[str, Callable[..., float]] = {
    "rr": reciprocal_rank,
    "ap": average_precision,
}


@pytest.mark.parametrize("fn", [*ALL_CUT.values(), *ALL_OPTIONAL_K.values()])
def test_empty_judgements_and_grade_zero_are_the_same_thing(fn: Callable[..., float]) -> None:
    ranked = ["c1", "c2"]
    assert fn(ranked, {}, 2) == fn(ranked, {"c1": 0}, 2) == fn(ranked, {"c1": -1}, 2) == 0.0


@pytest.mark.parametrize("fn", [*ALL_CUT.values(), *ALL_OPTIONAL_K.values()])
def test_unjudged_and_negative_docs_gain_nothing(fn: Callable[..., float]) -> None:
    rel = {"d": 2}
    assert (
        fn(["x", "d"], rel, 2)
        == fn(["n", "d"], {**rel, "n": -3}, 2)
        == fn(["n", "d"], {**rel, "n": 0}, 2)
    )


@pytest.mark.parametrize("fn", [*ALL_CUT.values(), *ALL_OPTIONAL_K.values()])
def test_a_repeated_doc_counts_once_at_its_first_rank(fn: Callable[..., float]) -> None:
    """Seed 004: ``c1, c1, x`` at k=3 scores exactly what ``c1, y, x`` scores."""
    rel = {"c1": 2, "c2": 2}
    assert fn(["c1", "c1", "x"], rel, 3) == fn(["c1", "y", "x"], rel, 3)
    assert fn(["c1", "c1", "c1", "c2"], rel, 4) == fn(["c1", "y", "z", "c2"], rel, 4)


def test_relevance_level_raises_the_threshold_like_trec_eval_l() -> None:
    rel = {"a": 1, "b": 2, "c": 3}
    ranked = ["a", "b", "c"]
    assert recall_at_k(ranked, rel, 1, relevance_level=2) == 0.0
    assert recall_at_k(ranked, rel, 2, relevance_level=2) == 0.5
    assert precision_at_k(ranked, rel, 3, relevance_level=3) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, rel, relevance_level=3) == pytest.approx(1 / 3)
    assert average_precision(ranked, rel, relevance_level=2) == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert hit_rate_at_k(ranked, rel, 2, relevance_level=3) == 0.0
    assert recall_at_k(ranked, rel, 1, relevance_level=4) == 0.0  # nothing relevant at all


@pytest.mark.parametrize("k", [0, -1, 1.5, "3", True, None])
@pytest.mark.parametrize("fn", list(ALL_CUT.values()))
def test_k_must_be_an_int_of_at_least_one(fn: Callable[..., float], k: object) -> None:
    with pytest.raises(
        InvalidInputError, match=r"k must be an int >= 1, got .*not a smaller top-k"
    ):
        fn(["a"], {"a": 1}, k)


@pytest.mark.parametrize("k", [0, -2, 2.0])
@pytest.mark.parametrize("fn", list(ALL_OPTIONAL_K.values()))
def test_optional_k_is_checked_when_given(fn: Callable[..., float], k: object) -> None:
    with pytest.raises(InvalidInputError, match=r"k must be an int >= 1"):
        fn(["a"], {"a": 1}, k)
    assert isinstance(InvalidInputError("x"), ValueError)


# --------------------------------------------------------------------------- oracles

DOCS = [f"d{i}" for i in range(12)]
rankings = st.lists(st.sampled_from(DOCS), unique=True, max_size=12)
graded = st.dictionaries(st.sampled_from(DOCS), st.integers(min_value=-1, max_value=4), max_size=10)
cutoffs = st.integers(min_value=1, max_value=14)
ORACLE_MEASURES = {
    "ndcg_cut.1,2,3,4,5,6,7,8,9,10,11,12,13,14",
    "P.1,2,3,4,5,6,7,8,9,10,11,12,13,14",
    "recall.1,2,3,4,5,6,7,8,9,10,11,12,13,14",
    "map_cut.1,2,3,4,5,6,7,8,9,10,11,12,13,14",
    "success.1,2,3,4,5,6,7,8,9,10,11,12,13,14",
    "map",
    "recip_rank",
}


def trec_eval_one(ranked: list[str], relevant: dict[str, int], level: int) -> dict[str, float]:
    evaluator = pytrec_eval.RelevanceEvaluator(
        {"q": relevant}, ORACLE_MEASURES, relevance_level=level
    )
    scores = {d: float(len(ranked) - i) for i, d in enumerate(ranked)}  # strictly decreasing
    return evaluator.evaluate({"q": scores})["q"]


@settings(max_examples=300, deadline=None)
@given(ranked=rankings, relevant=graded, k=cutoffs, level=st.sampled_from([1, 2, 3]))
def test_primitives_match_pytrec_eval(
    ranked: list[str], relevant: dict[str, int], k: int, level: int
) -> None:
    if not relevant:
        return  # pytrec_eval does not evaluate a query with no judgements
    want = trec_eval_one(ranked, relevant, level)
    lvl = {"relevance_level": level}
    assert ndcg_at_k(ranked, relevant, k) == pytest.approx(want[f"ndcg_cut_{k}"], abs=1e-12)
    assert precision_at_k(ranked, relevant, k, **lvl) == pytest.approx(want[f"P_{k}"], abs=1e-12)
    assert hit_rate_at_k(ranked, relevant, k, **lvl) == want[f"success_{k}"]
    assert reciprocal_rank(ranked, relevant, **lvl) == pytest.approx(want["recip_rank"], abs=1e-12)
    # a query with nothing relevant at this level scores 0 in both
    assert recall_at_k(ranked, relevant, k, **lvl) == pytest.approx(want[f"recall_{k}"], abs=1e-12)
    assert average_precision(ranked, relevant, **lvl) == pytest.approx(want["map"], abs=1e-12)
    assert average_precision(ranked, relevant, k, **lvl) == pytest.approx(
        want[f"map_cut_{k}"], abs=1e-12
    )


@settings(max_examples=300, deadline=None)
@given(
    ranked=rankings,
    relevant=st.dictionaries(
        st.sampled_from(DOCS), st.integers(min_value=0, max_value=3), max_size=10
    ),
    k=cutoffs,
)
def test_primitives_match_seed_000_ef(ranked: list[str], relevant: dict[str, int], k: int) -> None:
    rel = {d: float(g) for d, g in relevant.items()}
    assert dcg_at_k(ranked, rel, k) == pytest.approx(ef.dcg_at_k(ranked, rel, k), abs=1e-12)
    assert ndcg_at_k(ranked, rel, k) == pytest.approx(ef.ndcg_at_k(ranked, rel, k), abs=1e-12)
    assert recall_at_k(ranked, rel, k) == pytest.approx(ef.recall_at_k(ranked, rel, k), abs=1e-12)
    assert precision_at_k(ranked, rel, k) == pytest.approx(
        ef.precision_at_k(ranked, rel, k), abs=1e-12
    )
    assert reciprocal_rank(ranked, rel) == ef.reciprocal_rank(ranked, rel)
    assert reciprocal_rank(ranked, rel, k) == ef.reciprocal_rank(ranked, rel, k)
    assert average_precision(ranked, rel) == pytest.approx(
        ef.average_precision(ranked, rel), abs=1e-12
    )
    assert average_precision(ranked, rel, k) == pytest.approx(
        ef.average_precision(ranked, rel, k), abs=1e-12
    )


@settings(max_examples=200, deadline=None)
@given(ranked=st.lists(st.sampled_from(DOCS), max_size=16), relevant=graded, k=cutoffs)
def test_repeats_score_like_fresh_unjudged_docs(
    ranked: list[str], relevant: dict[str, int], k: int
) -> None:
    """Every later copy of a doc is a wasted slot: same score as an unjudged filler there."""
    seen: set[str] = set()
    filled = []
    for i, d in enumerate(ranked):
        filled.append(d if d not in seen else f"filler{i}")
        seen.add(d)
    for fn in ALL_CUT.values():
        assert fn(ranked, relevant, k) == fn(filled, relevant, k)
    for fn in ALL_OPTIONAL_K.values():
        assert fn(ranked, relevant) == fn(filled, relevant)
        assert fn(ranked, relevant, k) == fn(filled, relevant, k)


@settings(max_examples=200, deadline=None)
@given(ranked=rankings, relevant=graded, k=cutoffs)
def test_ranges(ranked: list[str], relevant: dict[str, int], k: int) -> None:
    for name, fn in ALL_CUT.items():
        value = fn(ranked, relevant, k)
        assert value >= 0.0
        if name != "dcg":
            assert value <= 1.0 + 1e-12
    assert recall_at_k(ranked, relevant, k) <= recall_at_k(ranked, relevant, k + 1)
    assert hit_rate_at_k(ranked, relevant, k) <= hit_rate_at_k(ranked, relevant, k + 1)
    assert average_precision(ranked, relevant, k) <= average_precision(ranked, relevant) + 1e-15
