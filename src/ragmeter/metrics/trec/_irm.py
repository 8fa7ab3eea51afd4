"""ir_measures names on the trec_eval engine, plus the measures trec_eval lacks.

``nDCG@10`` is computed as trec_eval's ``ndcg_cut.10``, ``P@5`` as ``P.5``, ``AP`` as ``map``
and so on (:func:`parse_ir_measure`); a ``rel=`` parameter (``P(rel=2)@5``) is trec_eval's
``-l`` for that measure. Values are keyed by the name as written. ``IPrec@x`` uses trec_eval
9's recall cut-offs (``int(x * R + 0.9)``), as ir_measures (through pytrec_eval) does. Four
measures have no trec_eval counterpart and are computed here, on the same shared arrays:

* ``Judged@k``: the share of the top ``min(k, n)`` docs that the qrels list (any grade,
  negative included), 0 for an empty ranking (:func:`ragmeter.metrics.ranking.judged_at_k`);
* ``ERR@k``: expected reciprocal rank, ``sum_i R_i / i * prod_{j<i} (1 - R_j)`` with
  ``R = (2**grade - 1) / 2**4`` (grades below 0 count as 0, above 4 as 4: gdeval's scale);
* ``RBP(rel=1, p=0.8)``: rank-biased precision with binary gains (grade ``>= rel``),
  ``(1 - p) * sum_i gain_i * p**(i - 1)`` (cwl_eval's, through ir_measures), and
  ``RBP_resid(rel=1, p=0.8)`` its residual: how much RBP could still rise if every unjudged
  doc and every doc past the end were relevant;
* ``RR@k``: reciprocal rank of the first relevant doc in the top k.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragmeter.errors import UnknownMetricError
from ragmeter.metrics.trec._context import Context, FloatArray, divide, sequential_sum
from ragmeter.metrics.trec._rank import NONPOOL

__all__ = ["IrMeasure", "compute_extra", "parse_ir_measure"]

_NAME = re.compile(r"^(?P<name>[A-Za-z_α]+)(?:\((?P<params>[^)]*)\))?(?:@(?P<cut>[0-9.]+))?$")

# ir_measures name -> (trec_eval measure, takes the cut-off as its parameter)
_TREC: dict[str, tuple[str, bool]] = {
    "nDCG": ("ndcg", False),
    "P": ("P", True),
    "R": ("recall", True),
    "AP": ("map", False),
    "RR": ("recip_rank", False),
    "Bpref": ("bpref", False),
    "BPref": ("bpref", False),
    "infAP": ("infAP", False),
    "Rprec": ("Rprec", False),
    "RPrec": ("Rprec", False),
    "NumRet": ("num_ret", False),
    "NumRel": ("num_rel", False),
    "NumRelRet": ("num_rel_ret", False),
    "NumQ": ("num_q", False),
    "SetP": ("set_P", False),
    "SetR": ("set_recall", False),
    "SetF": ("set_F", False),
    "SetAP": ("set_map", False),
    "SetRelP": ("set_relative_P", False),
    "Success": ("success", True),
    "IPrec": ("iprec_at_recall", True),
}
_CUT_NAMES = {"nDCG": "ndcg_cut", "AP": "map_cut"}
_EXTRA = {"Judged", "ERR", "RBP", "RBP_resid", "RR_cut", "alpha_nDCG"}
ERR_MAX_GRADE = 4


@dataclass(frozen=True)
class IrMeasure:
    """A parsed ir_measures name: the trec_eval request or extra measure behind it."""

    text: str
    name: str
    cutoff: int | None
    rel: int | None
    params: dict[str, float]
    trec: str | None  # the trec_eval -m request, or None for an extra measure

    @property
    def trec_value(self) -> str | None:
        """The trec_eval value name holding this measure (``ndcg_cut_10``, ``map``)."""
        if self.trec is None:
            return None
        base, _, params = self.trec.partition(".")
        if not params:
            return base
        if base == "iprec_at_recall":
            return f"{base}_{float(params):3.2f}"
        return f"{base}_{params}"


def _unknown(text: str) -> UnknownMetricError:
    """No such measure: trec_eval's names (``-m`` syntax) and ir_measures' both listed."""
    from ragmeter.metrics.trec._spec import MEASURES, NICKNAMES

    irm = ", ".join(sorted([*_TREC, *_EXTRA]))
    return UnknownMetricError(
        text,
        [*(m.name for m in MEASURES), *NICKNAMES],
        f" (trec_eval's -m names, NAME[.params]). ir_measures names (NAME(params)@k): {irm}.",
        bare=False,  # ``@k`` is ir_measures' own syntax here, not a result key
    )


def parse_ir_measure(text: str) -> IrMeasure:
    """Parse ``nDCG@10``, ``P(rel=2)@5``, ``RBP(p=0.8)``, ``Judged@10`` ...

    >>> parse_ir_measure("nDCG@10").trec, parse_ir_measure("AP").trec
    ('ndcg_cut.10', 'map')
    >>> m = parse_ir_measure("RBP(rel=2,p=0.5)")
    >>> (m.name, m.rel, m.params["p"])
    ('RBP', 2, 0.5)
    """
    m = _NAME.match(text.replace(" ", "").replace("α", "alpha_"))
    if m is None:
        raise _unknown(text)
    name, cut = m.group("name"), m.group("cut")
    params: dict[str, float] = {}
    for item in filter(None, (m.group("params") or "").split(",")):
        key, eq, value = item.partition("=")
        try:
            params[key] = float(value) if eq else float("nan")
        except ValueError:
            raise UnknownMetricError(text, [], f" Bad parameter {item!r}.") from None
    rel = int(params.pop("rel")) if "rel" in params else None
    cutoff = None if cut is None else (float(cut) if name == "IPrec" else int(cut))
    if name in _EXTRA or (name == "RR" and cutoff is not None):
        return IrMeasure(text, "RR_cut" if name == "RR" else name, cutoff, rel, params, None)  # type: ignore[arg-type]
    if name not in _TREC:
        raise _unknown(text)
    trec, takes_cut = _TREC[name]
    if cutoff is not None and name in _CUT_NAMES:
        trec = f"{_CUT_NAMES[name]}.{cutoff}"
    elif cutoff is not None and takes_cut:
        trec = f"{trec}.{cutoff}"
    elif cutoff is not None:
        raise UnknownMetricError(text, [], f" {name} takes no cut-off.")
    elif takes_cut:
        raise UnknownMetricError(text, [], f" {name} needs a cut-off ({name}@k).")
    if name == "SetF" and "beta" in params:
        trec = f"set_F.{params.pop('beta')}"
    if params:
        raise UnknownMetricError(text, [], f" Unsupported parameters {sorted(params)}.")
    return IrMeasure(text, name, cutoff, rel, params, trec)  # type: ignore[arg-type]


def _top(ctx: Context, k: int | None) -> npt.NDArray[np.bool_]:
    cols = np.arange(ctx.width)[None, :]
    n = ctx.r.num_ret[:, None] if k is None else np.minimum(ctx.r.num_ret, k)[:, None]
    return np.asarray(cols < n, dtype=bool)


def judged(ctx: Context, k: int) -> FloatArray:
    top = _top(ctx, k)
    count = (top & (ctx.r.rel != NONPOOL)).sum(axis=1)
    return np.asarray(np.where(top.any(axis=1), divide(count, top.sum(axis=1)), 0.0))


def err(ctx: Context, k: int | None) -> FloatArray:
    grades = np.clip(np.where(ctx.valid, ctx.r.rel, 0), 0, ERR_MAX_GRADE)
    r = (np.power(2.0, grades) - 1.0) / float(2**ERR_MAX_GRADE)
    r = np.where(_top(ctx, k), r, 0.0)
    decay = np.cumprod(1.0 - r, axis=1)
    before = np.concatenate([np.ones((ctx.n, 1)), decay[:, :-1]], axis=1)
    return sequential_sum(r * before / ctx.ranks[None, :])


def rbp(ctx: Context, p: float, k: int | None) -> FloatArray:
    gain = _top(ctx, k) & ctx.isrel
    pw = ctx.powers(p, ctx.width)[:-1]
    return (1.0 - p) * sequential_sum(np.where(gain, pw[None, :], 0.0))


def rbp_resid(ctx: Context, p: float, k: int | None) -> FloatArray:
    top = _top(ctx, k)
    pw = ctx.powers(p, ctx.width)
    unjudged = top & (ctx.r.rel < 0)
    seen = top.sum(axis=1)
    tail: FloatArray = pw[seen]
    return tail + (1.0 - p) * sequential_sum(np.where(unjudged, pw[None, :-1], 0.0))


def rr_cut(ctx: Context, k: int) -> FloatArray:
    hit = _top(ctx, k) & ctx.isrel
    first = np.argmax(hit, axis=1)
    return np.asarray(np.where(hit.any(axis=1), 1.0 / (first + 1.0), 0.0))


def compute_extra(ctx: Context, m: IrMeasure) -> FloatArray:
    """Per-query values of an extra (non-trec_eval) measure."""
    p = m.params.get("p", 0.8)
    if m.name == "Judged":
        if m.cutoff is None:
            raise UnknownMetricError(m.text, [], " Judged needs a cut-off (Judged@k).")
        return judged(ctx, int(m.cutoff))
    if m.name == "ERR":
        return err(ctx, m.cutoff)
    if m.name == "RBP":
        return rbp(ctx, p, m.cutoff)
    if m.name == "RBP_resid":
        return rbp_resid(ctx, p, m.cutoff)
    if m.name == "RR_cut":
        return rr_cut(ctx, int(m.cutoff or 0))
    raise UnknownMetricError(m.text, [], " alpha_nDCG needs subtopic qrels: see alpha_ndcg().")
