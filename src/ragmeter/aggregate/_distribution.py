"""``Distribution``: a metric's values in a few KiB, exact or in DDSketch buckets, mergeable."""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ragmeter.aggregate._exact import (
    _DEKKER_HI,
    _DEKKER_LO,
    _SCALE,
    ExactSum,
    _dekker_squares,
    _scaled,
    _scaled_square,
)
from ragmeter.aggregate._summary import MeanRule, _empty_stats, _mean, _quantiles, _std

if TYPE_CHECKING:
    import numpy as np


BLOCK = 4096
"""How many values a streamed evaluation buffers per metric before folding them in."""

MAX_DISTINCT = 2048
"""A :class:`Distribution` keeps exact counts up to this many distinct values."""

RELATIVE_ACCURACY = 0.001
"""Relative error bound of a bucketed order statistic (and so of a percentile)."""


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

    def add_trusted(self, block: list[float] | np.ndarray[Any, np.dtype[np.float64]]) -> None:
        """:meth:`add` without the check (the caller guarantees finite floats); a float64
        array is taken as it is (no Python float per value)."""
        import numpy as np

        if len(block) == 0:
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
