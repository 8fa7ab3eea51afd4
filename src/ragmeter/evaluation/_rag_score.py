"""Scoring one pass over RAG samples: every metric on each sample, into mergeable state.

:func:`_score` is evaluate_rag's pass (and :func:`~ragmeter.evaluation.rag.rag_partial`'s):
each sample's scores go into its row (kept in memory or written to a file) and, a block at
a time, into one :class:`~ragmeter.aggregate.Distribution` per metric; what the end of the
pass needs to explain and warn (fields seen, metrics that raised, lookalike keys, rankings
that judge none of their docs) is gathered on the way into a
:class:`~ragmeter.evaluation._rag_partial.RagPartial`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from ragmeter.aggregate import BLOCK, Distribution, IdRoots, StreamKeys
from ragmeter.errors import RagmeterError
from ragmeter.evaluation import sample_retrieval as _sample_retrieval
from ragmeter.evaluation._rag_partial import _EXAMPLES, RagPartial, _prune
from ragmeter.evaluation._rag_rules import (
    Scorer,
    _Group,
    _has,
    _key,
    _meant,
    _retrieval_groups,
    _SampleRetrieval,
    _scorer,
)
from ragmeter.evaluation.scoring import score_ranking
from ragmeter.io.scores import ScoreWriter
from ragmeter.metrics.base import RagMetric
from ragmeter.report import SampleDigests
from ragmeter.schema import RagSample, SampleKeys, SampleLike, coerce_sample

_Active = tuple[str, Scorer, str, Callable[[float], None]]
"""A metric still scored: (key, scorer, name, append to its block buffer)."""


class _Pass:
    """The state of one pass: what :func:`_score` gathers besides the rows."""

    def __init__(
        self,
        resolved: list[RagMetric],
        k: int,
        writer: ScoreWriter | None,
        stream_keys: StreamKeys | IdRoots,
    ) -> None:
        self.writer = writer
        self.stream_keys = stream_keys
        retrieval = [m for m in resolved if isinstance(m, _SampleRetrieval)]
        self.groups = _retrieval_groups(retrieval, k)
        # Which fields occur on some sample (to explain a metric nothing could be scored on).
        # A field only read through ``uses`` stops being looked for once its group is seen.
        self.needed: set[str] = set()
        self.uses_groups: list[frozenset[str]] = []
        for m in resolved:
            self.needed |= m.needs
            uses = frozenset(getattr(m, "uses", ()))
            if uses:
                self.uses_groups.append(uses)
        self.pending: set[str] = self.needed.union(*self.uses_groups)
        self.present: set[str] = set()

        self.failed: dict[str, tuple[int, str, str]] = {}
        self.lookalikes: Counter[tuple[str, str]] = Counter()
        self.blank: dict[str, float | None] = dict.fromkeys([_key(m) for m in resolved])
        self.dists = {key: Distribution() for key in self.blank}
        self.buffers: dict[str, list[float]] = {key: [] for key in self.blank}
        self.active: list[_Active] = [
            (_key(m), _scorer(m), m.name, self.buffers[_key(m)].append)
            for m in resolved
            if not isinstance(m, _SampleRetrieval)
        ]
        self.ranked_any = False
        self.judged_doc = False
        self.unjudged = 0
        self.retrieved = 0
        self.examples: list[list[str]] = []
        self.block_ids: list[str] = []
        self.block_rows: list[dict[str, float | None]] = []
        self.block_details: list[dict[str, Any] | None] = []
        self.truth = SampleDigests()  # the dataset fingerprint, built as the samples pass

    def flush(self) -> None:
        """Fold the block's scores into the distributions and write its rows (if a file)."""
        for key, buffer in self.buffers.items():
            if buffer:
                self.dists[key].add_trusted(buffer)
                buffer.clear()
        if self.block_ids:
            sids = self.stream_keys.resolve(self.block_ids)
            if self.writer is not None:
                self.writer.write(zip(sids, self.block_rows, self.block_details, strict=True))
            self.block_ids.clear()
            self.block_rows.clear()
            self.block_details.clear()

    def note_fields(self, sample: RagSample) -> None:
        """Count the sample's lookalike keys and note which looked-for fields it has."""
        if sample.metadata:
            for key in sample.metadata:
                meant = _meant(key)
                if meant is not None:
                    self.lookalikes[(key, meant)] += 1
        pending = self.pending
        if pending:
            found = [f for f in pending if _has(sample, f)]
            if found:
                self.present.update(found)
                pending.difference_update(found)
                for group in self.uses_groups:
                    if not group.isdisjoint(self.present):
                        pending.difference_update(group - self.needed)

    def score_metrics(
        self, index: int, sample: RagSample, row: dict[str, float | None]
    ) -> dict[str, Any] | None:
        """Score the sample on every metric still active (not retrieval); its details.

        A metric that raises anything but a :class:`~ragmeter.errors.RagmeterError`, or
        returns NaN or an infinity, is recorded in ``failed`` and scored no more."""
        sample_details: dict[str, Any] | None = None
        for entry in self.active:
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
                self.failed[key] = (index, sample.id, repr(exc))
                # the loop keeps the old list
                self.active = [e for e in self.active if e is not entry]
                continue
            if value is not None:
                row[key] = value
                append(value)
                if detail is not None:
                    if sample_details is None:
                        sample_details = {}
                    sample_details[name] = detail
        return sample_details

    def score_ranking(self, sample: RagSample, sid: str, row: dict[str, float | None]) -> None:
        """Score the sample's ranking on the retrieval metrics, and note whether its
        ``retrieved_ids`` hold a doc it judges (for the doc-ids warning)."""
        ranking = _sample_retrieval.sample_ranking(sample)
        if ranking is None:
            return
        self.ranked_any = True
        scored_ranking = _score_retrieval(sid, ranking, self.groups, row, self.buffers)
        if (
            scored_ranking
            and not self.judged_doc
            and ranking[0]
            and sample.retrieved_ids is not None  # ids, not rag-eval's texts
        ):
            ranked, judgements = ranking
            if any(d in judgements for d in ranked):
                self.judged_doc = True
                self.examples = []
            else:
                self.unjudged += 1
                self.retrieved += len(ranked)
                self.examples = _prune([*self.examples, list(dict.fromkeys(ranked))[:_EXAMPLES]])

    def partial(self, n: int) -> RagPartial:
        """The mergeable state after ``n`` samples (call :meth:`flush` first)."""
        return RagPartial(
            keys=list(self.blank),
            n=n,
            distributions=self.dists,
            present=self.present,
            ranked_any=self.ranked_any,
            failed=self.failed,
            lookalikes=self.lookalikes,
            judged_doc=self.judged_doc,
            unjudged=self.unjudged,
            retrieved=self.retrieved,
            examples=self.examples,
            truth=self.truth,
        )


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
    *,
    defer: bool = False,
) -> RagPartial:
    """evaluate_rag's one pass: score every sample into ``rows``/``details`` (kept) or the
    distributions, and return the mergeable state (``raw_ids`` collects the ids as given).
    The ground truth is hashed as the samples pass (a stream: constant memory), or, with
    ``defer`` (``samples`` is a list or tuple), when the fingerprint is first asked for."""
    state = _Pass(resolved, k, writer, stream_keys)
    if defer and isinstance(samples, (list, tuple)):
        state.truth = SampleDigests(source=samples)
    else:
        state.truth = SampleDigests(keep_items=keep)
    hash_truth = None if state.truth.source is not None else state.truth.add
    blank = state.blank
    n = 0
    for index, item in enumerate(samples):
        sample = item if type(item) is RagSample else coerce_sample(item, index=index)
        n += 1
        if hash_truth is not None:
            hash_truth(sample)
        row = dict(blank)
        if keep:
            sid = keys(sample.id)
            rows[sid] = row
            if raw_ids is not None:
                raw_ids.append(sample.id)
        else:
            sid = sample.id
            state.block_ids.append(sid)
            if writer is not None:
                state.block_rows.append(row)
        state.note_fields(sample)
        sample_details = state.score_metrics(index, sample, row)
        if state.groups:
            state.score_ranking(sample, sid, row)
        if keep:
            if sample_details is not None:
                details[sid] = sample_details
        elif writer is not None:
            state.block_details.append(sample_details)
        if n % BLOCK == 0:
            state.flush()
    state.flush()
    return state.partial(n)


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
