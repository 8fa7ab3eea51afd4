"""Embedding metrics inside :func:`ragmeter.evaluate_rag`.

:func:`ragmeter.evaluate_rag` hands every embedding metric it is given (a
:class:`~ragmeter.embed.metrics.EmbedMetric` object, or the names ``semantic_similarity``,
``semantic_context_recall``, ``semantic_context_precision``, which use the offline default
embedder) to :func:`evaluate_with_embeddings`: the other metrics (judge metrics too) are
computed as usual, the embedding metrics by :func:`ragmeter.embed.run_embeddings` (each
distinct text embedded once, batched, bounded, cached), and both land in one
:class:`~ragmeter.report.RagEvalReport`.

A score that could not be had (the model failed for good on a text it needs) is ``None``
for that sample (counted in ``summaries[key].missing``) with its reason in
``details[sample_id][key]``. The report's ``extra`` carries ``embed_models`` (each
embedder's identity: model name, and ``weights_sha256`` for the default model),
``embed_calls`` (model calls sent), ``embed_texts`` (text occurrences the metrics needed),
``embed_embedded`` (texts the model embedded), ``embed_cache_hits`` (distinct texts served
by the cache), ``embed_cache_writes_skipped`` and ``embed_notes`` (how many samples were
scored with each note: an empty answer, a zero vector).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ragmeter.embed.cache import EmbedCache
from ragmeter.embed.metrics import EMBED_METRICS, EmbedMetric
from ragmeter.embed.runner import EmbedOptions, EmbedRun, run_embeddings
from ragmeter.errors import InvalidInputError, NoSamplesError
from ragmeter.metrics.base import RAG_METRICS, RagMetric
from ragmeter.report import RagEvalReport
from ragmeter.schema import RagSample, SampleLike, coerce_sample, sample_keys

__all__ = ["DEFAULT_CACHE", "evaluate_with_embeddings", "open_embed_cache", "split_embedded"]

DEFAULT_CACHE = "default"
"""``embed_cache=DEFAULT_CACHE`` (the default) uses the user cache directory."""

EmbedCacheArg = str | os.PathLike[str] | EmbedCache | None


def split_embedded(
    metrics: Sequence[str | RagMetric] | str | RagMetric | None,
) -> tuple[list[EmbedMetric], Sequence[str | RagMetric] | str | RagMetric | None]:
    """Separate the embedding metrics (objects, or names of :data:`EMBED_METRICS` that are
    not RAG metric names) from the rest, which keep their order.

    >>> embeds, rest = split_embedded(["token_f1", "semantic_similarity"])
    >>> [m.name for m in embeds], rest
    (['semantic_similarity'], ['token_f1'])
    """
    if metrics is None:
        return [], None
    items: list[Any] = [metrics] if isinstance(metrics, (str, RagMetric)) else list(metrics)
    embeds: list[EmbedMetric] = []
    rest: list[Any] = []
    for item in items:
        if isinstance(item, EmbedMetric):
            embeds.append(item)
        elif isinstance(item, str) and item in EMBED_METRICS and item not in RAG_METRICS:
            registered = EMBED_METRICS[item]
            assert isinstance(registered, EmbedMetric)
            embeds.append(type(registered)())
        else:
            rest.append(item)
    if not embeds:
        return [], metrics
    return embeds, rest


def open_embed_cache(embed_cache: EmbedCacheArg) -> EmbedCache | None:
    """``None`` -> no cache; ``"default"`` -> the user cache dir; a path or an EmbedCache."""
    if embed_cache is None:
        return None
    if isinstance(embed_cache, EmbedCache):
        return embed_cache
    if isinstance(embed_cache, str) and embed_cache == DEFAULT_CACHE:
        return EmbedCache()
    return EmbedCache(embed_cache)


def evaluate_with_embeddings(
    samples: Iterable[SampleLike],
    *,
    embed_metrics: Sequence[EmbedMetric],
    other_metrics: Sequence[Any],
    evaluate: Callable[..., RagEvalReport],
    embed_cache: EmbedCacheArg = DEFAULT_CACHE,
    embed_options: EmbedOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    **kwargs: Any,
) -> RagEvalReport:
    """Score ``other_metrics`` with ``evaluate`` and ``embed_metrics`` with the embedding
    runner; an empty ``other_metrics`` means embedding metrics only. ``kwargs`` go to
    ``evaluate`` (``k_values``, ``prices``, the judge options...)."""
    coerced = _embeddable(samples, embed_metrics)
    if other_metrics:
        report = evaluate(coerced, metrics=list(other_metrics), progress=progress, **kwargs)
    else:
        report = RagEvalReport(metrics={}, coverage={}, n_samples=len(coerced))
        report.per_sample = {sid: {} for sid in sample_keys([s.id for s in coerced])}
        report.skipped_lines = int(kwargs.get("skipped_lines", 0) or 0)
        report.warnings.extend(str(w) for w in kwargs.get("warnings") or ())
    ids = sample_keys([s.id for s in coerced])
    renamed = [
        s if s.id == sid else s.model_copy(update={"id": sid})
        for s, sid in zip(coerced, ids, strict=True)
    ]
    cache = open_embed_cache(embed_cache)
    try:
        run = run_embeddings(
            renamed, list(embed_metrics), cache=cache, options=embed_options, progress=progress
        )
    finally:
        if cache is not None and not isinstance(embed_cache, EmbedCache):
            cache.close()
    for metric in embed_metrics:
        _add_scores(report, run, metric, ids)
    _add_run(report, run, cache)
    report.__dict__.pop("summaries", None)  # drop a cached summary computed before the merge
    return report


def _embeddable(
    samples: Iterable[SampleLike], embed_metrics: Sequence[EmbedMetric]
) -> list[RagSample]:
    """The samples as :class:`~ragmeter.schema.RagSample` objects; refuses no samples, and
    an embedding metric that no sample can be scored on (naming what it needs)."""
    coerced = [coerce_sample(s, index=i) for i, s in enumerate(samples)]
    if not coerced:
        raise NoSamplesError(
            "evaluate_rag got no samples: pass a non-empty list of RagSample objects or mappings"
        )
    names = [m.name for m in embed_metrics]
    for metric in embed_metrics:
        if names.count(metric.name) > 1:
            raise InvalidInputError(
                f"{metric.name} is asked for twice (e.g. with two embedders): one report "
                "holds one score per metric name; evaluate each embedder in its own run"
            )
        if not any(metric.applies_to(s) for s in coerced):
            raise InvalidInputError(
                f"{metric.name} needs {metric.requirement} on a sample; none of the "
                f"{len(coerced)} samples has them"
            )
    return coerced


def _add_scores(report: RagEvalReport, run: EmbedRun, metric: EmbedMetric, ids: list[str]) -> None:
    """Put one metric's per-sample scores, notes, reasons and details, and its mean, in
    the report (or say why it has none)."""
    key = metric.name
    values: list[float] = []
    for sid in ids:
        value = run.scores.get(sid, {}).get(key)
        report.per_sample.setdefault(sid, {})[key] = value
        if value is not None:
            values.append(value)
        info: dict[str, Any] = dict(run.details.get(sid, {}).get(key) or {})
        reason = run.reasons.get(sid, {}).get(key)
        if reason and value is None:
            info["reason"] = reason
        notes = run.notes.get(sid, {}).get(key)
        if notes:
            info["notes"] = list(notes)
        if info:
            report.details.setdefault(sid, {})[key] = info
    if values:
        report.metrics[key] = math.fsum(values) / len(values)
        report.coverage[key] = len(values)
        report.higher_is_better[key] = metric.higher_is_better
    else:
        why = "the embedding model scored no sample (each sample's reason is in details)"
        report.extra.setdefault("not_computed", {})[key] = why
        report.warnings.append(f"{key}: {why}")


def _add_run(report: RagEvalReport, run: EmbedRun, cache: EmbedCache | None) -> None:
    """Put what the run took (models, calls, cache hits) and its notes in ``extra`` and
    ``warnings``."""
    counts: Counter[str] = Counter()
    for row in run.notes.values():
        for name, notes in row.items():
            for note in notes:
                counts[f"{name}: {note}"] += 1
    report.extra.update(
        embed_models=[dict(m) for m in run.models],
        embed_calls=run.calls,
        embed_texts=run.texts,
        embed_embedded=run.embedded,
        embed_cache_hits=run.cache_hits,
        embed_cache_writes_skipped=run.cache_writes_skipped,
        embed_notes=dict(sorted(counts.items())),
    )
    if cache is not None:
        report.extra["embed_cache"] = str(cache.path)
    for what, n in sorted(counts.items()):
        report.warnings.append(f"{what}: {n} sample(s)")
    if run.cache_writes_skipped and cache is not None:
        report.warnings.append(
            f"embedding cache {cache.path}: {run.cache_writes_skipped} new vector(s) were not "
            f"stored ({run.cache_write_problem}); a re-run will embed them again"
        )
