"""One call computes any set of trec_eval measures over a run, per query and for ``all``.

The per-query values are trec_eval's, keyed by the names trec_eval prints (``P_10``,
``ndcg_cut_10``, ``iprec_at_recall_0.50``, ``utility_2,-1,0,0`` ...). The aggregate follows
trec_eval's ``all`` line: counts (``num_ret``, ``num_rel``, ``num_rel_ret``,
``num_nonrel_judged_ret``) are summed, ``gm_map`` / ``gm_bpref`` are geometric means (of the
values floored at 1e-5), ``num_q`` counts the queries, every other measure is the arithmetic
mean. Queries are the qrels' queries the run ranks, in byte order of their ids; with
``complete=True`` (``trec_eval -c``) every qrels query counts, a query the run lacks scoring
what one unjudged doc scores (``num_ret`` 0), so the means are over all judged queries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from ragmeter.errors import InvalidInputError, NoScorableQueriesError
from ragmeter.metrics.trec._context import Context, FloatArray
from ragmeter.metrics.trec._gains import GRADED
from ragmeter.metrics.trec._irm import IrMeasure, compute_extra, parse_ir_measure
from ragmeter.metrics.trec._measures import SIMPLE, utility
from ragmeter.metrics.trec._rank import Ranked, RunRanking, build, with_level
from ragmeter.metrics.trec._spec import MEASURES, NICKNAMES, Requested, parse_measures

__all__ = ["TrecEvalResult", "evaluate", "evaluate_ranked"]

Value = float | str
Measure = Callable[[Context, Requested], FloatArray]
_MEASURES: dict[str, Measure] = {**SIMPLE, **GRADED}


@dataclass
class TrecEvalResult:
    """Per-query values and the ``all`` line of one trec_eval-style evaluation.

    ``per_query[qid][name]`` is a float (``relstring`` values are strings). As in
    pytrec_eval, per-query ``num_q`` is 1 and per-query ``gm_map`` / ``gm_bpref`` are the
    logs ``log(max(value, 1e-5))`` whose mean the ``all`` line exponentiates (trec_eval's
    ``-q`` output does not print these three). ``aggregate[name]`` is an int for the summed
    counts and ``num_q``, a float otherwise, plus ``runid`` when known. ``requested`` keeps
    the parsed measures in trec_eval's print order (used by :func:`format_trec_eval`).
    """

    queries: list[str]
    per_query: dict[str, dict[str, Value]]
    aggregate: dict[str, float | int | str]
    requested: list[Requested] = field(repr=False)
    runid: str | None = None

    @property
    def names(self) -> list[str]:
        """Every value name, in trec_eval's print order."""
        return [n for r in self.requested for n in r.names]


def _relstrings(ctx: Context, req: Requested) -> list[str]:
    length = max(int(req.values[0]), 0)
    out = []
    for row, n in zip(ctx.r.rel[:, :length].tolist(), ctx.r.num_ret.tolist(), strict=True):
        chars = []
        for code in row[: min(length, n)]:
            if code > 9:
                chars.append(">")
            elif code >= 0:
                chars.append(str(code))
            elif code == -1:
                chars.append("-")
            elif code == -2:
                chars.append(".")
            else:
                chars.append("<")
        out.append("".join(chars))
    return out


def _seq_total(column: FloatArray) -> float:
    return float(np.cumsum(column)[-1]) if len(column) else 0.0


def _clear_bogus(req: Requested, values: FloatArray, missing: np.ndarray) -> FloatArray:
    """trec_eval -c zeroes these values for a query the run lacks (by printed name)."""
    values = values.copy()
    for j, name in enumerate(req.names):
        if name in ("num_ret", "utility", "rbp_resid") or name.startswith("unj"):
            values[missing, j] = 0.0
    return values


def evaluate_ranked(
    ranked: Ranked,
    requested: list[Requested],
    *,
    complete_rels: int | None = None,
    num_docs: int = 0,
    runid: str | None = None,
    legacy_recall_cutoffs: bool = False,
) -> TrecEvalResult:
    """The measures ``requested`` over prepared :class:`Ranked` arrays (see :func:`evaluate`).

    ``complete_rels`` is the ``all`` value of ``num_rel`` under ``-c`` (trec_eval counts the
    qrels' entries graded > 0 there, whatever the relevance level).
    """
    with np.errstate(all="ignore"):  # IEEE results (inf, nan) as in C, without warnings
        ctx = Context(ranked, legacy_recall_cutoffs=legacy_recall_cutoffs)
        return _evaluate(ctx, requested, complete_rels, num_docs, runid)


def _evaluate(
    ctx: Context,
    requested: list[Requested],
    complete_rels: int | None,
    num_docs: int,
    runid: str | None,
) -> TrecEvalResult:
    ranked = ctx.r
    n = ctx.n
    if n == 0:
        raise NoScorableQueriesError("no query has both judgements and a ranking in the run")
    aggregate: dict[str, float | int | str] = {}
    missing = ranked.missing
    names: list[str] = []
    blocks: list[FloatArray] = []
    strings: dict[str, list[str]] = {}
    for req in requested:
        name = req.spec.name
        summary = req.spec.summary
        if summary == "runid":
            if runid is not None:
                aggregate["runid"] = runid
            continue
        if summary == "string":
            texts = _relstrings(ctx, req)
            if req.names[0] == "relstring":  # trec_eval -c clears it (by that exact name)
                texts = ["" if m else s for s, m in zip(texts, missing.tolist(), strict=True)]
            strings[req.names[0]] = texts
            continue
        values = utility(ctx, req, num_docs) if name == "utility" else _MEASURES[name](ctx, req)
        if missing.any():
            values = _clear_bogus(req, values, missing)
        names.extend(req.names)
        blocks.append(values)
        totals = np.cumsum(values, axis=0)[-1]
        for vname, total in zip(req.names, totals.tolist(), strict=True):
            if summary == "sum":
                aggregate[vname] = int(total)
            elif summary == "count":
                aggregate[vname] = n
            elif summary == "gm":
                aggregate[vname] = math.exp(total / n)
            else:
                aggregate[vname] = total / n
        if name == "num_rel" and complete_rels is not None:
            aggregate["num_rel"] = complete_rels
    rows = np.concatenate(blocks, axis=1).tolist() if blocks else [[] for _ in ranked.qids]
    per_query: dict[str, dict[str, Value]] = {
        q: dict(zip(names, row, strict=True)) for q, row in zip(ranked.qids, rows, strict=True)
    }
    for name, texts in strings.items():
        for q, text in zip(ranked.qids, texts, strict=True):
            per_query[q][name] = text
    return TrecEvalResult(ranked.qids, per_query, aggregate, requested, runid)


def _check_qrels(qrels: Mapping[str, Mapping[str, int]]) -> dict[str, Mapping[str, int]]:
    clean: dict[str, Mapping[str, int]] = {}
    try:  # fast path: every grade an int, or a float with an integral value
        types = set(map(type, chain.from_iterable(j.values() for j in qrels.values())))
        if types <= {int}:
            return dict(qrels)
        if types <= {int, float}:
            grades = np.fromiter(
                chain.from_iterable(judged.values() for judged in qrels.values()), np.float64
            )
            if np.all(np.isfinite(grades) & (grades == np.trunc(grades))):
                return dict(qrels)
    except AttributeError:  # a row that is not a mapping: named below
        pass
    for qid, judged in qrels.items():
        if not isinstance(judged, Mapping):
            raise InvalidInputError(f"qrels[{qid!r}] must map doc ids to integer grades")
        row: dict[str, int] = {}
        for doc, grade in judged.items():
            if isinstance(grade, bool) or not isinstance(grade, (int, float)):
                raise InvalidInputError(
                    f"qrels[{qid!r}][{doc!r}] = {grade!r}: a grade must be an integer"
                )
            if isinstance(grade, float) and not float(grade).is_integer():
                raise InvalidInputError(
                    f"qrels[{qid!r}][{doc!r}] = {grade!r}: trec_eval grades are integers"
                )
            row[doc] = int(grade)
        clean[qid] = row
    return clean


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, RunRanking],
    measures: Sequence[str] = ("official",),
    *,
    relevance_level: int = 1,
    judged_only: bool = False,
    max_retrieved: int | None = None,
    complete: bool = False,
    num_docs: int = 0,
    runid: str | None = None,
    legacy_recall_cutoffs: bool = False,
) -> TrecEvalResult:
    """trec_eval's measures of ``run`` against ``qrels``, per query and for ``all``.

    ``measures`` takes trec_eval ``-m`` strings (``"all_trec"``, ``"official"``,
    ``"ndcg_cut.10,20"``, ``"P.5"``, ``"bpref"``, ``"ndcg.1=3,2=9"``, ``"rbp.p=0.8"``).
    ``run[qid]`` is ``{doc: score}`` (ranked as trec_eval ranks: score descending, ties by
    doc id descending) or a list of doc ids, best first. Options are trec_eval's:
    ``relevance_level`` (``-l``: grades at or above it are relevant), ``judged_only``
    (``-J``), ``max_retrieved`` (``-M``), ``complete`` (``-c``) and ``num_docs`` (``-N``,
    used by ``utility``). ``legacy_recall_cutoffs`` turns recall fractions into relevant-doc
    counts as trec_eval 9 and pytrec_eval do (``int(x * R + 0.9)``, for ``iprec_at_recall``
    and ``11pt_avg``) instead of trec_eval 10's ``lround(x * R)``.

    >>> r = evaluate({"q1": {"a": 1, "b": 0}}, {"q1": {"a": 0.5, "x": 0.9}}, ["P.1,2", "map"])
    >>> r.per_query["q1"]
    {'map': 0.5, 'P_1': 0.0, 'P_2': 0.5}
    >>> r.aggregate["P_2"]
    0.5
    """
    trec_names = {m.name for m in MEASURES} | set(NICKNAMES)
    trec = [m for m in measures if m.partition(".")[0] in trec_names]
    irm = [parse_ir_measure(m) for m in measures if m.partition(".")[0] not in trec_names]
    requested = parse_measures(trec)
    clean = _check_qrels(qrels)
    ranked = build(
        clean,
        run,
        relevance_level=relevance_level,
        judged_only=judged_only,
        max_retrieved=max_retrieved,
        complete=complete,
    )
    rels = None
    if complete:
        rels = sum(1 for judged in clean.values() for g in judged.values() if g > 0)
    result = evaluate_ranked(
        ranked,
        requested,
        complete_rels=rels,
        runid=runid,
        num_docs=num_docs,
        legacy_recall_cutoffs=legacy_recall_cutoffs,
    )
    for level in sorted({relevance_level if m.rel is None else m.rel for m in irm}):
        group = [m for m in irm if (relevance_level if m.rel is None else m.rel) == level]
        _add_ir_measures(result, with_level(ranked, level), group, num_docs)
    return result


def _rounds(requests: list[str]) -> list[list[str]]:
    """trec_eval requests grouped so one evaluation serves each group: the cut-offs of one
    measure merged (``P.5`` and ``P.10`` become ``P.5,10``), other parameter sets apart."""
    cuts: dict[str, list[str]] = {}
    others: list[str] = []
    kinds = {m.name: m.params for m in MEASURES}
    for request in dict.fromkeys(requests):
        base, dot, params = request.partition(".")
        if dot and kinds[base] in ("long_cuts", "double_cuts"):
            cuts.setdefault(base, []).append(params)
        else:
            others.append(request)
    merged = [f"{base}.{','.join(dict.fromkeys(p))}" for base, p in cuts.items()]
    rounds: list[list[str]] = []
    for request in [*merged, *others]:
        base = request.partition(".")[0]
        for r in rounds:
            if all(x.partition(".")[0] != base for x in r):
                r.append(request)
                break
        else:
            rounds.append([request])
    return rounds


def _add_ir_measures(
    result: TrecEvalResult, ranked: Ranked, group: list[IrMeasure], num_docs: int
) -> None:
    """Add ir_measures-named values (keyed by their text) to ``result``.

    ir_measures computes ``IPrec`` through pytrec_eval, so with trec_eval 9's recall cut-offs.
    """
    per_query: dict[str, dict[str, Value]] = {q: {} for q in ranked.qids}
    aggregate: dict[str, float | int | str] = {}
    for round_ in _rounds([m.trec for m in group if m.trec is not None]):
        sub = evaluate_ranked(
            ranked, parse_measures(round_), num_docs=num_docs, legacy_recall_cutoffs=True
        )
        for q in ranked.qids:
            per_query[q].update(sub.per_query[q])
        aggregate.update(sub.aggregate)
    ctx = Context(ranked)
    with np.errstate(all="ignore"):
        for m in group:
            if m.trec_value is not None:
                values = [float(per_query[q][m.trec_value]) for q in ranked.qids]
                total = aggregate[m.trec_value]
            else:
                column = compute_extra(ctx, m)
                values = column.tolist()
                total = _seq_total(column) / len(values)
            for q, v in zip(ranked.qids, values, strict=True):
                result.per_query[q][m.text] = v
            result.aggregate[m.text] = total
