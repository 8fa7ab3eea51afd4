"""A comparison turned into a pass/fail regression decision (``gate``)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragmeter.errors import InvalidInputError
from ragmeter.stats._base import _TEST_LABELS, Comparable, OnMissing, TestName
from ragmeter.stats._compare import compare
from ragmeter.stats._result import CompareResult, _p_text

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------- gate


@dataclass(frozen=True)
class GateResult:
    """A regression decision: ``passed`` unless the drop is both too large and significant.

    ``drop`` is how much worse ``current`` is than ``baseline`` in the metric's units
    (positive = worse; for a lower-is-better metric a rise counts as a drop); ``reason``
    says why, in one sentence (and points to the comparison's ``warnings`` when the two do
    not score the same queries the same way); ``comparison`` is the full
    :class:`CompareResult` with the baseline as ``a`` and the current run as ``b``.
    """

    passed: bool
    reason: str
    drop: float
    max_drop: float
    alpha: float
    comparison: CompareResult

    @property
    def exit_code(self) -> int:
        """``0`` when the gate passes, ``1`` when it fails (for a CI job)."""
        return 0 if self.passed else 1

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return {
            "passed": self.passed,
            "reason": self.reason,
            "drop": self.drop,
            "max_drop": self.max_drop,
            "alpha": self.alpha,
            "warnings": list(self.comparison.warnings),
            "comparison": self.comparison.to_dict(),
        }

    def __str__(self) -> str:
        return f"{self.reason}\n\n{self.comparison}"


def gate(
    baseline: Comparable,
    current: Comparable,
    *,
    metric: str | None = None,
    max_drop: float = 0.01,
    alpha: float = 0.05,
    test: TestName = "randomization",
    n: int = 10_000,
    seed: int | None = 0,
    on_missing: OnMissing = "error",
    higher_is_better: bool | None = None,
) -> GateResult:
    """Decide whether ``current`` regressed from ``baseline`` on ``metric``.

    The gate fails only when the mean got worse by more than ``max_drop`` (in the metric's
    units: ``0.01`` is one NDCG point) **and** the paired test finds the change significant
    (``p_value < alpha``). A large drop on few queries that could be noise passes, with a
    reason saying so. The direction follows ``higher_is_better`` (from the report when
    ``None``): for latency or cost a rise is the drop.

    >>> base = {"q1": 0.9, "q2": 0.8, "q3": 0.7, "q4": 0.9, "q5": 0.8}
    >>> now = {"q1": 0.9, "q2": 0.8, "q3": 0.7, "q4": 0.9, "q5": 0.79}
    >>> gate(base, now, max_drop=0.01).passed
    True
    """
    if isinstance(max_drop, bool) or not isinstance(max_drop, numbers.Real):
        raise InvalidInputError(f"max_drop must be a number >= 0, got {max_drop!r}")
    if not (math.isfinite(float(max_drop)) and max_drop >= 0):
        raise InvalidInputError(
            f"max_drop must be a finite number >= 0 (in the metric's units), got {max_drop!r}"
        )
    result = compare(
        baseline,
        current,
        metric=metric,
        test=test,
        n=n,
        seed=seed,
        alpha=alpha,
        on_missing=on_missing,
        higher_is_better=higher_is_better,
        label_a="baseline",
        label_b="current",
    )
    drop = -result.mean_diff if result.higher_is_better else result.mean_diff
    passed, reason = _decision(result, drop, max_drop, alpha, test)
    return GateResult(
        passed=passed,
        reason=reason,
        drop=drop,
        max_drop=float(max_drop),
        alpha=alpha,
        comparison=result,
    )


def _decision(
    result: CompareResult, drop: float, max_drop: float, alpha: float, test: str
) -> tuple[bool, str]:
    """``(passed, reason)``: fail only on a drop over ``max_drop`` that is significant."""
    name = result.metric or "the score"
    moved = f"{result.mean_a:.4f} -> {result.mean_b:.4f}"
    test_text = f"{_TEST_LABELS[test]} over {result.n} paired queries"
    p_text = f"p = {_p_text(result.p_value)}"
    worse = "rose" if not result.higher_is_better else "dropped"
    if drop > max_drop and result.p_value < alpha:
        passed = False
        reason = (
            f"REGRESSION: {name} {worse} by {drop:.4f} ({moved}), more than the allowed "
            f"{max_drop:g}, and the change is significant ({p_text} < alpha {alpha:g}; "
            f"{test_text})."
        )
    elif drop > max_drop:
        passed = True
        reason = (
            f"ok: {name} {worse} by {drop:.4f} ({moved}), more than the allowed "
            f"{max_drop:g}, but the change is not significant ({p_text} >= alpha {alpha:g}; "
            f"{test_text}): it may be noise, and more queries would tell."
        )
    elif drop > 0:
        passed = True
        reason = (
            f"ok: {name} {worse} by {drop:.4f} ({moved}), within the allowed {max_drop:g} "
            f"({p_text}; {test_text})."
        )
    else:
        passed = True
        reason = f"ok: {name} did not get worse ({moved}; {p_text}; {test_text})."
    if result.warnings:
        reason += (
            " Caution: the two do not score the same queries the same way; see the "
            f"warning{'s' if len(result.warnings) > 1 else ''} below."
        )
    return passed, reason
