"""Capture: LlamaIndex instrumentation -> one :class:`~ragmeter.schema.RagSample` per query.

:class:`RagmeterEventHandler` is an instrumentation event handler with a companion span
handler. The span handler keeps the span tree (``span id -> parent id``) and spots query
spans: a ``query``/``aquery`` call on any ``BaseQueryEngine`` (``CustomQueryEngine``
included, which emits no ``QueryStartEvent``). A *top-level query* is one with no enclosing
query span being captured; the retriever calls inside it (``RetrievalEndEvent``, also
those of sub-engines) belong to its sample. Everything is keyed by span id, so concurrent
``aquery`` calls and threads never mix their samples.

The state lives in a plain object (:class:`_Capture`) that both handlers reach through
their instance ``__dict__``: pydantic's private-attribute lookup costs microseconds, and
the span hooks run a dozen times per query.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    PydanticResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.instrumentation import (  # type: ignore[attr-defined, unused-ignore]
    Dispatcher,
    get_dispatcher,
)
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.instrumentation.span import SimpleSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.schema import NodeWithScore, QueryBundle

from ragmeter.capture import METADATA_FIELDS, SampleStore, fields_from_metadata
from ragmeter.evaluation.retrieval import dedupe_best_rank
from ragmeter.schema import RagSample
from ragmeter_llamaindex._retriever import IdField, check_id_field, node_doc_id

__all__ = ["RagmeterEventHandler"]

logger = logging.getLogger("ragmeter_llamaindex")
logger.addHandler(logging.NullHandler())

STREAM_PENDING = "stream not consumed yet"
STREAM_DONE = "streamed"
STREAM_PARTIAL = "stream closed before the end; text unknown"

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


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


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


class _Capture:
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

    def failed(self, exc: BaseException, pending: _Pending | None) -> None:
        message = f"{type(exc).__name__}: {exc}"
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
            sample = RagSample.model_validate(
                {
                    "user_input": pending.query,
                    "latency_ms": latency_ms,
                    "error": None if err is None else f"{type(err).__name__}: {err}",
                    "metadata": {
                        "framework": "llama_index",
                        "capture_errors": list(pending.errors),
                    },
                }
            )
            stream = None
        self.store.add(sample)
        if stream is not None:
            try:
                self.tap_stream(stream, sample, pending.start)
            except Exception as exc:
                self.failed(exc, None)
                self.set_stream_status(sample, None, f"not captured: {exc}", None)

    def build(
        self, pending: _Pending, response: Any, err: BaseException | None, latency_ms: float
    ) -> tuple[RagSample, Any]:
        ids = self.doc_ids(pending)
        texts = [_text(scored) for scored in pending.nodes]
        meta: dict[str, Any] = {
            "framework": "llama_index",
            "id_field": self.id_field if isinstance(self.id_field, str) else repr(self.id_field),
            "node_ids": [scored.node.node_id for scored in pending.nodes],
            "scores": [scored.score for scored in pending.nodes],
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
        extra_tags = {k: _jsonable(v) for k, v in pending.tags.items() if k not in METADATA_FIELDS}
        if extra_tags:
            meta["tags"] = extra_tags
        fields = fields_from_metadata(pending.tags)
        base: dict[str, Any] = {
            "user_input": pending.query,
            "response": text,
            "retrieved_contexts": contexts,
            "retrieved_ids": dedupe_best_rank(ids) if pending.retrieved else None,
            "retrieved_texts": texts if pending.retrieved else None,
            "latency_ms": latency_ms,
            "error": None if err is None else f"{type(err).__name__}: {err}",
        }
        try:
            sample = RagSample(**base, **fields, metadata=meta)
        except Exception as exc:
            pending.errors.append(
                f"ragmeter_* tags {sorted(fields)} were not usable ({exc}); they were left out"
            )
            keep = {"id": fields["id"]} if "id" in fields else {}
            sample = RagSample(**base, **keep, metadata=meta)
        if pending.errors:
            sample.metadata["capture_errors"] = list(pending.errors)
        return sample, stream

    # -- streaming ----------------------------------------------------------------------

    def set_stream_status(
        self, sample: RagSample, text: str | None, status: str, start: float | None
    ) -> None:
        with self.lock:
            if text is not None:
                sample.response = text
            sample.metadata["response_status"] = status
            if start is not None:
                sample.metadata["stream_complete_ms"] = (time.perf_counter() - start) * 1000.0

    def tap_stream(self, response: Any, sample: RagSample, start: float) -> None:
        """Wrap the response's token generator so the text is recorded as the caller reads it."""
        gen = response.response_gen
        if gen is None:
            self.set_stream_status(sample, None, "no stream", None)
            return

        def done(text: str | None, status: str) -> None:
            self.set_stream_status(sample, text, status, start if text is not None else None)

        if isinstance(response, AsyncStreamingResponse):
            response.response_gen = _atap(gen, done)
        else:
            response.response_gen = _tap(gen, done)


def _tap(gen: Any, done: Callable[[str | None, str], None]) -> Generator[str, None, None]:
    parts: list[str] = []
    finished = False
    try:
        for token in gen:
            parts.append(token)
            yield token
        finished = True
    finally:
        try:
            done("".join(parts) if finished else None, STREAM_DONE if finished else STREAM_PARTIAL)
        except Exception:
            logger.debug("ragmeter could not record a streamed response", exc_info=True)


async def _atap(gen: Any, done: Callable[[str | None, str], None]) -> AsyncGenerator[str, None]:
    parts: list[str] = []
    finished = False
    try:
        async for token in gen:
            parts.append(token)
            yield token
        finished = True
    finally:
        try:
            done("".join(parts) if finished else None, STREAM_DONE if finished else STREAM_PARTIAL)
        except Exception:
            logger.debug("ragmeter could not record a streamed response", exc_info=True)


class _SpanTracker(BaseSpanHandler[SimpleSpan]):
    """Feeds span enter/exit/drop to the capture; builds no span objects of its own."""

    if TYPE_CHECKING:  # a plain instance attribute, not a pydantic private one
        _core: ClassVar[_Capture]

    @classmethod
    def class_name(cls) -> str:
        """Class name."""
        return "RagmeterSpanTracker"

    def span_enter(
        self,
        id_: str,
        bound_args: Any,
        instance: Any | None = None,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Remember the span's parent; a top-level ``query``/``aquery`` starts a sample."""
        self._core.span_enter(id_, bound_args, instance, parent_id, tags)

    def span_exit(
        self,
        id_: str,
        bound_args: Any,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> None:
        """Forget the span; a captured query's sample is finished with its result."""
        self._core.span_closed(id_, result, None)

    def span_drop(
        self,
        id_: str,
        bound_args: Any,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> None:
        """Forget the span; a captured query that raised is finished with its error."""
        self._core.span_closed(id_, None, err if err is not None else RuntimeError("dropped"))

    def new_span(self, *args: Any, **kwargs: Any) -> SimpleSpan | None:
        """Not used: the tracker builds no span objects."""
        return None

    def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> SimpleSpan | None:
        """Not used."""
        return None

    def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> SimpleSpan | None:
        """Not used."""
        return None


_ROUTES: dict[type, Callable[[_Capture, Any], None]] = {
    RetrievalStartEvent: _Capture.retrieval_start,
    RetrievalEndEvent: _Capture.retrieval_end,
}


class RagmeterEventHandler(BaseEventHandler):
    """Records one :class:`~ragmeter.schema.RagSample` per top-level query of any query engine.

    ``handler = RagmeterEventHandler(id_field="ref_doc_id").attach()`` registers it (and its
    span tracker) on the root instrumentation dispatcher, once however often it is called;
    ``handler.detach()`` removes it; ``with RagmeterEventHandler() as handler:`` does both.

    A sample holds the query text (``user_input``), the retriever's nodes in rank order
    (``retrieved_ids`` mapped by ``id_field`` and de-duplicated to each doc's best rank;
    ``retrieved_texts`` and ``metadata["node_ids"]``/``["scores"]`` one entry per node),
    the texts the generator saw (``retrieved_contexts``: the response's source nodes, after
    any reranking), the answer (``response``), the query's wall-clock ``latency_ms`` and,
    if the query raised, its ``error``. ``id_field`` is ``"node_id"``, ``"ref_doc_id"`` (the
    source document of a chunk), ``"metadata.<key>"`` or a function ``node -> id``; a node
    without a value keeps its node id and the sample notes it in
    ``metadata["capture_errors"]``.

    Keys set with ``instrument_tags`` around the query fill the sample (see
    :mod:`ragmeter.capture`): ``{"ragmeter_id": qid}`` makes ``sample.id == qid`` so the
    run joins qrels; ``ragmeter_reference``, ``ragmeter_reference_ids`` and
    ``ragmeter_relevance`` fill the ground truth. Other tags go to ``metadata["tags"]``.

    A streaming response is never read by the handler: the sample is stored at once with
    ``response=None`` and ``metadata["response_status"] == "stream not consumed yet"``, and
    gets the text when the caller has read the whole stream (``"streamed"``); a stream
    closed early stays ``None``. Capture problems never reach the query: they are logged
    once (later ones at DEBUG), counted in ``capture_errors`` and noted on the sample.

    Raises :class:`~ragmeter.errors.InvalidInputError` for an invalid ``id_field``.
    """

    id_field: Any = "node_id"
    max_samples: int | None = None

    if TYPE_CHECKING:  # plain instance attributes, not pydantic private ones
        _core: ClassVar[_Capture]
        _spans: ClassVar[_SpanTracker]
        _dispatchers: ClassVar[list[Dispatcher]]

    def __init__(self, *, id_field: IdField = "node_id", max_samples: int | None = None) -> None:
        check_id_field(id_field)
        fields: dict[str, Any] = {"id_field": id_field, "max_samples": max_samples}
        super().__init__(**fields)
        core = _Capture(id_field, max_samples)
        spans = _SpanTracker()
        # plain instance attributes (not pydantic private ones): read on every span
        object.__setattr__(spans, "_core", core)
        object.__setattr__(self, "_core", core)
        object.__setattr__(self, "_spans", spans)
        object.__setattr__(self, "_dispatchers", [])

    @classmethod
    def class_name(cls) -> str:
        """Class name."""
        return "RagmeterEventHandler"

    # -- registration -------------------------------------------------------------------

    def attach(self, dispatcher: Dispatcher | None = None) -> RagmeterEventHandler:
        """Register on ``dispatcher`` (default: the root one, which sees everything); idempotent."""
        d = dispatcher if dispatcher is not None else get_dispatcher()
        with self._core.lock:
            if not any(h is self for h in d.event_handlers):
                d.add_event_handler(self)
            if not any(h is self._spans for h in d.span_handlers):
                d.add_span_handler(self._spans)
            if not any(x is d for x in self._dispatchers):
                self._dispatchers.append(d)
        return self

    def detach(self) -> None:
        """Unregister from every dispatcher it was attached to; queries in flight are dropped."""
        with self._core.lock:
            for d in self._dispatchers:
                d.event_handlers = [h for h in d.event_handlers if h is not self]
                d.span_handlers = [h for h in d.span_handlers if h is not self._spans]
            self._dispatchers.clear()
        self._core.reset()

    def __enter__(self) -> RagmeterEventHandler:
        return self.attach()

    def __exit__(self, *exc: object) -> None:
        self.detach()

    # -- the shared adapter surface -----------------------------------------------------

    @property
    def samples(self) -> list[RagSample]:
        """The captured samples in completion order (a copy of the list)."""
        return self._core.store.samples

    @property
    def store(self) -> SampleStore:
        """The underlying :class:`~ragmeter.capture.SampleStore`."""
        return self._core.store

    @property
    def capture_errors(self) -> int:
        """How many capture problems occurred (each is also noted on its sample when it has one)."""
        return self._core.errors

    def __len__(self) -> int:
        return len(self._core.store)

    def to_run(self) -> dict[str, list[str]]:
        """``{sample_id: [doc_id, ...]}`` for :func:`ragmeter.evaluate_run`."""
        return self._core.store.to_run()

    def to_qrels(self) -> dict[str, dict[str, float]]:
        """``{sample_id: {doc_id: grade}}`` from the ground truth given in tags."""
        return self._core.store.to_qrels()

    def to_jsonl(self, path: Any) -> int:
        """Write the samples as JSONL; returns how many."""
        return self._core.store.to_jsonl(path)

    def evaluate(self, **kwargs: Any) -> Any:
        """Score the samples with :func:`ragmeter.evaluate_rag` (keyword arguments pass through)."""
        return self._core.store.evaluate(**kwargs)

    def evaluate_retrieval(
        self, qrels: Mapping[str, Mapping[str, float]] | None = None, **kwargs: Any
    ) -> Any:
        """Score the captured run with :func:`ragmeter.evaluate_run` (qrels default: the tags')."""
        return self._core.store.evaluate_retrieval(qrels, **kwargs)

    def clear(self) -> None:
        """Forget every captured sample."""
        self._core.store.clear()

    # -- events -------------------------------------------------------------------------

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        """Route one instrumentation event; never raises."""
        route = _ROUTES.get(type(event))
        if route is None:
            return
        core = self._core
        try:
            route(core, event)
        except Exception as exc:
            core.failed(exc, None)
