"""``ragmeter runs``: the saved runs of the run registry, listed, shown, diffed, trended,
pinned and removed.

Every subcommand takes ``--registry PATH`` (default ``$RAGMETER_REGISTRY``, else
``./.ragmeter/runs.sqlite``). A run is named by a *ref*: a run id or a unique prefix of
one, a run name (its newest run), ``latest``, ``pinned`` (``pinned:NAME`` when several
names have a pin) or ``NAME~1`` (the run before the newest of that name).

Exit codes: 0 when the command did what it said; 2 for anything it refused: a ref that
names no run, a registry file that is corrupt or not ragmeter's (the file is named), two
runs that are not like for like (every difference is named on stderr).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ragmeter.cli._app import CliError, _print_table, _stderr, app, error_exit
from ragmeter.cli._options import RegistryOpt
from ragmeter.errors import RagmeterError, describe_error

if TYPE_CHECKING:
    from ragmeter.registry import Registry, RunRecord
    from ragmeter.stats import TrendPoint

__all__ = ["runs_app"]

runs_app = typer.Typer(
    name="runs",
    help="Saved runs (ragmeter ... --save NAME): list, show, diff, trend, pin, unpin, rm.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(runs_app, name="runs")

RefArg = Annotated[
    str,
    typer.Argument(
        help="A run: its id or a unique prefix, a name (its newest run), latest, pinned, "
        "pinned:NAME or NAME~1.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
NameOpt = Annotated[
    str | None, typer.Option("--name", help="Only the runs of this name.", show_default=False)
]
TagFilterOpt = Annotated[
    str | None,
    typer.Option(
        "--tag", help="Only the runs with this tag (KEY or KEY=VALUE).", show_default=False
    ),
]
HtmlOpt = Annotated[
    Path | None,
    typer.Option("--html", help="Also write a self-contained HTML page.", show_default=False),
]


@contextmanager
def _refusals() -> Iterator[None]:
    """Anything the registry or the comparison refuses ends the command with exit 2."""
    try:
        yield
    except (RagmeterError, OSError) as exc:
        raise error_exit(CliError(describe_error(exc))) from None


def _open(path: Path | None, *, write: bool = False) -> Registry:
    from ragmeter.registry import Registry

    return Registry(path, read_only=not write)


def _none_saved(reg: Registry, name: str | None, tag: str | None) -> str:
    which = " ".join(
        w for w in (f"named {name!r}" if name else "", f"tagged {tag!r}" if tag else "") if w
    )
    return (
        f"no saved runs{' ' + which if which else ''} in {reg.path}; save one with "
        "--save NAME (ragmeter retrieval, beir, eval, report, traces) or report.save(name=...)"
    )


def _main_metric(record: RunRecord) -> str | None:
    """The metric ``runs list`` shows: NDCG@10 for retrieval when saved, else the first."""
    if "ndcg@10" in record.metrics:
        return "ndcg@10"
    return next(iter(record.metrics), None)


def _ci(low: float | None, high: float | None) -> str:
    return "–" if low is None or high is None else f"[{low:.4f}, {high:.4f}]"


def _short(value: Any, limit: int = 160) -> str:
    """A setting as JSON, a long list shortened to its first items and its length."""
    text = json.dumps(value)
    if len(text) <= limit:
        return text
    if isinstance(value, list):
        shown = json.dumps(value[:6])[:-1]
        return f"{shown}, ...] ({len(value)} items; --json shows all)"
    return text[:limit] + "... (--json shows all)"


def _commit(record: RunRecord) -> str:
    if not record.git_commit:
        return "–"
    return record.git_commit[:10] + ("*" if record.git_dirty else "")


@runs_app.command("list")
def list_command(
    name: NameOpt = None,
    tag: TagFilterOpt = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many runs (newest).")
    ] = None,
    as_json: JsonOpt = False,
    registry: RegistryOpt = None,
) -> None:
    """List the saved runs, newest first (a commit with * was dirty)."""
    with _refusals():
        reg = _open(registry)
        records = reg.runs(name=name, tag=tag, limit=limit)
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in records], indent=2))
        return
    if not records:
        typer.echo(_none_saved(reg, name, tag))
        return
    table = Table(show_edge=False, pad_edge=False)
    for column in ("id", "name", "time (UTC)", "commit", "metric", "mean", "CI", "n", "pinned"):
        table.add_column(column, justify="right" if column in ("mean", "n") else "left")
    for r in records:
        key = _main_metric(r)
        row = r.metrics[key] if key is not None else None
        table.add_row(
            r.id[:12],
            r.name,
            r.created.strftime("%Y-%m-%d %H:%M:%S"),
            _commit(r),
            key or "–",
            "–" if row is None else f"{row.mean:.4f}",
            "–" if row is None else _ci(row.ci_low, row.ci_high),
            "–" if row is None else str(row.n),
            "pinned" if r.pinned else "",
        )
    _print_table(table, f"{len(records)} saved runs in {reg.path}")


@runs_app.command("show")
def show_command(ref: RefArg, as_json: JsonOpt = False, registry: RegistryOpt = None) -> None:
    """One saved run: what it scored and how (fingerprints, settings), its metrics with CI."""
    with _refusals():
        record = _open(registry).get(ref)
    if as_json:
        typer.echo(json.dumps(record.to_dict(), indent=2))
        return
    out = [
        f"run {record.id}  {record.name}  ({record.kind}{', pinned' if record.pinned else ''})",
        f"  saved        {record.created.isoformat()}",
        f"  git commit   {record.git_commit or '–'}" + (" (dirty)" if record.git_dirty else ""),
        f"  ragmeter     {record.ragmeter_version} (metric definitions "
        f"{record.metric_definitions})",
    ]
    if record.tags:
        out.append("  tags         " + ", ".join(f"{k}={v}" for k, v in record.tags.items()))
    if record.note:
        out.append(f"  note         {record.note}")
    if record.judge_model:
        out.append(f"  judge        {record.judge_model} (prompt {record.judge_prompt_hash})")
    if record.tokens is not None or record.cost is not None:
        out.append(f"  tokens/cost  {record.tokens} / {record.cost}")
    data = record.dataset
    out.append(
        "  dataset      none (a report made by hand, or by an older ragmeter)"
        if data is None
        else f"  dataset      {data.kind} {data.digest[:16]} ({data.items} items, "
        f"{data.entries} entries)"
    )
    out.append(f"  config       {record.config.digest[:16]}")
    out.extend(f"    {k}: {_short(v)}" for k, v in record.config.settings.items())
    out.append(f"  scores       {record.scores_path} (sha256 {record.scores_sha256[:16]})")
    typer.echo("\n".join(out))
    table = Table(show_edge=False, pad_edge=False)
    for column in ("metric", "mean", "95% CI", "n"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for key, row in record.metrics.items():
        table.add_row(key, f"{row.mean:.4f}", _ci(row.ci_low, row.ci_high), str(row.n))
    _print_table(table)


@runs_app.command("diff")
def diff_command(
    a: Annotated[str, typer.Argument(help="The baseline run (a ref).", show_default=False)],
    b: Annotated[str, typer.Argument(help="The run compared to it (a ref).", show_default=False)],
    metric: Annotated[
        str | None,
        typer.Option("--metric", "-m", help="Metric key (default: ndcg@10, or the first)."),
    ] = None,
    common_queries: Annotated[
        bool,
        typer.Option(
            "--common-queries",
            help="Compare runs that are not like for like anyway, on the queries both "
            "scored with unchanged judgements (the output says so).",
        ),
    ] = False,
    test: Annotated[
        str, typer.Option("--test", help="randomization (default), bootstrap or t-test.")
    ] = "randomization",
    resamples: Annotated[int, typer.Option("--resamples", "-n", help="Resamples.")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level.")] = 0.05,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    registry: RegistryOpt = None,
) -> None:
    """Is B really different from A? Paired by query: CI, p-value, most-moved queries.

    Refused (exit 2, every difference named) when the two runs were not scored on the
    same data with the same settings, unless --common-queries.
    """
    from ragmeter.stats import load_pair

    with _refusals():
        reg = _open(registry)
        pair = load_pair(a, b, registry=reg, metric=metric, common_queries=common_queries)
        result = pair.compare(
            test=test,  # type: ignore[arg-type]  # checked by compare()
            n=resamples,
            seed=seed,
            alpha=alpha,
        )
        if html is not None:
            from ragmeter.html import write_comparison

            written = write_comparison(
                result,
                html,
                a=pair.a,
                b=pair.b,
                title=f"{pair.label_b} vs {pair.label_a}",
                note=pair.note,
            )
            typer.echo(f"wrote {written}", err=True)
    if pair.note is not None:
        _stderr().print(f"note: {pair.note}", markup=False)
    if as_json:
        runs = {"run_a": pair.record_a.id, "run_b": pair.record_b.id}
        typer.echo(json.dumps({**runs, **result.to_dict()}, indent=2))
        return
    typer.echo(str(result))


def _trend_table(points: list[TrendPoint], metric: str) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for column in ("time (UTC)", "id", "name", "commit", metric, "CI", "n", "change", "p", ""):
        right = column in (metric, "n", "change", "p")
        table.add_column(column, justify="right" if right else "left")
    for p in points:
        table.add_row(
            p.created.strftime("%Y-%m-%d %H:%M:%S"),
            p.run_id[:12],
            p.name,
            (p.git_commit or "–")[:10],
            f"{p.mean:.4f}",
            _ci(p.ci_low, p.ci_high),
            str(p.n),
            "–" if p.diff is None else f"{p.diff:+.4f}",
            "–" if p.p_value is None else f"{p.p_value:.4g}",
            "REGRESSION"
            if p.regression
            else ("new series" if p.note and not p.baseline_id else ""),
        )
    return table


@runs_app.command("trend")
def trend_command(
    metric: Annotated[str, typer.Argument(help="Metric key, e.g. ndcg@10.", show_default=False)],
    name: NameOpt = None,
    tag: TagFilterOpt = None,
    max_drop: Annotated[
        float, typer.Option("--max-drop", min=0.0, help="A smaller drop is never a regression.")
    ] = 0.0,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level.")] = 0.05,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    registry: RegistryOpt = None,
) -> None:
    """METRIC over the saved runs, oldest first, with regressions marked.

    Each run is paired, query by query, with the previous like-for-like run: a drop over
    --max-drop that is significant (p < --alpha) is a REGRESSION. --html draws the trend,
    each point linking to its run's report page (written beside it, in <stem>_runs/).
    """
    from ragmeter.stats import trend

    with _refusals():
        reg = _open(registry)
        points = trend(reg, metric, name=name, tag=tag, max_drop=max_drop, alpha=alpha)
        if html is not None:
            from ragmeter.html import write_trend

            written = write_trend(points, html, metric=metric, registry=reg)
            typer.echo(f"wrote {written} and {len(points)} run pages", err=True)
    if as_json:
        typer.echo(json.dumps([p.to_dict() for p in points], indent=2))
        return
    if not points:
        typer.echo(_none_saved(reg, name, tag))
        return
    regressions = sum(p.regression for p in points)
    _print_table(
        _trend_table(points, metric),
        f"{metric} over {len(points)} saved runs: {regressions} regression"
        f"{'s' if regressions != 1 else ''}",
    )
    err = _stderr()
    for p in points:
        if p.note:
            err.print(f"note: run {p.run_id[:12]}: {p.note}", markup=False)


@runs_app.command("pin")
def pin_command(ref: RefArg, registry: RegistryOpt = None) -> None:
    """Pin a run as its name's baseline (ragmeter gate --baseline pinned)."""
    with _refusals():
        record = _open(registry, write=True).pin(ref)
    typer.echo(f"pinned run {record.id} ({record.name})")


@runs_app.command("unpin")
def unpin_command(
    ref: Annotated[
        str | None,
        typer.Argument(
            help="The run to unpin, or a name: its pinned run (default: every pinned run).",
            show_default=False,
        ),
    ] = None,
    registry: RegistryOpt = None,
) -> None:
    """Unpin a run, or a name's pinned run (default: every pinned run)."""
    with _refusals():
        _open(registry, write=True).unpin(ref)
    typer.echo(f"unpinned {ref}" if ref else "unpinned every pinned run")


@runs_app.command("rm")
def rm_command(ref: RefArg, registry: RegistryOpt = None) -> None:
    """Remove a saved run and its stored scores."""
    with _refusals():
        record = _open(registry, write=True).rm(ref)
    typer.echo(f"removed run {record.id} ({record.name})")
