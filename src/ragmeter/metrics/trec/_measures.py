"""trec_eval's binary-relevance measures, each read off the shared :class:`~._context.Context`.

Every function returns an ``(n_queries, n_values)`` float array, one column per value name of
its :class:`~._spec.Requested`. Definitions follow trec_eval 10.0 (``m_*.c``):

* ``P_k`` / ``recall_k`` / ``success_k`` / ``relative_P_k`` / ``unj_k``: counts in the top
  ``k``; a ranking shorter than ``k`` is padded with non-relevant docs (``P_k`` divides by k);
* ``map`` / ``map_cut_k``: precision at each relevant rank, summed and divided by all relevant
  docs; ``gm_map`` holds ``log(max(map, 1e-5))`` per query (its mean is exponentiated);
* ``Rprec``: relevant docs in the top ``R`` over ``R``; ``Rprec_mult_x``: precision at
  ``int(x * R + 0.9)`` docs;
* ``iprec_at_recall_x``: interpolated precision (best precision at or below the rank) at the
  ``lround(x * R)``-th relevant doc; ``11pt_avg``: their mean over the given recall points;
* ``bpref`` / ``infAP``: judged docs only (Buckley & Voorhees 2004; Yilmaz & Aslam 2006);
* ``set_*``, ``utility``, ``num_*``: set measures over the whole retrieved list;
* ``binG``: ``1 / log2(2 + non-relevant docs above)`` per relevant doc, over ``R``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.trec._context import (
    Context,
    FloatArray,
    IntArray,
    divide,
    sequential_sum,
)
from ragmeter.metrics.trec._spec import Requested

__all__ = ["SIMPLE"]

MIN_GEO_MEAN = 0.00001
INFAP_EPSILON = 0.00001


def _col(values: npt.ArrayLike) -> FloatArray:
    return np.asarray(values, dtype=np.float64)[:, None]


def _log(values: FloatArray) -> FloatArray:
    """Natural log with C's ``log`` (via :func:`math.log`), one query at a time."""
    return np.array([math.log(v) for v in values.tolist()], dtype=np.float64)


def _cuts(req: Requested) -> list[int]:
    return [int(c) for c in req.cutoffs]


def num_ret(ctx: Context, req: Requested) -> FloatArray:
    return _col(ctx.r.num_ret)


def num_rel(ctx: Context, req: Requested) -> FloatArray:
    return _col(ctx.r.num_rel)


def num_rel_ret(ctx: Context, req: Requested) -> FloatArray:
    return _col(ctx.num_rel_ret)


def num_q(ctx: Context, req: Requested) -> FloatArray:
    return np.ones((ctx.n, 1))


def _ap(ctx: Context) -> FloatArray:
    total = ctx.ap_cum[:, -1]
    return np.where(ctx.num_rel_ret > 0, divide(total, ctx.r.num_rel), 0.0)


def map_(ctx: Context, req: Requested) -> FloatArray:
    return _col(_ap(ctx))


def gm_map(ctx: Context, req: Requested) -> FloatArray:
    return _col(_log(np.maximum(_ap(ctx), MIN_GEO_MEAN)))


def rprec(ctx: Context, req: Requested) -> FloatArray:
    look = np.minimum(ctx.r.num_ret, ctx.r.num_rel)
    value = divide(ctx.at(ctx.cumrel, look), ctx.r.num_rel)
    return _col(np.where(look > 0, value, 0.0))


def _bpref(ctx: Context) -> FloatArray:
    if "bpref" not in ctx.cache:
        ctx.cache["bpref"] = _bpref_values(ctx)
    found = ctx.cache["bpref"]
    assert isinstance(found, np.ndarray)
    return found


def _bpref_values(ctx: Context) -> FloatArray:
    num_nonrel = ctx.r.rel_levels[:, : max(ctx.level, 0)].sum(axis=1)
    rows, cols = np.nonzero(ctx.judged_rel)
    nonrel_before = ctx.nonrel_before[rows, cols]
    big_r = ctx.r.num_rel[rows]
    frac = divide(np.minimum(nonrel_before, big_r), np.minimum(num_nonrel[rows], big_r))
    grid = np.zeros((ctx.n, ctx.width))
    grid[rows, cols] = np.where(nonrel_before > 0, 1.0 - frac, 1.0)
    total = sequential_sum(grid)
    return np.where(ctx.r.num_rel > 0, divide(total, ctx.r.num_rel), total)


def bpref(ctx: Context, req: Requested) -> FloatArray:
    return _col(_bpref(ctx))


def gm_bpref(ctx: Context, req: Requested) -> FloatArray:
    return _col(_log(np.maximum(_bpref(ctx), MIN_GEO_MEAN)))


def recip_rank(ctx: Context, req: Requested) -> FloatArray:
    first = np.argmax(ctx.isrel, axis=1)
    return _col(np.where(ctx.num_rel_ret > 0, 1.0 / (first + 1.0), 0.0))


def _iprec(ctx: Context, cutoffs: IntArray) -> FloatArray:
    """Interpolated precision at each query's ``cutoffs`` (``[q, j]``: relevant-doc counts)."""
    nrr = ctx.num_rel_ret[:, None]
    j = np.clip(np.maximum(cutoffs, 1), 1, ctx.rel_positions.shape[1]) - 1
    pos = np.take_along_axis(ctx.rel_positions, j, axis=1)
    best = np.take_along_axis(ctx.prec_suffix_max, np.maximum(pos, 0), axis=1)
    # no relevant doc retrieved: trec_eval's starting value num_rel_ret / num_ret (0, or nan)
    start = divide(nrr, ctx.r.num_ret[:, None])
    value = np.where(nrr > 0, best, start)
    return np.where(cutoffs > nrr, 0.0, value)


def iprec_at_recall(ctx: Context, req: Requested) -> FloatArray:
    points = np.array(req.cutoffs)[None, :]
    return _iprec(ctx, ctx.recall_cutoffs(points[0]))


def eleven_pt_avg(ctx: Context, req: Requested) -> FloatArray:
    if not req.values:
        raise InvalidInputError(f"{req.names[0]}: no recall points given")
    points = np.array(req.values)
    if np.any(np.diff(points) < 0):
        raise InvalidInputError(
            f"{req.names[0]}: give the recall points in increasing order (trec_eval's "
            "result for unordered points depends on an accident of its loop)"
        )
    values = _iprec(ctx, ctx.recall_cutoffs(points))
    total = sequential_sum(values[:, ::-1])
    return _col(total / float(len(points)))


def _at_cuts(ctx: Context, cum: IntArray | FloatArray, cuts: list[int]) -> FloatArray:
    return np.stack([ctx.at(cum, k) for k in cuts], axis=1).astype(np.float64)


def precision(ctx: Context, req: Requested) -> FloatArray:
    cuts = _cuts(req)
    return _at_cuts(ctx, ctx.cumrel, cuts) / np.array(cuts, dtype=np.float64)[None, :]


def recall(ctx: Context, req: Requested) -> FloatArray:
    hits = _at_cuts(ctx, ctx.cumrel, _cuts(req))
    num = ctx.r.num_rel[:, None]
    return np.where(num > 0, divide(hits, num), 0.0)


def success(ctx: Context, req: Requested) -> FloatArray:
    return (_at_cuts(ctx, ctx.cumrel, _cuts(req)) > 0).astype(np.float64)


def relative_p(ctx: Context, req: Requested) -> FloatArray:
    cuts = np.array(_cuts(req), dtype=np.int64)
    hits = _at_cuts(ctx, ctx.cumrel, _cuts(req))
    num = ctx.r.num_rel[:, None]
    return np.where(num > 0, divide(hits, np.minimum(cuts[None, :], num)), 0.0)


def map_cut(ctx: Context, req: Requested) -> FloatArray:
    sums = np.stack([ctx.at(ctx.ap_cum, k) for k in _cuts(req)], axis=1)
    num = ctx.r.num_rel[:, None]
    return np.where(num > 0, divide(sums, num), 0.0)


def unj(ctx: Context, req: Requested) -> FloatArray:
    cuts = _cuts(req)
    counts = _at_cuts(ctx, ctx._cum0(ctx.unjudged), cuts)
    return counts / np.array(cuts, dtype=np.float64)[None, :]


def infap(ctx: Context, req: Requested) -> FloatArray:
    rows, cols = np.nonzero(ctx.judged_rel)
    rel_before: IntArray = (np.cumsum(ctx.judged_rel, axis=1) - ctx.judged_rel)[rows, cols]
    nonrel_before = ctx.nonrel_before[rows, cols]
    pool_before = np.cumsum(ctx.valid & (ctx.r.rel == -2), axis=1)[rows, cols]
    fj = cols.astype(np.float64)
    seen = (rel_before + nonrel_before + pool_before).astype(np.float64)
    ratio = divide(rel_before + INFAP_EPSILON, (rel_before + nonrel_before) + 2 * INFAP_EPSILON)
    terms = divide(1.0, fj + 1.0) + divide(fj, fj + 1.0) * divide(seen, fj) * ratio
    grid = np.zeros((ctx.n, ctx.width))
    grid[rows, cols] = np.where(cols == 0, 1.0, terms)
    total = sequential_sum(grid)
    return _col(np.where(ctx.r.num_rel > 0, divide(total, ctx.r.num_rel), total))


def rprec_mult(ctx: Context, req: Requested) -> FloatArray:
    cuts = np.trunc(np.array(req.cutoffs)[None, :] * ctx.r.num_rel[:, None] + 0.9)
    cuts = cuts.astype(np.int64)
    hits = np.take_along_axis(ctx.cumrel, np.clip(cuts, 0, ctx.width), axis=1)
    return np.where(cuts > 0, divide(hits, cuts), 0.0)


def utility(ctx: Context, req: Requested, num_docs: int = 0) -> FloatArray:
    if len(req.values) != 4:
        raise InvalidInputError(f"{req.names[0]}: utility takes exactly 4 coefficients")
    p = req.values
    nrr = ctx.num_rel_ret.astype(np.float64)
    nret = ctx.r.num_ret.astype(np.float64)
    nrel = ctx.r.num_rel.astype(np.float64)
    rest = (num_docs + ctx.num_rel_ret - ctx.r.num_ret - ctx.r.num_rel).astype(np.float64)
    return _col(p[0] * nrr + p[1] * (nret - nrr) + p[2] * (nrel - nrr) + p[3] * rest)


def set_p(ctx: Context, req: Requested) -> FloatArray:
    return _col(np.where(ctx.r.num_ret > 0, divide(ctx.num_rel_ret, ctx.r.num_ret), 0.0))


def set_relative_p(ctx: Context, req: Requested) -> FloatArray:
    ok = (ctx.r.num_ret > 0) & (ctx.r.num_rel > 0)
    value = divide(ctx.num_rel_ret, np.minimum(ctx.r.num_ret, ctx.r.num_rel))
    return _col(np.where(ok, value, 0.0))


def set_recall(ctx: Context, req: Requested) -> FloatArray:
    return _col(np.where(ctx.r.num_rel > 0, divide(ctx.num_rel_ret, ctx.r.num_rel), 0.0))


def set_map(ctx: Context, req: Requested) -> FloatArray:
    ok = (ctx.r.num_ret > 0) & (ctx.r.num_rel > 0)
    nrr = ctx.num_rel_ret.astype(np.float64)
    den = ctx.r.num_ret.astype(np.float64) * ctx.r.num_rel.astype(np.float64)
    return _col(np.where(ok, divide(nrr * nrr, den), 0.0))


def set_f(ctx: Context, req: Requested) -> FloatArray:
    x = req.values[0]
    p = divide(ctx.num_rel_ret, ctx.r.num_ret)
    r = divide(ctx.num_rel_ret, ctx.r.num_rel)
    value = divide((x + 1.0) * p * r, x * p + r)
    return _col(np.where(ctx.num_rel_ret > 0, value, 0.0))


def num_nonrel_judged_ret(ctx: Context, req: Requested) -> FloatArray:
    r = ctx.r
    return _col(r.num_ret - r.num_nonpool - r.num_unjudged - ctx.num_rel_ret)


def bin_g(ctx: Context, req: Requested) -> FloatArray:
    rows, cols = ctx.rel_cells
    nonrel_above = cols + 1 - ctx.cumrel[rows, cols + 1]
    logs = ctx.discounts(int(nonrel_above.max()) + 1 if len(rows) else 1)
    terms = np.zeros((ctx.n, ctx.width))
    terms[rows, cols] = divide(1.0, logs[nonrel_above])
    total = sequential_sum(terms)
    return _col(np.where(ctx.num_rel_ret > 0, divide(total, ctx.r.num_rel), 0.0))


SIMPLE = {
    "num_q": num_q,
    "num_ret": num_ret,
    "num_rel": num_rel,
    "num_rel_ret": num_rel_ret,
    "map": map_,
    "gm_map": gm_map,
    "Rprec": rprec,
    "bpref": bpref,
    "recip_rank": recip_rank,
    "iprec_at_recall": iprec_at_recall,
    "P": precision,
    "recall": recall,
    "infAP": infap,
    "gm_bpref": gm_bpref,
    "Rprec_mult": rprec_mult,
    "11pt_avg": eleven_pt_avg,
    "binG": bin_g,
    "map_cut": map_cut,
    "relative_P": relative_p,
    "success": success,
    "set_P": set_p,
    "set_relative_P": set_relative_p,
    "set_recall": set_recall,
    "set_map": set_map,
    "set_F": set_f,
    "num_nonrel_judged_ret": num_nonrel_judged_ret,
    "unj": unj,
}
