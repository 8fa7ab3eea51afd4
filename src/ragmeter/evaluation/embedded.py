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

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ragmeter.embed.cache import EmbedCache
from ragmeter.embed.metrics import EMBED_METRICS, EmbedMetric
from ragmeter.embed.runner import EmbedOptions, EmbedRun, run_embeddings
from ragmeter.errors import InvalidInputError, NoSamplesError
from ragmeter.evaluation._model_runs import add_metric, base_report
from ragmeter.metrics.base import RAG_METRICS, RagMetric
from ragmeter.report import RagEvalReport
from ragmeter.schema import RagSample, SampleLike, coerce_sample

__all__ = [
    "DEFAULT_CACHE",
    "NONE_SCORED",
    "add_embed_run",
    "check_embed_names",
    "evaluate_with_embeddings",
    "note_counts",
    "open_embed_cache",
    "sample_score",
    "split_embedded",
    "unscorable",
]

DEFAULT_CACHE = "default"
"""``embed_cache=DEFAULT_CACHE`` (the default) uses the user cache directory."""

NONE_SCORED = "the embedding model scored no sample (each sample's reason is in details)"
"""Why an embedding metric with no score at all is left out of a report's ``metrics``."""

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
    report, ids, renamed = base_report(
        coerced, other_metrics, evaluate, {"progress": progress, **kwargs}
    )
    if not other_metrics:
        report.warnings.extend(str(w) for w in kwargs.get("warnings") or ())
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
    add_embed_run(report, run, note_counts(run), None if cache is None else str(cache.path))
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
    check_embed_names(embed_metrics)
    for metric in embed_metrics:
        if not any(metric.applies_to(s) for s in coerced):
            raise unscorable(metric, len(coerced))
    return coerced


def check_embed_names(embed_metrics: Sequence[EmbedMetric]) -> None:
    """Refuse an embedding metric asked for twice (one report, one score per name)."""
    names = [m.name for m in embed_metrics]
    for name in names:
        if names.count(name) > 1:
            raise InvalidInputError(
                f"{name} is asked for twice (e.g. with two embedders): one report "
                "holds one score per metric name; evaluate each embedder in its own run"
            )


def unscorable(metric: EmbedMetric, n: int) -> InvalidInputError:
    """The error for an embedding metric none of the ``n`` samples can be scored on."""
    return InvalidInputError(
        f"{metric.name} needs {metric.requirement} on a sample; none of the {n} samples has them"
    )


def _add_scores(report: RagEvalReport, run: EmbedRun, metric: EmbedMetric, ids: list[str]) -> None:
    """Put one metric's per-sample scores, notes, reasons and details, and its mean, in
    the report (or say why it has none)."""
    rows = [(sid, *sample_score(run, metric.name, sid)) for sid in ids]
    add_metric(report, metric.name, metric.higher_is_better, rows, NONE_SCORED)


def sample_score(run: EmbedRun, key: str, sid: str) -> tuple[float | None, dict[str, Any]]:
    """Sample ``sid``'s score of metric ``key`` in ``run``, and its details for the report
    (the metric's detail, the reason for a ``None``, the notes)."""
    value = run.scores.get(sid, {}).get(key)
    info: dict[str, Any] = dict(run.details.get(sid, {}).get(key) or {})
    reason = run.reasons.get(sid, {}).get(key)
    if reason and value is None:
        info["reason"] = reason
    notes = run.notes.get(sid, {}).get(key)
    if notes:
        info["notes"] = list(notes)
    return value, info


def note_counts(run: EmbedRun) -> Counter[str]:
    """How many samples got each note, as ``"<metric>: <note>"`` -> count."""
    counts: Counter[str] = Counter()
    for row in run.notes.values():
        for name, notes in row.items():
            for note in notes:
                counts[f"{name}: {note}"] += 1
    return counts


def add_embed_run(
    report: RagEvalReport, run: EmbedRun, counts: Mapping[str, int], cache_path: str | None
) -> None:
    """Put what the run took (models, calls, cache hits) and its notes (``counts``, see
    :func:`note_counts`) in ``extra`` and ``warnings``; ``cache_path`` is the cache's file."""
    report.extra.update(
        embed_models=[dict(m) for m in run.models],
        embed_calls=run.calls,
        embed_texts=run.texts,
        embed_embedded=run.embedded,
        embed_cache_hits=run.cache_hits,
        embed_cache_writes_skipped=run.cache_writes_skipped,
        embed_notes=dict(sorted(counts.items())),
    )
    if cache_path is not None:
        report.extra["embed_cache"] = cache_path
    for what, n in sorted(counts.items()):
        report.warnings.append(f"{what}: {n} sample(s)")
    if run.cache_writes_skipped and cache_path is not None:
        report.warnings.append(
            f"embedding cache {cache_path}: {run.cache_writes_skipped} new vector(s) were not "
            f"stored ({run.cache_write_problem}); a re-run will embed them again"
        )
