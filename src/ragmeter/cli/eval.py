"""``ragmeter eval``: score RAG samples from a JSONL file (judges optional)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragmeter.cli._app import app
from ragmeter.cli._embed import (
    EmbedBatchOpt,
    EmbedCacheOpt,
    EmbedConcurrencyOpt,
    EmbedderOpt,
    NoEmbedCacheOpt,
    embed_estimate,
    embedding_arguments,
    print_embed_estimate,
)
from ragmeter.cli._eval_options import (
    _checked_options,
    _ClaimsOnlyOpt,
    _DataArg,
    _DryRunOpt,
    _InputPriceOpt,
    _JudgeMetricsOpt,
    _JudgeOpt,
    _KeepPerSampleOpt,
    _KOpt,
    _MetricsOpt,
    _names_embedding,
    _OutputPriceOpt,
    _PerSampleOutOpt,
    _RepeatsOpt,
    _SkipErrorsOpt,
)
from ragmeter.cli._eval_options import _ConcurrencyOpt as _ConcurrencyOpt  # fill-holes: these 7
from ragmeter.cli._eval_options import _JudgeCacheOpt as _JudgeCacheOpt
from ragmeter.cli._eval_options import _MaxCallsOpt as _MaxCallsOpt
from ragmeter.cli._eval_options import _MaxTokensOpt as _MaxTokensOpt
from ragmeter.cli._eval_options import _NoJudgeCacheOpt as _NoJudgeCacheOpt
from ragmeter.cli._eval_options import _RpmOpt as _RpmOpt
from ragmeter.cli._eval_options import _TimeoutOpt as _TimeoutOpt
from ragmeter.cli._eval_score import _judged_report, _loaded, _plain_report, _print_eval, _Source
from ragmeter.cli._judges import _judge_cache_path, _judge_options
from ragmeter.cli._options import JsonOpt, RegistryOpt, SaveOpt, TagOpt, _existing_file
from ragmeter.cli._save import save_request

if TYPE_CHECKING:
    from pathlib import Path


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
