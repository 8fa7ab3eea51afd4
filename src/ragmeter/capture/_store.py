"""The sample store every adapter fills: O(1) views, atomic drain, scoring what it holds."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any, Literal, overload

from ragmeter._types import FailedQueries
from ragmeter.capture._record import RunRecord
from ragmeter.capture._scope import Scope
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.capture_rules import Hints, check_stage, missing_rule
from ragmeter.schema import RagSample, samples_to_qrels, samples_to_run

if TYPE_CHECKING:
    from ragmeter.evaluation.retrieval import MissingQueries
    from ragmeter.report import RagEvalReport, RetrievalEvalReport
    from ragmeter.stages import StageReport

__all__ = ["Entry", "SampleStore", "SampleView", "materialize", "missing_rule"]


Entry = RagSample | RunRecord


def materialize(entry: Entry) -> RagSample:
    return entry if isinstance(entry, RagSample) else entry.to_sample()


class SampleView(Sequence[RagSample]):
    """The samples a store held when it was read: a read-only sequence, made in O(1).

    Reading ``store.samples`` copies nothing; a sample is built (and kept) when it is first
    indexed or iterated. Samples added later, or a later ``clear()``/``drain()``, do not
    change a view already taken. Compares equal to a list of the same samples.
    """

    __slots__ = ("_items", "_start", "_stop")

    def __init__(self, items: list[Entry], start: int, stop: int) -> None:
        self._items = items
        self._start = start
        self._stop = stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> RagSample: ...

    @overload
    def __getitem__(self, index: slice) -> list[RagSample]: ...

    def __getitem__(self, index: int | slice) -> RagSample | list[RagSample]:
        n = self._stop - self._start
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(n))]
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"sample index {index} out of range for {n} samples")
        return materialize(self._items[self._start + i])

    def __iter__(self) -> Iterator[RagSample]:
        for entry in islice(self._items, self._start, self._stop):
            yield materialize(entry)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (SampleView, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


class SampleStore:
    """A thread-safe store of captured samples (the adapters' shared surface).

    Adapters add :class:`RunRecord` objects (built into samples when first read); anything
    may add finished :class:`RagSample` objects. ``max_samples`` bounds memory: when set,
    the oldest samples are dropped past it (and ``dropped`` counts them; their memory is
    released in batches, so at most twice ``max_samples`` are held). ``hints`` is how
    the adapter's users fix id problems; the warnings of :meth:`evaluate_retrieval` quote
    it. Reading :attr:`samples` copies nothing; :meth:`drain` takes and removes every
    stored sample in one step, so a sample added meanwhile is never lost.

    >>> store = SampleStore()
    >>> store.add(RagSample(id="q1", retrieved_ids=["d1", "d2"], reference_ids=["d2"]))
    >>> store.add(RagSample(id="q1", retrieved_ids=["d2"]))
    >>> store.to_run()
    {'q1': ['d1', 'd2'], 'q1#2': ['d2']}
    >>> store.evaluate_retrieval({"q1": {"d2": 1}}, k_values=(2,), metrics=["recall"]).metrics
    {'recall@2': 1.0}
    >>> [s.id for s in store.drain()], len(store)
    (['q1', 'q1'], 0)
    """

    def __init__(self, *, max_samples: int | None = None, hints: Hints | None = None) -> None:
        if max_samples is not None and (
            isinstance(max_samples, bool) or not isinstance(max_samples, int) or max_samples < 1
        ):
            raise InvalidInputError(
                f"max_samples must be an int >= 1 (or None: no limit), got {max_samples!r}"
            )
        self._lock = threading.Lock()
        self._items: list[Entry] = []
        self._start = 0  # entries before it were evicted by max_samples
        self.max_samples = max_samples
        self.dropped = 0
        self.hints = hints if hints is not None else Hints()

    def add(self, sample: RagSample | RunRecord) -> None:
        """Store one finished sample (or run record); a record made under a batch scope takes
        its query's id first (:meth:`RunRecord.claim_batch`)."""
        scope = sample.scope if isinstance(sample, RunRecord) else None
        if isinstance(scope, Scope) and scope.batch is not None:
            sample.claim_batch()  # type: ignore[union-attr]  # a RunRecord: it has a scope
            scope = sample.scope  # type: ignore[union-attr]
        with self._lock:
            items = self._items
            items.append(sample)
            if self.max_samples is not None and len(items) - self._start > self.max_samples:
                self._start += 1
                self.dropped += 1
                if self._start >= max(self.max_samples, 16):
                    # a new list (views taken before keep the old one unchanged); copying
                    # max_samples entries every max_samples evictions is O(1) per sample
                    self._items = items[self._start :]
                    self._start = 0
        if isinstance(scope, Scope) and scope._records is not None:
            scope._records.append((self, sample))
        if isinstance(sample, RunRecord):
            sample.settle()

    def extend(self, samples: Iterable[RagSample | RunRecord]) -> None:
        """Store several samples."""
        for s in samples:
            self.add(s)

    @property
    def samples(self) -> SampleView:
        """The stored samples in completion order (a :class:`SampleView`: no copy)."""
        with self._lock:
            return SampleView(self._items, self._start, len(self._items))

    def drain(self) -> list[RagSample]:
        """Remove every stored sample and return them, in one step (completion order).

        A run that finishes while ``drain`` runs is either returned or stays for the next
        call, never lost (unlike reading :attr:`samples` and then calling :meth:`clear`).
        Runs still in flight are not samples yet; they are stored when they finish.
        """
        with self._lock:
            items, start = self._items, self._start
            self._items, self._start = [], 0
        return [materialize(e) for e in islice(items, start, None)]

    def clear(self) -> None:
        """Forget every stored sample (and the ``dropped`` count)."""
        with self._lock:
            self._items, self._start = [], 0
            self.dropped = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._items) - self._start

    def to_run(self, stage: str | None = None) -> dict[str, list[str]]:
        """``{sample_id: [doc_id, ...]}``, ready for :func:`ragmeter.evaluate_run`: each
        sample's ``retrieved_ids`` (the ``context`` stage unless the adapter was told
        otherwise), or with ``stage`` that stage's ranking (``"context"``, ``"bm25"``...).

        A sample whose id an earlier sample already has is keyed ``"<id>#2"``, ``"<id>#3"``...
        (as in ``evaluate_rag``'s ``per_sample``); samples without that ranking are left out.
        """
        return samples_to_run(self.samples, stage=stage)

    def to_qrels(self) -> dict[str, dict[str, float]]:
        """``{sample_id: {doc_id: grade}}`` from the relevance the samples carry (same keys)."""
        return samples_to_qrels(self.samples)

    def to_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write the samples as JSONL (see :mod:`ragmeter.io.jsonl`); returns the count."""
        from ragmeter.io.jsonl import write_jsonl

        return write_jsonl(self.samples, path)

    def evaluate(self, **kwargs: Any) -> RagEvalReport:
        """Score the captured samples with :func:`ragmeter.evaluate_rag` (kwargs pass through);
        a store that dropped samples past ``max_samples`` says so in the report's warnings."""
        from ragmeter.evaluation.rag import evaluate_rag

        samples = self.samples
        report = evaluate_rag(samples, **kwargs)
        if self.dropped:
            report.warnings.append(
                f"CAUTION [capture] (max_samples): {self.dropped} captured samples were dropped "
                f"because the store keeps at most max_samples={self.max_samples} (the oldest go "
                f"first); the report covers the {len(samples)} samples kept"
            )
            report.extra["capture_dropped"] = self.dropped
        return report

    @overload
    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        stage: str | None = None,
        stages: Literal[False, None] = None,
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> RetrievalEvalReport: ...

    @overload
    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        stage: str | None = None,
        stages: Literal[True] | Sequence[str],
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> StageReport: ...

    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        stage: str | None = None,
        stages: bool | Sequence[str] | None = None,
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> RetrievalEvalReport | StageReport:
        """Score every captured ranking with :func:`ragmeter.evaluate_run` (kwargs pass through).

        ``qrels`` defaults to the relevance carried by the samples themselves. The ranking
        scored is each sample's ``retrieved_ids`` (its ``context`` stage, what reached the
        generator, unless the adapter was told otherwise), or with ``stage="<name>"`` that
        stage's. ``stages=True`` (or a list of stage names) scores every stage instead and
        returns a :class:`~ragmeter.stages.StageReport`: one row per stage, and what each
        step gained or lost against the one(s) it consumed, with a paired confidence
        interval. The rules:

        * a judged query that was never captured scores 0 and counts in the mean
          (``missing_queries="zero"``, trec_eval ``-c``, the default), or is left out
          (``"skip"``; the deprecated ``only_captured=True`` says the same);
        * a captured sample whose run failed before a ranking was captured (``error`` set,
          ``retrieved_ids`` ``None``) scores 0 and counts (``failed_queries="zero"``) or is
          left out (``"skip"``); either way it is listed in ``report.extra["capture"]
          ["failed"]`` and a warning counts it. A captured sample that did not fail but has
          no ranking scores 0 (a warning says so);
        * a repeated sample id is scored under ``"<id>#2"``... against the qrels of ``<id>``;
        * no captured sample id among the qrels ids raises
          :class:`~ragmeter.errors.InvalidInputError`; fewer than half, or retrieved doc ids
          that (nearly) never appear in the qrels, give a warning that names the fix.

        Every such warning is in ``report.warnings`` and logged (``hints.logger``);
        ``report.extra["capture"]`` holds the counts (JSON-ready).
        """
        if stages:
            from ragmeter.stages import evaluate_stages

            missing_queries = missing_rule(only_captured, missing_queries, stacklevel=2)
            if stage is not None:
                raise InvalidInputError(
                    "pass stage= (score one stage) or stages= (score several), not both"
                )
            return evaluate_stages(
                self,
                qrels,
                stages=None if stages is True else list(stages),
                missing_queries=missing_queries,
                failed_queries=failed_queries,
                **kwargs,
            )
        from ragmeter.evaluation.captured import evaluate_captured

        if stage is not None:
            stage = check_stage(stage)
        return evaluate_captured(
            self.samples,
            qrels,
            stage=stage,
            missing_queries=missing_rule(only_captured, missing_queries, stacklevel=2),
            failed_queries=failed_queries,
            hints=self.hints,
            dropped=self.dropped,
            max_samples=self.max_samples,
            **kwargs,
        )
