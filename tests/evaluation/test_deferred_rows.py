"""A report's per-query scores kept as the kernel's flat array until ``per_query`` is read.

``evaluate_run`` with built-in metrics no longer builds a ``{key: score}`` dict per query
while it scores (about half its time and most of its memory at a million queries): the
report reads the rows from the array (:class:`ragmeter.report.ColumnRows`) and makes
``per_query`` the plain dict it always was the first time it is read. These tests check that
nothing a user does with a report can tell, with pytrec_eval as the oracle for the numbers.
"""

from __future__ import annotations

import json
import pickle
import random
from typing import Any

import pytest
import pytrec_eval

from ragmeter import evaluate_run
from ragmeter.errors import InvalidInputError
from ragmeter.metrics.registry import METRICS
from ragmeter.report import ColumnRows, RetrievalEvalReport

KW: dict[str, Any] = {"k_values": [5, 10], "metrics": ["ndcg", "recall", "precision", "map"]}
ORACLE = {"ndcg_cut_10": "ndcg@10", "recall_5": "recall@5", "P_10": "precision@10"}


def _data(n: int, seed: int = 7) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    rng = random.Random(seed)
    qrels = {
        f"q{i}": {f"d{d}": rng.randint(1, 3) for d in rng.sample(range(60), rng.randint(1, 6))}
        for i in range(n)
    }
    run = {q: [f"d{d}" for d in rng.sample(range(60), 20)] for q in qrels if q != "q3"}
    return qrels, run


def _deferred(report: RetrievalEvalReport) -> bool:
    return "per_query" not in vars(report)


def test_the_rows_are_read_from_the_array_until_per_query_is_read() -> None:
    qrels, run = _data(40)
    report = evaluate_run(qrels, run, **KW)
    assert _deferred(report)
    # summaries, one key's scores and the JSON are read from the array: still deferred
    summary = report.summary("ndcg@10")
    scores = report.scores("recall@5")
    text = report.to_json()
    assert _deferred(report)
    scored = {q: {d: float(len(ds) - i) for i, d in enumerate(ds)} for q, ds in run.items()}
    oracle = pytrec_eval.RelevanceEvaluator(qrels, set(ORACLE)).evaluate(scored)
    rows = report.per_query  # now made, once
    assert not _deferred(report) and type(rows) is dict and report.per_query is rows
    assert list(rows) == list(qrels)  # qrels order; q3, missing from the run, scores 0
    assert rows["q3"] == dict.fromkeys(rows["q3"], 0.0)
    for qid, measures in oracle.items():
        for theirs, ours in ORACLE.items():
            assert rows[qid][ours] == pytest.approx(measures[theirs], abs=1e-12), (qid, ours)
    assert json.loads(text)["per_query"] == rows
    assert scores == {q: row["recall@5"] for q, row in rows.items()}
    values = sorted(row["ndcg@10"] for row in rows.values())
    assert summary.mean == report.metrics["ndcg@10"]
    assert summary.median == pytest.approx((values[19] + values[20]) / 2)


def test_a_deferred_report_compares_pickles_and_converts_like_a_plain_one() -> None:
    qrels, run = _data(12)
    report = evaluate_run(qrels, run, **KW)
    plain = RetrievalEvalReport.from_dict(report.to_dict())
    assert _deferred(report)
    again = pickle.loads(pickle.dumps(report))
    assert again.per_query == plain.per_query and again.metrics == plain.metrics
    assert report.to_dict()["per_query"] == plain.per_query
    assert report.to_pandas().loc["q0", "ndcg@10"] == plain.per_query["q0"]["ndcg@10"]
    assert report == plain  # the dataclass's == reads per_query too
    assert report.to_dict()["per_query"] is report.per_query  # made once, shared


def test_per_query_once_made_is_the_users_dict_to_change() -> None:
    qrels, run = _data(5)
    report = evaluate_run(qrels, run, **KW)
    report.per_query["q0"]["ndcg@10"] = 0.5
    del report.per_query["q1"]
    assert report.per_query["q0"]["ndcg@10"] == 0.5 and "q1" not in report.per_query
    assert report.scores("ndcg@10")["q0"] == 0.5 and "q1" not in report.scores("ndcg@10")
    report.per_query = {}
    assert report.per_query == {}


def test_a_custom_metric_keeps_dict_rows_with_the_same_numbers() -> None:
    qrels, run = _data(10)

    def hits(judgements: dict[str, float], ranked: list[str], k: int) -> float:
        return float(sum(judgements.get(d, 0) > 0 for d in ranked[:k]))

    METRICS.register("hits_deferred", hits)
    try:
        custom = evaluate_run(qrels, run, k_values=[5, 10], metrics=["ndcg", "hits_deferred"])
    finally:
        METRICS.unregister("hits_deferred")
    assert not _deferred(custom)
    builtin = evaluate_run(qrels, run, k_values=[5, 10], metrics=["ndcg"])
    assert _deferred(builtin)
    for qid, row in builtin.per_query.items():
        assert row == {k: v for k, v in custom.per_query[qid].items() if k.startswith("ndcg")}


def test_column_rows_refuse_values_that_do_not_hold_the_rows() -> None:
    from array import array

    with pytest.raises(ValueError, match="3 values do not hold 2 rows of width 2"):
        ColumnRows(["a", "b"], array("d", [1.0, 2.0, 3.0]), 2, ("x",))
    with pytest.raises(ValueError, match="1 places for 2 ids"):
        ColumnRows(["a", "b"], array("d", [1.0] * 4), 2, ("x",), order=[0])
    rows = ColumnRows(["a", "b"], array("d", [1.0, 2.0, 3.0, 4.0]), 2, ("x",), order=[1, 0])
    assert dict(rows) == {"a": {"x": 3.0}, "b": {"x": 1.0}} and "c" not in rows


def test_a_run_whose_later_ids_are_ints_scores_as_if_they_were_strings() -> None:
    """evaluate_run reads only the run's first id to decide it is keyed by strings; a later
    int id is made a string where it is scored, and a clash is worded as it always was."""
    qrels = {"1": {"a": 1}, "2": {"b": 1}}
    mixed: Any = {"1": ["a"], 2: ["x", "b"]}
    report = evaluate_run(qrels, mixed, k_values=[1, 2], metrics=["recall", "ndcg"])
    same = evaluate_run(
        qrels, {"1": ["a"], "2": ["x", "b"]}, k_values=[1, 2], metrics=["recall", "ndcg"]
    )
    assert report.per_query == same.per_query and report.metrics == same.metrics
    clash: Any = {"1": ["b"], 1: ["a"]}
    with pytest.raises(InvalidInputError, match=r"run has both '1' \(str\) and 1 \(int\)"):
        evaluate_run({"1": {"a": 1}}, clash, k_values=[1])


def test_the_compiled_rows_builder_makes_the_same_dict_as_python() -> None:
    from array import array

    from ragmeter.metrics._kernel import c_rows_dict

    if c_rows_dict is None:  # pragma: no cover - CI builds the kernel
        pytest.skip("the compiled kernel is not built")
    rng = random.Random(3)
    n, width, keys = 50, 5, ("a@1", "b@1", "c")
    values = array("d", [rng.choice([0.0, 1.0, rng.random()]) for _ in range(n * width)])
    ids = [f"q{i}" for i in range(n)]
    order = rng.sample(range(n), n)
    for places in (None, order):
        python = ColumnRows(ids, values, width, keys, order=places).to_dict()
        compiled = ColumnRows(ids, values, width, keys, order=places, build=c_rows_dict)
        made = compiled.to_dict()
        assert made == python and list(made) == ids
        assert all(list(row) == list(keys) for row in made.values())
    with pytest.raises(ValueError, match="width \\* len\\(ids\\) doubles"):
        c_rows_dict(ids, array("d", [0.0]), width, keys, None)
    with pytest.raises(ValueError, match="out of range"):
        c_rows_dict(ids[:1], array("d", [0.0] * width), width, keys, [5])
