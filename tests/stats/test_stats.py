"""ragmeter.stats: paired comparison checked against SciPy and exact enumeration."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from ragmeter.errors import InvalidInputError
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.stats import _resampling, compare, compare_many, gate, holm_bonferroni


def _as_map(values: np.ndarray, prefix: str = "q") -> dict[str, float]:
    return {f"{prefix}{i:05d}": float(v) for i, v in enumerate(values)}


def _pair(n: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 1, n)
    b = np.clip(a + shift + rng.normal(0, 0.2, n), 0, 1)
    return a, b


# --------------------------------------------------------------------------- randomization


def _enumerated_p(d: list[float]) -> float:
    """Oracle written independently: all 2**n sign vectors, means with math.fsum."""
    n = len(d)
    observed = abs(math.fsum(d) / n)
    hits = 0
    for signs in itertools.product((1.0, -1.0), repeat=n):
        value = abs(math.fsum(s * x for s, x in zip(signs, d, strict=True)) / n)
        hits += value >= observed - 1e-12
    return float(hits) / (1 << n)


@pytest.mark.parametrize(
    "diffs",
    [
        [0.1, 0.2, -0.05, 0.3, 0.0, 0.15, 0.25, -0.1],  # a zero and mixed signs
        [0.5, 0.5, 0.25, -0.25, 0.5, 0.0, 0.0, 0.25, -0.5, 0.5],  # discrete: many ties in null
        [0.01, -0.02, 0.03, -0.04, 0.05, -0.06, 0.07, -0.08, 0.09, -0.1, 0.11, 0.12],
        [1.0, 1.0, 1.0],  # all flips but two are smaller: p = 2/8
    ],
)
def test_randomization_is_exact_enumeration_for_small_n(diffs: list[float]) -> None:
    a = {f"q{i}": 0.5 for i in range(len(diffs))}
    b = {f"q{i}": 0.5 + x for i, x in enumerate(diffs)}
    r = compare(a, b, n=10_000)
    assert r.exact
    assert r.p_value == pytest.approx(_enumerated_p([b[k] - a[k] for k in sorted(a)]), abs=1e-15)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_randomization_exact_matches_scipy_permutation_test(seed: int) -> None:
    a, b = _pair(11, 0.08, seed)  # 2**11 = 2048 <= n: both enumerate every sign flip
    r = compare(_as_map(a), _as_map(b), n=5000)
    ref = sps.permutation_test(
        (b - a,),
        np.mean,
        permutation_type="samples",
        vectorized=True,
        n_resamples=5000,
        alternative="two-sided",
    )
    assert r.exact
    assert r.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_randomization_monte_carlo_agrees_with_scipy_and_exact_value() -> None:
    a, b = _pair(18, 0.07, 7)
    d = b - a
    exact = compare(_as_map(a), _as_map(b), n=2**18).p_value  # enumerates all 262,144 flips
    mc = compare(_as_map(a), _as_map(b), n=10_000, seed=3)
    ref = sps.permutation_test(
        (d,), np.mean, permutation_type="samples", vectorized=True, n_resamples=9_999, rng=11
    )
    assert not mc.exact
    assert 0.01 < exact < 0.5  # a p-value where Monte Carlo error matters
    # Both estimates are binomial proportions around the exact p with n = 10^4 draws: their
    # standard error is sqrt(p(1-p)/n) <= 0.005; 4 standard errors gives a false-failure
    # chance below 1e-4 per comparison, and any bias of the method would be far larger.
    se = math.sqrt(exact * (1 - exact) / 10_000)
    assert abs(mc.p_value - exact) < 4 * se
    assert abs(ref.pvalue - exact) < 4 * se


def test_randomization_p_never_zero_and_significant_for_a_real_shift() -> None:
    a, b = _pair(300, 0.1, 0)
    r = compare(_as_map(a), _as_map(b), n=2_000)
    assert r.p_value == pytest.approx(1 / 2_001)
    assert r.significant and r.b_is_better


# --------------------------------------------------------------------------- bootstrap


@pytest.mark.parametrize(("n", "seed"), [(30, 0), (57, 5), (400, 123)])
def test_bootstrap_interval_equals_scipy_percentile_with_same_seed(n: int, seed: int) -> None:
    a, b = _pair(n, 0.03, seed)
    r = compare(_as_map(a), _as_map(b), n=2_000, seed=seed, confidence=0.9)
    one = sps.bootstrap(
        (b - a,), np.mean, n_resamples=2_000, method="percentile", confidence_level=0.9, rng=seed
    )
    paired = sps.bootstrap(
        (a, b),
        lambda x, y, axis=-1: np.mean(y - x, axis=axis),
        paired=True,
        n_resamples=2_000,
        method="percentile",
        confidence_level=0.9,
        rng=seed,
    )
    for ref in (one, paired):
        assert r.ci_low == pytest.approx(ref.confidence_interval.low, rel=1e-12, abs=1e-14)
        assert r.ci_high == pytest.approx(ref.confidence_interval.high, rel=1e-12, abs=1e-14)


def test_bootstrap_in_blocks_draws_the_same_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _pair(37, 0.02, 9)  # odd size: blocks of 3 x 37 values
    whole = compare(_as_map(a), _as_map(b), n=1_000, seed=4, test="bootstrap")
    monkeypatch.setattr(_resampling, "_CHUNK_ELEMENTS", 3 * 37)
    blocks = compare(_as_map(a), _as_map(b), n=1_000, seed=4, test="bootstrap")
    assert (blocks.ci_low, blocks.ci_high, blocks.p_value) == (
        whole.ci_low,
        whole.ci_high,
        whole.p_value,
    )


def test_bootstrap_p_value_from_scipys_bootstrap_distribution() -> None:
    a, b = _pair(60, 0.04, 21)
    d = b - a
    r = compare(_as_map(a), _as_map(b), test="bootstrap", n=3_000, seed=8)
    dist = sps.bootstrap((d,), np.mean, n_resamples=3_000, rng=8).bootstrap_distribution
    # shifted bootstrap (Efron & Tibshirani 16.4): resampling d - mean(d) gives dist - mean(d)
    count = np.count_nonzero(np.abs(dist - d.mean()) >= abs(d.mean()) - 1e-12)
    assert r.p_value == pytest.approx((count + 1) / 3_001, abs=1e-15)
    assert not r.exact


# --------------------------------------------------------------------------- t-test


@pytest.mark.parametrize(
    ("n", "shift", "seed"),
    [(2, 0.1, 0), (5, 0.0, 1), (40, 0.05, 2), (3000, 0.02, 3), (500, 0.3, 4)],
)
def test_t_test_matches_scipy_ttest_rel(n: int, shift: float, seed: int) -> None:
    a, b = _pair(n, shift, seed)
    r = compare(_as_map(a), _as_map(b), test="t-test")
    ref = sps.ttest_rel(b, a)
    assert r.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("df", [1, 2, 3, 7.5, 30, 1000, 100_000])
@pytest.mark.parametrize("t", [0.001, 0.5, 1.0, 2.5, 6.0, 40.0, -3.0])
def test_student_t_tail_matches_scipy(t: float, df: float) -> None:
    expected = 2 * sps.t.sf(abs(t), df)
    assert _resampling._student_t_two_sided(t, df) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_t_test_with_constant_differences() -> None:
    a = {"q1": 0.1, "q2": 0.2, "q3": 0.3}
    assert compare(a, dict(a), test="t-test").p_value == 1.0
    shifted = {k: v + 0.1 for k, v in a.items()}
    r = compare(a, shifted, test="t-test")
    assert r.p_value == 0.0 and r.effect_size == math.inf


# --------------------------------------------------------------------------- summary fields


def test_fields_wins_ties_losses_effect_and_moved_queries() -> None:
    a = {"q1": 0.2, "q2": 0.5, "q3": 0.4, "q4": 0.1, "q5": 0.9}
    b = {"q1": 0.6, "q2": 0.5, "q3": 0.9, "q4": 0.3, "q5": 0.7}
    r = compare(a, b, top=2)
    d = np.array([b[k] - a[k] for k in sorted(a)])
    assert (r.wins, r.ties, r.losses, r.n) == (3, 1, 1, 5)
    assert r.mean_diff == pytest.approx(d.mean())
    assert r.mean_a == pytest.approx(np.mean(list(a.values())))
    assert r.effect_size == pytest.approx(d.mean() / d.std(ddof=1))
    assert [c.query_id for c in r.improved] == ["q3", "q1"]
    assert [c.query_id for c in r.regressed] == ["q5"]
    assert r.regressed[0].diff == pytest.approx(-0.2)
    assert r.ci_low <= r.mean_diff <= r.ci_high


def test_lower_is_better_counts_a_fall_as_a_win() -> None:
    latency_a = {"q1": 120.0, "q2": 100.0, "q3": 90.0}
    latency_b = {"q1": 80.0, "q2": 100.0, "q3": 95.0}
    r = compare(latency_a, latency_b, higher_is_better=False)
    assert (r.wins, r.ties, r.losses) == (1, 1, 1)
    assert r.mean_diff < 0 and r.b_is_better
    assert [c.query_id for c in r.improved] == ["q1"]


def test_direction_comes_from_a_rag_report() -> None:
    a = RagEvalReport(
        metrics={"latency_ms": 100.0, "token_f1": 0.5},
        coverage={"latency_ms": 3, "token_f1": 3},
        n_samples=3,
        per_sample={
            "s1": {"latency_ms": 100.0, "token_f1": 0.5},
            "s2": {"latency_ms": 110.0, "token_f1": None},
            "s3": {"latency_ms": 90.0, "token_f1": 0.4},
        },
        higher_is_better={"latency_ms": False, "token_f1": True},
    )
    b = RagEvalReport.from_dict(json.loads(a.to_json()))
    b.per_sample["s1"]["latency_ms"] = 50.0
    r = compare(a, b)  # metric=None: the first metric of a
    assert r.metric == "latency_ms" and not r.higher_is_better and r.wins == 1
    r2 = compare(a, b, metric="token_f1")  # None scores are not paired
    assert r2.n == 2 and r2.ties == 2


def _retrieval_report(scores: dict[str, float]) -> RetrievalEvalReport:
    return RetrievalEvalReport(
        metrics={"ndcg@10": sum(scores.values()) / len(scores), "recall@10": 0.5},
        per_query={q: {"ndcg@10": s, "recall@10": 0.5} for q, s in scores.items()},
        n_queries=len(scores),
        k_values=(10,),
    )


def test_retrieval_reports_default_to_ndcg_at_10() -> None:
    a = _retrieval_report({"1": 0.1, "2": 0.4, "3": 0.3})
    b = _retrieval_report({"1": 0.2, "2": 0.5, "3": 0.3})
    r = compare(a, b)
    assert r.metric == "ndcg@10" and r.wins == 2
    assert compare(a, b, metric="recall@10").ties == 3


def test_determinism_and_seed_sensitivity() -> None:
    a, b = _pair(200, 0.01, 5)
    r1 = compare(_as_map(a), _as_map(b), seed=42).to_dict()
    r2 = compare(_as_map(a), _as_map(b), seed=42).to_dict()
    shuffled_a = dict(reversed(list(_as_map(a).items())))
    r3 = compare(shuffled_a, _as_map(b), seed=42).to_dict()
    other = compare(_as_map(a), _as_map(b), seed=43)
    assert r1 == r2 == r3
    assert (other.p_value, other.ci_low) != (r1["p_value"], r1["ci_low"])


def test_to_dict_is_json_and_str_is_readable() -> None:
    a = {"q1": 0.1, "q2": 0.2, "q3": 0.3}
    r = compare(a, {k: v + 0.1 for k, v in a.items()}, label_a="bm25", label_b="dense")
    data = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert data["effect_size"] is None  # infinite d_z is not JSON
    assert data["diff_direction"] == "dense - bm25"
    text = str(r)
    assert "dense vs bm25 over 3 paired queries" in text
    assert "95% CI" in text and "exact" in text and "verdict" in text


# --------------------------------------------------------------------------- errors


def test_mismatched_ids_error_names_them_and_intersect_policy() -> None:
    a = {"q1": 0.1, "q2": 0.2, "q3": 0.3, "q4": 0.4}
    b = {"q1": 0.1, "q2": 0.3, "q3": 0.2, "q9": 0.5}
    with pytest.raises(InvalidInputError, match=r"1 only in a \(e\.g\. 'q4'\); 1 only in b .*'q9'"):
        compare(a, b)
    with pytest.raises(InvalidInputError, match="on_missing='intersect'"):
        compare(a, b)
    r = compare(a, b, on_missing="intersect")
    assert r.n == 3 and (r.only_in_a, r.only_in_b) == (1, 1)
    assert "left out 1 queries only in a" in str(r)


# --------------------------------------------------------------------------- unranked queries


def _cranfield_pair() -> tuple[dict[str, dict[str, float]], dict[str, list[str]], dict]:
    """Cranfield's qrels, BM25 and a weaker copy (top 10 reversed) without every 4th query."""
    from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run

    _, _, qrels = load_cranfield()
    bm25 = {q: list(d) for q, d in load_cranfield_bm25_run().items()}
    weaker = {q: d[:10][::-1] + d[10:] for i, (q, d) in enumerate(bm25.items()) if i % 4}
    return qrels, bm25, weaker


def test_a_run_missing_judged_queries_is_paired_as_zero_and_says_so() -> None:
    from ragmeter.evaluation.retrieval import evaluate_run

    qrels, bm25, weaker = _cranfield_pair()
    full, short = evaluate_run(qrels, bm25), evaluate_run(qrels, weaker)
    assert (full.n_missing, short.n_missing) == (0, 57)
    r = compare(full, short, label_a="A", label_b="B")
    assert r.n == 225 and r.significant and not r.b_is_better
    (warning,) = r.warnings
    assert warning.startswith(
        "B's run has no ranking for 57 of the 225 paired queries that A ranks (e.g. '1', "
    )
    assert "B's report scored them 0 (missing_queries='zero', = trec_eval -c)" in warning
    # the 57 zeros' share of the mean difference, and the difference on the other 168
    missing = set(short.missing_queries)
    d = {q: short.per_query[q]["ndcg@10"] - full.per_query[q]["ndcg@10"] for q in full.per_query}
    share = math.fsum(v for q, v in d.items() if q in missing) / 225
    assert f"make up {share:+.4f} of the {r.mean_diff:+.4f} mean difference (B - A)" in warning
    both = compare(
        evaluate_run(qrels, bm25, missing_queries="skip"),
        evaluate_run(qrels, weaker, missing_queries="skip"),
        on_missing="intersect",
        label_a="A",
        label_b="B",
    )
    assert both.n == 168
    assert (
        f"over the 168 paired queries both rank, the mean difference is {both.mean_diff:+.4f}"
        in warning
    )
    assert both.mean_diff == pytest.approx(
        math.fsum(v for q, v in d.items() if q not in missing) / 168
    )
    # ... and the intersect comparison says what it left out, and why
    (left,) = both.warnings
    assert left.startswith("left out 57 queries only in A and 0 only in B (on_missing='intersect')")
    assert "B's run has no ranking for 57 of them, which its report left out" in left
    assert "paired on the 168 queries both score" in left
    # the other way round it is A's run that lacks them; everywhere the result is shown
    flipped = compare(short, full, label_a="B", label_b="A")
    assert flipped.warnings[0].startswith("B's run has no ranking for 57 of the 225 paired")
    assert "  warning: B's run has no ranking" in str(flipped)
    assert json.loads(json.dumps(flipped.to_dict()))["warnings"] == list(flipped.warnings)


def test_queries_neither_run_ranks_are_ties_and_same_coverage_says_nothing() -> None:
    from ragmeter.evaluation.retrieval import evaluate_run

    qrels, bm25, weaker = _cranfield_pair()
    same = {q: bm25[q] for q in weaker}
    r = compare(evaluate_run(qrels, same), evaluate_run(qrels, weaker))
    assert r.warnings == (
        "57 of the 225 paired queries have no ranking in either run: both reports scored them "
        "0 (missing_queries='zero', = trec_eval -c), so they are paired as ties",
    )
    assert r.ties >= 57
    assert compare(evaluate_run(qrels, bm25), evaluate_run(qrels, dict(bm25))).warnings == ()
    # plain {query_id: score} mappings: nothing is known of rankings, only the pairing
    assert compare({"q1": 0.1, "q2": 0.2}, {"q1": 0.3, "q2": 0.1}).warnings == ()


def test_compare_many_and_gate_carry_the_warning() -> None:
    from ragmeter.evaluation.retrieval import evaluate_run

    qrels, bm25, weaker = _cranfield_pair()
    full, short = evaluate_run(qrels, bm25), evaluate_run(qrels, weaker)
    table = compare_many({"bm25": full, "short": short, "copy": full})
    text = str(table)
    assert "warning: short: short's run has no ranking for 57 of the 225 paired" in text
    assert "warning: copy" not in text
    rows = table.to_dict()["rows"]
    assert [len(r["warnings"]) for r in rows] == [1, 0]
    decision = gate(full, short)
    assert not decision.passed
    assert decision.reason.endswith(
        "Caution: the two do not score the same queries the same way; see the warning below."
    )
    assert decision.to_dict()["warnings"] == list(decision.comparison.warnings)
    assert "current's run has no ranking for 57" in str(decision)
    assert "Caution" not in gate(full, evaluate_run(qrels, dict(bm25))).reason


def test_many_missing_ids_are_abbreviated() -> None:
    a = {f"q{i}": 0.5 for i in range(10)}
    b = {"q0": 0.5, "q1": 0.6}
    with pytest.raises(InvalidInputError, match=r"8 only in a \(e\.g\. 'q2', 'q3', 'q4', \.\.\.\)"):
        compare(a, b)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"test": "wilcoxon"}, "test must be one of 'randomization', 'bootstrap', 't-test'"),
        ({"n": 0}, r"n \(the number of resamples\) must be an int >= 1, got 0"),
        ({"n": 2.5}, "must be an int >= 1, got 2.5"),
        ({"confidence": 1.0}, "confidence must be between 0 and 1, got 1.0"),
        ({"alpha": 0}, "alpha must be between 0 and 1, got 0"),
        ({"on_missing": "drop"}, "on_missing must be 'error' or 'intersect', got 'drop'"),
        ({"top": -1}, "top must be an int >= 0, got -1"),
    ],
)
def test_bad_options(kwargs: dict[str, object], message: str) -> None:
    a = {"q1": 0.1, "q2": 0.2}
    with pytest.raises(InvalidInputError, match=message):
        compare(a, a, **kwargs)  # type: ignore[arg-type]


def test_bad_inputs() -> None:
    good = {"q1": 0.1, "q2": 0.2}
    with pytest.raises(InvalidInputError, match=r"query 'q2' in b is 'high', not a number"):
        compare(good, {"q1": 0.1, "q2": "high"})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match=r"query 'q1' in a is nan; .* finite number"):
        compare({"q1": float("nan"), "q2": 0.2}, good)
    with pytest.raises(InvalidInputError, match=r"b must be a RetrievalEvalReport, .* got list"):
        compare(good, [0.1, 0.2])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="at least 2 queries scored by both a and b, got 1"):
        compare({"q1": 0.1}, {"q1": 0.3})
    report = _retrieval_report({"1": 0.1, "2": 0.4})
    with pytest.raises(InvalidInputError, match="no per-query scores for 'map'; its metrics are"):
        compare(report, report, metric="map")
    bare = RetrievalEvalReport(metrics={"ndcg@10": 0.3}, per_query={}, n_queries=2, k_values=())
    with pytest.raises(InvalidInputError, match="report a has no per-query scores"):
        compare(bare, report)
    empty = RagEvalReport(metrics={}, coverage={}, n_samples=0)
    with pytest.raises(InvalidInputError, match="report a has no metrics to compare"):
        compare(empty, empty)


def test_import_ragmeter_stats_does_not_import_numpy() -> None:
    code = (
        "import sys, ragmeter; before = 'numpy' in sys.modules; "
        "import ragmeter.stats, ragmeter.testing; print(before, 'numpy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[1] == out[0]


# --------------------------------------------------------------------------- Holm and many


def _holm_rejects(ps: list[float], alpha: float) -> set[int]:
    """Holm's step-down procedure as published (oracle for the adjusted p-values)."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    rejected: set[int] = set()
    for rank, i in enumerate(order):
        if ps[i] > alpha / (len(ps) - rank):
            break
        rejected.add(i)
    return rejected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=12),
    st.sampled_from([0.01, 0.05, 0.1, 0.2]),
)
def test_holm_adjusted_p_rejects_exactly_what_the_step_down_rejects(
    ps: list[float], alpha: float
) -> None:
    adjusted = holm_bonferroni(ps)
    assert {i for i, p in enumerate(adjusted) if p <= alpha} == _holm_rejects(ps, alpha)
    assert all(p <= q <= 1 for p, q in zip(ps, adjusted, strict=True))


def test_holm_hand_example_and_error() -> None:
    assert holm_bonferroni([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_bonferroni([]) == []
    with pytest.raises(InvalidInputError, match=r"p_values\[1\] must be in \[0, 1\], got 1.5"):
        holm_bonferroni([0.1, 1.5])


def test_compare_many_adjusts_each_pair_against_the_baseline() -> None:
    base, better = _pair(120, 0.08, 1)
    _, noise = _pair(120, 0.0, 1)
    systems = {"bm25": _as_map(base), "better": _as_map(better), "noise": _as_map(noise)}
    table = compare_many(systems, n=2_000)
    raw = [compare(systems["bm25"], systems[k], n=2_000).p_value for k in ("better", "noise")]
    assert [r.name for r in table.rows] == ["better", "noise"]
    assert [r.p_adjusted for r in table.rows] == pytest.approx(holm_bonferroni(raw))
    assert table.significant() == ["better"]
    text = str(table)
    assert "'bm25' over 120 paired queries" in text and "Holm–Bonferroni over 2" in text
    assert text.count("*") == 2  # legend + the significant row
    assert table.to_markdown().startswith("| system | mean |")
    assert json.loads(json.dumps(table.to_dict()))["rows"][0]["name"] == "better"
    other = compare_many(systems, baseline="noise", n=2_000)
    assert [r.name for r in other.rows] == ["bm25", "better"]


def test_compare_many_errors() -> None:
    a = {"q1": 0.1, "q2": 0.2}
    with pytest.raises(InvalidInputError, match=r"at least 2 systems .* got 1"):
        compare_many({"only": a})
    with pytest.raises(InvalidInputError, match="baseline 'x' is not one of the systems: 'a', 'b'"):
        compare_many({"a": a, "b": a}, baseline="x")


# --------------------------------------------------------------------------- gate


def test_gate_fails_only_on_a_large_and_significant_drop() -> None:
    base, worse = _pair(200, -0.05, 3)
    failed = gate(_as_map(base), _as_map(worse), max_drop=0.01, metric="ndcg@10")
    assert not failed.passed and failed.exit_code == 1
    assert failed.drop == pytest.approx(base.mean() - worse.mean())
    assert failed.reason.startswith("REGRESSION: ndcg@10 dropped by")
    assert "significant (p = " in failed.reason

    allowed = gate(_as_map(base), _as_map(worse), max_drop=0.2)
    assert allowed.passed and "within the allowed 0.2" in allowed.reason

    few_a = {"q1": 0.8, "q2": 0.2, "q3": 0.6}
    few_b = {"q1": 0.5, "q2": 0.3, "q3": 0.55}  # mean drop 0.083, but 3 queries
    noisy = gate(few_a, few_b, max_drop=0.01)
    assert noisy.passed and noisy.exit_code == 0
    assert "not significant" in noisy.reason and "more queries would tell" in noisy.reason

    improved = gate(_as_map(worse), _as_map(base))
    assert improved.passed and "did not get worse" in improved.reason


def test_gate_direction_for_lower_is_better_metrics() -> None:
    fast, slow = _pair(150, 0.1, 4)
    latency_fast = {k: 100 + 100 * v for k, v in _as_map(fast).items()}
    latency_slow = {k: 100 + 100 * v for k, v in _as_map(slow).items()}
    rose = gate(latency_fast, latency_slow, higher_is_better=False, max_drop=1.0)
    assert not rose.passed and "rose by" in rose.reason and rose.drop > 1.0
    fell = gate(latency_slow, latency_fast, higher_is_better=False, max_drop=1.0)
    assert fell.passed and fell.drop < 0
    # read as higher-is-better, the same faster run would be a regression
    assert not gate(latency_slow, latency_fast, max_drop=1.0).passed


@pytest.mark.parametrize("bad", [-0.1, float("nan"), "0.1", True])
def test_gate_rejects_bad_max_drop(bad: object) -> None:
    a = {"q1": 0.1, "q2": 0.2}
    with pytest.raises(InvalidInputError, match="max_drop must be a"):
        gate(a, a, max_drop=bad)  # type: ignore[arg-type]
