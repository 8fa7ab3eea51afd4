"""Helpers for a project's own test suite: fail a test when retrieval or answer quality regresses.

>>> from ragmeter.testing import assert_no_regression
>>> baseline = {"q1": 0.9, "q2": 0.8, "q3": 0.7}
>>> result = assert_no_regression(baseline, dict(baseline))  # passes, returns the decision
>>> result.passed
True
"""

from __future__ import annotations

from ragmeter.stats import Comparable, GateResult, OnMissing, TestName, gate

__all__ = ["assert_no_regression"]


def assert_no_regression(
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
    """Raise ``AssertionError`` if ``current`` regressed from ``baseline``; else return the verdict.

    Same rule as :func:`ragmeter.stats.gate` and ``ragmeter gate``: a regression is a drop
    larger than ``max_drop`` (metric units; a rise for a lower-is-better metric such as
    latency) that is also significant (``p_value < alpha``, paired ``test`` over the
    queries both score). The assertion message says which, with the full comparison.
    ``baseline``/``current`` are reports or ``{query_id: score}`` mappings, e.g. a report
    saved with ``to_dict()`` and loaded back with ``RetrievalEvalReport.from_dict``.

    Bad arguments raise :class:`~ragmeter.errors.InvalidInputError`, not ``AssertionError``:
    a broken comparison is an error in the test, not a regression.

    >>> before = {f"q{i}": 0.8 for i in range(30)}
    >>> after = {f"q{i}": 0.5 for i in range(30)}
    >>> assert_no_regression(before, after, metric="ndcg@10")
    Traceback (most recent call last):
    ...
    AssertionError: REGRESSION: ndcg@10 dropped by 0.3000 (0.8000 -> 0.5000), ...
    """
    __tracebackhide__ = True  # pytest shows the assertion, not this frame
    result = gate(
        baseline,
        current,
        metric=metric,
        max_drop=max_drop,
        alpha=alpha,
        test=test,
        n=n,
        seed=seed,
        on_missing=on_missing,
        higher_is_better=higher_is_better,
    )
    if not result.passed:
        raise AssertionError(str(result))
    return result
