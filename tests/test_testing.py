"""ragmeter.testing.assert_no_regression: the regression gate inside a test suite."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.report import RetrievalEvalReport
from ragmeter.stats import GateResult
from ragmeter.testing import assert_no_regression


def _scores(values: np.ndarray) -> dict[str, float]:
    return {f"q{i}": float(v) for i, v in enumerate(values)}


@pytest.fixture(scope="module")
def pair() -> tuple[dict[str, float], dict[str, float]]:
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.9, 150)
    worse = np.clip(base - 0.06 + rng.normal(0, 0.05, 150), 0, 1)
    return _scores(base), _scores(worse)


def test_raises_assertion_error_with_the_reason(pair: tuple[dict[str, float], ...]) -> None:
    base, worse = pair
    reason = r"(?s)REGRESSION: the score dropped by 0\.0\d+ .*verdict"
    with pytest.raises(AssertionError, match=reason):
        assert_no_regression(base, worse)


def test_passes_and_returns_the_decision(pair: tuple[dict[str, float], ...]) -> None:
    base, worse = pair
    same = assert_no_regression(base, dict(base))
    assert isinstance(same, GateResult) and same.passed
    tolerant = assert_no_regression(base, worse, max_drop=0.2)
    assert tolerant.passed and "within the allowed 0.2" in tolerant.reason


def test_not_significant_drop_passes() -> None:
    base = {"q1": 0.9, "q2": 0.1, "q3": 0.5, "q4": 0.7}
    now = {"q1": 0.6, "q2": 0.2, "q3": 0.45, "q4": 0.72}
    result = assert_no_regression(base, now, max_drop=0.01)
    assert result.drop > 0.01 and "not significant" in result.reason


def test_lower_is_better_direction(pair: tuple[dict[str, float], ...]) -> None:
    base, worse = pair
    cost_base = {k: 1 - v for k, v in base.items()}
    cost_now = {k: 1 - v for k, v in worse.items()}  # cost went up
    with pytest.raises(AssertionError, match="rose by"):
        assert_no_regression(cost_base, cost_now, higher_is_better=False)
    assert assert_no_regression(cost_now, cost_base, higher_is_better=False).passed


def test_works_on_reports_saved_as_json(tmp_path: Path) -> None:
    from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run

    _, _, qrels = load_cranfield()
    run = load_cranfield_bm25_run()
    saved = tmp_path / "baseline.json"
    saved.write_text(evaluate_run(qrels, run).to_json())
    baseline = RetrievalEvalReport.from_dict(json.loads(saved.read_text()))
    truncated = {q: docs[3:] for q, docs in run.items()}  # lose each query's top 3
    with pytest.raises(AssertionError, match="REGRESSION: ndcg@10 dropped"):
        assert_no_regression(baseline, evaluate_run(qrels, truncated))
    assert assert_no_regression(baseline, evaluate_run(qrels, run), metric="map").passed


def test_bad_arguments_are_errors_not_assertions(pair: tuple[dict[str, float], ...]) -> None:
    base, _ = pair
    with pytest.raises(InvalidInputError, match="do not score the same queries"):
        assert_no_regression(base, {"other": 0.5, "ids": 0.4})
    with pytest.raises(InvalidInputError, match="max_drop must be"):
        assert_no_regression(base, base, max_drop=-1)
