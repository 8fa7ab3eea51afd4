"""``RagmeterEventHandler``: LlamaIndex instrumentation -> one ``RagSample`` per query.

It is an instrumentation event handler with a companion span handler
(:class:`_SpanTracker`); both feed one :class:`~ragmeter_llamaindex._capture.Capture`,
which they reach through their instance ``__dict__``: pydantic's private-attribute lookup
costs microseconds, and the span hooks run a dozen times per query.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

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

from ragmeter.capture import FailedQueries, Hints, Retrieval, SampleStore, check_retrieval
from ragmeter.evaluation.retrieval import MissingQueries
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.schema import RagSample
from ragmeter_llamaindex._capture import FRAMEWORK, Capture
from ragmeter_llamaindex._retriever import IdField, check_id_field, describe_id_field

__all__ = ["RagmeterEventHandler"]

SAMPLE_ID_HINT = (
    "LlamaIndex: run each query inside instrument_tags({'ragmeter_id': qid}) (from "
    "llama_index.core.instrumentation.dispatcher); without it a sample's id is a new uuid."
)


def doc_id_hint(id_field: IdField) -> str:
    """How a LlamaIndex user makes retrieved ids the qrels' doc ids, given ``id_field``."""
    return (
        f"LlamaIndex: the handler reads each node's id_field={describe_id_field(id_field)} "
        "('node_id' is a chunk's own id once documents are split); pass "
        "RagmeterEventHandler(id_field='ref_doc_id') to score the source Document's id, or "
        "id_field='metadata.<key>' (or a function node -> id)."
    )


class _SpanTracker(BaseSpanHandler[SimpleSpan]):
    """Feeds span enter/exit/drop to the capture; builds no span objects of its own."""

    if TYPE_CHECKING:  # a plain instance attribute, not a pydantic private one
        _core: ClassVar[Capture]

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


_ROUTES: dict[type, Callable[[Capture, Any], None]] = {
    RetrievalStartEvent: Capture.retrieval_start,
    RetrievalEndEvent: Capture.retrieval_end,
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

    Every retriever call inside the query (a sub-question engine makes one per
    sub-question) is kept in ``metadata["retriever_calls"]`` (``name``: the retriever's
    class name, ``query``, ``depth``, ``ids``, ``latency_ms``, ``used``), and one ranking is
    scored, chosen as in the LangChain adapter: ``retrieval="last"`` (the default: the last
    outermost call to finish), ``"first"`` or ``"merge"`` (all of them, each id at its best
    rank), or the calls of ``retriever_name``. Calls that ran concurrently (``use_async``)
    make that pick depend on timing; ``capture_errors`` says so.

    Keys set with ``instrument_tags`` around the query fill the sample (see
    :mod:`ragmeter.capture`): ``{"ragmeter_id": qid}`` makes ``sample.id == qid`` so the
    run joins qrels; ``ragmeter_reference``, ``ragmeter_reference_ids`` and
    ``ragmeter_relevance`` fill the ground truth (a value that does not validate is left
    out and noted). Other tags go, JSON-safe, to ``metadata["run_metadata"]``, as every
    adapter puts your run metadata; ``metadata["framework"]`` is ``"llamaindex"``.

    A streaming response is never read by the handler: the sample is stored at once with
    ``response=None`` and ``metadata["response_status"] == "stream not consumed yet"``, and
    gets the text when the caller has read the whole stream (``"streamed"``); a stream
    closed early stays ``None``. Capture problems never reach the query: they are logged
    once (later ones at DEBUG), counted in ``capture_errors`` and noted on the sample.

    Raises :class:`~ragmeter.errors.InvalidInputError` for an invalid ``id_field`` or
    ``retrieval``.
    """

    id_field: Any = "node_id"
    max_samples: int | None = None
    retrieval: str = "last"
    retriever_name: str | None = None

    if TYPE_CHECKING:  # plain instance attributes, not pydantic private ones
        _core: ClassVar[Capture]
        _spans: ClassVar[_SpanTracker]
        _dispatchers: ClassVar[list[Dispatcher]]

    def __init__(
        self,
        *,
        id_field: IdField = "node_id",
        max_samples: int | None = None,
        retrieval: Retrieval = "last",
        retriever_name: str | None = None,
    ) -> None:
        check_id_field(id_field)
        retrieval = check_retrieval(retrieval)
        fields: dict[str, Any] = {
            "id_field": id_field,
            "max_samples": max_samples,
            "retrieval": retrieval,
            "retriever_name": retriever_name,
        }
        super().__init__(**fields)
        hints = Hints(FRAMEWORK, SAMPLE_ID_HINT, doc_id_hint(id_field))
        core = Capture(
            id_field, max_samples, retrieval=retrieval, retriever_name=retriever_name, hints=hints
        )
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

    def to_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write the samples as JSONL; returns how many."""
        return self._core.store.to_jsonl(path)

    def evaluate(self, **kwargs: Any) -> RagEvalReport:
        """Score the samples with :func:`ragmeter.evaluate_rag` (keyword arguments pass through)."""
        return self._core.store.evaluate(**kwargs)

    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> RetrievalEvalReport:
        """Score the captured run with :func:`ragmeter.evaluate_run` (qrels default: the tags').

        A judged query never captured scores 0 (trec_eval ``-c``) unless
        ``only_captured=True`` (= ``missing_queries="skip"``); a query that raised before
        anything was retrieved scores 0 unless ``failed_queries="skip"``, and is listed in
        ``report.extra["capture"]["failed"]``; a repeated ``ragmeter_id`` is scored as
        ``"<id>#2"``... See :meth:`ragmeter.capture.SampleStore.evaluate_retrieval`.
        """
        return self._core.store.evaluate_retrieval(
            qrels,
            only_captured=only_captured,
            missing_queries=missing_queries,
            failed_queries=failed_queries,
            **kwargs,
        )

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
