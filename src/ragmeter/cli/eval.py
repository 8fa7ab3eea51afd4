"""``ragmeter eval``: score RAG samples from a JSONL file (judges optional)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragmeter.cli import _progress
from ragmeter.cli._app import CliError, _print_table, _stderr, app
from ragmeter.cli._embed import (
    EmbedBatchOpt,
    EmbedCacheOpt,
    EmbedConcurrencyOpt,
    EmbedderOpt,
    NoEmbedCacheOpt,
    embed_estimate,
    embedding_arguments,
    print_embed_estimate,
    print_embed_summary,
)
from ragmeter.cli._judges import (
    _JUDGE_PANEL,
    _judge_cache_path,
    _judge_metric_names,
    _judge_metrics,
    _judge_options,
    _make_judge,
    _open_judge_cache,
    _print_estimate,
    _print_judge_summary,
)
from ragmeter.cli._options import (
    JsonOpt,
    RegistryOpt,
    SaveOpt,
    TagOpt,
    _existing_file,
    _split_list,
)
from ragmeter.cli._save import save_request
from ragmeter.cli._tables import _print_json, rag_table
from ragmeter.errors import InvalidInputError, NoSamplesError

if TYPE_CHECKING:
    from ragmeter.report import RagEvalReport


# --------------------------------------------------------------------------- options

_DataArg = Annotated[
    Path, typer.Argument(help="JSONL file of samples (ragmeter or rag-eval fields).")
]
_KOpt = Annotated[int, typer.Option("--k", "-k", min=1, help="Cut-off for retrieval metrics.")]
_MetricsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--metrics",
        "-m",
        help="Metrics to compute (comma-separated or repeated); default: every metric "
        "some sample can be scored on.",
    ),
]
_SkipErrorsOpt = Annotated[
    bool,
    typer.Option("--skip-errors", help="Skip malformed lines (counted) instead of failing."),
]
_ClaimsOnlyOpt = Annotated[
    bool,
    typer.Option("--claims-only", help="Faithfulness only (no retrieval or other metrics)."),
]
_InputPriceOpt = Annotated[
    float | None,
    typer.Option(min=0, help="USD per million prompt tokens (for cost_usd)."),
]
_OutputPriceOpt = Annotated[
    float | None,
    typer.Option(min=0, help="USD per million completion tokens (for cost_usd)."),
]
_PerSampleOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--per-sample-out",
        help="Write every sample's scores to FILE (.jsonl, .jsonl.gz or .parquet) as they "
        "are computed; memory stays flat.",
        show_default=False,
    ),
]
_KeepPerSampleOpt = Annotated[
    bool,
    typer.Option(
        "--per-sample",
        help="Put every sample's scores in the --json output (held in memory until the "
        "end; for ragmeter gate/compare on a saved report).",
    ),
]

# The LLM-judge options, shown in their own help panel.
_JudgeOpt = Annotated[
    str | None,
    typer.Option(
        "--judge",
        help="Add LLM-judged metrics with the judge a factory in your code returns "
        "(MODULE:FACTORY or path/to/file.py:FACTORY, called with no arguments): a "
        "ragmeter judge, or a LangChain / LlamaIndex / Haystack chat model.",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_JudgeMetricsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--judge-metrics",
        help="Judge metrics: faithfulness, answer_relevancy, correctness; default: each "
        "that some sample can be scored on.",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_JudgeCacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--judge-cache",
        help="SQLite cache of judge calls (file or directory); default: the user cache "
        "dir ($RAGMETER_CACHE_DIR, else ~/.cache/ragmeter).",
        rich_help_panel=_JUDGE_PANEL,
        show_default=False,
    ),
]
_NoJudgeCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-judge-cache", help="Call the judge for everything.", rich_help_panel=_JUDGE_PANEL
    ),
]
_ConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Judge calls in flight at once.",
        show_default="8",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_RpmOpt = Annotated[
    float | None,
    typer.Option(
        "--rpm", help="At most this many judge calls per minute.", rich_help_panel=_JUDGE_PANEL
    ),
]
_TimeoutOpt = Annotated[
    float | None,
    typer.Option(help="Seconds per judge call.", show_default="60", rich_help_panel=_JUDGE_PANEL),
]
_MaxCallsOpt = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Stop after this many judge calls (the report is marked incomplete).",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Stop once the judge has used this many tokens (as the model reports them).",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_RepeatsOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Ask the judge N times per sample; the mean is the score, the spread is in "
        "--json details.",
        show_default="1",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print how many judge calls and input tokens (and texts to embed) the run would "
        "need; call no model.",
        rich_help_panel=_JUDGE_PANEL,
    ),
]

# --------------------------------------------------------------------------- the command


@app.command("eval")
def eval_command(
    data: _DataArg,
    k: _KOpt = 5,
    metrics: _MetricsOpt = None,
    as_json: JsonOpt = False,
    skip_errors: _SkipErrorsOpt = False,
    claims_only: _ClaimsOnlyOpt = False,
    input_price: _InputPriceOpt = None,
    output_price: _OutputPriceOpt = None,
    judge: _JudgeOpt = None,
    judge_metrics: _JudgeMetricsOpt = None,
    judge_cache: _JudgeCacheOpt = None,
    no_judge_cache: _NoJudgeCacheOpt = False,
    concurrency: _ConcurrencyOpt = None,
    rpm: _RpmOpt = None,
    timeout: _TimeoutOpt = None,
    max_calls: _MaxCallsOpt = None,
    max_tokens: _MaxTokensOpt = None,
    repeats: _RepeatsOpt = None,
    dry_run: _DryRunOpt = False,
    per_sample_out: _PerSampleOutOpt = None,
    keep_per_sample: _KeepPerSampleOpt = False,
    embedder: EmbedderOpt = None,
    embed_cache: EmbedCacheOpt = None,
    no_embed_cache: NoEmbedCacheOpt = False,
    embed_batch_size: EmbedBatchOpt = None,
    embed_concurrency: EmbedConcurrencyOpt = None,
    save: SaveOpt = None,
    tag: TagOpt = None,
    registry: RegistryOpt = None,
) -> None:
    """Score RAG samples from a JSONL or Parquet file (rag-eval's `eval`, ragmeter's metrics).

    The samples are streamed: memory does not grow with the file (per-sample scores go to
    --per-sample-out, or into --json with --per-sample).
    """
    _existing_file(data, "data")
    saving = save_request(save, tag, registry)  # a saved run keeps every sample's scores
    keep_per_sample = keep_per_sample or saving is not None
    names, prices = _checked_options(
        metrics,
        claims_only,
        input_price,
        output_price,
        per_sample_out,
        judge,
        {
            "--judge-metrics": bool(judge_metrics),
            "--judge-cache": judge_cache is not None,
            "--no-judge-cache": no_judge_cache,
            "--concurrency": concurrency is not None,
            "--rpm": rpm is not None,
            "--timeout": timeout is not None,
            "--max-calls": max_calls is not None,
            "--max-tokens": max_tokens is not None,
            "--repeats": repeats is not None,
            "--dry-run": dry_run and not _names_embedding(metrics),
        },
    )
    asked, embedding = embedding_arguments(
        names, embedder, embed_cache, no_embed_cache, embed_batch_size, embed_concurrency
    )
    source = _Source(data, skip_errors, as_json)
    if dry_run and judge is None:
        loaded = _loaded(source)
        estimate = embed_estimate(loaded, asked, embedding)
        assert estimate is not None  # --dry-run without --judge needs embedding metrics
        print_embed_estimate(estimate, samples=len(loaded), as_json=as_json)
        return
    judge_keys: list[str] = []
    cache_path: Path | None = None
    if judge is not None:
        cache_path = _judge_cache_path(judge_cache, no_judge_cache)
        judged = _judged_report(
            source,
            judge,
            judge_metrics,
            _judge_options(concurrency, rpm, timeout, max_calls, max_tokens),
            cache_path,
            repeats=repeats or 1,
            dry_run=dry_run,
            names=asked,
            k=k,
            prices=prices,
            per_sample_out=per_sample_out,
            embedding=embedding,
        )
        if judged is None:  # --dry-run: the estimate was printed
            return
        report, judge_keys = judged
    else:
        streamed = per_sample_out if saving is None else None  # a saved run keeps them all
        report = _plain_report(source, asked, k, prices, streamed, keep_per_sample, embedding)
        if per_sample_out is not None and streamed is None:
            from ragmeter.io.scores import write_scores

            write_scores(report, per_sample_out)
            report.extra["per_sample_file"] = str(per_sample_out)
    _print_eval(report, source, judge_keys, cache_path)
    if saving is not None:
        saving.save(report)


def _names_embedding(metrics: list[str] | None) -> bool:
    """Whether ``--metrics`` names an embedding metric."""
    from ragmeter.embed import EMBED_METRICS

    return any(name in EMBED_METRICS for name in _split_list(metrics))


def _loaded(source: _Source) -> list[Any]:
    """Every sample of ``source`` in memory (model-scored metrics need them twice)."""
    try:
        loaded = list(source.samples)
    finally:
        source.samples.close()
    if not loaded:
        raise source.empty()
    return loaded


def _checked_options(
    metrics: list[str] | None,
    claims_only: bool,
    input_price: float | None,
    output_price: float | None,
    per_sample_out: Path | None,
    judge: str | None,
    judge_only: dict[str, bool],
) -> tuple[list[str], dict[str, float] | None]:
    """The metric names and token prices the options ask for; a :class:`CliError` for a
    combination that cannot work (judge options without ``--judge``, ``--claims-only`` with
    other metrics, one price without the other)."""
    from ragmeter.io.scores import score_format

    if per_sample_out is not None:
        try:
            score_format(per_sample_out)
        except InvalidInputError as exc:
            raise CliError(f"--per-sample-out: {exc}") from None
    if judge is None:
        given = [name for name, on in judge_only.items() if on]
        if given:
            raise CliError(f"{given[0]} only applies to LLM judges: add --judge MODULE:FACTORY")
    names = _split_list(metrics)
    if claims_only:
        if names and names != ["faithfulness"]:
            raise CliError(
                "--claims-only scores faithfulness only; drop --metrics or --claims-only"
            )
        names = ["faithfulness"]
    prices = None
    if input_price is not None or output_price is not None:
        if input_price is None or output_price is None:
            raise CliError("cost_usd needs both --input-price and --output-price")
        prices = {"input": input_price, "output": output_price}
    elif "cost_usd" in names:
        raise CliError(
            "--metrics cost_usd needs token prices: add --input-price and --output-price "
            "(USD per million prompt / completion tokens)"
        )
    return names, prices


class _Source:
    """The samples file, streamed (a JSONL or Parquet reader, with a progress bar on a
    terminal for large files)."""

    def __init__(self, data: Path, skip_errors: bool, as_json: bool) -> None:
        from ragmeter.io.jsonl import read_jsonl

        self.data = data
        self.as_json = as_json
        self.parquet = data.name.lower().endswith((".parquet", ".pq"))
        self.kind = "Parquet row" if self.parquet else "JSON object"
        self.reader: Any
        if self.parquet:
            from ragmeter.io.arrow import read_parquet

            self.reader = read_parquet(data, skip_errors=skip_errors)
        else:
            self.reader = read_jsonl(data, skip_errors=skip_errors)
        enabled = _progress.wanted(data, as_json)
        total = None
        if enabled:
            if self.parquet:
                total = self.reader.num_rows
            elif data.suffix != ".gz":
                total = _progress.count_lines(data)
        self.samples = _progress.with_progress(self.reader, total=total, enabled=enabled)

    def empty(self, note: str = "") -> NoSamplesError:
        """The error for a file that held no sample."""
        return NoSamplesError(
            f"{self.data}: no samples to score: the file holds no {self.kind}{note}"
            + ("" if self.parquet else " (JSONL = one JSON object per line)")
        )


def _judged_report(
    source: _Source,
    judge: str,
    judge_metrics: list[str] | None,
    options: Any,
    cache_path: Path | None,
    *,
    repeats: int,
    dry_run: bool,
    names: list[Any],
    k: int,
    prices: dict[str, float] | None,
    per_sample_out: Path | None,
    embedding: dict[str, Any],
) -> tuple[RagEvalReport, list[str]] | None:
    """Score with the user's judge (``None`` after printing a ``--dry-run`` estimate)."""
    from ragmeter.evaluation.judged import evaluate_with_judges
    from ragmeter.evaluation.rag import evaluate_rag
    from ragmeter.io.scores import write_scores

    judge_names = _judge_metric_names(judge_metrics)
    the_judge = _make_judge(judge)
    loaded = _loaded(source)  # judge mode needs them twice: to choose, then to score
    judged, notes = _judge_metrics(the_judge, judge_names, repeats, loaded)
    if dry_run:
        from ragmeter.judge.runner import estimate_judges
        from ragmeter.schema import coerce_sample

        cache = _open_judge_cache(cache_path, create=False)
        try:
            coerced = [coerce_sample(s, index=i) for i, s in enumerate(loaded)]
            estimate = estimate_judges(coerced, judged, cache=cache)
        finally:
            if cache is not None:
                cache.close()
        embeddings = embed_estimate(loaded, names, embedding)
        _print_estimate(estimate, cache_path, as_json=source.as_json, embeddings=embeddings)
        if embeddings is not None and not source.as_json:
            print_embed_estimate(embeddings, samples=len(loaded), as_json=False)
        return None
    err = _stderr()
    for note in notes:
        err.print(f"not computed: {note}", markup=False, style="dim")
    cache = _open_judge_cache(cache_path)
    try:
        shown = not source.as_json and _progress.stderr_is_tty()
        with _progress.judge_progress(shown) as progress:
            report = evaluate_with_judges(
                loaded,
                judge_metrics=judged,
                other_metrics=names or None,
                evaluate=evaluate_rag,
                judge_cache=cache,
                judge_options=options,
                progress=progress,
                k_values=k,
                prices=prices,
                **embedding,
            )
    finally:
        if cache is not None:
            cache.close()
    if per_sample_out is not None:
        write_scores(report, per_sample_out)
        report.extra["per_sample_file"] = str(per_sample_out)
    return report, [m.name for m in judged]


def _plain_report(
    source: _Source,
    names: list[Any],
    k: int,
    prices: dict[str, float] | None,
    per_sample_out: Path | None,
    keep_per_sample: bool,
    embedding: dict[str, Any],
) -> RagEvalReport:
    """Score without a judge, streaming the samples."""
    from ragmeter.evaluation.rag import evaluate_rag

    keep: Any = per_sample_out if per_sample_out is not None else keep_per_sample
    try:
        return evaluate_rag(
            source.samples,
            metrics=names or None,
            k_values=k,
            prices=prices,
            per_sample=keep,
            **embedding,
        )
    except NoSamplesError:
        skipped = source.reader.skipped
        what = "rows" if source.parquet else "lines"
        note = f" ({len(skipped)} malformed {what} skipped)" if skipped else ""
        raise source.empty(note) from None
    finally:
        source.samples.close()  # stops the progress bar at once, also on an error


def _print_eval(
    report: RagEvalReport, source: _Source, judge_keys: list[str], cache_path: Path | None
) -> None:
    """The report on stdout (a table, or JSON); skipped lines, gaps and warnings on stderr."""
    skipped = list(source.reader.skipped)
    report.skipped_lines = len(skipped)
    if source.as_json:
        _print_json(report)
        return
    heading = f"RAG evaluation: {report.n_samples} samples"
    if report.skipped_lines:
        heading += f" ({report.skipped_lines} malformed lines skipped)"
    _print_table(rag_table(report), heading)
    if judge_keys:
        _print_judge_summary(report, judge_keys, cache_path)
    print_embed_summary(report)
    err = _stderr()
    unit = "row" if source.parquet else "line"
    for line, message in skipped[:20]:
        err.print(f"skipped {unit} {line}: {message}", markup=False)
    if len(skipped) > 20:
        err.print(f"... and {len(skipped) - 20} more skipped {unit}s", markup=False)
    for reason in dict(report.extra.get("not_computed") or {}).values():
        err.print(f"not computed: {reason}", markup=False, style="dim")
    for warning in report.warnings:
        if report.incomplete and warning.startswith("incomplete:"):
            continue  # said under the table already
        err.print(f"warning: {warning}", markup=False)


# --------------------------------------------------------------------------- report
