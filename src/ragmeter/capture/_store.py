"""The sample store every adapter fills: O(1) views, atomic drain, scoring with its rules."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any, Literal, overload

from ragmeter.capture._record import NO_CONTEXT, RunRecord
from ragmeter.capture._rules import (
    FailedQueries,
    Hints,
    check_failed,
    check_stage,
    doc_id_problem,
    sample_id_problem,
)
from ragmeter.capture._scope import Scope
from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.schema import RagSample, sample_keys, samples_to_qrels, samples_to_run

if TYPE_CHECKING:
    from ragmeter.evaluation.retrieval import MissingQueries
    from ragmeter.report import RagEvalReport, RetrievalEvalReport
    from ragmeter.stages import StageReport

__all__ = ["Entry", "SampleStore", "SampleView", "materialize"]


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
        from ragmeter.evaluation.retrieval import evaluate_run
        from ragmeter.report import WarningLog

        if stages:
            from ragmeter.stages import evaluate_stages

            missing_queries = missing_rule(only_captured, missing_queries, stacklevel=2)
            only_captured = False

            if stage is not None:
                raise InvalidInputError(
                    "pass stage= (score one stage) or stages= (score several), not both"
                )
            return evaluate_stages(
                self,
                qrels,
                stages=None if stages is True else list(stages),
                only_captured=only_captured,
                missing_queries=missing_queries,
                failed_queries=failed_queries,
                **kwargs,
            )
        if stage is not None:
            stage = check_stage(stage)
        missing: Any = missing_rule(only_captured, missing_queries, stacklevel=2) or "zero"
        failed_rule = check_failed(failed_queries)
        samples = list(self.samples)
        if not samples:
            raise InvalidInputError(self._nothing_captured())
        keys = sample_keys([s.id for s in samples])
        notes: list[tuple[str, str]] = []
        judged = self._judgements(qrels, samples, keys, notes)

        run: dict[str, list[str]] = {}
        failed: list[str] = []
        unranked: list[str] = []
        troubled: list[str] = []
        for key, sample in zip(keys, samples, strict=True):
            ids = sample.retrieved_ids if stage is None else sample.ranking(stage)
            if ids is not None:
                run[key] = list(ids)
            elif key in judged:
                (failed if sample.error is not None else unranked).append(key)
            if key in judged and sample.metadata.get("capture_errors"):
                troubled.append(key)
        for key in unranked:
            run[key] = []
        for key in failed:
            if failed_rule == "zero":
                run[key] = []
            else:
                del judged[key]
        if failed and failed_rule == "skip" and not any(q in run for q in judged):
            raise InvalidInputError(
                f"every captured sample the qrels judge failed before a ranking was captured "
                f"({some_ids(failed)}; see sample.error), and failed_queries='skip' leaves "
                "them out: nothing is left to score"
            )
        self._note_problems(
            samples, keys, judged, run, failed, failed_rule, unranked, troubled, notes, stage
        )

        log = kwargs.pop("warnings", None)
        if log is None:
            log = WarningLog()
        for source, message in notes:
            log.add("capture", source, message)
            self.hints.logger.warning("ragmeter: %s", message)
        report = evaluate_run(judged, run, missing_queries=missing, warnings=log, **kwargs)
        if any(source == "doc_ids" for source, _ in notes):
            # ours names the fix; the generic one from evaluate_run says less
            report.warnings = [w for w in report.warnings if "[run] (doc_ids)" not in w]
        unjudged = [key for key in run if key not in judged]
        if unjudged and report.missing_queries:
            # not "pass missing_queries='skip'": the judged queries are probably right here,
            # captured under other ids
            report.warnings = [w for w in report.warnings if "[run] (missing_queries)" not in w]
            report.warnings.append(self._forgotten_ids(report.missing_queries, unjudged, missing))
        counts = {s.id: 0 for s in samples}
        for s in samples:
            counts[s.id] += 1
        report.extra["capture"] = {
            "framework": self.hints.framework,
            "stage": stage if stage is not None else "retrieved_ids",
            "samples": len(samples),
            "dropped": self.dropped,
            "failed": failed,
            "failed_queries": failed_rule,
            "unranked": unranked,
            "repeated": {sid: n for sid, n in counts.items() if n > 1},
            "unjudged": sum(1 for key in run if key not in judged),
            "capture_errors": len(troubled),
            "no_context": sum(1 for s in samples if _no_context(s) is not None),
        }
        return report

    def _forgotten_ids(
        self, missing: Sequence[str], unjudged: Sequence[str], rule: MissingQueries
    ) -> str:
        """The missing-queries warning when captured samples are not judged: both are likely
        the same queries under other ids."""
        what = (
            "they score 0 and count in the mean (missing_queries='zero', = trec_eval -c)"
            if rule == "zero"
            else "they are left out of the mean (missing_queries='skip'), "
            "so the mean covers only the queries whose ids were right"
        )
        message = (
            f"{len(missing)} judged queries have no captured sample (e.g. {some_ids(missing)}): "
            f"{what}. {len(unjudged)} captured samples are not judged (e.g. "
            f"{some_ids(unjudged)}): they are probably those queries, captured without their "
            f"query id. {self.hints.sample_id}"
        )
        self.hints.logger.warning("ragmeter: %s", message)
        return f"CAUTION [capture] (missing_queries): {message}"

    def _nothing_captured(self) -> str:
        """Why a store with no sample cannot be scored, and the likely causes."""
        hints = self.hints
        return (
            f"the {hints.name} adapter holds 0 captured samples, so there is no run to "
            "score. Likely causes: the handler was not attached to what ran (pass it in the "
            "framework's callbacks, or run inside `with handler.capture(id=...)`); "
            "record='tagged' keeps only runs that carry an id (capture(id=...) or "
            "ragmeter_id); a capture() scope opened in one thread does not reach work the "
            "pipeline ran in a thread pool started outside it (submit "
            "ragmeter.capture.propagate(fn) instead of fn); or drain()/clear() already took "
            f"the samples. {hints.sample_id}"
        )

    def _judgements(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None,
        samples: Sequence[RagSample],
        keys: Sequence[str],
        notes: list[tuple[str, str]],
    ) -> dict[str, Mapping[str, float]]:
        """The qrels by sample key: a repeat is judged by its id's row; checks the sample ids."""
        judged: dict[str, Mapping[str, float]] = {}
        if qrels is None:
            for key, sample in zip(keys, samples, strict=True):
                own = sample.relevance_map()
                if own is not None:
                    judged[key] = own
            if not judged and samples:
                raise InvalidInputError(
                    "no captured sample carries ground truth (ragmeter_relevance or "
                    "ragmeter_reference_ids), so there is nothing to judge the run against: "
                    "pass qrels={query_id: {doc_id: grade}}"
                )
            return judged
        given = {str(q): row for q, row in qrels.items()}
        if len(given) != len(qrels):
            raise InvalidInputError(
                "two qrels query ids are the same string (e.g. 1 and '1'); keep one of them"
            )
        problem = sample_id_problem([s.id for s in samples], given, self.hints.sample_id)
        if problem is not None:
            fatal, message = problem
            if fatal:
                raise InvalidInputError(message)
            notes.append(("sample_ids", message))
        for key, sample in zip(keys, samples, strict=True):
            if sample.id in given:
                judged[key] = given[sample.id]
        captured = {s.id for s in samples}
        for qid, row in given.items():
            if qid in captured:
                continue
            if qid in judged:
                raise InvalidInputError(
                    f"the qrels query {qid!r} has the key a repeated sample is scored under "
                    f"({qid.rpartition('#')[0]!r} was captured several times); rename that "
                    "query or capture each query once"
                )
            judged[qid] = row
        return judged

    def _note_problems(
        self,
        samples: Sequence[RagSample],
        keys: Sequence[str],
        judged: Mapping[str, Mapping[str, float]],
        run: Mapping[str, Sequence[str]],
        failed: Sequence[str],
        failed_rule: FailedQueries,
        unranked: Sequence[str],
        troubled: Sequence[str],
        notes: list[tuple[str, str]],
        stage: str | None = None,
    ) -> None:
        if self.dropped:
            notes.append(
                (
                    "max_samples",
                    f"{self.dropped} captured samples were dropped because the store keeps at "
                    f"most max_samples={self.max_samples} (the oldest go first); the report "
                    f"covers the {len(samples)} kept. Raise max_samples or drain() more often "
                    "to score every run.",
                )
            )
        repeats = [key for key, sample in zip(keys, samples, strict=True) if key != sample.id]
        if repeats:
            n = len(repeats)
            notes.append(
                (
                    "repeated_ids",
                    f"{n} sample{'s' if n != 1 else ''} repeat{'' if n != 1 else 's'} an "
                    f"earlier sample id; each is scored under its own key ({some_ids(repeats)}) "
                    "against the qrels of its id, so every captured run counts in the mean. "
                    "Capture each query once (or clear() between runs) to weight queries "
                    "equally.",
                )
            )
        if failed:
            rule = (
                "they score 0 and count in the mean (failed_queries='zero'); pass "
                "failed_queries='skip' to score only the runs that worked"
                if failed_rule == "zero"
                else "they are left out of the mean (failed_queries='skip')"
            )
            notes.append(
                (
                    "failed_queries",
                    f"{len(failed)} of {len(samples)} captured samples failed before a ranking "
                    f"was captured ({some_ids(failed, 5)}; see sample.error): {rule}",
                )
            )
        sample_of = dict(zip(keys, samples, strict=True))
        blind = [key for key in unranked if _no_context(sample_of[key]) is not None]
        if blind:
            seen = sorted({str(st.name) for key in blind for st in sample_of[key].stages or ()})
            notes.append(
                (
                    "no_context",
                    f"{len(blind)} captured samples had several stages and none can be "
                    f"identified as what reached the generator ({some_ids(blind)}; stages "
                    f"seen: {', '.join(seen)}), so they have no ranking to score and score "
                    f"0. {self.hints.stage}",
                )
            )
        unranked = [key for key in unranked if key not in set(blind)]
        if unranked:
            what = (
                f"no stage {stage!r}"
                if stage is not None
                else "no ranking although their run did not fail"
            )
            notes.append(
                (
                    "unranked",
                    f"{len(unranked)} captured samples have {what} ({some_ids(unranked)}): no "
                    "retriever ran, or the stage was not there (see their stages and "
                    "metadata['capture_errors']); they score 0",
                )
            )
        if troubled:
            first = sample_of[troubled[0]].metadata["capture_errors"]
            notes.append(
                (
                    "capture_errors",
                    f"{len(troubled)} judged samples carry capture problems in "
                    f"metadata['capture_errors'] (e.g. {troubled[0]!r}: {str(first[0])!r:.300})",
                )
            )
        problem = doc_id_problem({k: v for k, v in run.items() if v}, judged, self.hints.doc_id)
        if problem is not None:
            notes.append(("doc_ids", problem))


def missing_rule(
    only_captured: bool, missing_queries: MissingQueries | None, *, stacklevel: int
) -> MissingQueries | None:
    """``missing_queries`` with the deprecated ``only_captured=True`` folded in (it means
    ``"skip"``; a ``DeprecationWarning``, ``stacklevel`` frames up)."""
    if not only_captured:
        return missing_queries
    warnings.warn(
        "evaluate_retrieval(only_captured=True) is deprecated: it is missing_queries='skip' "
        "(judged queries never captured are left out of the mean); pass that instead "
        "(only_captured= will be removed in a future release)",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
    if missing_queries not in (None, "skip"):
        raise InvalidInputError(
            f"only_captured=True means missing_queries='skip' (judged queries never captured "
            f"are left out of the mean), but missing_queries={missing_queries!r} was given "
            "too: pass one of the two"
        )
    return "skip"


def _no_context(sample: RagSample) -> str | None:
    """The sample's note that no stage could be identified as its context, if any."""
    for note in sample.metadata.get("capture_errors") or ():
        if isinstance(note, str) and note.startswith(NO_CONTEXT):
            return note
    return None
