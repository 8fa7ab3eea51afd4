"""Reading traces into samples: spans grouped into traces as they stream, each trace's runs
converted, and the samples kept in a store with what was counted on the way."""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from ragmeter._gc import paused_gc
from ragmeter.capture import CaptureConfig, Hints, ProblemLog, SampleStore, StoreFront
from ragmeter.errors import InvalidInputError, NoSamplesError
from ragmeter.io.otel import TraceSpan, iter_otlp_batches, spans_from_phoenix, spans_from_sdk
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.schema import CONTEXT, RagSample
from ragmeter.traces._convert import Conversion, TraceRun, runs_of_trace
from ragmeter.traces._documents import DocIdRule

__all__ = ["TraceSamples", "batches_of", "group_traces", "iter_samples", "read", "spans_of"]

logger = logging.getLogger("ragmeter_traces")
logger.addHandler(logging.NullHandler())

HINTS = Hints(
    framework="traces",
    label="traces",
    sample_id=(
        "Traces: give each run the query id the qrels use with join_key= (an attribute such "
        "as 'session.id', or 'metadata.<key>' for a key of the run's metadata), or pass "
        "queries={query_id: text} to join by the question's text."
    ),
    doc_id=(
        "Traces: ragmeter reads each document's document.id; pass doc_id='metadata.<key>' "
        "to read the id from the document's metadata, or doc_id='content' for a hash of "
        "its text."
    ),
    stage=(
        "Traces: pick the stage to score by name with stage='<name>' (the retriever span's name)."
    ),
)


def batches_of(source: Any) -> Iterable[list[TraceSpan]]:
    """The spans of ``source`` in batches (a file line: the spans exported together): an
    OTLP/JSON lines file (``.json``, ``.jsonl``, ``.gz``...), a Phoenix parquet export, a
    pandas DataFrame of Phoenix spans, or an iterable of SDK ``ReadableSpan`` or
    :class:`~ragmeter.io.otel.TraceSpan` objects (one batch)."""
    if isinstance(source, (str, os.PathLike)):
        if not os.path.isfile(source):
            raise FileNotFoundError(2, "trace file not found", str(source))
        if str(source).endswith(".parquet"):
            return [list(spans_from_phoenix(source))]
        return iter_otlp_batches(source)
    if hasattr(source, "columns") and hasattr(source, "to_dict"):
        return [list(spans_from_phoenix(source))]
    if isinstance(source, Iterable):
        return [list(_spans_from_objects(source))]
    raise InvalidInputError(
        "traces must be a file path (OTLP/JSON lines, or a Phoenix .parquet export), a "
        f"Phoenix spans DataFrame, or OpenTelemetry spans; got {type(source).__name__}"
    )


def spans_of(source: Any) -> Iterator[TraceSpan]:
    """Every span of ``source`` (see :func:`batches_of`)."""
    for batch in batches_of(source):
        yield from batch


def _spans_from_objects(items: Iterable[Any]) -> Iterator[TraceSpan]:
    sdk: list[Any] = []
    for item in items:
        if isinstance(item, TraceSpan):
            yield item
        elif hasattr(item, "context") and hasattr(item, "attributes"):
            sdk.append(item)
        else:
            raise InvalidInputError(
                f"not a span: {type(item).__name__} (expected OpenTelemetry ReadableSpan "
                "objects, e.g. InMemorySpanExporter.get_finished_spans())"
            )
    yield from spans_from_sdk(sdk)


_DONE_KEPT = 100_000
"""How many handed-on trace ids are remembered to recognise their late spans."""


def group_traces(
    batches: Iterable[Sequence[TraceSpan]], counts: dict[str, int]
) -> Iterator[list[TraceSpan]]:
    """Spans grouped by trace, each trace handed on at the end of the batch in which its
    root span (one without a parent) arrived: exporters write a span when it ends, and a
    root ends last, so a file streams trace by trace. Traces whose root never came are
    handed on at the end; a span of a trace already handed on is counted (``late_spans``)
    and dropped."""
    open_traces: dict[str, list[TraceSpan]] = {}
    done: dict[str, None] = {}  # the traces handed on lately (bounded: the last _DONE_KEPT)
    order: deque[str] = deque()  # the same, oldest first (a dict's oldest key is slow to
    # find once many were deleted: it scans past them)
    for batch in batches:
        finished: dict[str, None] = {}
        for span in batch:
            trace = span.trace_id
            if trace in done:
                counts["late_spans"] = counts.get("late_spans", 0) + 1
                continue
            group = open_traces.get(trace)
            if group is None:
                group = open_traces[trace] = []
            group.append(span)
            if span.parent_id is None:
                finished[trace] = None
        for trace in finished:
            done[trace] = None
            order.append(trace)
            if len(order) > _DONE_KEPT:
                del done[order.popleft()]
            yield open_traces.pop(trace)
    if open_traces:
        counts["no_root_span"] = counts.get("no_root_span", 0) + len(open_traces)
    yield from open_traces.values()


def _config(stage: str, owner: object = None) -> CaptureConfig:
    return CaptureConfig(
        framework="traces",
        problems=ProblemLog(logger, "traces"),
        stage=stage,
        stage_hint=HINTS.stage,
        name_hint=HINTS.stage,
        owner=owner,
    )


def _options(
    doc_id: DocIdRule,
    join_key: str | None,
    question_key: str | None,
    queries: Mapping[str, str] | None,
    root_kinds: Sequence[str],
) -> Conversion:
    named = isinstance(doc_id, str) and (
        doc_id in ("id", "content") or (doc_id.startswith("metadata.") and len(doc_id) > 9)
    )
    if doc_id is not None and not callable(doc_id) and not named:
        raise InvalidInputError(
            f"doc_id must be 'id', 'content', 'metadata.<key>' or a function document -> id, "
            f"got {doc_id!r}"
        )
    kinds = tuple(k.upper() for k in ([root_kinds] if isinstance(root_kinds, str) else root_kinds))
    if not kinds:
        raise InvalidInputError("root_kinds is empty: name the span kinds a run starts at")
    return Conversion(
        doc_id=doc_id,
        join_key=join_key,
        question_key=question_key,
        root_kinds=kinds,
        queries=dict(queries) if queries is not None else None,
    )


def iter_samples(
    source: Any,
    *,
    doc_id: DocIdRule = None,
    join_key: str | None = None,
    question_key: str | None = None,
    queries: Mapping[str, str] | None = None,
    root_kinds: Sequence[str] = ("CHAIN", "AGENT"),
    stage: str = CONTEXT,
    counts: dict[str, int] | None = None,
) -> Iterator[RagSample]:
    """The samples of ``source``, one run at a time, holding one trace at a time (for
    :func:`ragmeter.evaluate_rag` over traces larger than memory). ``counts``, when given,
    is filled with what :func:`read` counts. The options are :func:`read`'s."""
    options = _options(doc_id, join_key, question_key, queries, root_kinds)
    config = _config(stage)
    for trace in group_traces(batches_of(source), options.counts):
        for run in runs_of_trace(trace, config, options):
            yield run.fresh_sample()
        if counts is not None:
            counts.update(options.counts)
    if counts is not None:
        counts.update(options.counts)


class TraceSamples(StoreFront):
    """The samples read from traces, in a store with the adapters' API (``samples``,
    ``evaluate_retrieval(qrels, stage=..., stages=True)``, ``evaluate()``, ``to_run()``,
    ``drain()``...), and ``counts``: traces, runs, traces with no run, runs with no
    retriever, documents without an id, runs joined to a query id and not. Every report
    made from it carries the counts (``report.extra["traces"]``) and a warning for each
    problem counted."""

    def __init__(self, store: SampleStore, counts: dict[str, int]) -> None:
        self._store = store
        self.counts = counts

    @property
    def store(self) -> SampleStore:
        return self._store

    @property
    def notes(self) -> list[str]:
        """A plain-English warning for each problem counted (empty when there is none)."""
        return notes_of(self.counts)

    @overload
    def evaluate_retrieval(
        self, qrels: Mapping[str, Mapping[str, float]] | None = None, **kwargs: Any
    ) -> Any: ...

    @overload
    def evaluate_retrieval(self, *args: Any, **kwargs: Any) -> Any: ...

    def evaluate_retrieval(self, *args: Any, **kwargs: Any) -> Any:
        self._check_runs()
        report = super().evaluate_retrieval(*args, **kwargs)
        if isinstance(report, RetrievalEvalReport):
            self._annotate(report)
        else:  # a StageReport: its rows are retrieval reports
            for row in getattr(report, "rows", ()):
                self._annotate(row.report)
            report.warnings = [*getattr(report, "warnings", []), *self.notes]
        return report

    def evaluate(self, **kwargs: Any) -> RagEvalReport:
        self._check_runs()
        report = super().evaluate(**kwargs)
        self._annotate(report)
        return report

    def _check_runs(self) -> None:
        """No run to score: say what was read (not an adapter's "was it attached?")."""
        if len(self.store):
            return
        counts = self.counts
        raise NoSamplesError(
            f"no run to score: {counts['traces']} traces were read"
            + (
                f" and {counts['no_run']} of them have no CHAIN or AGENT span (root_kinds=)"
                if counts.get("no_run")
                else " (is the input empty?)"
            )
            + (" or every sample was drained already" if counts["runs"] else "")
        )

    def _annotate(self, report: RetrievalEvalReport | RagEvalReport) -> None:
        report.extra["traces"] = dict(self.counts)
        report.warnings = [*report.warnings, *(f"CAUTION [traces] {n}" for n in self.notes)]


_NOTES: tuple[tuple[str, str], ...] = (
    (
        "no_run",
        "{no_run} of {traces} traces have no CHAIN or AGENT span (no run to make a sample of; "
        "see root_kinds=)",
    ),
    (
        "no_retriever",
        "{no_retriever} of {runs} runs have no retriever span: they have no ranking, and score "
        "0 where they are judged",
    ),
    (
        "hashed_doc_ids",
        "{hashed_doc_ids} retrieved documents carry no document.id: their ids are hashes of "
        "their text. " + HINTS.doc_id.replace("{", "{{").replace("}", "}}"),
    ),
    (
        "not_joined",
        "{not_joined} of {tried} runs matched no query id (join_key= or queries=); they keep "
        "their trace id as sample id",
    ),
    (
        "orphan_spans",
        "{orphan_spans} spans have a parent that is not in the input (not exported?): they "
        "were read as the top of their trace, and what their parent held (a run's question "
        "or answer) is missing",
    ),
    (
        "no_root_span",
        "{no_root_span} traces have no root span in the input (a parent span was not "
        "exported); they were read at the end",
    ),
    (
        "duplicate_spans",
        "{duplicate_spans} spans were in the input twice (a retried export?); each was read once",
    ),
    (
        "truncated_rankings",
        "{truncated_rankings} retriever or reranker spans lost attributes (the span attribute "
        "limit, 128 by default): their rankings are incomplete; raise "
        "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
    ),
    ("failed", "{failed} traces could not be turned into samples (logged on ragmeter_traces)"),
    (
        "dropped_traces",
        "{dropped_traces} traces were dropped unfinished: more than max_open_traces were open "
        "at once (a root span that never ended?)",
    ),
    ("late_spans", "{late_spans} spans arrived after their trace's root span and were left out"),
)
"""One warning per count that can be non-zero, in the order they are reported."""


def notes_of(counts: Mapping[str, int]) -> list[str]:
    """The warnings a conversion's counts call for (one per non-zero problem count)."""
    values = {**counts, "tried": counts.get("joined", 0) + counts.get("not_joined", 0)}
    return [template.format_map(values) for key, template in _NOTES if counts.get(key)]


def read(
    source: Any,
    *,
    doc_id: DocIdRule = None,
    join_key: str | None = None,
    question_key: str | None = None,
    queries: Mapping[str, str] | None = None,
    root_kinds: Sequence[str] = ("CHAIN", "AGENT"),
    stage: str = CONTEXT,
    progress: Callable[[int], None] | None = None,
) -> TraceSamples:
    """Read traces into samples, one per run (the outermost CHAIN or AGENT span of a trace).

    ``source`` is an OTLP/JSON lines file (as the OpenTelemetry Collector's file exporter
    writes it; ``.gz`` too), a Phoenix span export (parquet or DataFrame), or OpenTelemetry
    SDK spans. ``doc_id`` says where a document's id is (``None``/``"id"``: ``document.id``;
    ``"metadata.<key>"``; ``"content"``: a hash of the text; or a function of the document
    dict). ``join_key`` names where each run's query id is (an attribute such as
    ``"session.id"``, or ``"metadata.<key>"``); ``queries`` (``{query_id: text}``) joins by
    the question's text instead. ``question_key`` is a dotted path to the question in a
    JSON ``input.value``; ``root_kinds`` the span kinds a run starts at; ``stage`` the
    ranking ``retrieved_ids`` holds (``"context"``: what reached the LLM). ``progress(n)``
    is called with the number of traces read so far.

    The rules are in :mod:`ragmeter.traces._convert`: the same stage names, context rule
    and sample fields as the native adapters wherever the trace holds what they see.
    """
    options = _options(doc_id, join_key, question_key, queries, root_kinds)
    config = _config(stage)
    store = SampleStore(hints=HINTS)
    records: list[TraceRun] = []
    with paused_gc():  # many small records, no cycles: no collector walking them again
        for n, trace in enumerate(group_traces(batches_of(source), options.counts), 1):
            records.extend(runs_of_trace(trace, config, options))
            if len(records) >= 256:
                store.extend(records)
                records.clear()
            if progress is not None and n % 1000 == 0:
                progress(n)
        store.extend(records)
    if progress is not None:
        progress(options.counts["traces"])
    return TraceSamples(store, options.counts)
