"""The compiled run loop (``_ckernel.RunLoop``) against the Python scoring loop it replaces.

``evaluate_run`` scores the pairs it recognises in one C loop and hands every other pair back
to the Python loop of :mod:`ragmeter.evaluation.scoring`. The Python loop, with the compiled
kernel and with the pure-Python reference kernel, is the oracle: on generated runs (unjudged
and missing queries, repeated docs, empty rankings, tuples, int ids, graded and odd grades,
relevance levels, ``judged_only``, rankings read from TREC files with tied scores) the report
must be the same to the last bit (floats compared through ``repr``), warnings included, or the
error the same, message included. pytrec_eval checks the loop's numbers on its own.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmeter.evaluation import _query, scoring
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.trec import read_trec_run
from ragmeter.metrics import _kernel
from ragmeter.metrics._kernel import kernel_codes, py_score_query

LOOP = _kernel.c_run_loop
needs_loop = pytest.mark.skipif(
    LOOP is None or _kernel.c_score_query is None or _kernel.BACKEND != "c",
    reason="the compiled kernel is not built (or RAGMETER_PURE_PYTHON is set)",
)
pytestmark = needs_loop

PATHS = ("loop", "python loop", "python kernel")


def _report(path: str, qrels: Any, run: Any, **kwargs: Any) -> tuple[Any, ...]:
    """Everything a report says (floats as ``repr``), or the error, scored along ``path``."""
    with pytest.MonkeyPatch.context() as m:
        if path != "loop":
            m.setattr(scoring, "c_run_loop", None)
        if path == "python kernel":
            m.setattr(scoring, "score_query", py_score_query)
            m.setattr(_query, "score_query", py_score_query)
        try:
            report = evaluate_run(qrels, run, **kwargs)
        except Exception as exc:
            return ("raised", type(exc), str(exc))
    assert report.judged is not None

    def rows(per_query: Any) -> dict[str, dict[str, str]]:
        return {q: {k: repr(v) for k, v in row.items()} for q, row in per_query.items()}

    judged = report.judged
    return (
        {k: repr(v) for k, v in report.metrics.items()},
        rows(report.per_query),
        list(report.per_query),
        rows(judged.per_query),
        {k: repr(v) for k, v in judged.means.items()},
        (judged.documents, judged.unjudged, judged.queries, judged.queries_with_unjudged),
        report.n_queries,
        report.missing_queries,
        report.warnings,
        report.conventions,
    )


def _same_everywhere(qrels: Any, run: Any, **kwargs: Any) -> tuple[Any, ...]:
    want = _report("python kernel", qrels, run, **kwargs)
    assert _report("python loop", qrels, run, **kwargs) == want
    assert _report("loop", qrels, run, **kwargs) == want
    return want


QIDS = [f"q{i}" for i in range(24)]
DOCS = [f"d{i}" for i in range(14)]
grades = st.integers(-1, 3) | st.sampled_from([0.5, 2.5, 1.0, -0.5, True, False])
qrels_st = st.dictionaries(
    st.sampled_from(QIDS),
    st.dictionaries(st.sampled_from(DOCS), grades, max_size=8),
    min_size=4,
    max_size=20,
)
ranking: st.SearchStrategy[Any] = st.one_of(
    st.lists(st.sampled_from([*DOCS, "new1", "new2"]), max_size=12, unique=True),
    st.lists(st.sampled_from(DOCS), max_size=6, unique=True).map(tuple),
    st.just([]),
)
run_st = st.dictionaries(st.sampled_from([*QIDS, "x1", "x2"]), ranking, min_size=6, max_size=26)


def _with_repeat(run: dict[str, Any], where: int | None) -> dict[str, Any]:
    """``run`` with its ``where``-th ranking repeating its first doc (an error once scored)."""
    if where is None or not run:
        return run
    qid = list(run)[where % len(run)]
    ranked = list(run[qid])
    return {**run, qid: [*ranked, ranked[0]] if ranked else ["d1", "d1"]}


options = st.fixed_dictionaries(
    {
        "k_values": st.lists(st.integers(1, 12), min_size=1, max_size=3),
        "metrics": st.lists(
            st.sampled_from(["ndcg", "recall", "precision", "hit_rate", "mrr", "map", "judged"]),
            min_size=1,
            max_size=4,
        ),
        "relevance_level": st.sampled_from([None, 0, 1, 2, 0.5]),
        "missing_queries": st.sampled_from(["zero", "skip"]),
        "judged_only": st.booleans(),
    }
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    qrels=qrels_st,
    run=run_st,
    kwargs=options,
    repeat=st.none() | st.none() | st.none() | st.integers(0, 30),
)
def test_the_loop_gives_the_python_loops_report_or_error(
    qrels: dict[str, dict[str, Any]],
    run: dict[str, Any],
    kwargs: dict[str, Any],
    repeat: int | None,
) -> None:
    _same_everywhere(qrels, _with_repeat(run, repeat), **kwargs)


@settings(max_examples=60, deadline=None)
@given(
    qrels=qrels_st,
    given_run=run_st,
    int_qid=st.sampled_from(QIDS),
    odd=st.sampled_from([7, 7.5, None, "2", float("nan")]),
)
def test_pairs_the_loop_does_not_take_get_the_python_loops_handling(
    qrels: dict[str, dict[str, Any]], given_run: dict[str, Any], int_qid: str, odd: Any
) -> None:
    """Int query and doc ids (read as their digits), odd doc ids and grades, a str subclass:
    whatever the Python loop does with them (score or refuse) happens, in run order."""
    run: dict[Any, Any] = dict(given_run)
    if int_qid in run:  # an int query id, after the first few queries
        run[int(int_qid[1:]) + 1000] = run.pop(int_qid)
        qrels = {**qrels, str(int(int_qid[1:]) + 1000): qrels.get(int_qid, {"d1": 1})}
    qid = next(iter(qrels), None)
    if qid is not None:
        qrels = {**qrels, qid: {**qrels[qid], "d2": odd}}
    _same_everywhere(qrels, run, k_values=[1, 5])


def test_a_run_of_hundreds_of_queries_is_the_same_in_every_path() -> None:
    """Most queries here go through the compiled loop (the first few never do)."""
    qrels: dict[str, dict[str, Any]] = {}
    run: dict[str, list[str]] = {}
    for q in range(400):
        qrels[f"q{q}"] = {f"d{(q * 7 + j) % 50}": (q + j) % 4 for j in range(q % 9)}
        run[f"q{q}"] = [f"d{(q * 7 + j * 3) % 53}" for j in range(q % 40)]
    run["q2000"] = ["d1"]  # unjudged: ignored
    _same_everywhere(qrels, run, k_values=[1, 3, 10, 100])
    _same_everywhere(qrels, run, k_values=[2, 20], relevance_level=2, judged_only=True)
    del run["q17"], run["q200"]  # missing queries
    _same_everywhere(qrels, run, k_values=[5], missing_queries="skip")
    run["q390"] = [*run["q390"], run["q390"][0]]  # a repeat, in a scored query
    want = _same_everywhere(qrels, run, k_values=[10])
    assert want[0] == "raised" and "q390" in want[2]


def test_the_first_ranking_with_a_judged_doc_ends_the_hand_back() -> None:
    """Rankings with no judged doc go to the Python loop (for the doc-ids message) until one
    holds a judged doc; every later pair is the loop's."""
    qrels = {f"q{i}": {"a": 1} for i in range(30)}
    run = {f"q{i}": ["zz", "yy"] if i < 20 else ["a", "zz"] for i in range(30)}
    _same_everywhere(qrels, run, k_values=[1, 2])
    nothing = {f"q{i}": ["zz"] for i in range(30)}  # never: the warning names unjudged docs
    report = _same_everywhere(qrels, nothing, k_values=[1])
    assert any("zz" in w for w in report[8])


def test_tied_scores_read_from_a_trec_run_score_the_same(tmp_path: Path) -> None:
    """A TREC run with tied scores (read in trec_eval's order) through every path."""
    lines = []
    for q in range(12):
        for d in range(15):
            lines.append(f"q{q} Q0 d{(d * 5 + q) % 17} {d} {float(d // 4)} run\n")
    path = tmp_path / "run.txt"
    path.write_text("".join(lines))
    run = read_trec_run(path)
    qrels = {f"q{q}": {f"d{d}": (q * d) % 3 for d in range(0, 17, 2)} for q in range(12)}
    _same_everywhere(qrels, run, k_values=[1, 5, 10])


def test_the_loops_numbers_are_trec_evals() -> None:
    """pytrec_eval on a run the compiled loop scores (a few hundred queries, graded)."""
    qrels = {
        f"q{q}": {f"d{(q + j * 3) % 40}": j % 3 for j in range(1 + q % 11)} for q in range(300)
    }
    for q, judged in qrels.items():
        judged[f"r{q}"] = 2  # one relevant doc at least
    run = {q: [f"d{(int(q[1:]) * 5 + j) % 41}" for j in range(30)] + [f"r{q}"] for q in qrels}
    report = evaluate_run(qrels, run, k_values=[5, 10], metrics=["ndcg", "map", "precision"])
    scored = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5,10", "map", "P.5,10"})
    theirs = evaluator.evaluate(scored)
    for q, row in report.per_query.items():
        assert row["ndcg@10"] == pytest.approx(theirs[q]["ndcg_cut_10"], abs=1e-12)
        assert row["map"] == pytest.approx(theirs[q]["map"], abs=1e-12)
        assert row["precision@5"] == pytest.approx(theirs[q]["P_5"], abs=1e-12)
    mean = math.fsum(theirs[q]["ndcg_cut_5"] for q in theirs) / len(theirs)
    assert report.metrics["ndcg@5"] == pytest.approx(mean, abs=1e-12)


def _loop(**changes: Any) -> Any:
    args: dict[str, Any] = {
        "index": {"q1": 0},
        "judgements": [{"a": 1}],
        "ks": [1],
        "codes": kernel_codes(["ndcg", "judged"]),
        "level": None,
        "cut": 1,
        "jpos": 1,
        "examples": 0,
        "run_ids": [],
        "ranked_at": [],
        "positions": [],
        "ids": [],
        "values": array("d"),
    }
    args.update(changes)
    assert LOOP is not None
    return LOOP(*args.values())


def test_the_loop_keeps_what_the_python_loop_keeps() -> None:
    values: array[float] = array("d")
    ids: list[str] = []
    loop = _loop(values=values, ids=ids)
    pairs: Iterator[tuple[Any, Any]] = iter([("q1", ["b", "a"]), ("x", ["a"]), (1, ["a"])])
    assert loop.feed(pairs, False) == (1, ["a"])  # an int id: the Python loop's
    assert loop.feed(pairs, False) is None
    assert ids == ["q1"] and list(values) == [0.0, 0.0]  # ndcg@1, then judged@1
    assert loop.counts == (1, 1, 1, 1, 1)  # one ranking, its top doc unjudged


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"ks": []}, ValueError),
        ({"ks": [2, 1]}, ValueError),
        ({"codes": [9]}, ValueError),
        ({"level": "1"}, ValueError),
        ({"level": True}, ValueError),
        ({"jpos": 5}, ValueError),
        ({"cut": 0}, ValueError),
        ({"values": array("i")}, TypeError),
        ({"index": []}, TypeError),
    ],
)
def test_the_loop_refuses_arguments_it_cannot_use(change: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        _loop(**change)


def test_feed_takes_an_iterator() -> None:
    with pytest.raises(TypeError, match="feed"):
        _loop().feed([("q1", ["a"])], False)
