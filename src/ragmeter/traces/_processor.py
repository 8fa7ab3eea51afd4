"""``SpanProcessor``: capture any OpenInference-instrumented app live, with no adapter.

Added to an OpenTelemetry ``TracerProvider``, it receives every span as it ends, holds each
trace's spans until its root span ends, and turns the trace into samples with the same
rules as :func:`ragmeter.traces.read` (so the same numbers as the native adapters), into a
store with the adapters' API: ``samples``, ``drain()``, ``capture(id=...)`` scopes,
``evaluate_retrieval(qrels)``, ``evaluate()``. It never raises into the app: a trace it
cannot convert is logged and counted (``counts["failed"]``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.sdk.trace import SpanProcessor as _OtelSpanProcessor

from ragmeter.capture import SampleStore, Scope, scope_for
from ragmeter.io.otel import TraceSpan, spans_from_sdk
from ragmeter.schema import CONTEXT
from ragmeter.traces._convert import runs_of_trace
from ragmeter.traces._documents import DocIdRule
from ragmeter.traces._read import HINTS, TraceSamples, _config, _options, logger

__all__ = ["SpanProcessor"]


class SpanProcessor(TraceSamples, _OtelSpanProcessor):
    """An OpenTelemetry span processor that makes one :class:`~ragmeter.schema.RagSample`
    per run of an instrumented app (the fourth capture path, beside the three adapters).

    ``provider.add_span_processor(SpanProcessor(join_key="session.id"))`` with any
    OpenInference instrumentor on the same provider; the options are
    :func:`ragmeter.traces.read`'s. ``with processor.capture(id=qid, relevance=...):``
    names the runs started inside the block (it is read when a trace's first span starts,
    in the thread or task that starts it). ``max_open_traces`` bounds the traces held while
    they run (the oldest is dropped and counted when a root span never ends).
    """

    def __init__(
        self,
        *,
        doc_id: DocIdRule = None,
        join_key: str | None = None,
        question_key: str | None = None,
        queries: Mapping[str, str] | None = None,
        root_kinds: Sequence[str] = ("CHAIN", "AGENT"),
        stage: str = CONTEXT,
        max_samples: int | None = None,
        max_open_traces: int = 10_000,
    ) -> None:
        options = _options(doc_id, join_key, question_key, queries, root_kinds)
        options.counts.update(failed=0, dropped_traces=0)
        super().__init__(SampleStore(max_samples=max_samples, hints=HINTS), options.counts)
        self._conversion = options
        self._config = _config(stage, owner=self)
        self._lock = threading.Lock()
        self._open: dict[int, list[ReadableSpan]] = {}
        self._scopes: dict[int, dict[str, Scope | None]] = {}  # trace -> local root -> scope
        self._running: dict[int, int] = {}  # trace -> its local roots still running
        self._evicted: dict[int, None] = {}  # dropped unfinished: their late spans are ignored
        self._max_open = max_open_traces

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        """A span started: remember the ``capture()`` scope open when its trace began."""
        if _local_root(span):
            scope = scope_for(self)
            trace = span.context.trace_id
            with self._lock:
                self._scopes.setdefault(trace, {})[format(span.context.span_id, "016x")] = scope
                self._running[trace] = self._running.get(trace, 0) + 1

    def on_end(self, span: ReadableSpan) -> None:
        """A span ended: keep it; when it is its trace's root, make the trace's samples."""
        trace = span.context.trace_id
        with self._lock:
            if trace in self._evicted:
                if _local_root(span):
                    del self._evicted[trace]
                return
            group = self._open.get(trace)
            if group is None:
                if len(self._open) >= self._max_open:
                    oldest = next(iter(self._open))
                    del self._open[oldest]
                    self._scopes.pop(oldest, None)
                    self._running.pop(oldest, None)
                    self._evicted[oldest] = None
                    if len(self._evicted) > self._max_open:
                        del self._evicted[next(iter(self._evicted))]
                    self.counts["dropped_traces"] += 1
                group = self._open[trace] = []
            group.append(span)
            if not _local_root(span):
                return
            running = self._running.get(trace, 1) - 1
            if running > 0:  # another local root of the trace still runs (a fan-out)
                self._running[trace] = running
                return
            self._running.pop(trace, None)
            spans = self._open.pop(trace)
            scopes = self._scopes.pop(trace, {})
        try:
            converted: list[TraceSpan] = list(spans_from_sdk(spans))
            with self._lock:
                runs = runs_of_trace(converted, self._config, self._conversion, scopes=scopes)
            self.store.extend(runs)
        except Exception as exc:  # never raise into the app
            with self._lock:
                self.counts["failed"] += 1
            logger.warning("ragmeter could not turn a trace into samples: %r", exc)

    def shutdown(self) -> None:
        """Nothing to release: samples stay readable after the provider shuts down."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Samples are made as traces end; nothing is buffered."""
        return True


def _local_root(span: ReadableSpan) -> bool:
    """Whether ``span`` is the first span of its trace in this process: it has no parent, or
    its parent is remote (the trace began in another service, which exports its own spans)."""
    parent = span.parent
    return parent is None or not parent.is_valid or bool(parent.is_remote)
