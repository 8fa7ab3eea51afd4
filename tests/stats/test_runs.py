"""Saved runs compared from Python: ``diff_runs``, ``trend``, ``registry_baseline`` and
``assert_no_regression(baseline="pinned")`` on a real registry of Cranfield runs.

The oracles: :func:`ragmeter.stats.compare` on the reports themselves (the registry must
give back exactly the scores it was given), trec_eval's own output for BM25's NDCG@10,
and SciPy's paired t-test for the trend's significant drop.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.beir import read_beir_qrels
from ragmeter.io.trec import read_trec_run, write_trec_run
from ragmeter.registry import IncomparableRunsError, Registry, RunNotFoundError
from ragmeter.stats import TrendPoint, compare, diff_runs, load_pair, registry_baseline, trend
from ragmeter.testing import assert_no_regression

CRAN = Path(__file__).resolve().parents[1] / "data" / "cranfield_beir"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """BM25 on Cranfield, a weaker copy (each top 10 shuffled; a TREC run file too, so
    both are ordered by trec_eval's rule), BM25 on qrels with 12 judgements added, and
    BM25 at relevance level 2."""
    qrels = {q: dict(r) for q, r in read_beir_qrels(CRAN / "qrels" / "test.tsv").items()}
    run = read_trec_run(CRAN / "bm25.run")
    weaker = {}
    for qid, docs in run.items():
        top = list(docs[:10])
        random.Random(qid).shuffle(top)
        weaker[qid] = top + list(docs[10:])
    path = tmp_path_factory.mktemp("runs") / "weaker.run"
    write_trec_run(weaker, path)
    weaker = read_trec_run(path)
    changed = {q: dict(r) for q, r in qrels.items()}
    for qid in sorted(changed)[:4]:
        changed[qid].update({d: 1 for d in [d for d in run[qid][20:] if d not in qrels[qid]][:3]})
    return {
        "bm25": evaluate_run(qrels, run),
        "weaker": evaluate_run(qrels, weaker),
        "changed": evaluate_run(changed, run),
        "level2": evaluate_run(qrels, run, relevance_level=2),
    }


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "runs.sqlite")


def test_diff_runs_equals_compare_on_the_reports(
    registry: Registry, reports: dict[str, Any]
) -> None:
    a = reports["bm25"].save(name="bm25", registry=registry)
    b = reports["weaker"].save(name="bm25", registry=registry)
    for metric in ("ndcg@10", "map", "recall@100"):
        got = diff_runs("bm25~1", "bm25", registry=registry, metric=metric)
        want = compare(reports["bm25"], reports["weaker"], metric=metric)
        assert (got.n, got.mean_a, got.mean_b, got.mean_diff) == (
            want.n,
            want.mean_a,
            want.mean_b,
            want.mean_diff,
        )
        assert (got.ci_low, got.ci_high, got.p_value) == (want.ci_low, want.ci_high, want.p_value)
        assert got.regressed == want.regressed and got.warnings == ()
    # records and a path work as well as refs and a Registry
    by_record = diff_runs(a, b, registry=registry.path, test="t-test")
    assert by_record.p_value == compare(reports["bm25"], reports["weaker"], test="t-test").p_value
    assert by_record.label_a == f"bm25@{a.id[:8]}"


def test_unlike_runs_are_refused_unless_common_queries(
    registry: Registry, reports: dict[str, Any]
) -> None:
    reports["bm25"].save(name="base", registry=registry)
    reports["changed"].save(name="changed", registry=registry)
    reports["level2"].save(name="level2", registry=registry)
    with pytest.raises(IncomparableRunsError, match="12 judgements added") as refused:
        diff_runs("base", "changed", registry=registry)
    assert "common_queries=True" in str(refused.value)
    with pytest.raises(IncomparableRunsError, match="relevance_level"):
        diff_runs("base", "level2", registry=registry)
    result = diff_runs("base", "changed", registry=registry, common_queries=True)
    want = compare(reports["bm25"].scores("ndcg@10"), reports["changed"].scores("ndcg@10"))
    assert (result.n, result.mean_diff, result.p_value) == (want.n, want.mean_diff, want.p_value)
    assert result.warnings[0].startswith("compared on common queries only")
    assert "12 judgements added" in result.warnings[0]
    pair = load_pair("base", "changed", registry=registry, common_queries=True)
    assert pair.note == result.warnings[0] and pair.metric == "ndcg@10"
    with pytest.raises(RunNotFoundError, match="nope"):
        diff_runs("base", "nope", registry=registry)


def test_trend_marks_a_significant_drop_against_the_previous_comparable_run(
    registry: Registry, reports: dict[str, Any]
) -> None:
    from scipy.stats import ttest_rel

    saved = [
        reports[k].save(name="bm25", registry=registry)
        for k in ("bm25", "weaker", "weaker", "bm25", "changed")
    ]
    points = trend(registry, "ndcg@10", name="bm25", test="t-test")
    assert all(isinstance(p, TrendPoint) for p in points)
    assert [p.run_id for p in points] == [r.id for r in saved]
    sa, sb = reports["bm25"].scores("ndcg@10"), reports["weaker"].scores("ndcg@10")
    qids = sorted(sa)
    scipy = ttest_rel([sb[q] for q in qids], [sa[q] for q in qids])
    assert scipy.pvalue < 0.05 and scipy.statistic < 0
    assert points[1].regression and points[1].p_value == pytest.approx(scipy.pvalue)
    assert [p.regression for p in points] == [False, True, False, False, False]
    assert points[2].diff == 0.0  # the same scores twice: no change
    assert points[3].baseline_id == saved[2].id and points[3].diff > 0
    assert points[4].baseline_id is None and "qrels changed" in (points[4].note or "")
    assert points[0].mean == reports["bm25"].metrics["ndcg@10"]
    assert points[0].ci is not None and points[0].ci[0] < points[0].mean < points[0].ci[1]
    assert points[0].n == 225
    # a tolerated drop is not a regression
    loose = trend(registry, "ndcg@10", max_drop=0.1, test="t-test")
    assert not any(p.regression for p in loose)
    assert points[1].to_dict()["regression"] is True
    with pytest.raises(InvalidInputError, match="no saved run has the metric 'bleu'"):
        trend(registry, "bleu")


def test_assert_no_regression_reads_the_pinned_baseline(
    registry: Registry, reports: dict[str, Any]
) -> None:
    reports["bm25"].save(name="bm25", registry=registry)
    registry.pin("bm25")
    assert assert_no_regression("pinned", reports["bm25"], registry=registry).passed
    with pytest.raises(AssertionError, match="REGRESSION: ndcg@10 dropped"):
        assert_no_regression("pinned", reports["weaker"], registry=registry)
    # a tolerated drop passes
    assert assert_no_regression("bm25", reports["weaker"], registry=registry, max_drop=0.1).passed
    # not like for like: refused, not a regression
    with pytest.raises(IncomparableRunsError, match="qrels changed"):
        assert_no_regression("pinned", reports["changed"], registry=registry)
    with pytest.raises(IncomparableRunsError, match="relevance_level"):
        assert_no_regression("pinned", reports["level2"], registry=registry)
    # plain scores cannot be checked: the comparison says so
    result = assert_no_regression(
        "pinned", dict(reports["bm25"].scores("ndcg@10")), registry=registry, metric="ndcg@10"
    )
    assert result.passed and "could not be checked" in result.comparison.warnings[0]
    # the default registry is $RAGMETER_REGISTRY
    report, record, notes = registry_baseline("pinned", reports["bm25"], registry=registry)
    assert (
        record.pinned
        and notes == []
        and report.scores("ndcg@10") == reports["bm25"].scores("ndcg@10")
    )


def test_assert_no_regression_reads_a_report_file(
    tmp_path: Path, reports: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(reports["bm25"].to_json(), encoding="utf-8")
    assert assert_no_regression(str(path), reports["bm25"]).passed
    with pytest.raises(AssertionError, match="REGRESSION"):
        assert_no_regression(path, reports["weaker"])
    with pytest.raises(InvalidInputError, match="not found"):
        assert_no_regression(tmp_path / "absent.json", reports["bm25"])
    monkeypatch.setenv("RAGMETER_REGISTRY", str(tmp_path / "env.sqlite"))
    reports["bm25"].save(name="nightly")
    assert assert_no_regression("nightly", reports["bm25"]).passed


def test_trend_tests_each_run_against_its_own_name(
    registry: Registry, reports: dict[str, Any], tmp_path: Path
) -> None:
    """Runs of another name are another system: interleaved, they are not a baseline."""
    from ragmeter.html import write_trend

    first = reports["bm25"].save(name="bm25", registry=registry)
    other = reports["weaker"].save(name="other", registry=registry)
    third = reports["weaker"].save(name="bm25", registry=registry)
    points = trend(registry, "ndcg@10")
    assert [p.run_id for p in points] == [first.id, other.id, third.id]
    assert points[1].baseline_id is None and points[1].note is None  # the first of its name
    assert points[2].baseline_id == first.id and points[2].regression
    page = write_trend(points, tmp_path / "trend.html", metric="ndcg@10", registry=registry)
    html = page.read_text(encoding="utf-8")
    # one colour per name, a legend naming both, no break (neither series was interrupted)
    assert 'class="legend"' in html and ">bm25</span>" in html and ">other</span>" in html
    assert html.count('class="line s0"') == 1 and 'class="pt s1"' in html
    assert 'class="break"' not in html
    assert sorted(p.name for p in (tmp_path / "trend_runs").iterdir()) == sorted(
        f"{p.run_id}.html" for p in points
    )
