"""Issue 12: inputs that used to give a quietly wrong retrieval number.

Each case either raises a clear error naming the query, doc or value, or gives the right
number with a warning on the report that counts what happened.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_retrieval, evaluate_run, per_query
from ragmeter.report import RetrievalEvalReport

QRELS = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}, "q3": {"d": 1}}
RUN = {"q1": ["a", "x"], "q2": ["c"]}

# --------------------------------------------------------------------------- grades


@pytest.mark.parametrize(
    "grade", [math.nan, math.inf, -math.inf, 1.7e308, -1e300, 2.0**53 * 2, 2**53 + 1]
)
def test_non_finite_or_huge_grades_are_refused_naming_query_and_doc(grade: float) -> None:
    """NaN used to be taken as non-relevant; inf and 1.7e308 gave ndcg nan."""
    qrels: Any = {"q1": {"a": 1, "b": grade}}
    with pytest.raises(InvalidInputError, match=r"qrels\['q1'\]\['b'\] is .*finite number"):
        evaluate_run(qrels, {"q1": ["b", "a"]}, k_values=[2])


def test_the_largest_accepted_grades_give_finite_numbers() -> None:
    big = float(2**53)
    qrels = {"q1": {f"d{i}": big for i in range(50)}}
    report = evaluate_run(qrels, {"q1": [f"d{i}" for i in range(50)]}, k_values=[10, 100])
    assert all(math.isfinite(v) for v in report.metrics.values())
    assert report.metrics["ndcg@10"] == 1.0
    json.loads(report.to_json())  # standard JSON


def test_a_custom_metric_returning_infinity_is_left_out_with_a_warning() -> None:
    from ragmeter.metrics.registry import METRICS

    METRICS.register("infinite_metric", lambda j, r, k: math.inf)
    try:
        report = evaluate_run(QRELS, RUN, k_values=[1], metrics=["recall", "infinite_metric"])
    finally:
        METRICS.unregister("infinite_metric")
    assert list(report.metrics) == ["recall@1"]
    assert any("returned inf" in w for w in report.warnings)


def test_a_report_never_holds_nan_and_its_json_is_standard() -> None:
    report = evaluate_run(QRELS, RUN, k_values=[1, 10])
    data = report.to_dict()
    data["metrics"]["ndcg@10"] = math.nan
    with pytest.raises(InvalidInputError, match=r"metrics\['ndcg@10'\] must be a finite number"):
        RetrievalEvalReport.from_dict(data)
    report.metrics["ndcg@10"] = math.inf  # forced in by hand: to_json refuses, never 'Infinity'
    with pytest.raises(ValueError, match="not JSON compliant"):
        report.to_json()


# --------------------------------------------------------------------------- ids


def test_an_int_query_id_in_the_qrels_matches_the_same_string_in_the_run() -> None:
    """Used to score 0: qrels from pandas had int 1, the run had "1"."""
    qrels: Any = {1: {"a": 1}, 2: {"b": 1}}
    report = evaluate_run(qrels, {"1": ["a"], "2": ["b"]}, k_values=[1], metrics=["recall"])
    assert report.metrics == {"recall@1": 1.0}
    assert sorted(report.per_query) == ["1", "2"]
    assert per_query(qrels, {"1": ["a"], "2": ["x"]}, "recall", 1) == {"1": 1.0, "2": 0.0}


def test_qrels_holding_both_1_and_the_string_1_are_refused_not_merged() -> None:
    qrels: Any = {1: {"a": 1}, "1": {"b": 1}}
    with pytest.raises(InvalidInputError, match=r"qrels has both 1 \(int\) and '1' \(str\)"):
        evaluate_run(qrels, {"1": ["a"]}, k_values=[1])
    run: Any = {1: ["a"], "1": ["b"]}
    with pytest.raises(InvalidInputError, match=r"run has both 1 \(int\) and '1' \(str\)"):
        evaluate_run({"1": {"a": 1}}, run, k_values=[1])


def test_evaluate_retrieval_reads_int_ids_as_strings_too() -> None:
    qrels: Any = {1: {"a": 1}}
    queries: Any = {1: "text"}
    report = evaluate_retrieval(lambda text: ["a"], qrels, queries, k_values=[1])
    assert report.metrics["recall@1"] == 1.0 and list(report.per_query) == ["1"]


# --------------------------------------------------------------------------- missing queries


def test_judged_queries_missing_from_the_run_are_counted_and_warned_about() -> None:
    """Failed runs used to score 0 silently (NDCG@10 0.35 vs 0.55 on the good ones)."""
    report = evaluate_run(QRELS, RUN, k_values=[1], metrics=["recall"])
    assert report.metrics == {"recall@1": pytest.approx(1.5 / 3)}
    assert report.missing_queries == ["q3"] and report.n_missing == 1
    assert report.n_queries == 3
    assert "= trec_eval -c" in report.conventions.averaging
    (warning,) = report.warnings
    assert "1 of 3 judged queries have no ranking in the run (e.g. 'q3')" in warning
    assert "missing_queries='skip'" in warning
    assert report.to_dict()["missing_queries"] == ["q3"]
    assert RetrievalEvalReport.from_dict(json.loads(report.to_json())).missing_queries == ["q3"]
    assert "no ranking in the run" in report.to_text()


def test_skip_averages_over_the_runs_queries_like_trec_eval_without_c() -> None:
    report = evaluate_run(QRELS, RUN, k_values=[1], metrics=["recall"], missing_queries="skip")
    assert report.metrics == {"recall@1": 0.75}
    assert report.n_queries == 2 and set(report.per_query) == {"q1", "q2"}
    assert report.missing_queries == ["q3"]
    assert report.summary("recall@1").missing == 1 and report.summary("recall@1").count == 2
    assert "left out of the mean" in report.warnings[0]
    assert "trec_eval's default" in report.conventions.averaging


def test_a_run_that_ranks_no_judged_query_is_an_error_naming_both_kinds_of_id() -> None:
    with pytest.raises(
        InvalidInputError,
        match=r"none of the 3 judged queries has a ranking in the run \(the run's query ids, "
        r"e.g. 'Q1', 'Q2', are not qrels ids such as 'q1', 'q2', 'q3'\)",
    ):
        evaluate_run(QRELS, {"Q1": ["a"], "Q2": ["c"]}, k_values=[1])
    with pytest.raises(InvalidInputError, match="the run is empty"):
        evaluate_run(QRELS, {}, k_values=[1])
    with pytest.raises(InvalidInputError, match="has a ranking in the run"):
        evaluate_run(QRELS, {}, k_values=[1], missing_queries="skip")


def test_an_empty_ranking_is_in_the_run_not_missing() -> None:
    report = evaluate_run(QRELS, {"q1": [], "q2": [], "q3": []}, k_values=[1])
    assert report.missing_queries == [] and report.n_queries == 3
    assert set(report.metrics.values()) == {0.0}


# --------------------------------------------------------------------------- doc ids


def test_doc_ids_of_another_kind_get_a_loud_warning() -> None:
    """A retriever returning chunk ids where the qrels hold source ids scored 0 silently."""
    run = {"q1": ["chunk-1", "chunk-2"], "q2": ["chunk-3"], "q3": ["chunk-4"]}
    report = evaluate_run(QRELS, run, k_values=[10])
    assert set(report.metrics.values()) == {0.0}
    (warning,) = report.warnings
    assert "none of the 4 retrieved doc ids (e.g. 'chunk-1', 'chunk-2', 'chunk-3', ...)" in warning
    assert "different doc ids" in warning


def test_a_run_of_judged_non_relevant_docs_is_not_a_doc_id_problem() -> None:
    report = evaluate_run({"q1": {"a": 1, "n": 0}}, {"q1": ["n"]}, k_values=[1])
    assert report.metrics["ndcg@1"] == 0.0 and report.warnings == []
