"""Exact float sums and sums of squares, as integers scaled by ``2**1074`` (merging adds ints)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


_SCALE = 1074
"""Every finite float is an integer multiple of ``2**-1074``."""
_SQ_SCALE = 2 * _SCALE
_DEKKER_HI = 2.0**500
_DEKKER_LO = 2.0**-480
_SPLIT = 134217729.0  # 2**27 + 1 (Veltkamp)


def _scaled(value: float, scale: int = _SCALE) -> int:
    """``value * 2**scale`` exactly (an int for every finite float when scale >= 1074)."""
    num, den = value.as_integer_ratio()
    return num << (scale - den.bit_length() + 1)


def _array_sum(arr: np.ndarray[Any, np.dtype[np.float64]]) -> int:
    """The exact sum of finite floats, times ``2**1074``, at NumPy speed.

    Each value is ``M * 2**(e - 53)`` with an integer ``|M| < 2**53`` (``frexp``); ``M`` is
    split in 32-bit halves whose per-exponent sums stay below ``2**53`` (so the float
    ``bincount`` sums are exact), then the few per-exponent totals are added as ints.
    """
    import numpy as np

    total = 0
    for begin in range(0, arr.size, 1 << 20):  # keeps every per-exponent sum exact
        part = arr[begin : begin + (1 << 20)]
        mantissa, exponent = np.frexp(part)
        whole = (mantissa * 9007199254740992.0).astype(np.int64)  # * 2**53, exact
        index = exponent.astype(np.int64) + 1100
        high = np.bincount(index, weights=(whole >> 32).astype(np.float64))
        low = np.bincount(index, weights=(whole & 0xFFFFFFFF).astype(np.float64))
        for slot in np.flatnonzero((high != 0.0) | (low != 0.0)).tolist():
            value = (int(high[slot]) << 32) + int(low[slot])
            shift = slot - 1100 - 53 + _SCALE
            total += value << shift if shift >= 0 else value >> -shift
    return total


def _sqrt_frac(num: int, den: int) -> float:
    """The correctly rounded square root of ``num / den`` (ints, ``den > 0``).

    Rounds to odd on 109+ bits, then the float conversion rounds once more, correctly
    (the method of CPython's ``statistics``).
    """
    if num <= 0:
        return 0.0
    q = (num.bit_length() - den.bit_length() - 109) // 2
    if q >= 0:
        root = _isqrt_frac_rto(num, den << 2 * q) << q
        return float(root)
    return _isqrt_frac_rto(num << -2 * q, den) / (1 << -q)


def _isqrt_frac_rto(num: int, den: int) -> int:
    """The square root of ``num / den`` rounded to odd."""
    root = math.isqrt(num // den)
    return root | (root * root * den != num)


class ExactSum:
    """The exact sum of any number of finite floats, as one integer; mergeable.

    :meth:`add` folds a block of values in at NumPy speed; :meth:`merge` adds another sum.
    The value is exact, so whatever the order or partition of the values, :meth:`fsum`
    (the correctly rounded sum, as ``math.fsum``) and :meth:`mean` (the correctly rounded
    mean, as ``statistics.mean``) are the same floats.

    >>> s = ExactSum(); s.add([0.1] * 10)
    >>> s.fsum(), s.mean(10)
    (1.0, 0.1)
    >>> t = ExactSum(); t.add([1e308, 1e308]); t.add([-1e308])   # beyond the float range
    >>> t.fsum()
    1e+308
    """

    __slots__ = ("_scaled",)

    def __init__(self) -> None:
        self._scaled = 0
        """The exact sum times ``2**1074`` (every finite float is a multiple of ``2**-1074``)."""

    def add(self, values: Iterable[float]) -> None:
        """Add finite floats (trusted: NaN or infinities make the result meaningless)."""
        import numpy as np

        arr = values if isinstance(values, np.ndarray) else np.asarray(list(values), dtype=float)
        if arr.size:
            self._scaled += _array_sum(arr.astype(np.float64, copy=False))

    def add_scaled(self, value: int) -> None:
        """Add ``value * 2**-1074`` exactly."""
        self._scaled += value

    def merge(self, other: ExactSum) -> None:
        """Add ``other``'s sum to this one (``other`` is unchanged)."""
        self._scaled += other._scaled

    def scaled(self) -> int:
        """The exact sum times ``2**1074``, an int."""
        return self._scaled

    def fsum(self) -> float:
        """The correctly rounded sum (what ``math.fsum`` gives on all the values)."""
        return self._scaled / (1 << _SCALE)

    def mean(self, n: int) -> float:
        """The correctly rounded ``sum / n`` (``n >= 1``)."""
        return self._scaled / (n << _SCALE)

    def __getstate__(self) -> int:
        return self._scaled

    def __setstate__(self, state: int) -> None:
        self._scaled = state

    def __repr__(self) -> str:
        return f"ExactSum({self.fsum()!r})"


def _expansion(rest: list[float]) -> list[float]:
    """Floats whose exact sum is the exact sum of ``rest`` (which this extends): each
    ``math.fsum`` is the correctly rounded sum, and appending its negation leaves the
    rounding error as the new exact sum, until that is zero. Raises ``OverflowError`` when
    an intermediate sum leaves the float range."""
    terms: list[float] = []
    for _ in range(80):  # a finite float sum needs at most ~40 terms
        total = math.fsum(rest)
        if total == 0.0:
            return terms
        if not math.isfinite(total):
            raise OverflowError("sum out of float range")
        terms.append(total)
        rest.append(-total)
    raise OverflowError("no exact expansion found")  # pragma: no cover


def _py_sum(values: list[float]) -> int:
    """:func:`_array_sum` in plain Python (``math.fsum`` passes at C speed)."""
    try:
        return sum(_scaled(t) for t in _expansion(list(values)))
    except (OverflowError, ValueError):
        return sum(map(_scaled, values))


def _py_squares(values: list[float]) -> int:
    """:func:`_exact_squares` in plain Python: Veltkamp-split products, summed exactly."""
    terms: list[float] = []
    extra = 0
    add = terms.append
    for v in values:
        size = abs(v)
        if size > _DEKKER_HI or (size < _DEKKER_LO and size != 0.0):
            extra += _scaled_square(v)
            continue
        c = v * _SPLIT
        hi = c - (c - v)
        lo = v - hi
        add(hi * hi)
        add(2.0 * hi * lo)
        add(lo * lo)
    return (_py_sum(terms) << _SCALE) + extra


def _exact_squares(arr: np.ndarray[Any, np.dtype[np.float64]]) -> int:
    """The exact sum of squares of ``arr``, scaled by ``2**2148``."""
    import numpy as np

    size = np.abs(arr)
    ok = (size <= _DEKKER_HI) & ((size >= _DEKKER_LO) | (size == 0.0))
    if ok.all():
        return _array_sum(_dekker_squares(arr)) << _SCALE
    extra = sum(_scaled_square(v) for v in arr[~ok].tolist())  # rare: squared in integers
    return (_array_sum(_dekker_squares(arr[ok])) << _SCALE) + extra


def _scaled_square(value: float) -> int:
    """``value**2 * 2**2148`` exactly."""
    num, den = value.as_integer_ratio()
    return (num * num) << (_SQ_SCALE - 2 * (den.bit_length() - 1))


def _dekker_squares(arr: np.ndarray[Any, np.dtype[np.float64]]) -> Any:
    """Floats whose exact sum is the exact sum of the squares of ``arr`` (Veltkamp split;
    only for ``2**-480 <= |v| <= 2**500``, where every product is exact)."""
    import numpy as np

    c = arr * _SPLIT
    hi = c - (c - arr)
    lo = arr - hi
    return np.concatenate((hi * hi, 2.0 * hi * lo, lo * lo))
