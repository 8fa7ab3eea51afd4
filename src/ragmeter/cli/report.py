"""``ragmeter report``: score a file and print or write its report (text, JSON, HTML)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragmeter.cli._app import CliError, _stderr, app
from ragmeter.cli._options import (
    _DEFAULT_K,
    DISPLAY_METRICS,
    JudgedOnlyOpt,
    JudgedThresholdOpt,
    LevelOpt,
    MetricsOpt,
    MissingOpt,
    RegistryOpt,
    SaveOpt,
    TagOpt,
    _existing_file,
    _split_list,
    parse_k_values,
)
from ragmeter.cli._save import save_request
from ragmeter.errors import NoSamplesError, RagmeterError
from ragmeter.evaluation.retrieval import JUDGED_THRESHOLD, evaluate_run
from ragmeter.io.trec import read_trec_run

if TYPE_CHECKING:
    from ragmeter.report import RagEvalReport, RetrievalEvalReport
    from ragmeter.schema import RagSample


# --------------------------------------------------------------------------- options

_HtmlOpt = Annotated[
    Path,
    typer.Option(
        "--html",
        help="Write the report here: one self-contained HTML file (works offline).",
        show_default=False,
    ),
]
_DataArg = Annotated[
    Path | None,
    typer.Argument(
        help="JSONL sample file (a RAG report); omit it and give --qrels and --run for a "
        "retrieval report.",
        show_default=False,
    ),
]
_QrelsOpt = Annotated[
    Path | None,
    typer.Option(
        "--qrels",
        help="Qrels: TREC, BEIR TSV, or a BEIR directory (whose queries and corpus are "
        "then shown too).",
        show_default=False,
    ),
]
_RunOpt = Annotated[
    Path | None, typer.Option("--run", "-r", help="TREC run file.", show_default=False)
]
_QueriesOpt = Annotated[
    Path | None,
    typer.Option(
        "--queries",
        help="Query texts: a BEIR directory, queries.jsonl, or a TSV 'id<TAB>text'.",
        show_default=False,
    ),
]
_CorpusOpt = Annotated[
    Path | None,
    typer.Option(
        "--corpus",
        help="Document texts for snippets: a BEIR directory or corpus.jsonl.",
        show_default=False,
    ),
]
_KOpt = Annotated[
    str | None,
    typer.Option(
        "--k",
        "-k",
        help="Retrieval: comma-separated cut-offs (default 1,3,5,10,20,100). Samples: the "
        "cut-off of the retrieval metrics (default 5).",
        show_default=False,
    ),
]
_SkipErrorsOpt = Annotated[
    bool,
    typer.Option("--skip-errors", help="Samples: skip malformed lines (counted)."),
]
_DepthOpt = Annotated[
    int, typer.Option("--depth", min=1, help="Ranked docs (or retrieved ids) shown per item.")
]
_TitleOpt = Annotated[str | None, typer.Option("--title", help="Page title.")]
_DatasetOpt = Annotated[str | None, typer.Option("--dataset", help="Dataset name for the header.")]
_SystemOpt = Annotated[
    str | None,
    typer.Option("--system", help="System name for the header (default: the file's name)."),
]

# --------------------------------------------------------------------------- the command


@app.command("report")
def report_command(
    html: _HtmlOpt,
    data: _DataArg = None,
    qrels: _QrelsOpt = None,
    run: _RunOpt = None,
    queries: _QueriesOpt = None,
    corpus: _CorpusOpt = None,
    k: _KOpt = None,
    metrics: MetricsOpt = None,
    relevance_level: LevelOpt = None,
    missing_queries: MissingOpt = "zero",
    skip_errors: _SkipErrorsOpt = False,
    depth: _DepthOpt = 10,
    title: _TitleOpt = None,
    dataset: _DatasetOpt = None,
    system: _SystemOpt = None,
    judged_only: JudgedOnlyOpt = False,
    judged_threshold: JudgedThresholdOpt = JUDGED_THRESHOLD,
    save: SaveOpt = None,
    tag: TagOpt = None,
    registry: RegistryOpt = None,
) -> None:
    """Write an HTML report: plots, a sortable per-query table and drill-down, one file."""
    saving = save_request(save, tag, registry)
    header: dict[str, Any] = {"title": title, "dataset": dataset, "system": system}
    header.update(depth=depth, judged=(judged_only, judged_threshold))
    scored: RagEvalReport | RetrievalEvalReport
    if data is not None:
        if qrels is not None or run is not None or queries is not None or corpus is not None:
            raise CliError(
                "give either a JSONL sample file (RAG report) or --qrels and --run (retrieval "
                "report), not both; --queries and --corpus go with --qrels and --run"
            )
        if judged_only:
            raise CliError("--judged-only is for a retrieval report (--qrels and --run)")
        written, what, warnings, scored = _rag_page(data, html, k, metrics, skip_errors, header)
    else:
        if qrels is None or run is None:
            raise CliError(
                "ragmeter report needs a JSONL sample file, or --qrels and --run for a TREC run"
            )
        written, what, warnings, scored = _retrieval_page(
            qrels,
            run,
            html,
            k,
            metrics,
            relevance_level,
            missing_queries,
            (queries, corpus),
            header,
        )
    size = written.stat().st_size
    typer.echo(f"wrote {written} ({size / 1e6:.1f} MB, {what})")
    err = _stderr()
    for warning in warnings:
        err.print(f"warning: {warning}", markup=False)
    if saving is not None:
        saving.save(scored)


def _rag_page(
    data: Path,
    html: Path,
    k: str | None,
    metrics: list[str] | None,
    skip_errors: bool,
    header: dict[str, Any],
) -> tuple[Path, str, list[str], RagEvalReport]:
    """Score a sample file and write its page: (the page, what it shows, warnings, the
    report)."""
    from ragmeter.evaluation.rag import evaluate_rag
    from ragmeter.html import write_rag_report
    from ragmeter.io.jsonl import read_jsonl

    _existing_file(data, "data")
    cut_off = 5
    if k is not None:
        ks = parse_k_values(k)
        if len(ks) != 1:
            raise CliError(f"--k takes one cut-off for a sample file, got {k!r}")
        cut_off = ks[0]
    reader = read_jsonl(data, skip_errors=skip_errors)
    samples = list(reader)
    if not samples:
        raise NoSamplesError(f"{data}: no samples to report: the file holds no JSON object")
    rag = evaluate_rag(samples, metrics=_split_list(metrics) or None, k_values=cut_off)
    rag.skipped_lines = len(reader.skipped)
    staged, stage_notes = _stage_report(samples)
    written = write_rag_report(
        rag,
        html,
        samples=samples,
        title=header["title"],
        dataset=header["dataset"],
        system=header["system"] or data.stem,
        depth=header["depth"],
        stages=staged,
    )
    what = f"{rag.n_samples} samples" + (f", {len(staged.rows)} stages" if staged else "")
    return written, what, [*rag.warnings, *stage_notes], rag


def _retrieval_page(
    qrels: Path,
    run: Path,
    html: Path,
    k: str | None,
    metrics: list[str] | None,
    relevance_level: float | None,
    missing_queries: str,
    texts_from: tuple[Path | None, Path | None],
    header: dict[str, Any],
) -> tuple[Path, str, list[str], RetrievalEvalReport]:
    """Score a TREC run and write its page (with query and document texts when given, or
    from a BEIR directory): (the page, what it shows, warnings, the report)."""
    from ragmeter.html import beir_texts, load_texts, write_retrieval_report
    from ragmeter.io import read_qrels as read_any_qrels

    if not qrels.exists():
        raise CliError(f"qrels file not found: {qrels}")
    if missing_queries not in ("zero", "skip"):
        raise CliError(f"--missing-queries must be 'zero' or 'skip', got {missing_queries!r}")
    judged = read_any_qrels(qrels)
    ranked = read_trec_run(_existing_file(run, "run"))
    scored = evaluate_run(
        judged,
        ranked,
        k_values=parse_k_values(k or _DEFAULT_K),
        metrics=_split_list(metrics) or list(DISPLAY_METRICS),
        relevance_level=relevance_level,
        missing_queries="skip" if missing_queries == "skip" else "zero",
        judged_only=header["judged"][0],
        judged_threshold=header["judged"][1],
    )
    queries, corpus = texts_from
    texts = load_texts(queries, "queries") if queries is not None else None
    docs = load_texts(corpus, "corpus") if corpus is not None else None
    if qrels.is_dir():  # a BEIR directory brings its own texts
        texts = texts if texts is not None else beir_texts(qrels, "queries")
        docs = docs if docs is not None else beir_texts(qrels, "corpus")
    if queries is not None and queries.is_dir() and docs is None:
        docs = beir_texts(queries, "corpus")
    written = write_retrieval_report(
        scored,
        html,
        run=ranked,
        qrels=judged,
        queries=texts,
        corpus=docs,
        title=header["title"],
        dataset=header["dataset"] or (qrels.name if qrels.is_dir() else None),
        system=header["system"] or run.stem,
        depth=header["depth"],
    )
    return written, f"{len(scored.per_query)} queries", list(scored.warnings), scored


def _stage_report(samples: Sequence[RagSample]) -> tuple[Any, list[str]]:
    """The stage table of samples that carry stages and relevance (``None`` otherwise), and
    the warnings that say why there is none or come with it."""
    if not any(s.stages for s in samples):
        return None, []
    from ragmeter.stages import evaluate_stages

    try:
        report = evaluate_stages(samples)
    except RagmeterError as exc:
        return None, [f"the samples carry stages, but no stage table could be made: {exc}"]
    return report, list(report.warnings)


# --------------------------------------------------------------------------- serve
