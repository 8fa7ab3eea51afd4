"""A pass over RAG samples in two steps: partials that merge (``rag_partial``), and the
report made from the merged one (``rag_report``); the streaming and Dask paths use both."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragmeter.aggregate import Distribution, IdRoots
from ragmeter.errors import InvalidInputError, NoSamplesError
from ragmeter.evaluation._notes import note_unjudged_docs
from ragmeter.evaluation._rag_partial import RagPartial
from ragmeter.evaluation._rag_rules import (
    DEFAULT_K,
    SPAN_METRICS,
    _cut_offs,
    _k_extra,
    _key,
    _reason,
    _resolve,
    _SampleRetrieval,
)
from ragmeter.evaluation._rag_score import _score
from ragmeter.io.scores import ScoreWriter
from ragmeter.metrics.base import RagMetric
from ragmeter.report import RagEvalReport, WarningLog
from ragmeter.schema import SampleKeys, SampleLike

__all__ = ["RagPartial", "rag_partial", "rag_report"]


def rag_partial(
    samples: Iterable[SampleLike],
    *,
    metrics: Sequence[str | RagMetric] | str | RagMetric | None = None,
    k_values: Iterable[int] | int = DEFAULT_K,
    prices: Mapping[str, float] | None = None,
    keep: bool = False,
    k: int | None = None,
) -> RagPartial:
    """Score a part of the samples into a mergeable :class:`RagPartial`, with no report yet.

    ``metrics``, ``k_values`` and ``prices`` are :func:`evaluate_rag`'s (no judge metrics;
    ``k`` is the deprecated name of ``k_values``, as there); ``keep=True`` keeps the
    per-sample scores and details. Nothing is refused that needs
    the other parts to decide (no samples, a metric no sample here can be scored on):
    :func:`rag_report` does that on the merged partial. Raises what :func:`evaluate_rag`
    raises for bad arguments and invalid samples (the index is the sample's in this part).

    >>> first = rag_partial([{"id": "a", "response": "Paris", "reference": "Paris"}],
    ...                     metrics=["exact_match"], keep=True)
    >>> first.merge(rag_partial([{"id": "a", "response": "Lyon", "reference": "Paris"}],
    ...                         metrics=["exact_match"], keep=True))
    >>> report = rag_report(first, metrics=["exact_match"])
    >>> report.metrics, report.per_sample
    ({'exact_match': 0.5}, {'a': {'exact_match': 1.0}, 'a#2': {'exact_match': 0.0}})
    """
    ks = _cut_offs(k_values, k, caller="rag_partial", stacklevel=2)
    resolved, _ = _resolve(metrics, ks, prices)
    keys = SampleKeys()
    roots = IdRoots()
    rows: dict[str, dict[str, float | None]] = {}
    details: dict[str, dict[str, Any]] = {}
    raw: list[str] | None = [] if keep else None
    partial = _score(samples, resolved, ks[0], keep, None, keys, roots, rows, details, raw)
    if raw is not None:
        partial.rows = [
            (rid, row, details.get(sid)) for rid, (sid, row) in zip(raw, rows.items(), strict=True)
        ]
    else:
        partial.roots = roots
    return partial


def rag_report(
    partial: RagPartial,
    *,
    metrics: Sequence[str | RagMetric] | str | RagMetric | None = None,
    k_values: Iterable[int] | int = DEFAULT_K,
    prices: Mapping[str, float] | None = None,
    warnings: Iterable[str] | WarningLog | None = None,
    skipped_lines: int = 0,
    repeats: int | None = None,
    k: int | None = None,
) -> RagEvalReport:
    """The report of the merged :class:`RagPartial` of all the samples: what
    ``evaluate_rag(samples, per_sample=keep)`` returns, bit for bit (the partial is consumed).

    ``metrics``, ``k_values`` and ``prices`` must be those the partials were scored with
    (``k`` is the deprecated name of ``k_values``; ``metrics=None`` decides, as
    :func:`evaluate_rag` does, which defaults are left out). When per-sample scores were
    not kept and ``partial.roots.repeated()`` is not empty, ``repeats`` must say how many
    sample ids repeat an earlier one (see :class:`~ragmeter.aggregate.IdRoots`). Raises
    what :func:`evaluate_rag` raises at the end of a pass:
    :class:`~ragmeter.errors.NoSamplesError` when no part had a sample,
    :class:`~ragmeter.errors.InvalidInputError` for a requested metric no sample could be
    scored on, or other metrics than the partial's.
    """
    ks = _cut_offs(k_values, k, caller="rag_report", stacklevel=2)
    if skipped_lines is None or isinstance(skipped_lines, bool) or skipped_lines < 0:
        raise InvalidInputError(f"skipped_lines must be an int >= 0, got {skipped_lines!r}")
    resolved, explicit = _resolve(metrics, ks, prices)
    if [_key(m) for m in resolved] != partial.keys:
        raise InvalidInputError(
            f"the partial holds the metrics {partial.keys}, not {[_key(m) for m in resolved]}: "
            "pass rag_report the metrics, k_values and prices the partials were scored with"
        )
    log = [str(w) for w in warnings] if warnings is not None else []
    rows: dict[str, dict[str, float | None]] = {}
    details: dict[str, dict[str, Any]] = {}
    if partial.rows is not None:
        keys = SampleKeys()
        for rid, row, detail in partial.rows:
            sid = keys(rid)
            rows[sid] = row
            if detail is not None:
                details[sid] = detail
        count = keys.repeats
    elif repeats is None:
        if partial.roots is not None and partial.roots.repeated().size:
            raise InvalidInputError(
                "some sample ids may repeat across the parts: pass repeats= (count them with "
                "SampleKeys over the ids whose root is in partial.roots.repeated(), in order)"
            )
        count = 0
    else:
        count = repeats
    report = _report(
        partial, resolved, explicit, ks, log, skipped_lines, None, count, rows, details, None
    )
    if partial.rows is None:
        report.extra["per_sample"] = "not kept"
    return report


def _report(
    partial: RagPartial,
    resolved: list[RagMetric],
    explicit: bool,
    ks: Sequence[int],
    log: list[str],
    skipped_lines: int,
    reader_skipped: object,
    repeats: int,
    rows: dict[str, dict[str, float | None]],
    details: dict[str, dict[str, Any]],
    writer: ScoreWriter | None,
) -> RagEvalReport:
    """The end of evaluate_rag's pass: what was not computed and why, warnings, the report."""
    n = partial.n
    dists = partial.distributions
    failed = _failures(partial)
    if n == 0:
        _no_samples(reader_skipped)
    not_computed, silent = _not_computed(partial, resolved, explicit, failed)
    dropped = set(failed) | set(not_computed) | silent
    if dropped:
        for row in rows.values():
            for key in dropped:
                row.pop(key, None)
        if writer is not None:
            writer.drop(dropped)
    log.extend(failed.values())
    if repeats:
        log.append(
            f"{repeats} sample id(s) repeat an earlier one; they are reported as '<id>#2', "
            "'<id>#3', ... in per_sample"
        )
    log.extend(_doc_ids_note(partial, resolved, dropped))
    for (key, meant), count in partial.lookalikes.most_common():
        log.append(
            f"{count} sample(s) have a key {key!r}, which is not a field: it was kept in "
            f"metadata and not scored. Did you mean {meant!r}?"
        )
    if not skipped_lines and isinstance(reader_skipped, list):
        skipped_lines = len(reader_skipped)

    kept = [_key(m) for m in resolved if _key(m) not in dropped]
    if not kept and not failed:
        hints = [w for w in log if "Did you mean" in w]
        raise InvalidInputError(
            f"no metric could be computed on the {n} sample(s): "
            + "; ".join([*hints, *not_computed.values()])
        )
    for key in kept:
        dists[key].missing = n - dists[key].count
    extra: dict[str, Any] = {}
    if any(isinstance(m, _SampleRetrieval) for m in resolved):
        extra["k"] = _k_extra(ks)
    if not_computed:
        extra["not_computed"] = not_computed
    better = {_key(m): bool(m.higher_is_better) for m in resolved}
    report = RagEvalReport(
        metrics={key: dists[key].mean() for key in kept},
        coverage={key: dists[key].count for key in kept},
        n_samples=n,
        per_sample=rows,
        higher_is_better={key: better[key] for key in kept},
        skipped_lines=skipped_lines,
        warnings=log,
        details=details,
        extra=extra,
        distributions={key: dists[key] for key in kept},
    )
    if partial.truth is not None:
        report.set_dataset_fingerprint(partial.truth.fingerprint)
    return report


def _failures(partial: RagPartial) -> dict[str, str]:
    """Metric key -> why it was left out, for the metrics that raised (by failing sample,
    then metric order)."""
    position = {key: i for i, key in enumerate(partial.keys)}
    return {
        key: f"the {key!r} metric raised {error} on sample {index} (id {sid!r}) and was left "
        "out of the results rather than silently scoring zero"
        for key, (index, sid, error) in sorted(
            partial.failed.items(), key=lambda item: (item[1][0], position[item[0]])
        )
    }


def _no_samples(reader_skipped: object) -> None:
    """Refuse a pass over no samples (saying how many malformed lines a reader skipped)."""
    skipped_note = ""
    if isinstance(reader_skipped, list) and reader_skipped:
        skipped_note = f" ({len(reader_skipped)} malformed lines were skipped)"
    raise NoSamplesError(
        "evaluate_rag got no samples: pass a non-empty list of RagSample objects or "
        f"mappings (or a JSONL file with at least one valid sample){skipped_note}"
    )


def _not_computed(
    partial: RagPartial, resolved: list[RagMetric], explicit: bool, failed: dict[str, str]
) -> tuple[dict[str, str], set[str]]:
    """The metrics nothing could be scored on (or that read fields no sample has), with
    the reason, and the span metrics left out silently; raises for a requested one."""
    dists: dict[str, Distribution] = partial.distributions
    n = partial.n
    not_computed: dict[str, str] = {}
    silent: set[str] = set()
    for m in resolved:
        key = _key(m)
        if key in failed:
            continue
        if not dists[key].count:
            ranked = partial.ranked_any if isinstance(m, _SampleRetrieval) else False
            reason = _reason(m, partial.present, n, ranked)
        else:
            reads = frozenset(getattr(m, "uses", ()))
            if not reads or not reads.isdisjoint(partial.present):
                continue
            reason = _reason(m, partial.present, n, True)
        if explicit:
            raise InvalidInputError(reason)
        if key in SPAN_METRICS and not dists[key].count:
            silent.add(key)  # an opt-in default: no note for runs without spans
            continue
        not_computed[key] = reason
    return not_computed, silent


def _doc_ids_note(partial: RagPartial, resolved: list[RagMetric], dropped: set[str]) -> list[str]:
    """The doc-ids warning (evaluate_run's rule, per sample) when every retrieval score is
    0 and no scored ``retrieved_ids`` ranking holds a doc its sample judges; else none."""
    dists = partial.distributions
    retrieval_keys = [
        _key(m) for m in resolved if isinstance(m, _SampleRetrieval) and _key(m) not in dropped
    ]
    if (
        not retrieval_keys
        or partial.judged_doc
        or not partial.retrieved
        or any(dists[key].mean() for key in retrieval_keys)
    ):
        return []
    ids_log = WarningLog()
    note_unjudged_docs(
        ids_log,
        partial.retrieved,
        [d for ranking in partial.examples for d in ranking],
        stage="samples",
        scores=f"every retrieval score ({', '.join(retrieval_keys)}) of the "
        f"{partial.unjudged} sample(s) scored on retrieved_ids",
        run="their retrieved_ids",
        truth="their relevance/reference_ids",
    )
    return list(ids_log.entries)
