"""Summaries of a list of values: correctly rounded mean and deviation, percentiles."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from typing import Any, Literal

from ragmeter.aggregate._exact import (
    _SCALE,
    _SQ_SCALE,
    _array_sum,
    _exact_squares,
    _py_squares,
    _py_sum,
    _sqrt_frac,
)

PERCENTILES: tuple[int, ...] = (5, 25, 50, 75, 95)

MeanRule = Literal["exact", "fsum"]
"""``"exact"``: the correctly rounded mean; ``"fsum"``: ``math.fsum(values) / n`` (the
correctly rounded mean when that sum is beyond the float range)."""


def _mean(total: int, n: int, scale: int, rule: MeanRule) -> float:
    if rule == "fsum":
        try:
            return (total / (1 << scale)) / n
        except OverflowError:  # the sum is beyond the float range, the mean is not
            pass
    return total / (n << scale)


def _std(total: int, squares: int, n: int) -> float:
    """Correctly rounded population std from ``sum * 2**1074`` and ``sum of squares * 2**2148``."""
    return _sqrt_frac(n * squares - total * total, n * n << _SQ_SCALE)


def _order_stat_positions(n: int, q: float) -> tuple[int, int, float]:
    pos = (n - 1) * q
    lo = math.floor(pos)
    return lo, min(lo + 1, n - 1), pos - lo


def _interpolate(low: float, high: float, frac: float) -> float:
    value = low + (high - low) * frac
    if math.isfinite(value):
        return value
    return low * (1 - frac) + high * frac  # high - low overflowed (values near +-1.8e308)


def _quantiles(order_stat: Any, n: int) -> tuple[float, dict[str, float]]:
    """Median and percentiles by linear interpolation between order statistics."""
    cache: dict[int, float] = {}

    def at(i: int) -> float:
        if i not in cache:
            cache[i] = order_stat(i)
        return cache[i]

    def quantile(q: float) -> float:
        lo, hi, frac = _order_stat_positions(n, q)
        return _interpolate(at(lo), at(hi), frac)

    return quantile(0.5), {f"p{p}": quantile(p / 100) for p in PERCENTILES}


def _empty_stats(missing: int) -> dict[str, Any]:
    return {
        "count": 0,
        "missing": missing,
        "mean": 0.0,
        "median": 0.0,
        "std": 0.0,
        "min": 0.0,
        "max": 0.0,
        "percentiles": {f"p{p}": 0.0 for p in PERCENTILES},
        "exact": True,
        "relative_error": 0.0,
    }


def summarize_values(
    values: Iterable[float], missing: int = 0, *, mean: MeanRule = "exact"
) -> dict[str, Any]:
    """Exact summary statistics of finite floats held in memory (see the module docstring).

    The same numbers a :class:`Distribution` in its exact mode gives for these values. It
    uses NumPy for 20,000 values or more, or when something already imported it, and plain
    Python otherwise (a small report loads no NumPy); both compute the same exact sums, so
    the same floats.

    >>> summarize_values([1.0, 0.0, 0.5])["median"]
    0.5
    """
    listed = sorted(float(v) + 0.0 for v in values)  # -0.0 -> 0.0: one zero, whatever came first
    n = len(listed)
    if n == 0:
        return _empty_stats(missing)
    if not all(map(math.isfinite, listed)):
        raise ValueError(
            "cannot summarise scores that are not finite numbers (NaN or an infinity); the "
            "evaluation drivers never report one"
        )
    if n >= 20_000 or "numpy" in sys.modules:  # worth importing NumPy for
        import numpy as np

        arr = np.asarray(listed, dtype=np.float64)
        total = _array_sum(arr)
        squares = _exact_squares(arr)
    else:
        total = _py_sum(listed)
        squares = _py_squares(listed)
    median, percentiles = _quantiles(lambda i: listed[i], n)
    return {
        "count": n,
        "missing": missing,
        "mean": _mean(total, n, _SCALE, mean),
        "median": median,
        "std": _std(total, squares, n),
        "min": listed[0],
        "max": listed[-1],
        "percentiles": percentiles,
        "exact": True,
        "relative_error": 0.0,
    }
