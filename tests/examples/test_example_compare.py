"""examples/compare_bm25.py: a real difference is significant, a tie-break reshuffle is not."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run
from ragmeter.evaluation.retrieval import evaluate_run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "compare_bm25.py"


def test_example_runs_as_a_script() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=True, timeout=300
    ).stdout
    assert "weaker is significantly worse than bm25" in out
    assert "no significant difference between noise and bm25" in out
    assert "Holm–Bonferroni over 2 comparisons" in out


def test_example_verdicts_agree_with_scipy() -> None:
    module = runpy.run_path(str(EXAMPLE), run_name="example")
    results = module["main"]()
    _, _, qrels = load_cranfield()
    bm25 = load_cranfield_bm25_run()
    base = evaluate_run(qrels, bm25).scores("ndcg@10")
    ids = sorted(base)
    variants = {
        "weaker": module["shuffled_top"](bm25),
        "noise": module["near_tie_swaps"](bm25),
    }
    for name, significant in (("weaker", True), ("noise", False)):
        result = results[name]
        scores = evaluate_run(qrels, variants[name]).scores("ndcg@10")
        a = np.array([base[q] for q in ids])
        b = np.array([scores[q] for q in ids])
        assert result.n == len(ids) == 225
        assert result.mean_diff == pytest.approx(float(np.mean(b - a)), abs=1e-12)
        # SciPy's paired t-test and its own sign-flip permutation test reach the same verdict
        assert bool(sps.ttest_rel(b, a).pvalue < 0.05) is significant
        perm = sps.permutation_test(
            (b - a,), np.mean, permutation_type="samples", vectorized=True, rng=0
        )
        assert bool(perm.pvalue < 0.05) is significant
        assert result.significant is significant
    assert results["weaker"].ci_high < 0 and not results["weaker"].b_is_better
    noise = results["noise"]
    assert noise.ci_low < 0 < noise.ci_high
    assert noise.wins > 0 and noise.losses > 0  # queries moved both ways
