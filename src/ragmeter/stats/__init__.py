"""Is the winner real? Paired comparison of two systems, query by query.

Two systems scored on the same queries give two numbers per query. :func:`compare` pairs
them by query id and asks whether the mean difference is larger than the query-to-query
noise, the way IR evaluation does it (Smucker, Allan & Carterette, CIKM 2007):

* ``mean_diff`` is always **b minus a** (``a`` the baseline, ``b`` the candidate), in the
  metric's own units, whatever the metric's direction;
* ``ci_low``/``ci_high`` is a paired bootstrap percentile interval of that mean;
* ``p_value`` is two-sided, from a paired randomization (sign-flip) test by default, a
  paired bootstrap test, or a paired t-test;
* ``wins``/``ties``/``losses`` count queries where ``b`` is better / equal / worse, taking
  the metric's direction into account (lower latency is a win).

:func:`compare_many` compares several systems against one baseline with Holm–Bonferroni
adjusted p-values; :func:`gate` turns a comparison into a pass/fail regression decision.
:func:`fill_holes` grades a run's unjudged top documents with an LLM judge and shows the
scores before and after beside the judge's agreement with the human grades (Cohen's kappa,
Kendall's tau: :func:`cohen_kappa`, :func:`kendall_tau`, :func:`confusion_matrix`).
NumPy is imported only when a comparison runs, so ``import ragmeter`` stays light.
Saved runs (:mod:`ragmeter.registry`) are compared like for like by :func:`diff_runs`
(refused with what differs when their data or settings do), followed over time by
:func:`trend`, and read as a gate's baseline by :func:`registry_baseline`.

One idea per module: ``_compare`` (two systems), ``_pairing`` (each side's scores and how
they pair), ``_result`` (what a comparison found), ``_resampling`` (the tests and
intervals), ``_many`` (several systems, Holm-Bonferroni), ``_gate`` (pass/fail), ``_runs``
(saved runs: diff, a gate's baseline), ``_trend`` (a metric over saved runs),
``_agreement`` (two raters: kappa, tau), ``_holes`` and ``_holes_result`` (holes filled by
a judge); no rendering here (pages are written by :mod:`ragmeter.html`).
"""

from __future__ import annotations

from ragmeter.stats._agreement import cohen_kappa, confusion_matrix, kendall_tau
from ragmeter.stats._base import (
    PRIMARY_RETRIEVAL_METRIC,
    TESTS,
    TIE_TOLERANCE,
    Comparable,
    OnMissing,
    TestName,
)
from ragmeter.stats._compare import compare
from ragmeter.stats._gate import GateResult, gate
from ragmeter.stats._holes import fill_holes, stratified_sample
from ragmeter.stats._holes_result import HoleFilling, JudgeAgreement, SystemFill
from ragmeter.stats._many import ComparisonRow, ComparisonTable, compare_many, holm_bonferroni
from ragmeter.stats._result import CompareResult, QueryChange
from ragmeter.stats._runs import RunPair, diff_runs, load_pair, registry_baseline, run_label
from ragmeter.stats._trend import TrendPoint, trend

__all__ = [
    "PRIMARY_RETRIEVAL_METRIC",
    "TESTS",
    "TIE_TOLERANCE",
    "Comparable",
    "CompareResult",
    "ComparisonRow",
    "ComparisonTable",
    "GateResult",
    "HoleFilling",
    "JudgeAgreement",
    "OnMissing",
    "QueryChange",
    "RunPair",
    "SystemFill",
    "TestName",
    "TrendPoint",
    "cohen_kappa",
    "compare",
    "compare_many",
    "confusion_matrix",
    "diff_runs",
    "fill_holes",
    "gate",
    "holm_bonferroni",
    "kendall_tau",
    "load_pair",
    "registry_baseline",
    "run_label",
    "stratified_sample",
    "trend",
]
