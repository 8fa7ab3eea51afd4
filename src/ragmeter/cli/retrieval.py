"""``ragmeter retrieval``, ``ragmeter beir`` and ``ragmeter demo``: score a TREC run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.cli._app import CliError, app
from ragmeter.cli._options import (
    _DEFAULT_K,
    DISPLAY_METRICS,
    JsonOpt,
    JudgedOnlyOpt,
    JudgedThresholdOpt,
    KOpt,
    LevelOpt,
    MetricsOpt,
    MissingOpt,
    PerQueryOpt,
    PerQueryOutOpt,
    RegistryOpt,
    RunOpt,
    SaveOpt,
    TagOpt,
    TrecOpt,
    _beir_qrels_path,
    _existing_file,
    _split_list,
    parse_k_values,
    read_qrels,
)
from ragmeter.cli._save import save_request
from ragmeter.cli._tables import _emit_retrieval
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import JUDGED_THRESHOLD, evaluate_run
from ragmeter.io.beir import DEFAULT_QRELS_PATHS, read_beir_qrels
from ragmeter.report import RetrievalEvalReport


def _score_files(
    qrels: Mapping[str, Mapping[str, float]],
    run_path: Path,
    k: str,
    metrics: Sequence[str] | None,
    relevance_level: float | None,
    missing_queries: str,
    per_query_out: Path | None = None,
    judged: tuple[bool, float] = (False, JUDGED_THRESHOLD),
) -> RetrievalEvalReport:
    """Score a run file query by query when its queries' lines are together (a run of any
    size in little memory); otherwise read it whole (evaluate_run_file decides). Both give
    the same report. ``judged`` is ``(judged_only, judged_threshold)``."""
    from ragmeter.evaluation.retrieval import evaluate_run_file
    from ragmeter.io.scores import score_format, write_scores

    ks = parse_k_values(k)
    names = _split_list(metrics) or list(DISPLAY_METRICS)
    if missing_queries not in ("zero", "skip"):
        raise CliError(f"--missing-queries must be 'zero' or 'skip', got {missing_queries!r}")
    _existing_file(run_path, "run")
    if per_query_out is not None:
        try:
            score_format(per_query_out)
        except InvalidInputError as exc:
            raise CliError(f"--per-query-out: {exc}") from None
    mode: Any = "skip" if missing_queries == "skip" else "zero"
    report = evaluate_run_file(
        qrels,
        run_path,
        k_values=ks,
        metrics=names,
        relevance_level=relevance_level,
        missing_queries=mode,
        judged_only=judged[0],
        judged_threshold=judged[1],
        ungrouped="read_whole",
    )
    if per_query_out is not None:  # the per-query rows are small: kept for --json/--trec -q
        write_scores(report, per_query_out)
        report.extra["per_query_file"] = str(per_query_out)
    return report


@app.command()
def retrieval(
    qrels: Annotated[
        Path,
        typer.Option(
            "--qrels",
            help="Qrels: TREC (qid iter doc grade) or BEIR TSV, or a BEIR directory.",
            show_default=False,
        ),
    ],
    run: RunOpt,
    k: KOpt = _DEFAULT_K,
    metrics: MetricsOpt = None,
    relevance_level: LevelOpt = None,
    missing_queries: MissingOpt = "zero",
    as_json: JsonOpt = False,
    trec: TrecOpt = False,
    per_query: PerQueryOpt = False,
    per_query_out: PerQueryOutOpt = None,
    judged_only: JudgedOnlyOpt = False,
    judged_threshold: JudgedThresholdOpt = JUDGED_THRESHOLD,
    save: SaveOpt = None,
    tag: TagOpt = None,
    registry: RegistryOpt = None,
) -> None:
    """Score a TREC run against qrels (TREC or BEIR format, detected, or a BEIR directory)
    like trec_eval."""
    saving = save_request(save, tag, registry)
    report = _score_files(
        read_qrels(qrels),
        run,
        k,
        metrics,
        relevance_level,
        missing_queries,
        per_query_out,
        (judged_only, judged_threshold),
    )
    _emit_retrieval(report, as_json=as_json, trec=trec, per_query=per_query)
    if saving is not None:
        saving.save(report)


@app.command()
def beir(
    directory: Annotated[
        Path,
        typer.Argument(help="A BEIR dataset directory (qrels/test.tsv, ...).", show_default=False),
    ],
    run: RunOpt,
    qrels_file: Annotated[
        str | None,
        typer.Option(
            "--qrels-file",
            help="Qrels path inside DIRECTORY; default: the first of "
            + ", ".join(DEFAULT_QRELS_PATHS),
        ),
    ] = None,
    k: KOpt = _DEFAULT_K,
    metrics: MetricsOpt = None,
    relevance_level: LevelOpt = None,
    missing_queries: MissingOpt = "zero",
    as_json: JsonOpt = False,
    trec: TrecOpt = False,
    per_query: PerQueryOpt = False,
    per_query_out: PerQueryOutOpt = None,
    judged_only: JudgedOnlyOpt = False,
    judged_threshold: JudgedThresholdOpt = JUDGED_THRESHOLD,
    save: SaveOpt = None,
    tag: TagOpt = None,
    registry: RegistryOpt = None,
) -> None:
    """Score a TREC run against a BEIR dataset's qrels (the corpus is not loaded)."""
    saving = save_request(save, tag, registry)
    path = _beir_qrels_path(directory, qrels_file)
    report = _score_files(
        read_beir_qrels(path),
        run,
        k,
        metrics,
        relevance_level,
        missing_queries,
        per_query_out,
        (judged_only, judged_threshold),
    )
    _emit_retrieval(report, as_json=as_json, trec=trec, per_query=per_query)
    if saving is not None:
        saving.save(report)


@app.command()
def demo(
    as_json: JsonOpt = False,
    trec: TrecOpt = False,
) -> None:
    """Score the bundled Cranfield BM25 run (offline); NDCG@10 is trec_eval's 0.3458."""
    from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run

    _, _, qrels = load_cranfield()
    report = evaluate_run(qrels, load_cranfield_bm25_run(), metrics=DISPLAY_METRICS)
    _emit_retrieval(
        report,
        as_json=as_json,
        trec=trec,
        per_query=False,
        title=f"Cranfield 1400, BM25 depth-100 run: {report.n_queries} queries scored",
    )


# --------------------------------------------------------------------------- eval


# --------------------------------------------------------------------------- judges
