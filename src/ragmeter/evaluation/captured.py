"""``evaluate_captured``: score captured samples' rankings under the capture rules.

Every adapter's ``evaluate_retrieval`` (:meth:`ragmeter.capture.SampleStore.evaluate_retrieval`)
and every stage of :func:`ragmeter.stages.evaluate_stages` score through here: the samples
become qrels and a run (a repeated sample id is scored as ``"<id>#2"``... against the qrels of
its id; a run that failed before a ranking was captured scores 0 or is left out; a sample
without a ranking scores 0), the id problems are warned about with the adapter's
:class:`~ragmeter.evaluation.capture_rules.Hints`, and :func:`ragmeter.evaluate_run` scores
the run. ``report.extra["capture"]`` holds the counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragmeter._types import FailedQueries, MissingQueries
from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.evaluation.capture_rules import (
    Hints,
    check_failed,
    check_stage,
    doc_id_problem,
    no_context,
    sample_id_problem,
)
from ragmeter.evaluation.run import evaluate_run
from ragmeter.report import RetrievalEvalReport, WarningLog
from ragmeter.schema import RagSample, sample_keys

__all__ = ["CapturedSamples", "evaluate_captured", "nothing_captured"]


@runtime_checkable
class CapturedSamples(Protocol):
    """What holds captured samples and how they were kept: an adapter's
    :class:`~ragmeter.capture.SampleStore` (``handler.store``) is one.

    ``samples`` in completion order; ``hints`` name the adapter's fixes; ``dropped`` samples
    were evicted past ``max_samples``. :func:`evaluate_captured` takes them as keywords.
    """

    @property
    def samples(self) -> Sequence[RagSample]:
        """The captured samples, in completion order."""
        ...

    @property
    def hints(self) -> Hints:
        """How the adapter's users fix id problems."""
        ...

    @property
    def dropped(self) -> int:
        """How many samples were dropped past ``max_samples``."""
        ...

    @property
    def max_samples(self) -> int | None:
        """The bound on the samples kept (``None``: no bound)."""
        ...


Notes = list[tuple[str, str]]
"""``(source, message)`` of each capture warning, in the order they are reported."""


@dataclass
class _Captured:
    """The captured samples and what scoring them found (see :func:`evaluate_captured`)."""

    samples: list[RagSample]
    keys: list[str]
    hints: Hints
    dropped: int
    max_samples: int | None
    stage: str | None
    failed_rule: FailedQueries
    notes: Notes = field(default_factory=list)
    judged: dict[str, Mapping[str, float]] = field(default_factory=dict)
    run: dict[str, list[str]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    unranked: list[str] = field(default_factory=list)
    troubled: list[str] = field(default_factory=list)


def evaluate_captured(
    samples: Iterable[RagSample],
    qrels: Mapping[str, Mapping[str, float]] | None = None,
    *,
    stage: str | None = None,
    missing_queries: MissingQueries | None = None,
    failed_queries: FailedQueries = "zero",
    hints: Hints | None = None,
    dropped: int = 0,
    max_samples: int | None = None,
    **kwargs: Any,
) -> RetrievalEvalReport:
    """Score the captured samples' rankings with :func:`ragmeter.evaluate_run` (kwargs pass
    through), under the rules of :meth:`ragmeter.capture.SampleStore.evaluate_retrieval`.

    ``qrels`` default to the relevance the samples carry; the ranking scored is each sample's
    ``retrieved_ids``, or with ``stage`` that stage's. ``missing_queries`` (default
    ``"zero"``) and ``failed_queries`` say how judged queries never captured, and captured
    runs that failed, count. ``hints`` (default ``Hints()``) name the adapter's
    fixes in the warnings and log them; ``dropped`` samples past ``max_samples`` (of a
    bounded store) are warned about. The warnings are in ``report.warnings``;
    ``report.extra["capture"]`` holds the counts (JSON-ready).

    >>> samples = [RagSample(id="q1", retrieved_ids=["d1", "d2"]),
    ...            RagSample(id="q1", retrieved_ids=["d2"])]
    >>> report = evaluate_captured(samples, {"q1": {"d2": 1}}, k_values=(1,), metrics=["recall"])
    >>> report.per_query["q1#2"], report.extra["capture"]["repeated"]
    ({'recall@1': 1.0}, {'q1': 2})
    """
    hints = hints if hints is not None else Hints()
    if stage is not None:
        stage = check_stage(stage)
    missing: MissingQueries = missing_queries or "zero"
    failed_rule = check_failed(failed_queries)
    kept = list(samples)
    if not kept:
        raise InvalidInputError(nothing_captured(hints))
    keys = sample_keys([s.id for s in kept])
    found = _Captured(kept, keys, hints, dropped, max_samples, stage, failed_rule)
    found.judged = _judgements(qrels, found)
    _rank(found)
    _note_store(found)
    _note_rankings(found)
    report = _score(found, missing, kwargs)
    report.extra["capture"] = _counts(found)
    return report


def nothing_captured(hints: Hints) -> str:
    """Why a store with no sample cannot be scored, and the likely causes."""
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
    qrels: Mapping[str, Mapping[str, float]] | None, found: _Captured
) -> dict[str, Mapping[str, float]]:
    """The qrels by sample key: a repeat is judged by its id's row; checks the sample ids."""
    samples, keys = found.samples, found.keys
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
    problem = sample_id_problem([s.id for s in samples], given, found.hints.sample_id)
    if problem is not None:
        fatal, message = problem
        if fatal:
            raise InvalidInputError(message)
        found.notes.append(("sample_ids", message))
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


def _rank(found: _Captured) -> None:
    """The run (each sample's ranking, by key), and the judged samples that failed, have no
    ranking or carry capture problems; failed runs score 0 or leave the qrels."""
    judged, run, failed, unranked = found.judged, found.run, found.failed, found.unranked
    for key, sample in zip(found.keys, found.samples, strict=True):
        ids = sample.retrieved_ids if found.stage is None else sample.ranking(found.stage)
        if ids is not None:
            run[key] = list(ids)
        elif key in judged:
            (failed if sample.error is not None else unranked).append(key)
        if key in judged and sample.metadata.get("capture_errors"):
            found.troubled.append(key)
    for key in unranked:
        run[key] = []
    for key in failed:
        if found.failed_rule == "zero":
            run[key] = []
        else:
            del judged[key]
    if failed and found.failed_rule == "skip" and not any(q in run for q in judged):
        raise InvalidInputError(
            f"every captured sample the qrels judge failed before a ranking was captured "
            f"({some_ids(failed)}; see sample.error), and failed_queries='skip' leaves "
            "them out: nothing is left to score"
        )


def _note_store(found: _Captured) -> None:
    """The warnings about the store: dropped samples, repeated ids, failed runs."""
    samples, notes = found.samples, found.notes
    if found.dropped:
        notes.append(
            (
                "max_samples",
                f"{found.dropped} captured samples were dropped because the store keeps at "
                f"most max_samples={found.max_samples} (the oldest go first); the report "
                f"covers the {len(samples)} kept. Raise max_samples or drain() more often "
                "to score every run.",
            )
        )
    repeats = [key for key, sample in zip(found.keys, samples, strict=True) if key != sample.id]
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
    if found.failed:
        rule = (
            "they score 0 and count in the mean (failed_queries='zero'); pass "
            "failed_queries='skip' to score only the runs that worked"
            if found.failed_rule == "zero"
            else "they are left out of the mean (failed_queries='skip')"
        )
        notes.append(
            (
                "failed_queries",
                f"{len(found.failed)} of {len(samples)} captured samples failed before a "
                f"ranking was captured ({some_ids(found.failed, 5)}; see sample.error): {rule}",
            )
        )


def _note_rankings(found: _Captured) -> None:
    """The warnings about the rankings: no context, no ranking, capture problems, doc ids."""
    notes, stage = found.notes, found.stage
    sample_of = dict(zip(found.keys, found.samples, strict=True))
    blind = [key for key in found.unranked if no_context(sample_of[key]) is not None]
    if blind:
        seen = sorted({str(st.name) for key in blind for st in sample_of[key].stages or ()})
        notes.append(
            (
                "no_context",
                f"{len(blind)} captured samples had several stages and none can be "
                f"identified as what reached the generator ({some_ids(blind)}; stages "
                f"seen: {', '.join(seen)}), so they have no ranking to score and score "
                f"0. {found.hints.stage}",
            )
        )
    unranked = [key for key in found.unranked if key not in set(blind)]
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
    if found.troubled:
        first = sample_of[found.troubled[0]].metadata["capture_errors"]
        notes.append(
            (
                "capture_errors",
                f"{len(found.troubled)} judged samples carry capture problems in "
                f"metadata['capture_errors'] (e.g. {found.troubled[0]!r}: "
                f"{str(first[0])!r:.300})",
            )
        )
    run = {k: v for k, v in found.run.items() if v}
    problem = doc_id_problem(run, found.judged, found.hints.doc_id)
    if problem is not None:
        notes.append(("doc_ids", problem))


def _score(
    found: _Captured, missing: MissingQueries, kwargs: dict[str, Any]
) -> RetrievalEvalReport:
    """:func:`evaluate_run` of the run, with the capture warnings in place of its generic ones."""
    log = kwargs.pop("warnings", None)
    if log is None:
        log = WarningLog()
    for source, message in found.notes:
        log.add("capture", source, message)
        found.hints.logger.warning("ragmeter: %s", message)
    judged, run = found.judged, found.run
    report = evaluate_run(judged, run, missing_queries=missing, warnings=log, **kwargs)
    if any(source == "doc_ids" for source, _ in found.notes):
        # ours names the fix; the generic one from evaluate_run says less
        report.warnings = [w for w in report.warnings if "[run] (doc_ids)" not in w]
    unjudged = [key for key in run if key not in judged]
    if unjudged and report.missing_queries:
        # not "pass missing_queries='skip'": the judged queries are probably right here,
        # captured under other ids
        report.warnings = [w for w in report.warnings if "[run] (missing_queries)" not in w]
        report.warnings.append(_forgotten_ids(report.missing_queries, unjudged, missing, found))
    return report


def _forgotten_ids(
    missing: Sequence[str], unjudged: Sequence[str], rule: MissingQueries, found: _Captured
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
        f"query id. {found.hints.sample_id}"
    )
    found.hints.logger.warning("ragmeter: %s", message)
    return f"CAUTION [capture] (missing_queries): {message}"


def _counts(found: _Captured) -> dict[str, Any]:
    """``report.extra["capture"]``: what the scoring found, JSON-ready."""
    samples, judged = found.samples, found.judged
    counts = {s.id: 0 for s in samples}
    for s in samples:
        counts[s.id] += 1
    return {
        "framework": found.hints.framework,
        "stage": found.stage if found.stage is not None else "retrieved_ids",
        "samples": len(samples),
        "dropped": found.dropped,
        "failed": found.failed,
        "failed_queries": found.failed_rule,
        "unranked": found.unranked,
        "repeated": {sid: n for sid, n in counts.items() if n > 1},
        "unjudged": sum(1 for key in found.run if key not in judged),
        "capture_errors": len(found.troubled),
        "no_context": sum(1 for s in samples if no_context(s) is not None),
    }
