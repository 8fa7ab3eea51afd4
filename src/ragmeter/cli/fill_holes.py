"""``ragmeter fill-holes``: grade the unjudged top documents of TREC runs with the user's
judge, show the judge's agreement and the scores before and after, write the augmented
qrels (a thin shell over :func:`ragmeter.stats.fill_holes`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ragmeter.cli._app import CliError, _print_table, _stderr, app
from ragmeter.cli._judges import (
    _JUDGE_PANEL,
    _judge_cache_path,
    _judge_options,
    _make_judge,
    _open_judge_cache,
)
from ragmeter.cli._options import JsonOpt, LevelOpt, _existing_file, read_qrels
from ragmeter.cli.eval import (
    _ConcurrencyOpt,
    _JudgeCacheOpt,
    _MaxCallsOpt,
    _MaxTokensOpt,
    _NoJudgeCacheOpt,
    _RpmOpt,
    _TimeoutOpt,
)

_QrelsArg = Annotated[
    Path,
    typer.Argument(
        help="Human qrels: TREC (qid iter doc grade), a BEIR qrels TSV, or a BEIR directory "
        "(which also brings its queries and corpus).",
        show_default=False,
    ),
]
_RunsArg = Annotated[
    list[Path],
    typer.Argument(
        help="TREC run file(s); several runs pool their holes and are ranked against each "
        "other (Kendall's tau).",
        show_default=False,
    ),
]
_TextsOpt = Annotated[
    Path | None,
    typer.Option(
        help="Query texts (BEIR queries.jsonl, TSV id<TAB>text, or a BEIR directory).",
        show_default=False,
    ),
]
_CorpusOpt = Annotated[
    Path | None,
    typer.Option(
        help="Document texts (BEIR corpus.jsonl, TSV id<TAB>text, or a BEIR directory).",
        show_default=False,
    ),
]
_JudgeOpt = Annotated[
    str,
    typer.Option(
        "--judge",
        help="The judge a factory in your code returns (MODULE:FACTORY or "
        "path/to/file.py:FACTORY, called with no arguments): a ragmeter judge, or a LangChain "
        "/ LlamaIndex / Haystack chat model.",
        rich_help_panel=_JUDGE_PANEL,
        show_default=False,
    ),
]
_DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print how many judge calls and input tokens filling would need; send nothing.",
        rich_help_panel=_JUDGE_PANEL,
    ),
]


def _grade_map(text: str | None) -> dict[int, float] | None:
    """``"0:0,1:2,2:3,3:4"`` -> ``{0: 0, 1: 2, 2: 3, 3: 4}``; CliError when malformed."""
    if text is None:
        return None
    out: dict[int, float] = {}
    for part in text.split(","):
        judge, colon, grade = part.partition(":")
        try:
            out[int(judge)] = int(grade)
        except ValueError:
            raise CliError(
                f"--grade-map takes JUDGE:QRELS pairs such as 0:0,1:1,2:2,3:3; "
                f"{part.strip()!r} is not one"
            ) from None
        if not colon:
            raise CliError(f"--grade-map: {part!r} has no ':'")
    return out


def _texts(qrels: Path, queries: Path | None, corpus: Path | None) -> tuple[Any, Any]:
    from ragmeter.html import beir_texts, load_texts

    texts = load_texts(queries, "queries") if queries is not None else None
    docs = load_texts(corpus, "corpus") if corpus is not None else None
    for root in (qrels, queries, corpus):
        if root is not None and root.is_dir():  # a BEIR directory brings its own texts
            texts = texts if texts is not None else beir_texts(root, "queries")
            docs = docs if docs is not None else beir_texts(root, "corpus")
    if texts is None:
        raise CliError("fill-holes needs the query texts: pass --queries FILE (or a BEIR dir)")
    if docs is None:
        raise CliError("fill-holes needs the document texts: pass --corpus FILE (or a BEIR dir)")
    return texts, docs


def _runs(paths: list[Path]) -> dict[str, Any]:
    from ragmeter.io.trec import read_trec_run

    names = [p.stem for p in paths]
    if len(set(names)) < len(names):
        names = [str(p) for p in paths]
    if len(set(names)) < len(names):
        raise CliError("the same run file is given twice")
    return {n: read_trec_run(_existing_file(p, "run")) for n, p in zip(names, paths, strict=True)}


def _print_result(result: Any) -> None:
    """The counts, the systems side by side (a rich table), the judge's agreement."""
    out = Console(highlight=False, soft_wrap=True)
    head, *counts = result.summary_lines()
    out.print(head, style="bold", markup=False)
    for line in counts:
        out.print(line, markup=False)
    table = Table(show_edge=False, header_style="bold")
    rows = result.system_rows()
    for i, name in enumerate(rows[0]):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in rows[1:]:
        table.add_row(*row)
    _print_table(table)
    if not result.dry_run:
        for line in result.agreement_lines():
            out.print(line, markup=False)


@app.command("fill-holes")
def fill_holes_command(
    qrels: _QrelsArg,
    runs: _RunsArg,
    judge: _JudgeOpt,
    queries: _TextsOpt = None,
    corpus: _CorpusOpt = None,
    depth: Annotated[int, typer.Option(min=1, help="Grade the holes of each top DEPTH.")] = 10,
    k: Annotated[
        int | None, typer.Option("--k", "-k", min=1, help="Score METRIC@K (default: DEPTH).")
    ] = None,
    metric: Annotated[str, typer.Option(help="The score shown before and after.")] = "ndcg",
    sample_size: Annotated[
        int, typer.Option(min=0, help="Judged documents graded to measure the judge (0: none).")
    ] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the agreement sample.")] = 0,
    grade_map: Annotated[
        str | None,
        typer.Option(help="Judge grade -> qrels grade, e.g. 0:0,1:2,2:3,3:4 (default: same)."),
    ] = None,
    skip_missing_text: Annotated[
        bool, typer.Option(help="Count and skip documents without a text instead of failing.")
    ] = False,
    relevance_level: LevelOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the augmented qrels (TREC) here.")
    ] = None,
    as_json: JsonOpt = False,
    dry_run: _DryRun = False,
    judge_cache: _JudgeCacheOpt = None,
    no_judge_cache: _NoJudgeCacheOpt = False,
    concurrency: _ConcurrencyOpt = None,
    rpm: _RpmOpt = None,
    timeout: _TimeoutOpt = None,
    max_calls: _MaxCallsOpt = None,
    max_tokens: _MaxTokensOpt = None,
) -> None:
    """Grade the unjudged documents of the runs' top DEPTH with an LLM judge (0-3,
    UMBRELA-style), after measuring it on judged ones; write the augmented qrels."""
    from ragmeter.io.trec import write_trec_qrels
    from ragmeter.stats import fill_holes

    judged = read_qrels(qrels)
    named = _runs(runs)
    texts, docs = _texts(qrels, queries, corpus)
    the_judge = _make_judge(judge)
    cache_path = _judge_cache_path(judge_cache, no_judge_cache)
    cache = _open_judge_cache(cache_path, create=not dry_run)
    try:
        result = fill_holes(
            named,
            judged,
            judge=the_judge,
            corpus=docs,
            queries=texts,
            depth=depth,
            k=k,
            metric=metric,
            sample_size=sample_size,
            seed=seed,
            grade_map=_grade_map(grade_map),
            missing_text="skip" if skip_missing_text else "error",
            relevance_level=relevance_level,
            judge_cache=cache,
            judge_options=_judge_options(concurrency, rpm, timeout, max_calls, max_tokens),
            dry_run=dry_run,
        )
    finally:
        if cache is not None:
            cache.close()
    if out is not None and not dry_run:
        write_trec_qrels(result.qrels, out)
    if as_json:
        data = result.to_dict()
        data["out"] = None if out is None or dry_run else str(out)
        typer.echo(json.dumps(data, indent=2))
    else:
        _print_result(result)
        if out is not None:
            where = "not written (dry run)" if dry_run else f"written to {out}"
            Console(highlight=False, soft_wrap=True).print(
                f"augmented qrels: {where}", markup=False
            )
    for note in result.notes:
        _stderr().print(f"note: {note}", markup=False)
