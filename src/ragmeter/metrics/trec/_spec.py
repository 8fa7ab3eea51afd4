"""trec_eval's measure table: names, parameter syntax, defaults, and how each is averaged.

A measure request is trec_eval's ``-m`` argument: ``name`` or ``name.params``, where the
part after the first ``.`` is a comma-separated list whose meaning depends on the measure:

* **integer cut-offs** (``P.5,10``, ``ndcg_cut.10,20``): parsed like C ``atol`` (``23.4`` is
  23), sorted, each must be positive and distinct; one value ``P_5``, ``P_10`` ... per cut-off;
* **fractional cut-offs** (``iprec_at_recall.0,.5``, ``Rprec_mult.0.5,2``): parsed like C
  ``atof``, sorted, distinct; values named with two decimals (``iprec_at_recall_0.50``);
* **numeric parameters** (``utility.2,-1,0,0``, ``11pt_avg.0.2,0.5``, ``set_F.0.5``,
  ``relstring.20``): kept in order; the value is named ``utility_2,-1,0,0`` (the text as given);
* **gain pairs** (``ndcg.1=3,2=9``, ``rbp.p=0.8``): ``level=gain`` pairs (``p=`` for RBP's
  persistence); the value is named ``ndcg_1=3,2=9``.

A measure asked for twice keeps the parameters of its first request (trec_eval's rule), and
the nicknames ``official``, ``set`` and ``all_trec`` stand for trec_eval's sets. Values print
in the order of :data:`MEASURES`, never in the order asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ragmeter.errors import UnknownMetricError

__all__ = [
    "MEASURES",
    "NICKNAMES",
    "MeasureSpec",
    "Requested",
    "atof",
    "atol",
    "parse_measures",
]

ParamKind = Literal["none", "long_cuts", "double_cuts", "doubles", "pairs"]
#: how the ``all`` line is made: ``mean`` of the per-query values, ``sum`` of them (printed as an
#: integer), geometric mean ``gm`` (per-query values are logs, never printed), ``count``
#: (num_q), ``string`` (relstring: per query only) and ``runid`` (summary only)
Summary = Literal["mean", "sum", "gm", "count", "string", "runid"]

_LONG = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_RECALL_POINTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@dataclass(frozen=True)
class MeasureSpec:
    """One row of trec_eval's measure table (``measures.c``)."""

    name: str
    params: ParamKind
    summary: Summary
    default: tuple[float, ...] = ()


#: every measure ragmeter computes the trec_eval way, in trec_eval's print order
MEASURES: tuple[MeasureSpec, ...] = (
    MeasureSpec("runid", "none", "runid"),
    MeasureSpec("num_q", "none", "count"),
    MeasureSpec("num_ret", "none", "sum"),
    MeasureSpec("num_rel", "none", "sum"),
    MeasureSpec("num_rel_ret", "none", "sum"),
    MeasureSpec("map", "none", "mean"),
    MeasureSpec("gm_map", "none", "gm"),
    MeasureSpec("Rprec", "none", "mean"),
    MeasureSpec("bpref", "none", "mean"),
    MeasureSpec("recip_rank", "none", "mean"),
    MeasureSpec("iprec_at_recall", "double_cuts", "mean", _RECALL_POINTS),
    MeasureSpec("P", "long_cuts", "mean", _LONG),
    MeasureSpec("relstring", "doubles", "string", (10.0,)),
    MeasureSpec("recall", "long_cuts", "mean", _LONG),
    MeasureSpec("infAP", "none", "mean"),
    MeasureSpec("gm_bpref", "none", "gm"),
    MeasureSpec(
        "Rprec_mult", "double_cuts", "mean", (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
    ),
    MeasureSpec("utility", "doubles", "mean", (1.0, -1.0, 0.0, 0.0)),
    MeasureSpec("11pt_avg", "doubles", "mean", _RECALL_POINTS),
    MeasureSpec("binG", "none", "mean"),
    MeasureSpec("G", "pairs", "mean"),
    MeasureSpec("dcg", "pairs", "mean"),
    MeasureSpec("ideal_dcg", "pairs", "mean"),
    MeasureSpec("ndcg", "pairs", "mean"),
    MeasureSpec("ndcg_rel", "pairs", "mean"),
    MeasureSpec("Rndcg", "pairs", "mean"),
    MeasureSpec("ndcg_cut", "long_cuts", "mean", _LONG),
    MeasureSpec("map_cut", "long_cuts", "mean", _LONG),
    MeasureSpec("relative_P", "long_cuts", "mean", _LONG),
    MeasureSpec("success", "long_cuts", "mean", (1, 5, 10)),
    MeasureSpec("set_P", "none", "mean"),
    MeasureSpec("set_relative_P", "none", "mean"),
    MeasureSpec("set_recall", "none", "mean"),
    MeasureSpec("set_map", "none", "mean"),
    MeasureSpec("set_F", "doubles", "mean", (1.0,)),
    MeasureSpec("num_nonrel_judged_ret", "none", "sum"),
    MeasureSpec("rbp", "pairs", "mean"),
    MeasureSpec("rbp_resid", "pairs", "mean"),
    MeasureSpec("unj", "long_cuts", "mean", (5, 10, 20)),
)
_BY_NAME = {m.name: m for m in MEASURES}

_OFFICIAL = (
    "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref",
    "recip_rank", "iprec_at_recall", "P",
)  # fmt: skip
#: trec_eval's nicknames for sets of measures (``-m official``, ``-m all_trec``, ``-m set``)
NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": _OFFICIAL,
    "set": (
        "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall",
        "set_relative_P", "set_map", "set_F",
    ),
    "all_trec": (
        *_OFFICIAL, "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref",
        "utility", "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut",
        "ndcg_cut", "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall", "set_relative_P",
        "set_map", "set_F", "num_nonrel_judged_ret",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Requested:
    """A measure to compute: its table row, its parameter values and its output names.

    ``cutoffs`` holds the sorted cut-offs (``long_cuts``/``double_cuts``), ``values`` the
    numeric parameters (``doubles``), ``pairs`` the ``(name, gain)`` pairs, and ``names`` the
    value names trec_eval prints, one per cut-off or a single one.
    """

    spec: MeasureSpec
    names: tuple[str, ...]
    cutoffs: tuple[float, ...] = ()
    values: tuple[float, ...] = ()
    pairs: tuple[tuple[str, float], ...] = ()


_ATOF = re.compile(r"\s*[+-]?(?:inf(?:inity)?|nan|(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)", re.I)
_ATOL = re.compile(r"\s*[+-]?\d+")


def atof(text: str) -> float:
    """C ``atof``: the longest leading number of ``text``; ``0.0`` when there is none.

    >>> atof("0.25"), atof(".5x"), atof("abc"), atof("1e3")
    (0.25, 0.5, 0.0, 1000.0)
    """
    m = _ATOF.match(text)
    if m is None:
        return 0.0
    return float(m.group(0))


def atol(text: str) -> int:
    """C ``atol``: the leading integer of ``text``; ``0`` when there is none.

    >>> atol("23.4"), atol(" -2"), atol("x")
    (23, -2, 0)
    """
    m = _ATOL.match(text)
    return int(m.group(0)) if m else 0


def _check_pairs(text: str, request: str) -> tuple[tuple[str, float], ...]:
    last = ","
    for ch in text:
        if ch in ",=":
            if ch == last:
                last = ","
                break
            last = ch
    if last != "=":
        raise UnknownMetricError(
            request, [], f" Malformed pair parameters {text!r}: expected level=gain,..."
        )
    pairs = []
    for item in text.split(","):
        name, _, value = item.partition("=")
        pairs.append((name, atof(value)))
    return tuple(pairs)


def _format_double_cut(name: str, value: float) -> str:
    return f"{name}_{value:3.2f}"


def _build(spec: MeasureSpec, params: str | None, request: str) -> Requested:
    kind = spec.params
    if kind == "none":
        return Requested(spec, (spec.name,))
    if kind in ("long_cuts", "double_cuts"):
        if params is None:
            cuts = tuple(float(c) for c in spec.default)
        else:
            parts = params.split(",")
            cuts = tuple(sorted(float(atol(p)) if kind == "long_cuts" else atof(p) for p in parts))
            if kind == "long_cuts" and cuts[0] <= 0:
                raise UnknownMetricError(request, [], " Cut-offs must be positive.")
            if len(set(cuts)) != len(cuts):
                raise UnknownMetricError(request, [], " Duplicate cut-offs.")
        if kind == "long_cuts":
            names = tuple(f"{spec.name}_{int(c)}" for c in cuts)
        else:
            names = tuple(_format_double_cut(spec.name, c) for c in cuts)
        return Requested(spec, names, cutoffs=cuts)
    if kind == "doubles":
        if params is None:
            return Requested(spec, (spec.name,), values=spec.default)
        values = tuple(atof(p) for p in params.split(","))
        return Requested(spec, (f"{spec.name}_{params}",), values=values)
    if params is None:
        return Requested(spec, (spec.name,))
    return Requested(spec, (f"{spec.name}_{params}",), pairs=_check_pairs(params, request))


def parse_measures(requests: list[str] | tuple[str, ...]) -> list[Requested]:
    """The measures ``requests`` ask for (trec_eval ``-m`` syntax), in trec_eval's order.

    Unknown names raise :class:`~ragmeter.errors.UnknownMetricError` naming the request.

    >>> [r.names for r in parse_measures(["ndcg_cut.10,5", "P.5", "map"])]
    [('map',), ('P_5',), ('ndcg_cut_5', 'ndcg_cut_10')]
    >>> parse_measures(["official"])[0].spec.name
    'runid'
    """
    marked: set[str] = set()
    params: dict[str, str] = {}
    for request in requests:
        name, dot, rest = request.partition(".")
        if dot:
            if rest == "":
                raise UnknownMetricError(request, [], " Nothing follows the '.'.")
            params.setdefault(name, rest)
        if name in NICKNAMES:
            marked.update(NICKNAMES[name])
        elif name in _BY_NAME:
            marked.add(name)
        else:
            raise UnknownMetricError(request, [*_BY_NAME, *NICKNAMES])
    return [_build(m, params.get(m.name), m.name) for m in MEASURES if m.name in marked]
