"""One pass over samples: partial results that merge (``rag_partial``) and the report made
from them (``rag_report``); the streaming and Dask paths use the same two steps."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmeter.aggregate import BLOCK, Distribution, IdRoots, StreamKeys
from ragmeter.errors import InvalidInputError, NoSamplesError, RagmeterError, check_k
from ragmeter.evaluation import sample_retrieval as _sample_retrieval
from ragmeter.evaluation._rag_rules import (
    SPAN_METRICS,
    _Group,
    _has,
    _key,
    _meant,
    _reason,
    _resolve,
    _retrieval_groups,
    _SampleRetrieval,
    _scorer,
)
from ragmeter.evaluation.retrieval import _note_unjudged_docs, score_ranking
from ragmeter.io.scores import ScoreWriter
from ragmeter.metrics.base import RagMetric
from ragmeter.report import RagEvalReport, WarningLog
from ragmeter.schema import RagSample, SampleKeys, SampleLike, coerce_sample


@dataclass
class RagPartial:
    """What :func:`evaluate_rag` holds after scoring some of the samples; mergeable.

    :func:`rag_partial` scores one part of the samples (a Dask partition, a file, a
    shard) into a partial, :meth:`merge` folds in the partial of the part that comes
    next, and :func:`rag_report` turns the partial of all the parts into the report one
    pass over all the samples gives, bit for bit: the means come from exact sums
    (:class:`~ragmeter.aggregate.Distribution`), the repeated-id rule is applied to the ids
    in order, and a metric that raised is reported at its first failing sample. Partials
    pickle, so they can be made in other processes or on other machines
    (:mod:`ragmeter.dask`).
    """

    keys: list[str]
    """The metric keys scored, in order."""
    n: int = 0
    """How many samples were scored."""
    distributions: dict[str, Distribution] = field(default_factory=dict)
    """One mergeable aggregate per key."""
    present: set[str] = field(default_factory=set)
    """Fields some sample had (to explain a metric nothing could be scored on)."""
    ranked_any: bool = False
    """Whether some sample had a ranking for the retrieval metrics."""
    failed: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    """Metric key -> (index of the first sample it raised on, that sample's id, the error)."""
    lookalikes: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(unknown key, the field it probably meant) -> how many samples had it."""
    judged_doc: bool = False
    """Whether some scored ``retrieved_ids`` ranking holds a doc its sample judges."""
    unjudged: int = 0
    """Samples whose scored ``retrieved_ids`` ranking holds no judged doc (while none did)."""
    retrieved: int = 0
    """How many doc ids those rankings hold."""
    examples: list[list[str]] = field(default_factory=list)
    """Their first rankings, in order, until :data:`_EXAMPLES` distinct ids (the message's)."""
    rows: list[tuple[str, dict[str, float | None], dict[str, Any] | None]] | None = None
    """Per-sample ``(id as given, scores, details)`` in order when kept, else ``None``."""
    roots: IdRoots | None = None
    """The ids' root digests when per-sample scores are not kept (to count repeated ids)."""

    def merge(self, later: RagPartial) -> None:
        """Fold in the partial of the samples that come right after this one's.

        Raises :class:`~ragmeter.errors.InvalidInputError` for partials of other metrics or
        of another ``keep``.
        """
        if later.keys != self.keys or (later.rows is None) != (self.rows is None):
            raise InvalidInputError(
                "cannot merge partials scored with other metrics or another keep= "
                f"({self.keys} keep={self.rows is not None} and {later.keys} "
                f"keep={later.rows is not None})"
            )
        for key, (index, sid, error) in later.failed.items():
            if key not in self.failed:
                self.failed[key] = (self.n + index, sid, error)
        self.n += later.n
        for key, dist in later.distributions.items():
            self.distributions[key].merge(dist)
        self.present |= later.present
        self.ranked_any = self.ranked_any or later.ranked_any
        self.lookalikes.update(later.lookalikes)
        self.judged_doc = self.judged_doc or later.judged_doc
        self.unjudged += later.unjudged
        self.retrieved += later.retrieved
        self.examples = [] if self.judged_doc else _prune(self.examples + later.examples)
        if self.rows is not None and later.rows is not None:
            self.rows.extend(later.rows)
        if self.roots is not None and later.roots is not None:
            self.roots.merge(later.roots)


_EXAMPLES = 4
"""Distinct doc ids the doc-ids warning needs (it shows three and ``...``)."""


def _prune(examples: list[list[str]]) -> list[list[str]]:
    """The first rankings that bring a new id, until :data:`_EXAMPLES` distinct ids are seen
    (each ranking holds its first :data:`_EXAMPLES` distinct ids): at most that many short
    lists, giving the message the same ids however the samples were split and merged."""
    kept: list[list[str]] = []
    seen: set[str] = set()
    for ranking in examples:
        if len(seen) >= _EXAMPLES:
            break
        if not seen.issuperset(ranking):
            kept.append(ranking)
            seen.update(ranking)
    return kept


def rag_partial(
    samples: Iterable[SampleLike],
    *,
    metrics: Sequence[str | RagMetric] | str | RagMetric | None = None,
    k: int = 5,
    prices: Mapping[str, float] | None = None,
    keep: bool = False,
) -> RagPartial:
    """Score a part of the samples into a mergeable :class:`RagPartial`, with no report yet.

    ``metrics``, ``k`` and ``prices`` are :func:`evaluate_rag`'s (no judge metrics);
    ``keep=True`` keeps the per-sample scores and details. Nothing is refused that needs
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
    check_k(k)
    resolved, _ = _resolve(metrics, k, prices)
    keys = SampleKeys()
    roots = IdRoots()
    rows: dict[str, dict[str, float | None]] = {}
    details: dict[str, dict[str, Any]] = {}
    raw: list[str] | None = [] if keep else None
    partial = _score(samples, resolved, k, keep, None, keys, roots, rows, details, raw)
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
    k: int = 5,
    prices: Mapping[str, float] | None = None,
    warnings: Iterable[str] | WarningLog | None = None,
    skipped_lines: int = 0,
    repeats: int | None = None,
) -> RagEvalReport:
    """The report of the merged :class:`RagPartial` of all the samples: what
    ``evaluate_rag(samples, per_sample=keep)`` returns, bit for bit (the partial is consumed).

    ``metrics``, ``k`` and ``prices`` must be those the partials were scored with
    (``metrics=None`` decides, as :func:`evaluate_rag` does, which defaults are left
    out). When per-sample scores were not kept and ``partial.roots.repeated()`` is not
    empty, ``repeats`` must say how many sample ids repeat an earlier one (see
    :class:`~ragmeter.aggregate.IdRoots`). Raises what :func:`evaluate_rag` raises at the
    end of a pass: :class:`~ragmeter.errors.NoSamplesError` when no part had a sample,
    :class:`~ragmeter.errors.InvalidInputError` for a requested metric no sample could be
    scored on, or other metrics than the partial's.
    """
    check_k(k)
    if skipped_lines is None or isinstance(skipped_lines, bool) or skipped_lines < 0:
        raise InvalidInputError(f"skipped_lines must be an int >= 0, got {skipped_lines!r}")
    resolved, explicit = _resolve(metrics, k, prices)
    if [_key(m) for m in resolved] != partial.keys:
        raise InvalidInputError(
            f"the partial holds the metrics {partial.keys}, not {[_key(m) for m in resolved]}: "
            "pass rag_report the metrics, k and prices the partials were scored with"
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
        partial, resolved, explicit, k, log, skipped_lines, None, count, rows, details, None
    )
    if partial.rows is None:
        report.extra["per_sample"] = "not kept"
    return report


def _score(
    samples: Iterable[SampleLike],
    resolved: list[RagMetric],
    k: int,
    keep: bool,
    writer: ScoreWriter | None,
    keys: SampleKeys,
    stream_keys: StreamKeys | IdRoots,
    rows: dict[str, dict[str, float | None]],
    details: dict[str, dict[str, Any]],
    raw_ids: list[str] | None,
) -> RagPartial:
    """evaluate_rag's one pass: score every sample into ``rows``/``details`` (kept) or the
    distributions, and return the mergeable state (``raw_ids`` collects the ids as given)."""
    retrieval = [m for m in resolved if isinstance(m, _SampleRetrieval)]
    groups = _retrieval_groups(retrieval, k)
    scored = [(_key(m), _scorer(m), m) for m in resolved if not isinstance(m, _SampleRetrieval)]
    # Which fields occur on some sample (to explain a metric nothing could be scored on).
    # A field only read through ``uses`` stops being looked for once its group is seen.
    needed: set[str] = set()
    uses_groups: list[frozenset[str]] = []
    for m in resolved:
        needed |= m.needs
        uses = frozenset(getattr(m, "uses", ()))
        if uses:
            uses_groups.append(uses)
    pending: set[str] = needed.union(*uses_groups)
    present: set[str] = set()

    failed: dict[str, tuple[int, str, str]] = {}
    lookalikes: Counter[tuple[str, str]] = Counter()
    blank = dict.fromkeys([_key(m) for m in resolved])
    dists = {key: Distribution() for key in blank}
    buffers: dict[str, list[float]] = {key: [] for key in blank}
    active = [(key, score, m.name, buffers[key].append) for key, score, m in scored]
    ranked_any = False
    judged_doc = False
    unjudged = retrieved = 0
    examples: list[list[str]] = []
    block_ids: list[str] = []
    block_rows: list[dict[str, float | None]] = []
    block_details: list[dict[str, Any] | None] = []

    def flush() -> None:
        for key, buffer in buffers.items():
            if buffer:
                dists[key].add_trusted(buffer)
                buffer.clear()
        if block_ids:
            sids = stream_keys.resolve(block_ids)
            if writer is not None:
                writer.write(zip(sids, block_rows, block_details, strict=True))
            block_ids.clear()
            block_rows.clear()
            block_details.clear()

    n = 0
    for index, item in enumerate(samples):
        sample = item if type(item) is RagSample else coerce_sample(item, index=index)
        n += 1
        row = dict(blank)
        sample_details: dict[str, Any] | None = None
        if keep:
            sid = keys(sample.id)
            rows[sid] = row
            if raw_ids is not None:
                raw_ids.append(sample.id)
        else:
            sid = sample.id
            block_ids.append(sid)
            if writer is not None:
                block_rows.append(row)
        if sample.metadata:
            for key in sample.metadata:
                meant = _meant(key)
                if meant is not None:
                    lookalikes[(key, meant)] += 1
        if pending:
            found = [f for f in pending if _has(sample, f)]
            if found:
                present.update(found)
                pending.difference_update(found)
                for group in uses_groups:
                    if not group.isdisjoint(present):
                        pending.difference_update(group - needed)
        for entry in active:
            key, score, name, append = entry
            try:
                value, detail = score(sample)
                # ``v - v`` is 0.0 for every finite float, NaN for NaN and the infinities
                if value is not None and (type(value) is not float or value - value != 0.0):
                    value = float(value)
                    if not math.isfinite(value):
                        raise ValueError("returned NaN" if value != value else f"returned {value}")
            except RagmeterError:
                raise
            except Exception as exc:
                failed[key] = (index, sample.id, repr(exc))
                active = [e for e in active if e is not entry]  # the loop keeps the old list
                continue
            if value is not None:
                row[key] = value
                append(value)
                if detail is not None:
                    if sample_details is None:
                        sample_details = {}
                    sample_details[name] = detail
        if groups:
            ranking = _sample_retrieval.sample_ranking(sample)
            if ranking is not None:
                ranked_any = True
                scored_ranking = _score_retrieval(sid, ranking, groups, row, buffers)
                if (
                    scored_ranking
                    and not judged_doc
                    and ranking[0]
                    and sample.retrieved_ids is not None  # ids, not rag-eval's texts
                ):
                    ranked, judgements = ranking
                    if any(d in judgements for d in ranked):
                        judged_doc = True
                        examples = []
                    else:
                        unjudged += 1
                        retrieved += len(ranked)
                        examples = _prune([*examples, list(dict.fromkeys(ranked))[:_EXAMPLES]])
        if keep:
            if sample_details is not None:
                details[sid] = sample_details
        elif writer is not None:
            block_details.append(sample_details)
        if n % BLOCK == 0:
            flush()
    flush()

    return RagPartial(
        keys=list(blank),
        n=n,
        distributions=dists,
        present=present,
        ranked_any=ranked_any,
        failed=failed,
        lookalikes=lookalikes,
        judged_doc=judged_doc,
        unjudged=unjudged,
        retrieved=retrieved,
        examples=examples,
    )


def _report(
    partial: RagPartial,
    resolved: list[RagMetric],
    explicit: bool,
    k: int,
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
    present = partial.present
    ranked_any = partial.ranked_any
    position = {key: i for i, key in enumerate(partial.keys)}
    failed = {
        key: f"the {key!r} metric raised {error} on sample {index} (id {sid!r}) and was left "
        "out of the results rather than silently scoring zero"
        for key, (index, sid, error) in sorted(
            partial.failed.items(), key=lambda item: (item[1][0], position[item[0]])
        )
    }
    if n == 0:
        skipped_note = ""
        if isinstance(reader_skipped, list) and reader_skipped:
            skipped_note = f" ({len(reader_skipped)} malformed lines were skipped)"
        raise NoSamplesError(
            "evaluate_rag got no samples: pass a non-empty list of RagSample objects or "
            f"mappings (or a JSONL file with at least one valid sample){skipped_note}"
        )

    not_computed: dict[str, str] = {}
    silent: set[str] = set()
    for m in resolved:
        key = _key(m)
        if key in failed:
            continue
        if not dists[key].count:
            reason = _reason(
                m, present, n, ranked_any if isinstance(m, _SampleRetrieval) else False
            )
        else:
            reads = frozenset(getattr(m, "uses", ()))
            if not reads or not reads.isdisjoint(present):
                continue
            reason = _reason(m, present, n, True)
        if explicit:
            raise InvalidInputError(reason)
        if key in SPAN_METRICS and not dists[key].count:
            silent.add(key)  # an opt-in default: no note for runs without spans
            continue
        not_computed[key] = reason

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
    retrieval_keys = [
        _key(m) for m in resolved if isinstance(m, _SampleRetrieval) and _key(m) not in dropped
    ]
    if (
        retrieval_keys
        and not partial.judged_doc
        and partial.retrieved
        and not any(dists[key].mean() for key in retrieval_keys)
    ):
        ids_log = WarningLog()
        _note_unjudged_docs(
            ids_log,
            partial.retrieved,
            [d for ranking in partial.examples for d in ranking],
            stage="samples",
            scores=f"every retrieval score ({', '.join(retrieval_keys)}) of the "
            f"{partial.unjudged} sample(s) scored on retrieved_ids",
            run="their retrieved_ids",
            truth="their relevance/reference_ids",
        )
        log.extend(ids_log.entries)
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
        extra["k"] = k
    if not_computed:
        extra["not_computed"] = not_computed
    better = {_key(m): bool(m.higher_is_better) for m in resolved}
    return RagEvalReport(
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


def _score_retrieval(
    sid: str,
    ranking: tuple[list[str], dict[str, float]],
    groups: list[_Group],
    row: dict[str, float | None],
    buffers: dict[str, list[float]],
) -> bool:
    """Score one sample's ranking at every cut-off, as evaluate_run scores a query; whether
    some metric scored it (a sample with no relevant judgement is not scored)."""
    ranked, judgements = ranking
    scored = False
    for cut, names, codes, picks, keys in groups:
        if codes:
            values = score_ranking(sid, ranked, judgements, (cut,), codes, None)
            if values is None:
                continue
            scored = True
            for pick, key in zip(picks, keys, strict=True):
                value = values[pick]
                row[key] = value
                buffers[key].append(value)
            continue
        results = _sample_retrieval.score_rankings({sid: ranked}, {sid: judgements}, names, cut)
        for name, key in zip(names, keys, strict=True):
            got = results[name].get(sid)
            if got is not None:
                scored = True
                row[key] = got
                buffers[key].append(got)
    return scored
