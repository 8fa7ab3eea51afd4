"""Arrays derived once from :class:`~._rank.Ranked` and shared by every measure of a call.

Everything is a whole-run numpy array (one row per query), computed on first use: which
ranks are relevant, running counts of relevant / judged non-relevant / unjudged docs, the
``log2(rank + 1)`` discounts (from C's ``log2`` via :func:`math.log2`, so the same floats as
trec_eval), and the gain orders used by the NDCG family. Sums that trec_eval accumulates
doc by doc are formed with ``np.cumsum`` along the rank axis, which adds in the same order,
so per-query values are the same floats as trec_eval's.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ragmeter.metrics.trec._rank import NONPOOL, UNJUDGED, Ranked

__all__ = ["Context", "FloatArray", "IntArray", "divide", "lround", "sequential_sum"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def divide(num: npt.ArrayLike, den: npt.ArrayLike) -> FloatArray:
    """IEEE division as C does it (``x/0`` is ``inf`` or ``nan``), without numpy warnings."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.true_divide(num, den), dtype=np.float64)


def sequential_sum(values: FloatArray) -> FloatArray:
    """Row sums added left to right (``np.sum`` pairs terms up and can differ in the last bit)."""
    if values.shape[1] == 0:
        return np.zeros(values.shape[0])
    total: FloatArray = values[:, 0].astype(np.float64)
    for j in range(1, values.shape[1]):
        total += values[:, j]
    return total


def lround(x: FloatArray) -> IntArray:
    """C ``lround``: to the nearest integer, halves away from zero."""
    t = np.trunc(x)
    up = np.where(x >= 0, (x - t) >= 0.5, 0) - np.where(x < 0, (t - x) >= 0.5, 0)
    return np.asarray(t + up, dtype=np.int64)


class Context:
    """Lazily computed whole-run arrays over one :class:`Ranked`."""

    def __init__(self, ranked: Ranked, *, legacy_recall_cutoffs: bool = False) -> None:
        self.r = ranked
        self.legacy_recall_cutoffs = legacy_recall_cutoffs
        self.n = len(ranked.qids)
        self.width = ranked.rel.shape[1]
        self.level = ranked.relevance_level
        #: objects measures share within one evaluation (gain tables, running DCGs)
        self.cache: dict[object, object] = {}

    def recall_cutoffs(self, fractions: FloatArray) -> IntArray:
        """``[q, j]``: relevant-doc counts for recall ``fractions[j]`` of each query's ``R``.

        trec_eval 10 rounds (``lround(x * R)``); trec_eval 9 and pytrec_eval truncated
        ``x * R + 0.9`` (``legacy_recall_cutoffs``).
        """
        raw = fractions[None, :] * self.r.num_rel[:, None]
        if self.legacy_recall_cutoffs:
            return np.trunc(raw + 0.9).astype(np.int64)
        return lround(raw)

    @cached_property
    def valid(self) -> BoolArray:
        """``[q, i]``: rank ``i`` (0-based) holds a retrieved doc."""
        return np.asarray(np.arange(self.width)[None, :] < self.r.num_ret[:, None], dtype=bool)

    @cached_property
    def isrel(self) -> BoolArray:
        """``[q, i]``: the doc at rank ``i`` has a grade ``>= relevance_level``."""
        return self.valid & (self.r.rel >= self.level)

    @cached_property
    def cumrel(self) -> IntArray:
        """``[q, k]``: relevant docs in the top ``k`` (column 0 is 0; ``k`` up to the width)."""
        return self._cum0(self.isrel)

    @cached_property
    def num_rel_ret(self) -> IntArray:
        return self.cumrel[:, -1]

    @cached_property
    def unjudged(self) -> BoolArray:
        """``[q, i]``: the doc at rank ``i`` is not judged (not in the pool, or no grade)."""
        unjudged = (self.r.rel == NONPOOL) | (self.r.rel == UNJUDGED)
        return np.asarray(self.valid & unjudged, dtype=bool)

    @cached_property
    def judged_rel(self) -> BoolArray:
        """Judged docs counted relevant by bpref and infAP (grade ``>= 0`` and ``>= level``)."""
        return self.isrel & (self.r.rel >= 0)

    @cached_property
    def judged_nonrel(self) -> BoolArray:
        return self.valid & (self.r.rel >= 0) & (self.r.rel < self.level)

    @cached_property
    def nonrel_before(self) -> IntArray:
        """``[q, i]``: judged non-relevant docs at ranks ``<= i + 1``."""
        return np.cumsum(self.judged_nonrel, axis=1)

    @cached_property
    def ranks(self) -> FloatArray:
        """``[i]``: the 1-based rank ``i + 1`` as a float."""
        return np.arange(1, self.width + 1, dtype=np.float64)

    def discounts(self, length: int) -> FloatArray:
        """``[i]``: ``log2(i + 2)``, from C's ``log2``."""
        return np.array([math.log2(i + 2) for i in range(length)], dtype=np.float64)

    @cached_property
    def disc(self) -> FloatArray:
        return self.discounts(self.width)

    def powers(self, p: float, length: int) -> FloatArray:
        """``[i]``: ``p**i`` formed by repeated multiplication, as trec_eval's RBP does."""
        out = np.empty(length + 1, dtype=np.float64)
        cur = 1.0
        for i in range(length + 1):
            out[i] = cur
            cur = cur * p
        return out

    @staticmethod
    def _cum0(mask: npt.NDArray[np.bool_]) -> IntArray:
        out = np.zeros((mask.shape[0], mask.shape[1] + 1), dtype=np.int64)
        np.cumsum(mask, axis=1, out=out[:, 1:])
        return out

    def at(self, cum: npt.NDArray[np.generic], k: int | IntArray) -> npt.NDArray[np.generic]:
        """``cum[q, min(k, width)]`` for a cut-off ``k`` (one int, or one per query)."""
        if isinstance(k, int):
            return np.asarray(cum[:, min(k, cum.shape[1] - 1)])
        idx = np.clip(k, 0, cum.shape[1] - 1)
        return np.asarray(np.take_along_axis(cum, idx[:, None], axis=1)[:, 0])

    @cached_property
    def prec_suffix_max(self) -> FloatArray:
        """``[q, i]``: the best precision at any rank ``>= i + 1`` (interpolated precision)."""
        prec = divide(self.cumrel[:, 1:], self.ranks[None, :])
        prec = np.where(self.valid, prec, -np.inf)
        return np.maximum.accumulate(prec[:, ::-1], axis=1)[:, ::-1]

    @cached_property
    def rel_positions(self) -> IntArray:
        """``[q, j]``: 0-based rank of the ``j+1``-th relevant doc (``-1`` past the last)."""
        rows, cols = self.rel_cells
        counts = self.num_rel_ret
        out = np.full((self.n, max(int(counts.max()) if self.n else 0, 1)), -1, dtype=np.int64)
        starts = np.cumsum(counts) - counts
        out[rows, np.arange(len(rows)) - np.repeat(starts, counts)] = cols
        return out

    @cached_property
    def ap_terms(self) -> FloatArray:
        """``[q, i]``: ``relevant so far / rank`` at relevant ranks, else 0 (AP's terms)."""
        rows, cols = self.rel_cells
        out = np.zeros((self.n, self.width))
        out[rows, cols] = divide(self.cumrel[rows, cols + 1], cols + 1.0)
        return out

    @cached_property
    def rel_cells(self) -> tuple[IntArray, IntArray]:
        """Row and column indices of the relevant ranks, row by row, rank ascending."""
        rows, cols = np.nonzero(self.isrel)
        return rows.astype(np.int64), cols.astype(np.int64)

    @cached_property
    def ap_cum(self) -> FloatArray:
        """``[q, k]``: AP's sum over the top ``k`` (column 0 is 0), added rank by rank."""
        out = np.zeros((self.n, self.width + 1))
        np.cumsum(self.ap_terms, axis=1, out=out[:, 1:])
        return out
