"""The ``ragmeter stages`` command: every stage of captured samples scored, a thin shell over
:func:`ragmeter.stages.evaluate_stages`.

``register(app)`` adds the command to a :class:`typer.Typer` app; ``ragmeter.cli`` calls it.
The table goes to stdout (or JSON with ``--json``), warnings to stderr with their counts;
``--html`` also writes the stage page. Bad input exits 1 with one stderr line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ragmeter.errors import RagmeterError, describe_error

if TYPE_CHECKING:
    from ragmeter.stages import StageReport

__all__ = ["register"]


def _fail(exc: BaseException) -> typer.Exit:
    typer.echo(f"ragmeter: error: {' '.join(describe_error(exc).split())}", err=True)
    return typer.Exit(1)


_DataArg = Annotated[
    Path,
    typer.Argument(
        help="JSONL sample file whose samples carry stages (what an adapter captured).",
        show_default=False,
    ),
]
_QrelsOpt = Annotated[
    Path | None,
    typer.Option(
        "--qrels",
        help="Qrels: TREC, BEIR TSV or a BEIR directory (default: the relevance the "
        "samples carry).",
        show_default=False,
    ),
]
_KOpt = Annotated[str, typer.Option("--k", "-k", help="Comma-separated cut-offs.")]
_MetricsOpt = Annotated[
    str, typer.Option("--metrics", "-m", help="Comma-separated retrieval metrics.")
]
_CompareOnOpt = Annotated[
    str | None,
    typer.Option(
        "--compare-on",
        help="The key each step is compared on (default ndcg@10, else the first).",
        show_default=False,
    ),
]
_StageOpt = Annotated[
    list[str] | None,
    typer.Option("--stage", help="Only these stages (repeat the option).", show_default=False),
]
_MissingOpt = Annotated[
    str,
    typer.Option(
        "--missing-queries",
        help="A judged query a stage has no ranking for: 'zero' (scores 0, trec_eval -c) "
        "or 'skip'.",
    ),
]
_TestOpt = Annotated[
    str, typer.Option("--test", help="Paired test: randomization, bootstrap or t-test.")
]
_ResamplesOpt = Annotated[
    int, typer.Option("--resamples", "-n", help="Resamples for the CI and the test.")
]
_SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed.")]
_JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
_HtmlOpt = Annotated[
    Path | None,
    typer.Option(
        "--html", help="Also write the stage page here (one HTML file).", show_default=False
    ),
]


def stages_command(
    data: _DataArg,
    qrels: _QrelsOpt = None,
    k: _KOpt = "10,100",
    metrics: _MetricsOpt = "ndcg,recall",
    compare_on: _CompareOnOpt = None,
    stage: _StageOpt = None,
    missing_queries: _MissingOpt = "zero",
    test: _TestOpt = "randomization",
    resamples: _ResamplesOpt = 10_000,
    seed: _SeedOpt = 0,
    as_json: _JsonOpt = False,
    html: _HtmlOpt = None,
) -> None:
    """Score every stage of captured samples (retrievers, fusion, rerankers, the context) and
    what each step gained or lost against what it consumed, with a paired CI."""
    from ragmeter.cli._options import parse_k_values
    from ragmeter.html import write_stage_report
    from ragmeter.io import read_qrels
    from ragmeter.io.jsonl import read_jsonl
    from ragmeter.stages import evaluate_stages

    try:
        if not data.is_file():
            raise FileNotFoundError(2, "sample file not found", str(data))
        samples = list(read_jsonl(data))
        judged = read_qrels(qrels) if qrels is not None else None
        if missing_queries not in ("zero", "skip"):
            raise typer.BadParameter(
                f"--missing-queries must be 'zero' or 'skip', got {missing_queries!r}"
            )
        report = evaluate_stages(
            samples,
            judged,
            stages=stage or None,
            metric=compare_on,
            k_values=parse_k_values(k),
            metrics=[m.strip() for m in metrics.split(",") if m.strip()],
            missing_queries="skip" if missing_queries == "skip" else "zero",
            test=test,  # type: ignore[arg-type]  # checked by compare
            n=resamples,
            seed=seed,
        )
        written = write_stage_report(report, html) if html is not None else None
    except (RagmeterError, OSError) as exc:
        raise _fail(exc) from None
    _print_stages(report, written, as_json=as_json)


def _print_stages(report: StageReport, written: Path | None, *, as_json: bool) -> None:
    """The stage table (or JSON) on stdout; the warnings, their count and the page written
    on stderr."""
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, allow_nan=False))
    else:
        typer.echo(report.to_text(warnings=False))
    for warning in report.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if report.warnings:
        typer.echo(f"{len(report.warnings)} warning(s) while scoring the stages", err=True)
    if written is not None:
        typer.echo(f"wrote {written} ({written.stat().st_size / 1e6:.2f} MB)", err=True)


def register(app: typer.Typer) -> None:
    """Add ``ragmeter stages`` to ``app``."""
    app.command("stages")(stages_command)
