"""The capture state of :class:`~ragmeter_llamaindex.RagmeterEventHandler` and its logic.

:class:`Capture` keeps the span tree (``span id -> parent id``) and spots query spans: a
``query``/``aquery`` call on any ``BaseQueryEngine`` (``CustomQueryEngine`` included, which
emits no ``QueryStartEvent``). A *top-level query* is one with no enclosing query span
being captured; the retriever calls inside it (``RetrievalEndEvent``, also those of
sub-engines) belong to its sample. Everything is keyed by span id, so concurrent ``aquery``
calls and threads never mix their samples; a span's entry is dropped when it closes.
"""

from __future__ import annotations

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
    SampleStore,
    describe,
    fields_from_metadata,
    jsonable,
    run_metadata,
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


def _query_text(query: Any) -> str | None:
    if isinstance(query, QueryBundle):
        return query.query_str
    return None if query is None else str(query)


def _text(scored: NodeWithScore) -> str:
    text = getattr(scored.node, "text", None)
    return text if isinstance(text, str) else scored.node.get_content()


class _Pending:
    """What is known about a top-level query while it runs."""

    __slots__ = ("errors", "nodes", "query", "retrieved", "start", "tags")

    def __init__(self, query: str | None, tags: dict[str, Any]) -> None:
        self.query = query
        self.tags = tags
        self.start = time.perf_counter()
        self.nodes: list[NodeWithScore] = []
        self.retrieved = False
        self.errors: list[str] = []


class Capture:
    """The capture state and logic shared by the event handler and the span tracker."""

    def __init__(self, id_field: IdField, max_samples: int | None) -> None:
        self.id_field = id_field
        self.store = SampleStore(max_samples=max_samples)
        self.lock = threading.RLock()
        self.parents: dict[str, str | None] = {}
        self.roots: dict[str, _Pending] = {}
        self.retrievals: dict[str, str] = {}  # top-level retrieval span -> its query span
        self.errors = 0
        self.logged = False

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
                self.retrievals.pop(span_id, None)
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
            for _ in range(_MAX_DEPTH):
                if span is None or span in self.retrievals:
                    return  # outside any captured query, or inside a captured retrieval
                if span in self.roots:
                    self.retrievals[sid] = span
                    return
                span = self.parents.get(span)

    def retrieval_end(self, event: RetrievalEndEvent) -> None:
        with self.lock:
            root = self.retrievals.pop(event.span_id or "", None)
            pending = self.roots.get(root) if root is not None else None
            if pending is not None:
                pending.nodes.extend(event.nodes)
                pending.retrieved = True

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

    def doc_ids(self, pending: _Pending) -> list[str]:
        ids: list[str] = []
        missing = 0
        failure: Exception | None = None
        for scored in pending.nodes:
            doc_id: str | None = None
            try:
                doc_id = node_doc_id(scored, self.id_field)
            except Exception as exc:
                failure = failure or exc
            if doc_id is None:
                missing += 1
                doc_id = scored.node.node_id
            ids.append(doc_id)
        if failure is not None:
            self.failed(failure, pending)
        elif missing:
            pending.errors.append(
                f"{missing} of {len(ids)} retrieved node(s) had no value for id_field="
                f"{self.id_field!r}; their node_id was used instead"
            )
        return ids

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
        ids = self.doc_ids(pending)
        texts = [_text(scored) for scored in pending.nodes]
        meta: dict[str, Any] = {
            "framework": FRAMEWORK,
            "id_field": self.id_field if isinstance(self.id_field, str) else repr(self.id_field),
            "node_ids": [scored.node.node_id for scored in pending.nodes],
            "scores": [jsonable(scored.score) for scored in pending.nodes],
        }
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
            "retrieved_ids": dedupe_best_rank(ids) if pending.retrieved else None,
            "retrieved_texts": texts if pending.retrieved else None,
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
