"""``ragmeter traces FILE``: score production traces (OTLP/JSON or a Phoenix export).

With ``--qrels`` the runs' rankings are scored as trec_eval scores a run (joined to the
qrels by ``--join-key`` or by question text with ``--queries``); without, the reference-free
answer metrics run on every trace. What the conversion counted (traces, runs, runs with no
retriever, documents without ids, runs not joined) is printed on stderr with the report's
warnings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.cli._app import _print_table, _stderr, app
from ragmeter.cli._options import (
    JsonOpt,
    JudgedOnlyOpt,
    JudgedThresholdOpt,
    KOpt,
    MetricsOpt,
    PerQueryOpt,
    RegistryOpt,
    SaveOpt,
    TagOpt,
    _existing_file,
    _split_list,
    parse_k_values,
    read_qrels,
)
from ragmeter.cli._progress import stderr_is_tty
from ragmeter.cli._save import save_request
from ragmeter.cli._tables import _emit_retrieval, _print_json, rag_table
from ragmeter.evaluation.retrieval import JUDGED_THRESHOLD

__all__ = ["traces"]

_DEFAULT_K = "1,3,5,10,20,100"
_REFERENCE_FREE = ["non_empty_rate", "latency_ms", "total_tokens", "faithfulness"]

QrelsOpt = Annotated[
    Path | None,
    typer.Option(
        "--qrels",
        help="Qrels (TREC or BEIR TSV, or a BEIR directory): score the runs' rankings.",
        show_default=False,
    ),
]
JoinOpt = Annotated[
    str | None,
    typer.Option(
        "--join-key",
        help="Where each run's query id is: an attribute ('session.id') or 'metadata.<key>'.",
        show_default=False,
    ),
]
QueriesOpt = Annotated[
    Path | None,
    typer.Option(
        "--queries",
        help="Queries (BEIR queries.jsonl or TSV 'id<TAB>text'): join runs by question text.",
        show_default=False,
    ),
]
DocIdOpt = Annotated[
    str | None,
    typer.Option(
        "--doc-id",
        help="Where a document's id is: 'id' (document.id, the default), 'metadata.<key>' "
        "or 'content' (a hash of its text).",
        show_default=False,
    ),
]
QuestionOpt = Annotated[
    str | None,
    typer.Option(
        "--question-key",
        help="Dotted path to the question in a JSON input.value (e.g. 'data.retriever.query').",
        show_default=False,
    ),
]
StageOpt = Annotated[
    str, typer.Option("--stage", help="The ranking to score: 'context' or a stage's name.")
]
HtmlOpt = Annotated[
    Path | None,
    typer.Option("--html", help="Also write a self-contained HTML report.", show_default=False),
]


@app.command()
def traces(
    path: Annotated[
        Path, typer.Argument(help="OTLP/JSON lines (.jsonl, .gz) or a Phoenix .parquet export.")
    ],
    qrels: QrelsOpt = None,
    join_key: JoinOpt = None,
    queries: QueriesOpt = None,
    doc_id: DocIdOpt = None,
    question_key: QuestionOpt = None,
    stage: StageOpt = "context",
    k: KOpt = _DEFAULT_K,
    metrics: MetricsOpt = None,
    html: HtmlOpt = None,
    as_json: JsonOpt = False,
    per_query: PerQueryOpt = False,
    judged_only: JudgedOnlyOpt = False,
    judged_threshold: JudgedThresholdOpt = JUDGED_THRESHOLD,
    save: SaveOpt = None,
    tag: TagOpt = None,
    registry: RegistryOpt = None,
) -> None:
    """Score production traces: trec_eval's numbers with --qrels, else the answer metrics."""
    from ragmeter.traces import read

    _existing_file(path, "traces")
    saving = save_request(save, tag, registry)
    texts = _read_queries(queries) if queries is not None else None
    samples = read(
        path,
        doc_id=doc_id,
        join_key=join_key,
        question_key=question_key,
        queries=texts,
        stage=stage,
        progress=_progress() if stderr_is_tty() and not as_json else None,
    )
    _print_counts(samples.counts)
    if qrels is not None:
        judged = read_qrels(qrels)
        names = _split_list(metrics) or None
        options: dict[str, Any] = {
            "k_values": parse_k_values(k),
            "judged_only": judged_only,
            "judged_threshold": judged_threshold,
        }
        if names:
            options["metrics"] = names
        report = samples.evaluate_retrieval(judged, **options)
        if html is not None:
            from ragmeter.html import write_retrieval_report

            write_retrieval_report(report, html, run=samples.to_run(), qrels=judged)
        _emit_retrieval(report, as_json=as_json, trec=False, per_query=per_query)
        if saving is not None:
            saving.save(report)
        return
    rag = samples.evaluate(metrics=_split_list(metrics) or _REFERENCE_FREE)
    if html is not None:
        from ragmeter.html import write_rag_report

        write_rag_report(rag, html, samples=samples.samples)
    if as_json:
        _print_json(rag)
    else:
        _print_table(rag_table(rag), f"Traces: {rag.n_samples} runs scored (no qrels)")
        for warning in rag.warnings:
            _stderr().print(f"warning: {warning}", markup=False)
    if saving is not None:
        saving.save(rag)


def _read_queries(path: Path) -> dict[str, str]:
    from ragmeter.html import load_texts

    _existing_file(path, "queries")
    return load_texts(path, "queries")


def _print_counts(counts: dict[str, int]) -> None:
    line = f"read {counts['traces']} traces: {counts['runs']} runs"
    if counts.get("joined") or counts.get("not_joined"):
        line += f", {counts['joined']} joined to a query id, {counts['not_joined']} not"
    _stderr().print(line, markup=False, style="dim")


def _progress() -> Any:
    err = _stderr()

    def report(n: int) -> None:
        err.print(f"... {n} traces read", markup=False, style="dim")

    return report
