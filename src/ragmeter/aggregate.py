"""Mergeable, exact aggregates: what a streamed evaluation keeps instead of every score.

A streamed :func:`ragmeter.evaluate_rag` (or :func:`ragmeter.evaluate_run_file`) keeps one
:class:`Distribution` per metric, a few KiB whatever the number of samples, and merging the
distributions of any partition of the samples gives **bit-identical** results to one pass
over all of them (what a scale-out needs):

* :class:`ExactSum` holds a float sum exactly, as one integer scaled by ``2**1074`` (every
  finite float is a multiple of ``2**-1074``), folded in a block at a time at NumPy speed.
  Merging adds integers, so the exact sum, and every number computed from it, does not
  depend on how the values were split or ordered.
* :class:`Distribution` adds the count, the number of missing scores, exact minimum and
  maximum, the exact sum of squares, and the values themselves: exactly (a count per
  distinct value) while there are at most ``max_distinct`` distinct values -- every 0/1
  metric, ``precision@k``, most token ratios -- and otherwise in logarithmic buckets
  (the DDSketch algorithm, Masson, Rim and Lee, VLDB 2019, with a piecewise-linear
  logarithm so that bucketing uses only exact IEEE operations and gives the same buckets on
  every machine). A bucket's representative is within relative error ``relative_accuracy``
  (default 0.001) of every value in it.

From those: the mean is correctly rounded (``statistics.mean``) or, for retrieval reports,
``math.fsum(values) / n`` (trec_eval's sum, rounded once); the population standard deviation
is correctly rounded (``statistics.pstdev``); count, missing, min and max are exact; median
and percentiles (linear interpolation between order statistics, as NumPy's default) are
exact in the exact mode and otherwise each order statistic is within relative error
``relative_accuracy`` of the true one, so a percentile of scores of one sign is within
that relative error too.

>>> a, b = Distribution(), Distribution()
>>> a.add([0.1, 0.2]); b.add([0.4]); b.add_missing(1)
>>> a.merge(b)
>>> stats = a.stats()
>>> stats["count"], stats["missing"], stats["mean"], stats["exact"]
(3, 1, 0.23333333333333334, True)
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ragmeter._gc import paused_gc

if TYPE_CHECKING:
    import numpy as np


__all__ = [
    "BLOCK",
    "MAX_DISTINCT",
    "PERCENTILES",
    "RELATIVE_ACCURACY",
    "Distribution",
    "ExactSum",
    "IdRoots",
    "MeanRule",
    "StreamKeys",
    "id_root",
    "paused_gc",
    "summarize_values",
]

BLOCK = 4096
"""How many values a streamed evaluation buffers per metric before folding them in."""

MAX_DISTINCT = 2048
"""A :class:`Distribution` keeps exact counts up to this many distinct values."""

RELATIVE_ACCURACY = 0.001
"""Relative error bound of a bucketed order statistic (and so of a percentile)."""

PERCENTILES: tuple[int, ...] = (5, 25, 50, 75, 95)

MeanRule = Literal["exact", "fsum"]
"""``"exact"``: the correctly rounded mean; ``"fsum"``: ``math.fsum(values) / n`` (the
correctly rounded mean when that sum is beyond the float range)."""

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


def _dekker_squares(arr: np.ndarray[Any, np.dtype[np.float64]]) -> Any:
    """Floats whose exact sum is the exact sum of the squares of ``arr`` (Veltkamp split;
    only for ``2**-480 <= |v| <= 2**500``, where every product is exact)."""
    import numpy as np

    c = arr * _SPLIT
    hi = c - (c - arr)
    lo = arr - hi
    return np.concatenate((hi * hi, 2.0 * hi * lo, lo * lo))


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


class _Buckets:
    """Counts of log-spaced buckets over positive values (a dense numpy array with an offset)."""

    __slots__ = ("counts", "offset")

    def __init__(self) -> None:
        import numpy as np

        self.counts: np.ndarray[Any, np.dtype[np.int64]] = np.zeros(0, dtype=np.int64)
        self.offset = 0

    def add_keys(self, keys: np.ndarray[Any, np.dtype[np.int64]], weights: Any = None) -> None:
        import numpy as np

        if keys.size == 0:
            return
        low, high = int(keys.min()), int(keys.max())
        self._cover(low, high)
        self.counts += np.bincount(
            keys - self.offset, weights=weights, minlength=self.counts.size
        ).astype(np.int64)

    def _cover(self, low: int, high: int) -> None:
        import numpy as np

        if self.counts.size == 0:
            self.offset = low
            self.counts = np.zeros(high - low + 1, dtype=np.int64)
            return
        start = min(low, self.offset)
        stop = max(high + 1, self.offset + self.counts.size)
        if start == self.offset and stop == self.offset + self.counts.size:
            return
        grown = np.zeros(stop - start, dtype=np.int64)
        grown[self.offset - start : self.offset - start + self.counts.size] = self.counts
        self.counts, self.offset = grown, start

    def merge(self, other: _Buckets) -> None:
        if other.counts.size == 0:
            return
        self._cover(other.offset, other.offset + other.counts.size - 1)
        begin = other.offset - self.offset
        self.counts[begin : begin + other.counts.size] += other.counts

    def total(self) -> int:
        return int(self.counts.sum())


class Distribution:
    """One metric's scores as a mergeable summary state (see the module docstring).

    :meth:`add` takes a block of finite floats, :meth:`add_missing` counts scores that are
    missing, :meth:`merge` folds another distribution in; :meth:`stats` gives the summary.
    Memory does not grow with the number of values: at most ``max_distinct`` exact counts,
    then buckets whose number grows with the logarithm of the value range only (about
    500 per factor of 2 at ``relative_accuracy=0.001``; 0/1 scores stay exact).

    Raises :class:`ValueError` for a non-finite value or an accuracy outside (0, 1).

    >>> d = Distribution(max_distinct=2)
    >>> d.add([1.0, 2.0, 4.0, 8.0])
    >>> d.exact, d.stats()["mean"], d.stats()["min"], d.stats()["max"]
    (False, 3.75, 1.0, 8.0)
    >>> abs(d.stats()["median"] - 3.0) <= 0.001 * 3.0
    True
    """

    def __init__(
        self, *, relative_accuracy: float = RELATIVE_ACCURACY, max_distinct: int = MAX_DISTINCT
    ) -> None:
        if not 0.0 < relative_accuracy < 1.0:
            raise ValueError(f"relative_accuracy must be in (0, 1), got {relative_accuracy!r}")
        if isinstance(max_distinct, bool) or not isinstance(max_distinct, int) or max_distinct < 0:
            raise ValueError(f"max_distinct must be an int >= 0, got {max_distinct!r}")
        self.relative_accuracy = float(relative_accuracy)
        self.max_distinct = max_distinct
        self._multiplier = 1.0 / math.log(
            (1 + self.relative_accuracy) / (1 - self.relative_accuracy)
        )
        self.count = 0
        """How many values were added."""
        self.missing = 0
        """How many scores were missing (``None``)."""
        self._counts: Counter[float] | None = Counter()
        # bucketed mode (``_counts is None``):
        self._sum = ExactSum()
        self._squares = 0  # exact sum of squares beyond the Dekker range, scaled by 2**2148
        self._sq_terms = ExactSum()  # Dekker terms of the squares (exact, scale 2**-1074)
        self._min = math.inf
        self._max = -math.inf
        self._zeros = 0
        self._pos = _Buckets()
        self._neg = _Buckets()

    @property
    def exact(self) -> bool:
        """True while every value is kept exactly (so every statistic is exact)."""
        return self._counts is not None

    # ------------------------------------------------------------------ adding

    def add(self, values: Iterable[float]) -> None:
        """Add a block of finite floats; raises :class:`ValueError` for NaN or an infinity."""
        block = [float(v) for v in values]
        if not all(map(math.isfinite, block)):
            bad = next(v for v in block if not math.isfinite(v))
            raise ValueError(f"a Distribution holds finite floats only, got {bad!r}")
        self.add_trusted(block)

    def add_trusted(self, block: list[float]) -> None:
        """:meth:`add` without the check (the caller guarantees finite floats)."""
        import numpy as np

        if not block:
            return
        self.count += len(block)
        counts = self._counts
        if counts is not None:
            values, times = np.unique(np.asarray(block, dtype=np.float64), return_counts=True)
            for value, c in zip(values.tolist(), times.tolist(), strict=True):
                counts[value] += c
            if len(counts) > self.max_distinct:
                self._to_buckets()
            return
        self._add_bucketed(np.asarray(block, dtype=np.float64) + 0.0)

    def add_missing(self, n: int = 1) -> None:
        """Count ``n`` missing scores."""
        self.missing += n

    def merge(self, other: Distribution) -> None:
        """Fold ``other`` (unchanged) into this distribution; the result does not depend
        on how the values were split between the two, nor on the order of merges."""
        if other.relative_accuracy != self.relative_accuracy:
            raise ValueError(
                "cannot merge distributions of different relative accuracy "
                f"({self.relative_accuracy} and {other.relative_accuracy})"
            )
        self.missing += other.missing
        if other._counts is not None:
            self.count += other.count
            if self._counts is not None:
                self._counts.update(other._counts)
                if len(self._counts) > self.max_distinct:
                    self._to_buckets()
            else:
                self._add_counted(other._counts)
            return
        if self._counts is not None:
            self._to_buckets()
        self.count += other.count
        self._sum.merge(other._sum)
        self._sq_terms.merge(other._sq_terms)
        self._squares += other._squares
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)
        self._zeros += other._zeros
        self._pos.merge(other._pos)
        self._neg.merge(other._neg)

    def _to_buckets(self) -> None:
        counts = self._counts
        self._counts = None
        if counts:
            self._add_counted(counts)

    def _add_counted(self, counts: Counter[float]) -> None:
        """Add exact ``{value: count}`` to the bucketed state (count already included)."""
        import numpy as np

        if not counts:  # an empty part (e.g. an empty partition's distribution)
            return

        values = list(counts)
        weights = np.fromiter(counts.values(), dtype=np.int64, count=len(values))
        self._sum.add_scaled(sum(_scaled(v) * c for v, c in counts.items()))
        self._squares += sum(_scaled_square(v) * c for v, c in counts.items())
        self._bucket(np.asarray(values, dtype=np.float64) + 0.0, weights)

    def _add_bucketed(self, arr: np.ndarray[Any, np.dtype[np.float64]]) -> None:
        import numpy as np

        self._sum.add(arr)
        size = np.abs(arr)
        ok = (size <= _DEKKER_HI) & ((size >= _DEKKER_LO) | (size == 0.0))
        if ok.all():
            self._sq_terms.add(_dekker_squares(arr))
        else:
            self._sq_terms.add(_dekker_squares(arr[ok]))
            self._squares += sum(_scaled_square(v) for v in arr[~ok].tolist())
        self._bucket(arr, None)

    def _bucket(self, arr: np.ndarray[Any, np.dtype[np.float64]], weights: Any) -> None:
        low, high = float(arr.min()), float(arr.max())
        self._min = min(self._min, low)
        self._max = max(self._max, high)
        positive = arr > 0.0
        negative = arr < 0.0
        zero = ~(positive | negative)
        if weights is None:
            self._zeros += int(zero.sum())
            self._pos.add_keys(self._keys(arr[positive]))
            self._neg.add_keys(self._keys(-arr[negative]))
        else:
            self._zeros += int(weights[zero].sum())
            self._pos.add_keys(self._keys(arr[positive]), weights[positive])
            self._neg.add_keys(self._keys(-arr[negative]), weights[negative])

    def _keys(self, positive: np.ndarray[Any, np.dtype[np.float64]]) -> Any:
        """Bucket keys: ``ceil(M * L(v))`` with ``L(v) = e + 2m - 2`` for ``v = m * 2**e``,
        ``0.5 <= m < 1`` (a piecewise-linear log2, exact IEEE operations only)."""
        import numpy as np

        mantissa, exponent = np.frexp(positive)
        log2 = exponent.astype(np.float64) + (2.0 * mantissa - 2.0)
        return np.ceil(log2 * self._multiplier).astype(np.int64)

    def _bound(self, key: int) -> float:
        """The upper end of bucket ``key`` (the value whose ``L`` is ``key / M``)."""
        log2 = key / self._multiplier
        floor = math.floor(log2)
        try:
            return math.ldexp((log2 - floor + 1.0) / 2.0, floor + 1)
        except OverflowError:  # the top bucket: no value lies beyond the largest float
            return sys.float_info.max

    def _representative(self, key: int) -> float:
        low, high = self._bound(key - 1), self._bound(key)
        ratio = high / low
        return low * (2.0 * ratio / (1.0 + ratio))

    # ------------------------------------------------------------------ results

    def stats(self, *, mean: MeanRule = "exact") -> dict[str, Any]:
        """The summary: ``count missing mean median std min max percentiles exact
        relative_error`` (``relative_error`` bounds median and percentiles; 0.0 when exact)."""
        import numpy as np

        n = self.count
        if n == 0:
            return _empty_stats(self.missing)
        if self._counts is not None:
            return self._exact_stats(self._counts, mean)
        total = self._sum.scaled()
        squares = (self._sq_terms.scaled() << _SCALE) + self._squares
        neg = self._neg.counts[::-1]
        neg_cum = np.cumsum(neg)
        pos_cum = np.cumsum(self._pos.counts)
        n_neg = int(neg_cum[-1]) if neg_cum.size else 0
        zeros = self._zeros

        def order_stat(i: int) -> float:
            import numpy as np

            if i == 0:
                return self._min
            if i == n - 1:
                return self._max
            if i < n_neg:
                j = int(np.searchsorted(neg_cum, i, side="right"))
                key = self._neg.offset + self._neg.counts.size - 1 - j
                value = -self._representative(key)
            elif i < n_neg + zeros:
                value = 0.0
            else:
                j = int(np.searchsorted(pos_cum, i - n_neg - zeros, side="right"))
                value = self._representative(self._pos.offset + j)
            return min(max(value, self._min), self._max)

        median, percentiles = _quantiles(order_stat, n)
        return {
            "count": n,
            "missing": self.missing,
            "mean": _mean(total, n, _SCALE, mean),
            "median": median,
            "std": _std(total, squares, n),
            "min": self._min,
            "max": self._max,
            "percentiles": percentiles,
            "exact": False,
            "relative_error": self.relative_accuracy,
        }

    def _exact_stats(self, counts: Counter[float], mean: MeanRule) -> dict[str, Any]:
        import numpy as np

        n = self.count
        keys = sorted(counts)  # -0.0 and 0.0 are one key
        distinct = [v + 0.0 for v in keys]
        cumulative = np.cumsum(np.fromiter((counts[v] for v in keys), dtype=np.int64))
        total = sum(_scaled(v) * c for v, c in counts.items())
        squares = sum(_scaled_square(v) * c for v, c in counts.items())

        def order_stat(i: int) -> float:
            import numpy as np

            return distinct[int(np.searchsorted(cumulative, i, side="right"))]

        median, percentiles = _quantiles(order_stat, n)
        return {
            "count": n,
            "missing": self.missing,
            "mean": _mean(total, n, _SCALE, mean),
            "median": median,
            "std": _std(total, squares, n),
            "min": distinct[0],
            "max": distinct[-1],
            "percentiles": percentiles,
            "exact": True,
            "relative_error": 0.0,
        }

    def mean(self, *, rule: MeanRule = "exact") -> float:
        """The mean alone (0.0 when empty), without the quantiles."""
        n = self.count
        if n == 0:
            return 0.0
        if self._counts is None:
            return _mean(self._sum.scaled(), n, _SCALE, rule)
        total = sum(_scaled(v) * c for v, c in self._counts.items())
        return _mean(total, n, _SCALE, rule)

    def __repr__(self) -> str:
        mode = "exact" if self.exact else f"relative_accuracy={self.relative_accuracy}"
        return f"Distribution(count={self.count}, missing={self.missing}, {mode})"


def _digests(ids: Sequence[str]) -> tuple[Any, Any]:
    """Two int64 arrays: Python's (SipHash) hashes of each id and of ``"\x1f" + id``,
    together a 128-bit digest (two independent keyed hashes of different inputs)."""
    import numpy as np

    high = np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids))
    low = np.fromiter((hash("\x1f" + i) for i in ids), dtype=np.int64, count=len(ids))
    return high, low


class StreamKeys:
    """:class:`ragmeter.schema.SampleKeys`' rule for a stream, in ~16 bytes per id.

    The key of each id is the id, or ``"<id>#2"``, ``"<id>#3"``... (the first free suffix)
    when an earlier sample took it, exactly as ``SampleKeys``, but the keys taken are kept
    as 128-bit digests (two SipHash string hashes) in sorted NumPy arrays, merged
    log-structured so that adding ``n`` ids costs ``O(n log n)``, not as strings. Two
    different ids share a digest with probability about ``n**2 / 2**129`` (1e-27 for a
    million ids). Ids are resolved a block at a time with :meth:`resolve`; the digests are
    those of this process (``PYTHONHASHSEED``), so a ``StreamKeys`` is not merged across
    processes.

    >>> keys = StreamKeys()
    >>> keys.resolve(["q1", "q2", "q1"]), keys.resolve(["q1", "q1#2"]), keys.repeats
    (['q1', 'q2', 'q1#2'], ['q1#3', 'q1#2#2'], 3)
    """

    def __init__(self) -> None:
        self._levels: list[tuple[Any, Any]] = []  # (high sorted, low aligned), sizes decreasing
        self.repeats = 0
        """How many ids so far were renamed because an earlier sample took them."""

    def __len__(self) -> int:
        return sum(int(high.size) for high, _ in self._levels)

    def _seen(self, high: Any, low: Any) -> Any:
        import numpy as np

        found = np.zeros(high.size, dtype=bool)
        if not self._levels:
            return found
        order = np.argsort(high)  # sorted queries search a large level cache-friendly
        ranks = np.empty_like(order)
        ranks[order] = np.arange(order.size)
        for level_high, level_low in self._levels:
            pos = np.searchsorted(level_high, high[order])[ranks]
            inside = pos < level_high.size
            hit = np.zeros(high.size, dtype=bool)
            hit[inside] = level_high[pos[inside]] == high[inside]
            for i in np.flatnonzero(hit).tolist():  # confirm with the other 64 bits
                j = int(pos[i])
                while j < level_high.size and level_high[j] == high[i]:
                    if level_low[j] == low[i]:
                        found[i] = True
                        break
                    j += 1
        return found

    def _taken(self, key: str, block: set[str]) -> bool:
        if key in block:
            return True
        high, low = _digests([key])
        return bool(self._seen(high, low)[0])

    def resolve(self, ids: Sequence[str]) -> list[str]:
        """The keys of a block of ids, in order (and mark them taken)."""
        if not ids:
            return []
        high, low = _digests(ids)
        seen_mask = self._seen(high, low)
        if not seen_mask.any() and len(set(ids)) == len(ids):  # the usual case: all new
            self._insert(high, low)
            return list(ids)
        seen = seen_mask.tolist()
        block: set[str] = set()
        keys: list[str] = []
        renamed: list[int] = []
        for i, (sid, was) in enumerate(zip(ids, seen, strict=True)):
            key = sid
            if was or sid in block:
                self.repeats += 1
                suffix = 2
                while self._taken(f"{sid}#{suffix}", block):
                    suffix += 1
                key = f"{sid}#{suffix}"
                renamed.append(i)
            block.add(key)
            keys.append(key)
        if renamed:
            new_high, new_low = _digests([keys[i] for i in renamed])
            high[renamed], low[renamed] = new_high, new_low
        self._insert(high, low)
        return keys

    def _insert(self, high: Any, low: Any) -> None:
        import numpy as np

        order = np.argsort(high, kind="stable")
        level = (high[order], low[order])
        while self._levels and self._levels[-1][0].size <= level[0].size:
            top_high, top_low = self._levels.pop()
            both_high = np.concatenate((top_high, level[0]))
            both_low = np.concatenate((top_low, level[1]))
            order = np.argsort(both_high, kind="stable")
            level = (both_high[order], both_low[order])
        self._levels.append(level)


_SUFFIXES = re.compile(r"(?:#[0-9]+)+\Z")


def id_root(sample_id: str) -> str:
    """``sample_id`` without its trailing ``#<digits>`` suffixes.

    Every key the repeated-id rule (:class:`StreamKeys`, :class:`ragmeter.schema.SampleKeys`)
    makes from an id has that id's root, so two samples can only affect each other's keys
    when their roots are equal.

    >>> id_root("q1"), id_root("q1#2"), id_root("q1#2#3"), id_root("doc#a")
    ('q1', 'q1', 'q1', 'doc#a')
    """
    return _SUFFIXES.sub("", sample_id) if "#" in sample_id else sample_id


def _root_digests(ids: Sequence[str]) -> Any:
    """The 64-bit BLAKE2b digests of the ids' roots: the same in every process."""
    import numpy as np

    digests = (
        hashlib.blake2b(id_root(i).encode("utf-8", "surrogatepass"), digest_size=8).digest()
        for i in ids
    )
    return np.fromiter(digests, dtype="S8", count=len(ids)).view(np.uint64)


class IdRoots:
    """Which sample ids may repeat, found across processes: a mergeable
    :class:`StreamKeys` stand-in for a partitioned stream.

    :meth:`resolve` records the 64-bit digest of each id's :func:`id_root` (BLAKE2b, the
    same in every process, unlike :class:`StreamKeys`' string hashes) and returns the ids
    unchanged; :meth:`merge` folds in another part's digests; :meth:`repeated` gives the
    digests seen more than once. Only samples whose root digest is repeated can be
    renamed by the repeated-id rule, so applying :class:`~ragmeter.schema.SampleKeys` to
    just those ids, in stream order, counts the repeats of the whole stream exactly (a
    digest collision only adds a sample to that pass, never changes the count). About
    8 bytes per distinct root.

    >>> a, b = IdRoots(), IdRoots()
    >>> a.resolve(["q1", "q2"]), b.resolve(["q3", "q1#2"])
    (['q1', 'q2'], ['q3', 'q1#2'])
    >>> a.merge(b)
    >>> a.matches(["q1", "q2", "q3", "q1#7"])
    [True, False, False, True]
    """

    repeats = 0
    """Always 0: the repeats are counted afterwards (see the class docstring)."""

    def __init__(self) -> None:
        import numpy as np

        self._unique: Any = np.zeros(0, dtype=np.uint64)  # sorted distinct digests
        self._repeated: Any = np.zeros(0, dtype=np.uint64)  # sorted, seen more than once
        self._pending: list[Any] = []

    def resolve(self, ids: Sequence[str]) -> list[str]:
        """Record a block of ids; returns them unchanged (as :meth:`StreamKeys.resolve`
        would when no id repeats)."""
        if ids:
            self._pending.append(_root_digests(ids))
        return list(ids)

    def _compact(self) -> None:
        import numpy as np

        if not self._pending:
            return
        values, counts = np.unique(
            np.concatenate([self._unique, *self._pending]), return_counts=True
        )
        self._pending = []
        self._unique = values
        if (counts > 1).any():
            self._repeated = np.union1d(self._repeated, values[counts > 1])

    def merge(self, other: IdRoots) -> None:
        """Fold in ``other``'s digests (``other`` is unchanged)."""
        import numpy as np

        other._compact()
        self._pending.append(other._unique)
        self._repeated = np.union1d(self._repeated, other._repeated)
        self._compact()

    def repeated(self) -> Any:
        """The sorted digests (``uint64``) of the roots seen more than once."""
        self._compact()
        return self._repeated

    def repeated_only(self) -> IdRoots:
        """A copy that holds only :meth:`repeated` (what a finished stream needs: about
        nothing when no id repeats). Merging into it would miss repeats across the parts."""
        roots = IdRoots()
        roots._repeated = self.repeated()
        return roots

    def matches(self, ids: Sequence[str]) -> list[bool]:
        """For each id, whether its root digest is :meth:`repeated`."""
        import numpy as np

        repeated = self.repeated()
        if not ids or not repeated.size:
            return [False] * len(ids)
        found: list[bool] = np.isin(_root_digests(ids), repeated).tolist()
        return found

    def __getstate__(self) -> tuple[Any, Any]:
        self._compact()
        return self._unique, self._repeated

    def __setstate__(self, state: tuple[Any, Any]) -> None:
        self._unique, self._repeated = state
        self._pending = []

    def __repr__(self) -> str:
        self._compact()
        return f"IdRoots(distinct={self._unique.size}, repeated={self._repeated.size})"
