"""trec_eval's text output: ``name<TAB>qid<TAB>value`` lines, byte for byte.

The name is left-justified in 22 columns; values print with ``%6.4f``, except counts
(``num_ret``, ``num_rel``, ``num_rel_ret``, ``num_nonrel_judged_ret``, ``num_q``), which print
as integers, ``relstring`` (quoted) and ``runid`` (the run's id). With ``per_query``
(``trec_eval -q``) each query's lines come first, query by query, then the ``all`` lines
(unless ``summary`` is off, ``-n``). ``num_q``, ``gm_map``, ``gm_bpref`` and ``runid`` print
only in the summary, ``relstring`` only per query.
"""

from __future__ import annotations

from ragmeter.metrics.trec._engine import TrecEvalResult

__all__ = ["format_trec_eval"]


def _number(value: float | int | str, integer: bool) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if integer else f"{value:6.4f}"


def format_trec_eval(
    result: TrecEvalResult, *, per_query: bool = False, summary: bool = True
) -> str:
    """The text trec_eval prints for ``result`` (see the module docstring).

    >>> from ragmeter.metrics.trec import evaluate
    >>> r = evaluate({"1": {"a": 1}}, {"1": {"a": 2.0, "b": 1.0}}, ["P.2", "num_ret"])
    >>> print(format_trec_eval(r, per_query=True), end="")
    num_ret               	1	2
    P_2                   	1	0.5000
    num_ret               	all	2
    P_2                   	all	0.5000
    """
    lines: list[str] = []
    if per_query:
        for qid in result.queries:
            values = result.per_query[qid]
            for req in result.requested:
                kind = req.spec.summary
                if kind in ("gm", "count", "runid"):
                    continue
                for name in req.names:
                    value = values[name]
                    shown = f"'{value}'" if kind == "string" else _number(value, kind == "sum")
                    lines.append(f"{name:<22}\t{qid}\t{shown}\n")
    if summary:
        for req in result.requested:
            kind = req.spec.summary
            if kind == "string":
                continue
            if kind == "runid":
                runid = result.aggregate.get("runid")
                if runid is not None:
                    lines.append(f"{'runid':<22}\tall\t{runid}\n")
                continue
            for name in req.names:
                value = result.aggregate[name]
                lines.append(f"{name:<22}\tall\t{_number(value, kind in ('sum', 'count'))}\n")
    return "".join(lines)
