"""Every measure pytrec_eval supports, per query, on generated graded runs.

pytrec_eval wraps trec_eval 9's C code, so it is the oracle for per-query values. Runs have
tied scores (ties broken by doc id), unjudged docs, docs judged with negative grades
(in the pool, unjudged) and queries with no relevant doc; qrels have grades -1 to 4, and
``judged_only`` (``-J``) often empties a ranking. (pytrec_eval crashes on a run that maps a
query to an empty dict, so an empty ranking is compared with the same ranking emptied by
``-J``.) ``iprec_at_recall`` and ``11pt_avg`` are compared with ``legacy_recall_cutoffs``
(trec_eval 9's ``int(x * R + 0.9)``; trec_eval 10, whose output files the CLI tests check,
rounds). Every generated query keeps at least one judgement >= 0: on a query whose only
judgements are negative pytrec_eval reads state left over from the previous query (and can
loop forever), so it is no oracle there.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.metrics.trec import evaluate

pytrec_eval = pytest.importorskip("pytrec_eval")

MEASURES = sorted(set(pytrec_eval.supported_measures) - {"runid", "relstring"})
DOCS = [f"d{i}" for i in range(12)]


@st.composite
def collections(draw: st.DrawFn) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for qi in range(draw(st.integers(1, 4))):
        qid = f"q{qi}"
        judged = draw(st.dictionaries(st.sampled_from(DOCS), st.integers(-1, 4), min_size=1))
        if all(g < 0 for g in judged.values()):
            judged[next(iter(judged))] = 0
        qrels[qid] = judged
        pool = [*DOCS, "u1", "u2", "u3"]
        scores = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]) | st.floats(-5, 5, width=32)
        run[qid] = draw(st.dictionaries(st.sampled_from(pool), scores, min_size=1, max_size=15))
    return qrels, run


def _same(got: float | str, want: float) -> bool:
    if isinstance(got, str):
        return False
    if math.isnan(want):
        return math.isnan(got)
    return got == want or abs(got - want) <= 1e-12


@settings(max_examples=400, deadline=None)
@given(collections(), st.sampled_from([1, 1, 2, 3]), st.booleans())
def test_every_pytrec_eval_measure_per_query(
    data: tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]],
    level: int,
    judged_only: bool,
) -> None:
    qrels, run = data
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, set(MEASURES), relevance_level=level, judged_docs_only_flag=judged_only
    )
    want = evaluator.evaluate(run)
    got = evaluate(
        qrels,
        run,
        MEASURES,
        relevance_level=level,
        judged_only=judged_only,
        legacy_recall_cutoffs=True,
    )
    assert set(got.per_query) == set(want)
    for qid, values in want.items():
        for name, value in values.items():
            assert _same(got.per_query[qid][name], value), (
                qid,
                name,
                got.per_query[qid][name],
                value,
            )


def test_default_recall_cutoffs_are_trec_eval_10s() -> None:
    """R = 6, recall 0.2: trec_eval 10 needs lround(1.2) = 1 relevant doc, trec_eval 9 and
    pytrec_eval int(1.2 + 0.9) = 2; the ranking makes the two rules give different values."""
    qrels = {"q": {f"r{i}": 1 for i in range(6)}}
    run = {"q": {"r0": 5.0, "x1": 4.0, "x2": 3.0, "x3": 2.0, "r1": 1.0}}
    new = evaluate(qrels, run, ["iprec_at_recall.0.2"]).per_query["q"]
    old = evaluate(qrels, run, ["iprec_at_recall.0.2"], legacy_recall_cutoffs=True).per_query["q"]
    want = pytrec_eval.RelevanceEvaluator(qrels, {"iprec_at_recall.0.2"}).evaluate(run)["q"]
    assert old == want == {"iprec_at_recall_0.20": 0.4}  # from the 2nd relevant doc: 2/5
    assert new["iprec_at_recall_0.20"] == 1.0  # from the 1st: 1/1


def test_an_empty_ranking_scores_as_pytrec_eval_scores_a_ranking_emptied_by_judged_only() -> None:
    qrels = {"q": {"a": 2, "b": 0, "c": 1}}
    want = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES), judged_docs_only_flag=True)
    expected = want.evaluate({"q": {"unjudged": 1.0}})["q"]
    got = evaluate(qrels, {"q": {}}, MEASURES, legacy_recall_cutoffs=True).per_query["q"]
    for name, value in expected.items():
        assert _same(got[name], value), name
