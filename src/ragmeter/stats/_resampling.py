"""The paired tests and intervals: randomization, bootstrap and t-test (Student's t via the
regularised incomplete beta, no SciPy)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ragmeter.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------- resampling

_CHUNK_ELEMENTS = 2_000_000  # resamples are drawn in blocks of about this many numbers


def _tolerance(d: FloatArray) -> float:
    # Null statistics are sums in another order than the observed one; values equal in
    # exact arithmetic may differ by a few ulps. 1e-9 of the mean |d| absorbs that and is
    # far below any real gap between distinct values of the statistic.
    import numpy as np

    return 1e-9 * float(np.mean(np.abs(d)))


def _bootstrap_means(d: FloatArray, n_resamples: int, seed: int | None) -> FloatArray:
    """Means of ``n_resamples`` resamples of ``d`` (with replacement), in blocks.

    The indices are ``default_rng(seed).integers(0, len(d), (n_resamples, len(d)))``
    drawn block by block, the same stream ``scipy.stats.bootstrap(..., rng=seed)`` uses.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    m = d.size
    rows = max(1, _CHUNK_ELEMENTS // m)
    out = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, rows):
        stop = min(start + rows, n_resamples)
        idx = rng.integers(0, m, size=(stop - start, m))
        out[start:stop] = np.take(d, idx).mean(axis=1)
    return out


def _randomization_p(d: FloatArray, n_resamples: int, seed: int | None) -> tuple[float, bool]:
    """Two-sided sign-flip p-value of the mean of ``d``; exact when ``2**m <= n_resamples``.

    Under the null the sign of each paired difference is a fair coin, so the mean of
    ``d`` with random signs is the null distribution. Monte Carlo p-values are
    ``(count + 1) / (n_resamples + 1)``, counting the observed assignment, so never 0.
    """
    import numpy as np

    m = d.size
    total = float(d.sum())
    observed = abs(total) / m
    threshold = observed - _tolerance(d)
    rows = max(1, _CHUNK_ELEMENTS // m)
    count = 0
    if m < 63 and 2**m <= n_resamples:
        shifts = np.arange(m, dtype=np.uint64)
        n_all = 2**m
        for start in range(0, n_all, rows):
            codes = np.arange(start, min(start + rows, n_all), dtype=np.uint64)
            bits = ((codes[:, None] >> shifts) & np.uint64(1)).astype(np.float64)
            null = (total - 2.0 * (bits @ d)) / m
            count += int(np.count_nonzero(np.abs(null) >= threshold))
        return count / n_all, True
    rng = np.random.default_rng(seed)
    n_bytes = (m + 7) // 8
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        raw = rng.integers(0, 256, size=(size, n_bytes), dtype=np.uint8)
        # float64 bits: a float64 @ float64 product uses BLAS, uint8 @ float64 does not.
        bits = np.unpackbits(raw, axis=1, count=m).astype(np.float64)
        null = (total - 2.0 * (bits @ d)) / m
        count += int(np.count_nonzero(np.abs(null) >= threshold))
    return (count + 1) / (n_resamples + 1), False


def _bootstrap_p(d: FloatArray, boot: FloatArray) -> float:
    """Two-sided paired bootstrap test of mean 0 (Efron & Tibshirani's shifted bootstrap).

    Resampling ``d - mean(d)`` (the null made true) gives means ``boot - mean(d)``; the
    p-value is ``(count(|boot - mean(d)| >= |mean(d)|) + 1) / (len(boot) + 1)``.
    """
    import numpy as np

    mean = float(d.mean())
    count = int(np.count_nonzero(np.abs(boot - mean) >= abs(mean) - _tolerance(d)))
    return (count + 1) / (boot.size + 1)


def _std(d: FloatArray) -> float:
    """Sample standard deviation, 0.0 when it is only rounding noise (constant differences)."""
    sd = float(d.std(ddof=1))
    return 0.0 if sd <= _tolerance(d) else sd


def _t_test_p(d: FloatArray) -> float:
    """Two-sided paired t-test p-value (Student t, ``n - 1`` degrees of freedom).

    When every difference is the same (up to rounding), ``t`` is undefined: ``1.0`` if
    they are all 0, else ``0.0`` (a constant non-zero shift), where SciPy returns NaN.
    """
    m = d.size
    mean = float(d.mean())
    sd = _std(d)
    if sd == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = mean / (sd / math.sqrt(m))
    return _student_t_two_sided(t, m - 1)


def _student_t_two_sided(t: float, df: float) -> float:
    """Two-sided tail probability ``P(|T| >= |t|)`` of Student's t with ``df`` degrees of freedom.

    Computed as the regularized incomplete beta ``I_{df/(df+t^2)}(df/2, 1/2)``.

    >>> round(_student_t_two_sided(2.0, 10), 6)
    0.073388
    >>> _student_t_two_sided(0.0, 5)
    1.0
    """
    if df <= 0:
        raise InvalidInputError(f"df must be > 0, got {df!r}")
    t2 = t * t
    if t2 == 0.0:
        return 1.0
    if math.isinf(t2):
        return 0.0
    x = df / (df + t2)
    y = t2 / (df + t2)  # 1 - x without cancellation
    return min(1.0, _betainc_reg(df / 2.0, 0.5, x, y))


def _betainc_reg(a: float, b: float, x: float, y: float) -> float:
    """Regularized incomplete beta ``I_x(a, b)`` with ``y = 1 - x`` (continued fraction)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_cf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_cf(b, a, y) / b


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta, evaluated by the modified Lentz method."""
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for i in range(1, 100_000):
        two_i = 2 * i
        for num in (
            i * (b - i) * x / ((a + two_i - 1.0) * (a + two_i)),
            -(a + i) * (a + b + i) * x / ((a + two_i) * (a + two_i + 1.0)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            step = d * c
            h *= step
        if abs(step - 1.0) < 1e-15:
            break
    return h
