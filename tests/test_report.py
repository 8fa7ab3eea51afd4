"""Retrieval reports: DistributionSummary, conventions, dict/JSON round trip, pandas, rendering.

NumPy is the oracle for the summary statistics (population std, linear percentiles).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter._version import __version__
from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.trec import TREC_ORDERING
from ragmeter.report import Conventions, DistributionSummary, RetrievalEvalReport, WarningLog

# --------------------------------------------------------------------------- DistributionSummary


@pytest.mark.parametrize("scores", [[], [None], [None, None, None]])
def test_summary_of_nothing_never_divides_by_zero(scores: list[float | None]) -> None:
    s = DistributionSummary.of(scores)
    assert (s.count, s.missing) == (0, len(scores))
    assert s.mean == s.median == s.std == s.min == s.max == 0.0
    assert s.percentiles == {"p5": 0.0, "p25": 0.0, "p50": 0.0, "p75": 0.0, "p95": 0.0}


def test_summary_of_one_value() -> None:
    s = DistributionSummary.of([0.4])
    assert (s.count, s.mean, s.median, s.std, s.min, s.max) == (1, 0.4, 0.4, 0.0, 0.4, 0.4)
    assert set(s.percentiles.values()) == {0.4}


def test_summary_doctest_case_and_generators() -> None:
    s = DistributionSummary.of([1.0, 0.0, None, 0.5])
    assert (s.count, s.missing, s.mean, s.median) == (3, 1, 0.5, 0.5)
    assert DistributionSummary.of(x for x in (1.0, None)) == DistributionSummary.of([1.0, None])


@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(
        st.one_of(st.none(), st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)), max_size=40
    )
)
def test_summary_matches_numpy(scores: list[float | None]) -> None:
    s = DistributionSummary.of(scores)
    values = np.array([v for v in scores if v is not None], dtype=float)
    assert s.count == len(values) and s.missing == len(scores) - len(values)
    if not len(values):
        return
    tol = 1e-9 * max(1.0, float(np.abs(values).max()))
    assert s.mean == pytest.approx(float(values.mean()), abs=tol)
    assert s.median == pytest.approx(float(np.median(values)), abs=tol)
    assert s.std == pytest.approx(float(values.std()), abs=tol)
    assert (s.min, s.max) == (float(values.min()), float(values.max()))
    for p in (5, 25, 50, 75, 95):
        assert s.percentiles[f"p{p}"] == pytest.approx(float(np.percentile(values, p)), abs=tol)


def test_summary_to_dict_is_plain() -> None:
    d = DistributionSummary.of([0.0, 1.0]).to_dict()
    assert d["count"] == 2 and d["percentiles"]["p50"] == 0.5
    assert json.loads(json.dumps(d)) == d


# --------------------------------------------------------------------------- RetrievalEvalReport


@pytest.fixture(scope="module")
def cranfield_report() -> RetrievalEvalReport:
    _, _, qrels = load_cranfield()
    return evaluate_run(
        qrels, load_cranfield_bm25_run(), k_values=(1, 5, 10), metrics=["ndcg", "map", "recall"]
    )


def test_seed_000_report_example() -> None:
    report = RetrievalEvalReport(
        metrics={"ndcg@10": 0.83}, per_query={}, n_queries=12, k_values=(10,)
    )
    assert report.primary == 0.83
    assert report.primary_at(5) is None
    assert (
        RetrievalEvalReport(
            metrics={"recall@10": 1.0}, per_query={}, n_queries=1, k_values=(10,)
        ).primary
        is None
    )


def test_primary_is_mean_ndcg_at_10(cranfield_report: RetrievalEvalReport) -> None:
    assert cranfield_report.primary == cranfield_report.metrics["ndcg@10"]
    assert cranfield_report.primary_at(5) == cranfield_report.metrics["ndcg@5"]
    assert cranfield_report.primary_at(3) is None


def test_summaries_describe_the_per_query_scores(cranfield_report: RetrievalEvalReport) -> None:
    assert set(cranfield_report.summaries) == set(cranfield_report.metrics)
    for key, mean in cranfield_report.metrics.items():
        summary = cranfield_report.summary(key)
        scores = cranfield_report.scores(key)
        assert summary.count == len(scores) == cranfield_report.n_queries == 225
        assert summary.mean == pytest.approx(mean, abs=1e-12)
        assert summary.mean == pytest.approx(math.fsum(scores.values()) / len(scores), abs=1e-12)
        assert summary.max == max(scores.values())


def test_conventions_are_recorded() -> None:
    qrels = {"q": {"a": 1, "b": 2}}
    from_list = evaluate_run(qrels, {"q": ["b", "a"]}, relevance_level=2)
    assert from_list.conventions.relevance_level == 2
    assert from_list.conventions.ties == "list order"
    assert from_list.conventions.duplicates == "rejected"
    assert "P@k divides by k" in from_list.conventions.cutoff
    assert from_list.conventions.ragmeter_version == __version__
    cranfield_qrels = load_cranfield()[2]
    assert (
        evaluate_run(cranfield_qrels, load_cranfield_bm25_run()).conventions.ties == TREC_ORDERING
    )


def test_dict_and_json_round_trip(cranfield_report: RetrievalEvalReport) -> None:
    data = json.loads(cranfield_report.to_json())
    assert data["kind"] == "retrieval"
    assert data["primary"] == cranfield_report.primary
    assert data["summaries"]["ndcg@10"]["count"] == 225
    back = RetrievalEvalReport.from_dict(data)
    assert back.metrics == cranfield_report.metrics
    assert back.per_query == cranfield_report.per_query
    assert back.n_queries == cranfield_report.n_queries
    assert back.k_values == cranfield_report.k_values
    assert back.conventions == cranfield_report.conventions
    assert back.warnings == cranfield_report.warnings
    assert back.to_dict() == cranfield_report.to_dict()


def test_from_dict_ignores_convention_fields_it_does_not_know() -> None:
    data = RetrievalEvalReport(
        metrics={"ndcg@10": 0.5}, per_query={}, n_queries=1, k_values=(10,)
    ).to_dict()
    data["conventions"]["added_in_a_later_version"] = "x"
    assert RetrievalEvalReport.from_dict(data).conventions == Conventions()


def test_to_pandas(cranfield_report: RetrievalEvalReport) -> None:
    frame = cranfield_report.to_pandas()
    assert frame.shape == (225, len(cranfield_report.metrics))
    assert list(frame.columns) == sorted(cranfield_report.metrics)
    assert frame.loc["1", "ndcg@10"] == cranfield_report.per_query["1"]["ndcg@10"]
    assert frame["map"].mean() == pytest.approx(cranfield_report.metrics["map"], abs=1e-12)


def test_text_table(cranfield_report: RetrievalEvalReport) -> None:
    text = cranfield_report.to_text()
    lines = text.splitlines()
    assert lines[0] == (
        f"Retrieval evaluation: 225 queries scored (relevant: grade > 0; ties: {TREC_ORDERING})"
    )
    assert lines[1].split() == ["metric", "@1", "@5", "@10", "all"]
    ndcg_row = next(line for line in lines if line.startswith("ndcg"))
    assert ndcg_row.split() == [
        "ndcg",
        f"{cranfield_report.metrics['ndcg@1']:.4f}",
        f"{cranfield_report.metrics['ndcg@5']:.4f}",
        f"{cranfield_report.metrics['ndcg@10']:.4f}",
        "-",
    ]
    map_row = next(line for line in lines if line.startswith("map"))
    assert map_row.split()[-1] == f"{cranfield_report.metrics['map']:.4f}"
    assert str(cranfield_report) == text


def test_text_shows_level_and_warnings() -> None:
    report = RetrievalEvalReport(
        metrics={"recall@5": 0.5},
        per_query={"q": {"recall@5": 0.5}},
        n_queries=1,
        k_values=(5,),
        conventions=Conventions(relevance_level=2),
        warnings=["CAUTION [score] (x): broke"],
    )
    lines = report.to_text().splitlines()
    assert "(relevant: grade >= 2; ties: list order)" in lines[0]
    assert lines[1].split() == ["metric", "@5"]
    assert lines[-1] == "warning: CAUTION [score] (x): broke"


def test_markdown_table(cranfield_report: RetrievalEvalReport) -> None:
    lines = cranfield_report.to_markdown().splitlines()
    assert lines[0] == "| metric | mean | median | std | min | max | n | missing |"
    assert len(lines) == 2 + len(cranfield_report.metrics)
    row = next(line for line in lines if line.startswith("| ndcg@10 |"))
    s = cranfield_report.summary("ndcg@10")
    assert row == (
        f"| ndcg@10 | {s.mean:.4f} | {s.median:.4f} | {s.std:.4f} | {s.min:.4f} | "
        f"{s.max:.4f} | 225 | 0 |"
    )


def test_warning_log() -> None:
    log = WarningLog()
    assert len(log) == 0
    log.add("score", "broken", "the 'broken' metric raised")
    assert list(log) == ["CAUTION [score] (broken): the 'broken' metric raised"]
    assert len(log) == 1
