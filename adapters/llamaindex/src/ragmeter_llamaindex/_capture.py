"""The capture state of :class:`~ragmeter_llamaindex.RagmeterEventHandler` and its logic.

:class:`Capture` keeps the span tree (``span id -> parent id``) and spots query spans: a
``query``/``aquery`` call on any ``BaseQueryEngine`` (``CustomQueryEngine`` included, which
emits no ``QueryStartEvent``). A *top-level query* is one with no enclosing query span
being captured; every retriever call inside it (``RetrievalStartEvent``/``EndEvent``, also
those of sub-engines) is kept as one call of its sample, with its own ranking, depth (how
many retriever calls enclose it) and timing, and
:func:`ragmeter.capture.select_calls` picks the ranking the sample scores (``retrieval=``,
``retriever_name=``). Everything is keyed by span id, so concurrent ``aquery`` calls and
threads never mix their samples; a span's entry is dropped when it closes.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    PydanticResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.schema import NodeWithScore, QueryBundle

from ragmeter.capture import (
    Hints,
    Retrieval,
    SampleStore,
    call_record,
    describe,
    fields_from_metadata,
    jsonable,
    run_metadata,
    select_calls,
    validated_sample,
)
from ragmeter.evaluation.retrieval import dedupe_best_rank
from ragmeter.schema import RagSample
from ragmeter_llamaindex._retriever import IdField, node_doc_id
from ragmeter_llamaindex._stream import STREAM_PENDING, tap_stream

__all__ = ["FRAMEWORK", "Capture"]

logger = logging.getLogger("ragmeter_llamaindex")
logger.addHandler(logging.NullHandler())

FRAMEWORK = "llamaindex"
"""``sample.metadata["framework"]`` (the name ``ragmeter_llamaindex.judge`` reports too)."""

_QUERY_METHODS = frozenset({"query", "aquery"})
_MAX_DEPTH = 10_000


def _method_of(span_id: str) -> str:
    """``"query"`` from a span id ``"RetrieverQueryEngine.query-<uuid4>"``."""
    name = span_id[:-37] if len(span_id) > 37 and span_id[-37] == "-" else span_id
    return name.rpartition(".")[2]


def _class_of(span_id: str) -> str:
    """``"VectorIndexRetriever"`` from a span id ``"VectorIndexRetriever.retrieve-<uuid4>"``."""
    name = span_id[:-37] if len(span_id) > 37 and span_id[-37] == "-" else span_id
    return name.rpartition(".")[0] or name


def _query_text(query: Any) -> str | None:
    if isinstance(query, QueryBundle):
        return query.query_str
    return None if query is None else str(query)


def _text(scored: NodeWithScore) -> str:
    text = getattr(scored.node, "text", None)
    return text if isinstance(text, str) else scored.node.get_content()


class _Call:
    """One retriever call inside a top-level query (a :class:`ragmeter.capture.CallLike`)."""

    __slots__ = (
        "depth",
        "end",
        "error",
        "ids",
        "name",
        "nodes",
        "query",
        "seq",
        "start",
        "thread",
    )

    def __init__(self, name: str, query: str | None, depth: int) -> None:
        self.name = name
        self.query = query
        self.depth = depth
        self.start = time.perf_counter()
        self.thread = threading.get_ident()
        self.end: float | None = None
        self.seq = -1
        self.nodes: list[NodeWithScore] | None = None
        self.ids: list[str] | None = None  # set from ``nodes`` when the sample is built
        self.error: str | None = None

    def to_dict(self, used: bool) -> dict[str, Any]:
        return call_record(self, used)


class _Pending:
    """What is known about a top-level query while it runs."""

    __slots__ = ("calls", "errors", "query", "start", "tags")

    def __init__(self, query: str | None, tags: dict[str, Any]) -> None:
        self.query = query
        self.tags = tags
        self.start = time.perf_counter()
        self.calls: list[_Call] = []
        self.errors: list[str] = []


class Capture:
    """The capture state and logic shared by the event handler and the span tracker."""

    def __init__(
        self,
        id_field: IdField,
        max_samples: int | None,
        *,
        retrieval: Retrieval = "last",
        retriever_name: str | None = None,
        hints: Hints | None = None,
    ) -> None:
        self.id_field = id_field
        self.retrieval: Retrieval = retrieval
        self.retriever_name = retriever_name
        self.store = SampleStore(max_samples=max_samples, hints=hints)
        self.lock = threading.RLock()
        self.parents: dict[str, str | None] = {}
        self.roots: dict[str, _Pending] = {}
        self.retrievals: dict[str, _Call] = {}  # open retrieval span -> its call
        self.errors = 0
        self.logged = False
        self._seq = itertools.count()

    def reset(self) -> None:
        with self.lock:
            self.parents.clear()
            self.roots.clear()
            self.retrievals.clear()

    def root_of(self, span_id: str | None) -> str | None:
        """The captured query span at or above ``span_id`` (caller holds the lock)."""
        for _ in range(_MAX_DEPTH):
            if span_id is None:
                return None
            if span_id in self.roots:
                return span_id
            span_id = self.parents.get(span_id)
        return None

    # -- span hooks ---------------------------------------------------------------------

    def span_enter(
        self, id_: str, bound_args: Any, instance: Any, parent_id: str | None, tags: Any
    ) -> None:
        try:
            with self.lock:
                self.parents[id_] = parent_id
                if (
                    isinstance(instance, BaseQueryEngine)
                    and _method_of(id_) in _QUERY_METHODS
                    and self.root_of(parent_id) is None
                ):
                    query = getattr(bound_args, "arguments", {}).get("str_or_query_bundle")
                    self.roots[id_] = _Pending(_query_text(query), dict(tags or {}))
        except Exception as exc:
            self.failed(exc, None)

    def span_closed(self, span_id: str, result: Any, err: BaseException | None) -> None:
        try:
            with self.lock:
                self.parents.pop(span_id, None)
                call = self.retrievals.pop(span_id, None)
                if call is not None and call.nodes is None and err is not None:
                    call.error = describe(err)
                    call.end = time.perf_counter()
                pending = self.roots.pop(span_id, None)
            if pending is not None:
                self.finish(pending, result, err)
        except Exception as exc:
            self.failed(exc, None)

    # -- retrieval events ---------------------------------------------------------------

    def retrieval_start(self, event: RetrievalStartEvent) -> None:
        sid = event.span_id
        if sid is None:
            return
        with self.lock:
            span = self.parents.get(sid)
            depth = 0
            for _ in range(_MAX_DEPTH):
                if span is None:
                    return  # outside any captured query
                if span in self.retrievals:
                    depth += 1  # nested in another retriever call (a fusion retriever's member)
                pending = self.roots.get(span)
                if pending is not None:
                    query = _query_text(getattr(event, "str_or_query_bundle", None))
                    call = _Call(_class_of(sid), query, depth)
                    pending.calls.append(call)
                    self.retrievals[sid] = call
                    return
                span = self.parents.get(span)

    def retrieval_end(self, event: RetrievalEndEvent) -> None:
        with self.lock:
            call = self.retrievals.get(event.span_id or "")
            if call is not None and call.nodes is None:
                call.nodes = list(event.nodes)
                call.end = time.perf_counter()
                call.seq = next(self._seq)

    # -- samples ------------------------------------------------------------------------

    def failed(
        self, exc: BaseException | None, pending: _Pending | None, message: str | None = None
    ) -> None:
        """Count and log a capture problem (a warning once, then DEBUG); note it on ``pending``."""
        message = message if message is not None else describe(exc) if exc else "?"
        with self.lock:
            self.errors += 1
            first = not self.logged
            self.logged = True
        if pending is not None:
            pending.errors.append(message)
        if first:
            logger.warning(
                "ragmeter capture failed (%s); the query is unaffected and the problem is "
                "noted on the sample. Further capture errors are logged at DEBUG level.",
                message,
                exc_info=exc,
            )
        else:
            logger.debug("ragmeter capture failed: %s", message, exc_info=exc)

    def doc_ids(self, pending: _Pending) -> None:
        """Map each finished call's nodes to ids (``id_field``); note nodes that have none."""
        missing = total = 0
        failure: Exception | None = None
        for call in pending.calls:
            if call.nodes is None:
                continue
            ids: list[str] = []
            for scored in call.nodes:
                doc_id: str | None = None
                try:
                    doc_id = node_doc_id(scored, self.id_field)
                except Exception as exc:
                    failure = failure or exc
                if doc_id is None:
                    missing += 1
                    doc_id = scored.node.node_id
                ids.append(doc_id)
            call.ids = ids
            total += len(ids)
        if failure is not None:
            self.failed(failure, pending)
        elif missing:
            pending.errors.append(
                f"{missing} of {total} retrieved node(s) had no value for id_field="
                f"{self.id_field!r}; their node_id was used instead"
            )

    def select(self, pending: _Pending) -> list[_Call]:
        """The calls whose ranking the sample scores; capture notes go on the sample."""
        chosen, notes = select_calls(
            pending.calls,
            self.retrieval,
            self.retriever_name,
            name_hint="a LlamaIndex retriever's name is its class name, e.g. "
            "'VectorIndexRetriever'",
        )
        for where, message in notes:
            self.failed(None, pending, f"{where}: {message}")
        return chosen

    def finish(self, pending: _Pending, response: Any, err: BaseException | None) -> None:
        latency_ms = (time.perf_counter() - pending.start) * 1000.0
        try:
            sample, stream = self.build(pending, response, err, latency_ms)
        except Exception as exc:
            self.failed(exc, pending)
            sample = validated_sample(
                {
                    "user_input": pending.query,
                    "latency_ms": latency_ms,
                    "error": None if err is None else describe(err),
                    "metadata": {"framework": FRAMEWORK},
                },
                pending.errors,
            )
            stream = None
        self.store.add(sample)
        if stream is not None:
            start = pending.start

            def done(text: str | None, status: str) -> None:
                self.set_stream_status(sample, text, status, start if text is not None else None)

            try:
                tap_stream(stream, done)
            except Exception as exc:
                self.failed(exc, None)
                self.set_stream_status(sample, None, f"not captured: {exc}", None)

    def build(
        self, pending: _Pending, response: Any, err: BaseException | None, latency_ms: float
    ) -> tuple[RagSample, Any]:
        self.doc_ids(pending)
        chosen = self.select(pending)
        nodes = [scored for call in chosen for scored in call.nodes or ()]
        ids = [doc_id for call in chosen for doc_id in call.ids or ()]
        texts = [_text(scored) for scored in nodes]
        meta: dict[str, Any] = {
            "framework": FRAMEWORK,
            "id_field": self.id_field if isinstance(self.id_field, str) else repr(self.id_field),
            "node_ids": [scored.node.node_id for scored in nodes],
            "scores": [jsonable(scored.score) for scored in nodes],
        }
        if pending.calls:
            used = {id(call) for call in chosen}
            meta["retriever_calls"] = [c.to_dict(id(c) in used) for c in pending.calls]
        text: str | None = None
        stream: Any = None
        sources = getattr(response, "source_nodes", None) or []
        if isinstance(response, (StreamingResponse, AsyncStreamingResponse)):
            stream = response
            meta["response_status"] = STREAM_PENDING
        elif isinstance(response, Response):
            text = response.response
        elif isinstance(response, PydanticResponse) or response is not None:
            text = str(response)
        if sources:
            meta["source_node_ids"] = [s.node.node_id for s in sources]
        contexts = [_text(s) for s in sources] if sources else (texts or None)
        extra = run_metadata(pending.tags)
        if extra:
            meta["run_metadata"] = extra
        fields: dict[str, Any] = {
            "user_input": pending.query,
            "response": text,
            "retrieved_contexts": contexts,
            "retrieved_ids": dedupe_best_rank(ids) if chosen else None,
            "retrieved_texts": texts if chosen else None,
            "latency_ms": latency_ms,
            "error": None if err is None else describe(err),
            **fields_from_metadata(pending.tags),
            "metadata": meta,
        }
        noted = len(pending.errors)
        sample = validated_sample(fields, pending.errors)
        if len(pending.errors) > noted:  # a tag did not validate and was left out
            self.failed(None, None, pending.errors[-1])
        return sample, stream

    def set_stream_status(
        self, sample: RagSample, text: str | None, status: str, start: float | None
    ) -> None:
        """Record what became of a streamed answer on its (already stored) sample."""
        with self.lock:
            if text is not None:
                sample.response = text
            sample.metadata["response_status"] = status
            if start is not None:
                sample.metadata["stream_complete_ms"] = (time.perf_counter() - start) * 1000.0
