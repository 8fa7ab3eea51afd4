"""recall_against_exact and mean_rank_of_first_relevant: seed 004 numbers, contextgrid parity."""

from __future__ import annotations

import contextgrid as cg
import pytest
from contextgrid.index.base import Scored as CgScored
from contextgrid.score.metrics import mean_rank_of_first_relevant as cg_mean_rank
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.ann import Scored, mean_rank_of_first_relevant, recall_against_exact

EXACT = [Scored("c1", 0.9), Scored("c2", 0.8), Scored("c3", 0.7)]
APPROX = [Scored("c1", 0.9), Scored("c9", 0.75), Scored("c3", 0.7)]


def test_seed_examples() -> None:
    assert recall_against_exact(APPROX, EXACT, k=3) == 2 / 3
    assert recall_against_exact(APPROX, EXACT, k=1) == 1.0
    # documented caution: nothing to compare against reads as perfect recall
    assert recall_against_exact(APPROX, [], k=3) == 1.0
    assert recall_against_exact([], [], k=3) == 1.0


def test_recall_against_exact_edges() -> None:
    assert recall_against_exact([], EXACT, k=3) == 0.0
    # only ids matter, not scores; k larger than either list uses what is there
    assert recall_against_exact([Scored("c3", 0.1), Scored("c2", 0.0)], EXACT[:2], k=10) == 0.5
    # approximate results past k do not count
    assert recall_against_exact([Scored("x", 1.0), Scored("c1", 0.9)], EXACT, k=1) == 0.0


ids = st.sampled_from(["a", "b", "c", "d", "e"])
results = st.lists(st.builds(Scored, ids, st.floats(0, 1)), max_size=6)


@settings(max_examples=200, deadline=None)
@given(results, results, st.integers(1, 7))
def test_recall_against_exact_matches_contextgrid(
    approx: list[Scored], exact: list[Scored], k: int
) -> None:
    ours = recall_against_exact(approx, exact, k)
    theirs = cg.recall_against_exact(
        [CgScored(r.id, r.score) for r in approx], [CgScored(r.id, r.score) for r in exact], k=k
    )
    assert ours == theirs
    assert 0.0 <= ours <= 1.0


def test_mean_rank_of_first_relevant() -> None:
    qrels = {"q1": {"c1": 2, "c2": 1}, "q2": {"c4": 2}, "q3": {"c7": 1}, "q4": {"c8": 0}, "q5": {}}
    run = {"q1": ["c3", "c1"], "q2": ["c4"], "q3": ["c5", "c6"], "q4": ["c8"], "q9": ["c1"]}
    assert mean_rank_of_first_relevant(qrels, run) == (1.5, 1)
    assert mean_rank_of_first_relevant(qrels, run, k=1) == (1.0, 2)
    # a judged query missing from the run is a miss
    assert mean_rank_of_first_relevant({"q1": {"c1": 1}}, {}) == (None, 1)
    assert mean_rank_of_first_relevant({}, run) == (None, 0)
    # a repeated id is found at its first position
    assert mean_rank_of_first_relevant({"q": {"b": 1}}, {"q": ["a", "b", "b"]}) == (2.0, 0)


qrels_rows = st.dictionaries(ids, st.integers(0, 2), max_size=4)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["q1", "q2", "q3"]), qrels_rows, max_size=3),
    st.dictionaries(st.sampled_from(["q1", "q2", "q4"]), st.lists(ids, max_size=5), max_size=3),
    st.one_of(st.none(), st.integers(1, 6)),
)
def test_mean_rank_matches_contextgrid(
    qrels: dict[str, dict[str, int]], run: dict[str, list[str]], k: int | None
) -> None:
    assert mean_rank_of_first_relevant(qrels, run, k=k) == cg_mean_rank(qrels, run, k=k)


def test_validation_errors() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidInputError, match=r"k must be an int >= 1"):
            recall_against_exact(APPROX, EXACT, k=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"k must be an int >= 1, got 0"):
        mean_rank_of_first_relevant({}, {}, k=0)
    with pytest.raises(InvalidInputError, match=r"exact\[0\] must be a Scored, got 'c1'"):
        recall_against_exact(APPROX, ["c1"], k=1)  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match=r"approximate must be a sequence of Scored"):
        recall_against_exact("c1", EXACT, k=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"Scored.id must be a str"):
        Scored(1, 0.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"Scored\('c1'\): score must be a number"):
        Scored("c1", float("nan"))
    with pytest.raises(InvalidInputError, match=r"qrels\['q1'\] must be a mapping"):
        mean_rank_of_first_relevant({"q1": ["c1"]}, {})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match=r"run\['q1'\] must be a list of doc ids, not a"):
        mean_rank_of_first_relevant({"q1": {"c1": 1}}, {"q1": "c1"})
    with pytest.raises(InvalidInputError, match=r"qrels must be a mapping, got list"):
        mean_rank_of_first_relevant([], {})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"run must be a mapping, got list"):
        mean_rank_of_first_relevant({}, [])  # type: ignore[arg-type]
