"""``ragmeter.dask.evaluate_rag``: :func:`ragmeter.evaluate_rag` over a Dask bag or dataframe.

One task per partition scores its samples into a :class:`~ragmeter.evaluation.rag.RagPartial`
(and runs the judge and embedding metrics there, see :mod:`ragmeter.dask._judges` and
:mod:`ragmeter.dask._embeds`); the partials are
merged in partition order by a tree of tasks; the client turns the merged partial into the
report with :func:`~ragmeter.evaluation.rag.rag_report`, the code that ends a pass on one
machine. Repeated sample ids are counted in a second, light pass over the ids whose root
digest was seen twice (:class:`~ragmeter.aggregate.IdRoots`), only when there are any.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import dask

from ragmeter.aggregate import Distribution, IdRoots
from ragmeter.dask._collections import (
    active_client,
    check_not_strings,
    compute,
    is_dataframe,
    merge_tree,
    one_task,
    partitions,
    task_prefix,
)
from ragmeter.errors import InvalidInputError, NoSamplesError, RagmeterError
from ragmeter.evaluation._rag_rules import DEFAULT_K, _cut_offs, _resolve, _split_judges
from ragmeter.evaluation.embedded import split_embedded
from ragmeter.evaluation.rag import RagPartial, rag_partial, rag_report
from ragmeter.metrics.base import RagMetric
from ragmeter.report import RagEvalReport, WarningLog
from ragmeter.schema import RagSample, SampleKeys, coerce_sample, sample_keys

__all__ = ["evaluate_rag"]


_STRUCTURED = (
    "retrieved_contexts",
    "references",
    "reference_contexts",
    "retrieved_ids",
    "retrieved_texts",
    "reference_ids",
    "relevance",
    "gold_spans",
    "retrieved_spans",
    "metadata",
    "context",
    "golden_documents",
    "retrieved",
)
"""Sample fields that hold lists or mappings (rag-eval's names too)."""


@dataclass
class _Spec:
    """What every partition task needs (one task of the graph, sent once)."""

    metrics: list[RagMetric] | None
    """The deterministic metrics, resolved on the client; ``None``: model-scored only."""
    k_values: tuple[int, ...]
    keep: bool
    judges: Any  # a ragmeter.dask._judges.JudgeSpec, or None
    embeds: Any = None  # a ragmeter.dask._embeds.EmbedSpec, or None


@dataclass
class _Part:
    partial: RagPartial
    judged: Any  # a ragmeter.dask._judges.JudgePartial, or None
    embedded: Any = None  # a ragmeter.dask._embeds.EmbedPartial, or None


def _absent(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return value != value  # NaN: pandas' missing number or string
    return type(value).__name__ in ("NAType", "NaTType")


def _cell(column: str, value: Any) -> Any:
    if hasattr(value, "tolist"):  # a numpy array (a list column) or a numpy scalar
        value = value.tolist()
    if column == "relevance" and isinstance(value, list):  # an Arrow map column
        value = dict(value)
    return value


def _frame_records(frame: Any) -> Iterator[dict[str, Any]]:
    """A pandas partition's rows as sample mappings; a missing cell is an absent field."""
    columns = [str(c) for c in frame.columns]
    for values in frame.itertuples(index=False, name=None):
        yield {c: _cell(c, v) for c, v in zip(columns, values, strict=True) if not _absent(v)}


def _records(part: Any) -> Iterable[Any]:
    """A bag partition as is; a dataframe partition as one mapping per row."""
    if hasattr(part, "itertuples") and hasattr(part, "columns"):
        return _frame_records(part)
    if isinstance(part, (str, bytes, Mapping)) or not isinstance(part, Iterable):
        raise InvalidInputError(
            "each partition of the samples bag must hold samples (RagSample objects or "
            f"mappings), got a partition of type {type(part).__name__}"
        )
    return part


def _note(exc: BaseException, number: int) -> None:
    if hasattr(exc, "add_note"):  # Python 3.11+; the index in the message is this partition's
        exc.add_note(f"(in partition {number} of the Dask collection; sample indexes count from 0)")


def _bare(samples: Sequence[RagSample], keep: bool) -> RagPartial:
    """A partial with no metric: the samples' count and ids (judge metrics only)."""
    if keep:
        return RagPartial(keys=[], n=len(samples), rows=[(s.id, {}, None) for s in samples])
    roots = IdRoots()
    roots.resolve([s.id for s in samples])
    return RagPartial(keys=[], n=len(samples), roots=roots)


def _score_part(part: Any, spec: _Spec, number: int) -> _Part:
    """One partition's partial (the task)."""
    try:
        items = _records(part)
        if spec.judges is None and spec.embeds is None:
            partial = rag_partial(
                items, metrics=spec.metrics, k_values=spec.k_values, keep=spec.keep
            )
            return _Part(partial, None)
        samples = [coerce_sample(s, index=i) for i, s in enumerate(items)]
        if spec.metrics is None:
            partial = _bare(samples, spec.keep)
        else:
            partial = rag_partial(
                samples, metrics=spec.metrics, k_values=spec.k_values, keep=spec.keep
            )
        judged = embedded = None
        if spec.judges is not None:
            from ragmeter.dask._judges import judge_partition

            judged = judge_partition(samples, spec.judges, kept=spec.keep)
        if spec.embeds is not None:
            from ragmeter.dask._embeds import embed_partition

            embedded = embed_partition(samples, spec.embeds, kept=spec.keep)
        return _Part(partial, judged, embedded)
    except RagmeterError as exc:
        _note(exc, number)
        raise


def _empty(like: RagPartial) -> RagPartial:
    kept = like.rows is not None
    return RagPartial(
        keys=list(like.keys),
        distributions={key: Distribution() for key in like.keys},
        rows=[] if kept else None,
        roots=None if kept else IdRoots(),
    )


def _merge(*parts: _Part) -> _Part:
    """Merge partials in order into a new one (a task never changes its inputs)."""
    partial = _empty(parts[0].partial)
    for part in parts:
        partial.merge(part.partial)
    models: list[Any] = []
    for which in ("judged", "embedded"):  # a ModelPartial of each part, or None in every one
        first = getattr(parts[0], which)
        merged = None if first is None else first.empty_like()
        if merged is not None:
            for part in parts:
                merged.merge(getattr(part, which))
        models.append(merged)
    return _Part(partial, *models)


def _final(part: _Part) -> _Part:
    """What the client needs: the root digests only where they repeat."""
    roots = part.partial.roots
    if roots is None:
        return part
    return replace(part, partial=replace(part.partial, roots=roots.repeated_only()))


def _raw_id(item: Any, index: int) -> str | None:
    """A sample's id as evaluate_rag reads it; ``None`` when it gets a fresh uuid (unique)."""
    if isinstance(item, RagSample):
        return item.id
    if isinstance(item, Mapping):
        value = item.get("id")
        if value is None or isinstance(value, str):
            return value
    return coerce_sample(item, index=index).id


def _candidates(part: Any, roots: IdRoots, number: int) -> list[str]:
    """The ids of one partition whose root digest repeats, in order (the second pass)."""
    try:
        found = [_raw_id(item, i) for i, item in enumerate(_records(part))]
    except RagmeterError as exc:
        _note(exc, number)
        raise
    ids = [i for i in found if i is not None]
    return [i for i, hit in zip(ids, roots.matches(ids), strict=True) if hit]


def _local_scheduler() -> str:
    """The scheduler for judges without a cluster: one process, so one budget."""
    configured = dask.config.get("scheduler", None)
    if configured in ("sync", "synchronous", "single-threaded"):
        return str(configured)
    return "threads"


def evaluate_rag(
    samples: Any,
    *,
    metrics: Sequence[str | RagMetric] | str | RagMetric | None = None,
    k_values: Iterable[int] | int = DEFAULT_K,
    prices: Mapping[str, float] | None = None,
    per_sample: bool = False,
    skipped_lines: int = 0,
    warnings: Iterable[str] | WarningLog | None = None,
    judge_cache: Any = "default",
    judge_options: Any = None,
    embed_cache: Any = "default",
    embed_options: Any = None,
    client: Any = None,
    split_every: int = 8,
    k: int | None = None,
) -> RagEvalReport:
    """:func:`ragmeter.evaluate_rag` over a Dask collection, partition by partition.

    ``samples`` is a ``dask.bag.Bag`` of samples (:class:`~ragmeter.schema.RagSample`
    objects or mappings with Ragas or rag-eval field names) or a ``dask.dataframe.DataFrame``
    whose columns are sample fields (a missing cell is an absent field). ``metrics``,
    ``k_values`` (and its deprecated name ``k``), ``prices``, ``skipped_lines``,
    ``warnings``, ``judge_cache``, ``judge_options``, ``embed_cache`` and ``embed_options``
    are :func:`ragmeter.evaluate_rag`'s.
    ``metrics`` (and registered names) are resolved here and sent to the workers.

    The report is the one :func:`ragmeter.evaluate_rag` returns for all the samples in
    partition order: the same ``metrics`` (bit for bit, whatever the partitioning),
    ``coverage``, ``n_samples``, warnings and ``extra``. ``per_sample=False`` (the default)
    keeps no per-sample scores: ``summaries`` come from the merged
    :class:`~ragmeter.aggregate.Distribution` aggregates (count, missing, mean, std, min and
    max exact; median and percentiles exact up to 2,048 distinct values, else within a
    relative error of 0.001); ``per_sample=True`` gathers them to the client, and the
    summaries, ``per_sample`` and ``details`` are exactly one machine's.

    Judge metrics run on the workers, each partition with the judge cache at
    ``judge_cache`` opened there (give a path every worker can reach to share one cache)
    and one call/token budget for the whole evaluation (``judge_options.max_calls`` and
    ``max_tokens``, counted by the scheduler); concurrency and rate limit apply per
    partition. Embedding metrics (``semantic_similarity``, ``semantic_context_recall``,
    ``semantic_context_precision`` by name with the offline default model, or
    :class:`ragmeter.embed.SemanticSimilarity` ... objects with your embedder, which must
    pickle) run on the workers too, each partition with the embedding cache at
    ``embed_cache`` opened there: give a path every worker can reach and they share it, so
    a re-run makes no model call. Their scores are one machine's; ``extra["embed_calls"]``,
    ``["embed_cache_hits"]`` and the other counts are sums over the partitions (a text two
    partitions need is counted, and embedded when not cached yet, in each). See
    ``docs/dask.md``.

    ``client`` is a ``distributed.Client`` (default: the current default client, else
    Dask's configured scheduler); ``split_every`` is how many partials a merge task takes.
    Raises what :func:`ragmeter.evaluate_rag` raises, from the worker for a bad sample
    (with the partition named in a note), :class:`~ragmeter.errors.InvalidInputError` for a
    collection that is neither a bag nor a dataframe or a ``per_sample`` that is not a bool.
    """
    ks = _cut_offs(k_values, k, caller="ragmeter.dask.evaluate_rag", stacklevel=2)
    _check_options(per_sample, skipped_lines)
    embeds, metrics = split_embedded(metrics)
    judges, other = _split_judges(metrics)
    parts = partitions(samples, "evaluate_rag samples")
    if is_dataframe(samples):
        check_not_strings(samples, _STRUCTURED, "samples")
    resolved = None if (judges or embeds) and not other else _resolve(other, ks, prices)[0]
    client = active_client(client)
    prefix = task_prefix("rag")
    scheduler = None
    judge_spec = embed_spec = None
    budget: Any = None
    if judges:
        judge_spec, budget, scheduler = _judge_setup(
            judges, judge_cache, judge_options, client, prefix
        )
    if embeds:
        from ragmeter.dask._embeds import embed_spec as make_embed_spec

        embed_spec = make_embed_spec(embeds, embed_cache, embed_options)
    spec = one_task(_Spec(resolved, ks, per_sample, judge_spec, embed_spec), prefix)
    merged, granted = _compute(parts, spec, prefix, split_every, client, scheduler, budget)
    partial = merged.partial
    _check_model_metrics(merged, judges, embeds)
    if resolved is not None:
        repeats = None
        if partial.roots is not None and partial.roots.repeated().size:
            repeats = _count_repeats(parts, partial.roots, client, scheduler, prefix)
        report = rag_report(
            partial,
            metrics=other,
            k_values=ks,
            prices=prices,
            warnings=warnings,
            skipped_lines=skipped_lines,
            repeats=repeats,
        )
    else:
        report = _judged_only(partial, skipped_lines, warnings)
    if judges:
        from ragmeter.dask._judges import add_judges

        add_judges(report, merged.judged, partial.n)
        if granted is not None:
            report.extra["judge_budget"] = {"calls": granted[0], "tokens": granted[1]}
    if embeds:
        from ragmeter.dask._embeds import add_embeds

        add_embeds(report, merged.embedded, partial.n)
    return report


def _check_model_metrics(merged: _Part, judges: list[Any], embeds: list[Any]) -> None:
    """Refuse what one machine refuses before scoring model metrics: no samples, and an
    embedding or judge metric no sample has the fields for (in that order)."""
    n = merged.partial.n
    if not (judges or embeds):
        return
    if n == 0:
        raise NoSamplesError(
            "evaluate_rag got no samples: pass a non-empty list of RagSample objects or mappings"
        )
    if embeds:
        from ragmeter.dask._embeds import check_embeds

        check_embeds(merged.embedded, embeds, n)
    if judges:
        from ragmeter.dask._judges import check_applies

        check_applies(merged.judged, judges, n)


def _check_options(per_sample: object, skipped_lines: int) -> None:
    """Refuse a ``per_sample`` that is not a bool and a ``skipped_lines`` that is not an
    int >= 0."""
    if per_sample is not True and per_sample is not False:
        raise InvalidInputError(
            "per_sample must be True (gather every sample's scores to the client) or False "
            f"(keep the mergeable aggregates only) under Dask, got {per_sample!r:.80}"
        )
    if skipped_lines is None or isinstance(skipped_lines, bool) or skipped_lines < 0:
        raise InvalidInputError(f"skipped_lines must be an int >= 0, got {skipped_lines!r}")


def _judge_setup(
    judges: list[Any], judge_cache: Any, judge_options: Any, client: Any, prefix: str
) -> tuple[Any, Any, str | None]:
    """What the partitions need to run the judge metrics: ``(judge spec, budget,
    scheduler)``; the budget is kept by the scheduler with a client, else in this process
    (with a local scheduler of one process, so one budget)."""
    from ragmeter.dask import _judges
    from ragmeter.dask._budget import LocalBudget, SchedulerBudget
    from ragmeter.judge.runner import JudgeOptions

    opts = judge_options or JudgeOptions()
    scheduler = None
    budget: Any
    if client is not None:
        budget = SchedulerBudget(prefix, opts.max_calls, opts.max_tokens)
    else:
        budget = LocalBudget(opts.max_calls, opts.max_tokens)
        scheduler = _local_scheduler()
    judge_spec = _judges.JudgeSpec(
        _judges.freeze(judges),
        _judges.cache_spec(judge_cache),
        _judges.no_options_budget(opts),
        budget,
    )
    return judge_spec, budget, scheduler


def _compute(
    parts: Sequence[Any],
    spec: Any,
    prefix: str,
    split_every: int,
    client: Any,
    scheduler: str | None,
    budget: Any,
) -> tuple[_Part, tuple[int, int] | None]:
    """Score every partition, merge the partials in a tree, and bring the merged one to
    the client; with the judges' budget (``None`` without judges) and what it granted."""
    tasks = [
        dask.delayed(_score_part, pure=False)(part, spec, i, dask_key_name=f"{prefix}-part-{i}")
        for i, part in enumerate(parts)
    ]
    root = merge_tree(tasks, _merge, split_every=split_every, prefix=prefix)
    final = dask.delayed(_final, pure=False)(root, dask_key_name=f"{prefix}-final")
    granted: tuple[int, int] | None = None
    if budget is not None and client is not None:
        budget.open(client, prefix, budget.max_calls, budget.max_tokens)
        try:
            merged: _Part = compute(final, client)
        finally:
            granted = budget.close(client, prefix)
    else:
        merged = compute(final, client, scheduler=scheduler)
        if budget is not None:
            granted = (budget.calls, budget.tokens)
    return merged, granted


def _judged_only(
    partial: RagPartial, skipped_lines: int, warnings: Iterable[str] | WarningLog | None
) -> RagEvalReport:
    """The report before the judge metrics are added, when there is no other metric."""
    report = RagEvalReport(
        metrics={}, coverage={}, n_samples=partial.n, skipped_lines=skipped_lines
    )
    if warnings is not None:
        report.warnings = [str(w) for w in warnings]
    if partial.rows is not None:
        report.per_sample = {sid: {} for sid in sample_keys([r[0] for r in partial.rows])}
    else:
        report.extra["per_sample"] = "not kept"
    return report


def _count_repeats(
    parts: Sequence[Any], roots: IdRoots, client: Any, scheduler: str | None, prefix: str
) -> int:
    """How many sample ids repeat an earlier one: :class:`SampleKeys` over the ids whose
    root digest repeats, gathered in partition order (the second, light pass)."""
    shared = one_task(roots, f"{prefix}-roots")
    tasks = [
        dask.delayed(_candidates, pure=False)(part, shared, i, dask_key_name=f"{prefix}-ids-{i}")
        for i, part in enumerate(parts)
    ]
    keys = SampleKeys()
    for ids in compute(tasks, client, scheduler=scheduler):
        for sid in ids:
            keys(sid)
    return keys.repeats
