"""``ragmeter trec_eval``: a drop-in for trec_eval 10.0 (same options, same output bytes).

``ragmeter trec_eval [-q] [-c] [-n] [-a] [-J] [-m MEASURE[.params]]... [-l LEVEL] [-M N]
[-N N] qrels results`` reads both files by trec_eval's rules and prints exactly what trec_eval
prints. Options are typed as trec_eval users type them: ``-q -c -m all_trec``, values attached
or not (``-M100``, ``-l2``, ``-mndcg_cut.10``), repeated ``-m``. ``-a`` is trec_eval 8's "all
measures" (``-m all_trec``). ``results`` may be ``-`` for standard input.

Two deliberate departures, both where trec_eval misbehaves: a qrels query the results lack is
skipped without ``-c`` (trec_eval 10.0 exits with "result qid not found in qrels"; 9.x and its
own help text skip it), and a doc listed twice, in either file, is an error naming the file
line (trec_eval stops at the first such query it evaluates).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ragmeter.cli._app import CliError, app
from ragmeter.metrics.trec import evaluate, format_trec_eval, parse_qrels, parse_results


def _read(path: str, what: str) -> str:
    if path == "-" and what == "results":
        return sys.stdin.read()
    file = Path(path)
    if not file.is_file():
        raise CliError(f"{what} file {path!r} does not exist")
    return file.read_text(encoding="utf-8", errors="surrogateescape")


@app.command(
    "trec_eval",
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Evaluate a TREC results file against qrels exactly as trec_eval 10.0 does.",
)
def trec_eval_command(
    qrels: Annotated[str, typer.Argument(help="Relevance judgements: qid iter docno grade.")],
    results: Annotated[
        str, typer.Argument(help="Results: qid iter docno rank score runid ('-' for stdin).")
    ],
    query_eval_wanted: Annotated[
        bool, typer.Option("-q", "--query_eval_wanted", help="Also print each query's values.")
    ] = False,
    measure: Annotated[
        list[str] | None,
        typer.Option(
            "-m",
            "--measure",
            help="Measure or nickname, with optional .params (P.5,10; all_trec; official).",
        ),
    ] = None,
    complete: Annotated[
        bool,
        typer.Option(
            "-c",
            "--complete_rel_info_wanted",
            help="Average over every qrels query; a query with no results scores 0.",
        ),
    ] = False,
    level_for_rel: Annotated[
        int, typer.Option("-l", "--level_for_rel", help="Lowest grade that is relevant.")
    ] = 1,
    nosummary: Annotated[
        bool, typer.Option("-n", "--nosummary", help="Do not print the 'all' lines.")
    ] = False,
    judged_only: Annotated[
        bool,
        typer.Option("-J", "--Judged_docs_only", help="Drop unjudged docs before scoring."),
    ] = False,
    max_retrieved: Annotated[
        int | None,
        typer.Option(
            "-M", "--Max_retrieved_per_topic", help="Score only each query's first N docs."
        ),
    ] = None,
    num_docs: Annotated[
        int,
        typer.Option("-N", "--Number_docs_in_coll", help="Docs in the collection (for utility)."),
    ] = 0,
    all_measures: Annotated[
        bool, typer.Option("-a", help="All measures (trec_eval 8's -a; same as -m all_trec).")
    ] = False,
) -> None:
    """Evaluate ``results`` against ``qrels`` as trec_eval does and print its output."""
    if max_retrieved is not None and max_retrieved < 0:
        raise CliError(f"-M must be >= 0, got {max_retrieved}")
    requests = list(measure or [])
    if all_measures:
        requests.append("all_trec")
    notes: list[str] = []
    judged = parse_qrels(_read(qrels, "qrels"), qrels, notes)
    ranked = parse_results(_read(results, "results"), results, notes)
    if notes:  # read as trec_eval reads them (stdout stays trec_eval's); said on stderr
        shown = "; ".join(notes[:3]) + (f"; and {len(notes) - 3} more" if len(notes) > 3 else "")
        sys.stderr.write(
            f"ragmeter trec_eval: {len(notes)} grades or scores are not plain numbers and were "
            f"read the way trec_eval reads them (C atol/atof): {shown}\n"
        )
    result = evaluate(
        judged,
        ranked.scores,
        requests or ["official"],
        relevance_level=level_for_rel,
        judged_only=judged_only,
        max_retrieved=max_retrieved,
        complete=complete,
        num_docs=num_docs,
        runid=ranked.runid,
    )
    text = format_trec_eval(result, per_query=query_eval_wanted, summary=not nosummary)
    sys.stdout.write(text)
