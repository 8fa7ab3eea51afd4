"""Rendering reports on the terminal: rich tables, trec_eval lines, JSON."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

import typer
from rich.console import Console
from rich.table import Table

from ragmeter.cli._app import CliError, _print_table, _stderr
from ragmeter.report import RagEvalReport, RetrievalEvalReport

# --------------------------------------------------------------------------- rendering

_TREC_NAMES: dict[str, str] = {
    "ndcg": "ndcg_cut_{k}",
    "precision": "P_{k}",
    "recall": "recall_{k}",
    "map": "map_cut_{k}",
    "hit_rate": "success_{k}",
}
_TREC_UNCUT: dict[str, str] = {"map": "map", "mrr": "recip_rank"}


def trec_measure(key: str) -> str:
    """trec_eval's measure name for a ragmeter result key; the key itself when it has none.

    >>> trec_measure("ndcg@10"), trec_measure("precision@5"), trec_measure("mrr")
    ('ndcg_cut_10', 'P_5', 'recip_rank')
    >>> trec_measure("mrr@10")  # trec_eval has no cut-off reciprocal rank
    'mrr@10'
    """
    name, _, k = key.partition("@")
    if not k:
        return _TREC_UNCUT.get(name, name)
    template = _TREC_NAMES.get(name)
    return template.format(k=k) if template else key


_TREC_ORDER: tuple[str, ...] = ("map", "mrr", "precision@", "recall@", "ndcg@", "map@", "hit_rate@")


def _trec_sort_key(key: str) -> tuple[int, int]:
    """trec_eval's print order: map, recip_rank, P, recall, ndcg_cut, map_cut, success."""
    name, at, k = key.partition("@")
    group = name + at
    rank = _TREC_ORDER.index(group) if group in _TREC_ORDER else len(_TREC_ORDER)
    return (rank, int(k) if k.isdigit() else -1)


def trec_eval_lines(report: RetrievalEvalReport, *, per_query: bool = False) -> list[str]:
    """The report as trec_eval prints it: ``measure<pad>\\tquery\\tvalue``, 4 decimals.

    Per-query rows (trec_eval ``-q``) come first, queries in string order, then the
    ``all`` rows starting with ``num_q``. Measures are named as trec_eval names them
    (``ndcg_cut_10``, ``P_10``, ``recall_100``, ``map``, ``map_cut_10``, ``recip_rank``,
    ``success_10``); a key trec_eval has no measure for keeps its ragmeter name. Means are
    over the scored queries: with judged queries missing from the run as zeros under
    ``missing_queries="zero"`` (trec_eval ``-c``), over the run's queries only under
    ``"skip"`` (trec_eval's default).
    """
    keys = sorted(report.metrics, key=_trec_sort_key)
    lines: list[str] = []
    if per_query:
        for qid in sorted(report.per_query):
            row = report.per_query[qid]
            lines.extend(f"{trec_measure(k):<22}\t{qid}\t{row[k]:.4f}" for k in keys if k in row)
    lines.append(f"{'num_q':<22}\tall\t{report.n_queries}")
    lines.extend(f"{trec_measure(k):<22}\tall\t{report.metrics[k]:.4f}" for k in keys)
    return lines


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _grid(keys: Iterable[str]) -> tuple[list[str], list[int], bool]:
    """Split result keys into metric names (in order), sorted cut-offs, and 'has uncut'."""
    names: list[str] = []
    ks: set[int] = set()
    uncut = False
    for key in keys:
        name, _, k = key.partition("@")
        if name not in names:
            names.append(name)
        if k:
            ks.add(int(k))
        else:
            uncut = True
    return names, sorted(ks), uncut


def _cells(values: Mapping[str, float], names: list[str], cols: list[str]) -> list[str]:
    return [_fmt(values.get(f"{name}{col}" if col else name)) for name in names for col in cols]


def retrieval_table(report: RetrievalEvalReport) -> Table:
    """A rich table: one row per metric, one column per cut-off, ``all`` for uncut ones;
    under a rule, ``judged`` (the share of the top k that is judged) when the report has it."""
    names, ks, uncut = _grid(report.metrics)
    cols = [f"@{c}" for c in ks] + ([""] if uncut else [])
    table = Table()
    table.add_column("metric", style="bold")
    for col in cols:
        table.add_column(col or "all", justify="right")
    for i, name in enumerate(names):
        table.add_row(name, *_cells(report.metrics, [name], cols), end_section=i == len(names) - 1)
    judged = report.judged
    if judged is not None and judged.means and "judged" not in names:
        table.add_row("judged", *_cells(judged.means, ["judged"], cols), style="dim")
    return table


def judged_note(report: RetrievalEvalReport) -> str | None:
    """One line on the unjudged docs in the rankings' top k (``None`` without counts).

    >>> from ragmeter.report import JudgedShare
    >>> r = RetrievalEvalReport(metrics={}, per_query={}, n_queries=2, k_values=(10,),
    ...     judged=JudgedShare(k=10, documents=20, unjudged=5, queries=2,
    ...                        queries_with_unjudged=1, threshold=0.9))
    >>> judged_note(r)
    'judged@10: 75.0% of the 20 top-10 docs are judged; 5 unjudged (counted...) in 1 of 2 queries'
    """
    j = report.judged
    if j is None or not j.documents:
        return None
    what = "removed before scoring: --judged-only" if j.judged_only else "counted non-relevant"
    return (
        f"judged@{j.k}: {j.share:.1%} of the {j.documents:,} top-{j.k} docs are judged; "
        f"{j.unjudged:,} unjudged ({what}) in {j.queries_with_unjudged:,} of "
        f"{j.queries:,} queries"
        + (
            " (the qrels list relevant docs only: judged@k is precision@k)"
            if j.relevant_only
            else ""
        )
    )


def per_query_table(report: RetrievalEvalReport) -> Table:
    """Per-query scores: a block of rows per query (one per metric), a column per cut-off."""
    names, ks, uncut = _grid(report.metrics)
    cols = [f"@{c}" for c in ks] + ([""] if uncut else [])
    table = Table()
    table.add_column("query", style="bold")
    table.add_column("metric")
    for col in cols:
        table.add_column(col or "all", justify="right")
    for qid in sorted(report.per_query):
        row = report.per_query[qid]
        for i, name in enumerate(names):
            table.add_row(
                qid if i == 0 else "",
                name,
                *_cells(row, [name], cols),
                end_section=i == len(names) - 1,
            )
    return table


def rag_table(report: RagEvalReport) -> Table:
    """A rich table: metric, mean, median, coverage (samples it applied to), direction."""
    table = Table()
    for name, justify in (
        ("metric", "left"),
        ("mean", "right"),
        ("median", "right"),
        ("coverage", "right"),
        ("better", "left"),
    ):
        table.add_column(name, justify=justify, style="bold" if name == "metric" else None)  # type: ignore[arg-type]
    for key, value in report.metrics.items():
        summary = report.summaries.get(key)
        covered = report.coverage.get(key, 0)
        table.add_row(
            key,
            _fmt(value if covered or key not in report.coverage else None),
            _fmt(summary.median if summary is not None and summary.count else None),
            f"{covered}/{report.n_samples}",
            "higher" if report.higher_is_better.get(key, True) else "lower",
        )
    return table


def _emit_retrieval(
    report: RetrievalEvalReport,
    *,
    as_json: bool,
    trec: bool,
    per_query: bool,
    title: str | None = None,
) -> None:
    if as_json and trec:
        raise CliError("--json and --trec are two output formats; choose one")
    if as_json:
        _print_json(report)
    elif trec:
        typer.echo("\n".join(trec_eval_lines(report, per_query=per_query)))
    else:
        heading = title or f"Retrieval evaluation: {report.n_queries} queries scored"
        _print_table(retrieval_table(report), heading)
        conv = report.conventions
        level = "> 0" if conv.relevance_level is None else f">= {conv.relevance_level:g}"
        note = f"relevant: grade {level}; ties: {conv.ties}"
        judged = judged_note(report)
        if judged is not None:
            note += f"\n{judged}"
        Console(highlight=False, soft_wrap=True).print(note, style="dim", markup=False)
        if per_query:
            _print_table(per_query_table(report), f"Per-query scores ({report.n_queries} queries)")
    if report.warnings and not as_json:
        err = _stderr()
        for warning in report.warnings:
            err.print(f"warning: {warning}", markup=False)


def _print_json(report: RetrievalEvalReport | RagEvalReport) -> None:
    """The report as JSON on stdout, written a row at a time (never one giant string)."""
    report.to_json(sys.stdout)
    sys.stdout.write("\n")
