"""trec_eval's graded measures: the NDCG family, G, and rank-biased precision.

Gains follow trec_eval's ``setup_gains``: a judged doc's gain is its grade, unless a
``level=gain`` pair of the request (``-m ndcg.1=3,2=9``) overrides that grade; a doc the qrels
do not judge gains 0 (unless a pair names level ``-1``/``-2``, as trec_eval allows). The ideal
ranking lists every judged doc with a positive gain, highest gain first.

* ``ndcg`` / ``dcg`` / ``ideal_dcg``: ``sum(gain / log2(rank + 1))`` over the whole ranking,
  the ideal one over every positive-gain judged doc (never cut);
* ``ndcg_cut_k``: grades as gains (pairs do not apply), both rankings cut at ``k``;
* ``ndcg_rel``: NDCG averaged at each positive-gain retrieved doc, the unretrieved ones
  counting the final NDCG; ``Rndcg``: NDCG averaged where the ideal gain changes level;
* ``G``: ``gain / log2(2 + ideal cost so far - gain so far)`` summed, over the ideal's total;
* ``rbp`` (``rbp.p=0.8``, default ``p = 0.9``): ``(1 - p) * sum(gain * p**(rank - 1))``, gains
  rescaled into ``[0, 1]`` when some gain lies outside; ``rbp_resid`` is the most RBP could
  still rise if every unjudged doc were relevant (0 when every doc is judged).
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from ragmeter.metrics.trec._context import Context, FloatArray, IntArray, divide, sequential_sum
from ragmeter.metrics.trec._rank import PAD
from ragmeter.metrics.trec._spec import Requested

__all__ = ["GRADED"]


def _int_pairs(req: Requested) -> dict[int, float]:
    """``{level: gain}`` of the request's pairs whose name is an integer (first one wins)."""
    out: dict[int, float] = {}
    for name, gain in req.pairs:
        body = name[1:] if name[:1] in "+-" else name
        if body.isdigit() and body.isascii():
            out.setdefault(int(name), gain)
    return out


class Gains:
    """One request's gains over one run: per-rank gains and the ideal ranking's gains."""

    def __init__(self, ctx: Context, pairs: dict[int, float]) -> None:
        self.ctx = ctx
        self.pairs = pairs
        self.m: IntArray = np.zeros(ctx.n, dtype=np.int64)  # set with the ideal ranking
        levels = ctx.r.rel_levels
        n_levels = levels.shape[1]
        self.level_gain = np.array([pairs.get(lv, float(lv)) for lv in range(n_levels)])
        lo = min(-2, *pairs) if pairs else -2
        table = {code: pairs.get(code, 0.0) for code in range(lo, 0)}
        offset = -lo
        lookup = np.zeros(n_levels + offset)
        for code, gain in table.items():
            lookup[code + offset] = gain
        lookup[offset:] = self.level_gain
        codes = np.where(ctx.valid, ctx.r.rel, 0)
        codes = np.where(codes == PAD, 0, codes)
        self.gain: FloatArray = np.where(ctx.valid, lookup[codes + offset], 0.0)

    @cached_property
    def ideal(self) -> FloatArray:
        """``[q, j]``: the ideal ranking's ``j``-th gain (positive gains only, 0 past the end)."""
        counts = self.ctx.r.rel_levels
        order = [
            lv for lv in np.argsort(-self.level_gain, kind="stable") if self.level_gain[lv] > 0
        ]
        sizes = counts[:, order] if order else np.zeros((self.ctx.n, 0), dtype=np.int64)
        self.m = sizes.sum(axis=1)
        width = max(int(self.m.max()) if self.ctx.n else 0, 1)
        out = np.zeros((self.ctx.n, width))
        col = np.arange(width)[None, :]
        start = np.zeros(self.ctx.n, dtype=np.int64)
        for j, lv in enumerate(order):
            end = start + sizes[:, j]
            out[(col >= start[:, None]) & (col < end[:, None])] = self.level_gain[lv]
            start = end
        return out


def _cum0(terms: FloatArray) -> FloatArray:
    out = np.zeros((terms.shape[0], terms.shape[1] + 1))
    np.cumsum(terms, axis=1, out=out[:, 1:])
    return out


def _dcg_terms(ctx: Context, gain: FloatArray) -> FloatArray:
    return np.where(gain != 0, gain / ctx.discounts(gain.shape[1])[None, :], 0.0)


def _gains(ctx: Context, pairs: dict[int, float]) -> Gains:
    """The :class:`Gains` of ``pairs``, made once per evaluation."""
    key = ("gains", tuple(sorted(pairs.items())))
    if key not in ctx.cache:
        ctx.cache[key] = Gains(ctx, pairs)
    found = ctx.cache[key]
    assert isinstance(found, Gains)
    return found


def _ndcg_state(ctx: Context, req: Requested) -> _Ndcg:
    key = ("ndcg", req.pairs)
    if key not in ctx.cache:
        ctx.cache[key] = _Ndcg(ctx, req)
    found = ctx.cache[key]
    assert isinstance(found, _Ndcg)
    return found


class _Ndcg:
    """The results' and the ideal ranking's running DCG for one request."""

    def __init__(self, ctx: Context, req: Requested) -> None:
        self.g = _gains(ctx, _int_pairs(req))
        self.ideal = self.g.ideal
        self.m = self.g.m
        self.rdcg = _cum0(_dcg_terms(ctx, self.g.gain))
        self.idcg = _cum0(_dcg_terms(ctx, self.ideal))

    @property
    def rdcg_total(self) -> FloatArray:
        return self.rdcg[:, -1]

    @property
    def idcg_total(self) -> FloatArray:
        return self.idcg[:, -1]


def ndcg(ctx: Context, req: Requested) -> FloatArray:
    s = _ndcg_state(ctx, req)
    if req.spec.name == "dcg":
        return s.rdcg_total[:, None]
    if req.spec.name == "ideal_dcg":
        return s.idcg_total[:, None]
    ok = s.idcg_total > 0
    return np.where(ok, divide(s.rdcg_total, s.idcg_total), 0.0)[:, None]


def ndcg_rel(ctx: Context, req: Requested) -> FloatArray:
    s = _ndcg_state(ctx, req)
    pos = s.g.gain > 0
    clamp = np.minimum(np.arange(ctx.width)[None, :], np.maximum(s.m - 1, 0)[:, None])
    idcg_incl = np.where(s.m[:, None] > 0, np.take_along_axis(s.idcg[:, 1:], clamp, 1), 0.0)
    ratios = np.where(pos, divide(s.rdcg[:, 1:], idcg_incl), 0.0)
    total = sequential_sum(ratios)
    missed = (s.m - pos.sum(axis=1)).astype(np.float64)
    total = total + divide(missed * s.rdcg_total, s.idcg_total)
    return np.where(total > 0, divide(total, s.m), 0.0)[:, None]


def rndcg(ctx: Context, req: Requested) -> FloatArray:
    s = _ndcg_state(ctx, req)
    width = s.ideal.shape[1]
    i = np.arange(1, width + 1)[None, :]
    seq = np.concatenate([s.ideal, np.zeros((ctx.n, 1))], axis=1)
    change = (i <= s.m[:, None]) & ((seq[:, 1:] != seq[:, :-1]) | (i == s.m[:, None]))
    rank_idx = np.minimum(i, ctx.r.num_ret[:, None])
    rd = np.take_along_axis(s.rdcg, np.minimum(rank_idx, s.rdcg.shape[1] - 1), 1)
    idg = np.take_along_axis(s.idcg, np.minimum(i, s.idcg.shape[1] - 1), 1)
    use = change & (idg > 0)
    terms = np.where(use, divide(rd, idg), 0.0)
    total = sequential_sum(terms)
    count = use.sum(axis=1)
    final = (ctx.r.num_ret > s.m + 1) & (s.idcg_total > 0)
    total = np.where(final, total + divide(s.rdcg_total, s.idcg_total), total)
    count = count + final
    value = divide(total, count)
    return np.where(ctx.r.num_rel > 0, value, 0.0)[:, None]


def g_measure(ctx: Context, req: Requested) -> FloatArray:
    g = _gains(ctx, _int_pairs(req))
    ideal = g.ideal
    width = ctx.width
    cols = np.arange(width)[None, :]
    ideal_w = np.zeros((ctx.n, width))
    take = min(width, ideal.shape[1])
    ideal_w[:, :take] = ideal[:, :take]
    cost = np.where((cols < g.m[:, None]) & (ideal_w >= 1.0), ideal_w, 1.0)
    sum_cost = np.cumsum(cost, axis=1)
    sum_results = np.cumsum(g.gain, axis=1)
    rows, where = np.nonzero((g.gain != 0) & ctx.valid)
    args = (2 + sum_cost[rows, where]) - sum_results[rows, where]
    logs = np.array([math.log2(a) for a in args.tolist()], dtype=np.float64)
    terms = np.zeros((ctx.n, width))
    terms[rows, where] = divide(g.gain[rows, where], logs)
    results_g = sequential_sum(terms)
    sum_ideal = sequential_sum(ideal)
    return np.where(sum_ideal > 0, divide(results_g, sum_ideal), 0.0)[:, None]


def ndcg_cut(ctx: Context, req: Requested) -> FloatArray:
    grades = np.where(ctx.valid & (ctx.r.rel > 0), ctx.r.rel, 0).astype(np.float64)
    rdcg = _cum0(_dcg_terms(ctx, grades))
    plain = _gains(ctx, {})
    idcg = _cum0(_dcg_terms(ctx, plain.ideal))
    cols = []
    for k in (int(c) for c in req.cutoffs):
        r = ctx.at(rdcg, k).astype(np.float64)
        i = idcg[:, min(k, idcg.shape[1] - 1)]
        cols.append(np.where(i > 0, divide(r, i), r))
    return np.stack(cols, axis=1)


def _p(req: Requested) -> float:
    p = 0.9
    for name, value in req.pairs:
        if name == "p":
            p = value
    return p


def rbp(ctx: Context, req: Requested) -> FloatArray:
    pairs = _int_pairs(req)
    g = _gains(ctx, pairs)
    n_levels = ctx.r.num_rel_levels
    listed = [(lv, gain) for lv, gain in pairs.items()]
    lo = np.full(ctx.n, min((x for _, x in listed), default=np.inf))
    hi = np.full(ctx.n, max((x for _, x in listed), default=-np.inf))
    for lv in range(ctx.r.rel_levels.shape[1]):
        if lv in pairs:
            continue
        has = lv < n_levels
        lo = np.where(has, np.minimum(lo, float(lv)), lo)
        hi = np.where(has, np.maximum(hi, float(lv)), hi)
    rescale = ((lo < 0) | (hi > 1))[:, None]
    codes = ctx.r.rel
    in_list = ctx.valid & (
        ((codes >= 0) & (codes < n_levels[:, None])) | np.isin(codes, list(pairs))
    )
    scaled = divide(g.gain - lo[:, None], (hi - lo)[:, None])
    gain = np.where(rescale & in_list, scaled, g.gain)
    p = _p(req)
    pw = ctx.powers(p, ctx.width)
    total = sequential_sum(np.where(ctx.valid & (gain != 0), gain * pw[None, :-1], 0.0))
    return ((1.0 - p) * total)[:, None]


def rbp_resid(ctx: Context, req: Requested) -> FloatArray:
    p = _p(req)
    pw = ctx.powers(p, ctx.width)
    unj = ctx.valid & (ctx.r.rel < 0)
    total = sequential_sum(np.where(unj, pw[None, :-1], 0.0))
    value = pw[ctx.r.num_ret] + (1 - p) * total
    return np.where(unj.any(axis=1), value, 0.0)[:, None]


GRADED = {
    "G": g_measure,
    "dcg": ndcg,
    "ideal_dcg": ndcg,
    "ndcg": ndcg,
    "ndcg_rel": ndcg_rel,
    "Rndcg": rndcg,
    "ndcg_cut": ndcg_cut,
    "rbp": rbp,
    "rbp_resid": rbp_resid,
}
