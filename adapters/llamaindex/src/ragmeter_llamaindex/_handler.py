"""``RagmeterEventHandler``: LlamaIndex instrumentation -> one ``RagSample`` per query.

It is an instrumentation event handler with a companion span handler
(:class:`_SpanTracker`); both feed one :class:`~ragmeter_llamaindex._capture.Capture`,
which they reach through their instance ``__dict__``: pydantic's private-attribute lookup
costs microseconds, and the span hooks run a dozen times per query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.chat_engine.types import BaseChatEngine
from llama_index.core.instrumentation import (  # type: ignore[attr-defined, unused-ignore]
    Dispatcher,
    get_dispatcher,
)
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMCompletionEndEvent
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.instrumentation.span import SimpleSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

from ragmeter.capture import (
    Attachment,
    CaptureConfig,
    DatasetFront,
    Hints,
    ProblemLog,
    Record,
    Retrieval,
    SampleStore,
    check_record,
    check_retrieval,
    check_stage,
    deprecated_selection,
)
from ragmeter.errors import InvalidInputError
from ragmeter.schema import CONTEXT
from ragmeter_llamaindex._capture import FRAMEWORK, Capture, logger
from ragmeter_llamaindex._retriever import UNSET, DocId, describe_id_field, doc_id_option

__all__ = ["RagmeterEventHandler"]

SAMPLE_ID_HINT = (
    "LlamaIndex: run each query inside `with handler.capture(id=qid):` (or "
    "instrument_tags({'ragmeter_id': qid}) from llama_index.core.instrumentation.dispatcher); "
    "without it a sample's id is a new uuid."
)


STAGE_HINT = (
    "LlamaIndex: the context is the response's source nodes (after node postprocessors); when "
    "they are no ranking of one retriever call (a sub-question engine, a router combining "
    "engines), score one call with stage='<name>' (a stage is named after its retriever's "
    "class, VectorIndexRetriever#2 for a second call; name retrievers with "
    "stage_names={'bm25': retriever})."
)


def doc_id_hint(doc_id: DocId) -> str:
    """How a LlamaIndex user makes retrieved ids the qrels' doc ids, given ``doc_id``.

    >>> doc_id_hint("ref_doc_id").count("doc_id='ref_doc_id' to score")
    0
    """
    if doc_id == "ref_doc_id":
        fix = (
            "the source Document's id (a node not split from a Document is its own); if the "
            "qrels name documents another way, pass doc_id='metadata.<key>' (or a function "
            "node -> id), or give the Documents the qrels' ids (Document(id_=...))."
        )
    else:
        fix = (
            "'node_id' is a chunk's own id once documents are split; pass "
            "RagmeterEventHandler(doc_id='ref_doc_id') to score the source Document's id, or "
            "doc_id='metadata.<key>' (or a function node -> id)."
        )
    return f"LlamaIndex: the handler reads each node's doc_id={describe_id_field(doc_id)}: {fix}"


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
        """A top-level query or chat turn starts a record (a span inside one: nothing, but a
        retriever the user named)."""
        core = self._core
        if core.run.get() is None:
            core.span_enter(id_, bound_args, instance, parent_id, tags)
        elif core.names:
            core.name_span(id_, instance)

    def span_exit(
        self,
        id_: str,
        bound_args: Any,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> None:
        """A captured query's record is finished with its result (other spans: nothing)."""
        core = self._core
        if id_ in core.retrievals or id_ in core.roots or core.chat_streams:
            core.span_closed(id_, instance, result, None)

    def span_drop(
        self,
        id_: str,
        bound_args: Any,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> None:
        """A captured query that raised is finished with its error (other spans: nothing)."""
        core = self._core
        if id_ in core.retrievals or id_ in core.roots or core.chat_streams:
            core.span_closed(
                id_, instance, None, err if err is not None else RuntimeError("dropped")
            )

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
    LLMChatEndEvent: Capture.llm_end,
    LLMCompletionEndEvent: Capture.llm_end,
}


class RagmeterEventHandler(DatasetFront, BaseEventHandler):
    """Records one :class:`~ragmeter.schema.RagSample` per top-level query or chat turn.

    ``with handler.capture(id=qid, relevance=qrels[qid]): engine.query(q)`` attaches the
    handler (once) and gives the query's sample that id and ground truth (threads and
    asyncio tasks each see their own scope); ``handler.run_dataset(engine, queries,
    qrels=...)`` runs a whole dataset with bounded concurrency and a progress bar and returns
    the report. ``handler.attach()`` registers it (and its span tracker) on the root
    instrumentation dispatcher, once however often it is called; ``handler.detach()``
    removes it; ``with RagmeterEventHandler() as handler:`` does both.

    A *top-level* run is a ``query``/``aquery`` of any query engine or a
    ``chat``/``achat``/``stream_chat``/``astream_chat`` of any chat engine (``context``,
    ``condense_plus_context``, ``condense_question``...) not inside another one being
    captured. Its sample holds the query or chat message (``user_input``), the retriever's
    nodes in rank order (``retrieved_ids`` mapped by ``doc_id`` and de-duplicated to each
    doc's best rank; ``retrieved_texts`` and ``metadata["node_ids"]``/``["scores"]`` one
    entry per node), the texts the generator saw (``retrieved_contexts``: the response's
    source nodes, after any reranking), the answer (``response``), the token usage the LLM
    calls report (``input_tokens``/``output_tokens``), the wall-clock ``latency_ms`` and,
    if it raised, its ``error``. ``doc_id`` is ``"node_id"``, ``"ref_doc_id"`` (the source
    document of a chunk), ``"metadata.<key>"``, ``"content"`` or a function ``node -> id``;
    a node without a value keeps its node id and the sample notes it in
    ``metadata["capture_errors"]``. ``id_field=`` is the deprecated name of ``doc_id``.

    Every retriever call inside the run (a sub-question engine makes one per sub-question,
    a router one per chosen engine, a ``QueryFusionRetriever`` one per member inside its
    own) is a stage of the sample (``sample.stages``: ``name``, the retriever's class, or
    the name ``stage_names={"bm25": retriever}`` gives it, ``"#2"`` for a second call;
    ``query``, ``depth``, ``ids``, ``latency_ms``), and so are the engine's node
    postprocessors when they changed the ranking (one ``"reranker"`` stage named after
    them). ``context`` is what reached the LLM, the response's source nodes; when they are
    no ranking of one call (sub-question, router) the sample has none and says so. The
    scored ranking (``retrieved_ids``) is the context unless ``stage=`` names another;
    ``retrieval=`` and ``retriever_name=`` are deprecated. Rankings are kept in list
    order, ties included, never re-sorted by score.

    Ids and ground truth: the scope's (``capture(...)``), or ``instrument_tags`` keys
    around the query (``ragmeter_id``, ``ragmeter_reference``, ``ragmeter_reference_ids``,
    ``ragmeter_relevance``; they win; a value that does not validate is left out and
    noted). Other tags go, JSON-safe, to ``metadata["run_metadata"]``;
    ``metadata["framework"]`` is ``"llamaindex"``. ``record="tagged"`` records only runs
    that carry a sample id. Queries LlamaIndex runs on its own, inside an evaluator
    (``FaithfulnessEvaluator`` queries an index of the contexts) or a tool, are never the
    user's: they are not recorded (:attr:`skipped` counts them) unless
    ``capture_internal=True``. Several handlers may be attached at once: each keeps its
    own samples and its own ``capture()`` scopes.

    A streaming response (query or chat) is never read by the handler: the sample is stored
    at once with ``response=None`` and ``metadata["response_status"] == "stream not consumed
    yet"``, and gets the text when the stream has been read to the end (``"streamed"``); a
    stream closed early stays ``None``. While a query runs only references are kept; the
    sample is built when first read. Capture problems never reach the query: they are
    logged once per kind (later ones at DEBUG), counted in ``capture_errors`` and noted on
    the sample.

    Raises :class:`~ragmeter.errors.InvalidInputError` for an invalid ``doc_id``, ``stage``,
    ``stage_names``, ``retrieval`` or ``record``.
    """

    doc_id: Any = "node_id"
    max_samples: int | None = None
    stage: str = CONTEXT
    retrieval: str | None = None
    retriever_name: str | None = None
    record: str = "all"
    capture_internal: bool = False

    if TYPE_CHECKING:  # plain instance attributes, not pydantic private ones
        _core: ClassVar[Capture]
        _spans: ClassVar[_SpanTracker]
        _dispatchers: ClassVar[list[Dispatcher]]
        _attachment_state: ClassVar[Attachment]

    def __init__(
        self,
        *,
        doc_id: DocId | None = None,
        max_samples: int | None = None,
        stage: str = CONTEXT,
        stage_names: Mapping[str, Any] | None = None,
        record: Record = "all",
        capture_internal: bool = False,
        retrieval: Retrieval | None = None,
        retriever_name: str | None = None,
        id_field: Any = UNSET,
    ) -> None:
        rule = doc_id_option(doc_id, id_field, owner="RagmeterEventHandler")
        stage = check_stage(stage)
        if retrieval is not None:
            deprecated_selection("RagmeterEventHandler", "retrieval")
            retrieval = check_retrieval(retrieval)
        if retriever_name is not None:
            deprecated_selection("RagmeterEventHandler", "retriever_name")
        record = check_record(record)
        names = _check_names(stage_names)
        fields: dict[str, Any] = {
            "doc_id": rule,
            "max_samples": max_samples,
            "stage": stage,
            "retrieval": retrieval,
            "retriever_name": retriever_name,
            "record": record,
            "capture_internal": bool(capture_internal),
        }
        super().__init__(**fields)
        hints = Hints(
            FRAMEWORK, SAMPLE_ID_HINT, doc_id_hint(rule), label="LlamaIndex", stage=STAGE_HINT
        )
        config = CaptureConfig(
            FRAMEWORK,
            ProblemLog(logger, "LlamaIndex"),
            stage=stage,
            retrieval=retrieval,
            retriever_name=retriever_name,
            name_hint="a LlamaIndex stage is named after its retriever's class, e.g. "
            "'VectorIndexRetriever' (or by stage_names=)",
            stage_hint=STAGE_HINT,
            record=record,
            owner=self,
        )
        core = Capture(
            rule,
            config,
            SampleStore(max_samples=max_samples, hints=hints),
            names=names,
            internal=bool(capture_internal),
        )
        spans = _SpanTracker()
        # plain instance attributes (not pydantic private ones): read on every span
        object.__setattr__(spans, "_core", core)
        object.__setattr__(self, "_core", core)
        object.__setattr__(self, "_spans", spans)
        object.__setattr__(self, "_dispatchers", [])
        object.__setattr__(self, "_attachment_state", Attachment(self._register))

    @classmethod
    def class_name(cls) -> str:
        """Class name."""
        return "RagmeterEventHandler"

    @property
    def id_field(self) -> Any:
        """The deprecated name of :attr:`doc_id`."""
        return self.doc_id

    # -- registration -------------------------------------------------------------------

    def attach(self, dispatcher: Dispatcher | None = None) -> RagmeterEventHandler:
        """Register on ``dispatcher`` (default: the root one, which sees everything);
        idempotent. Other handlers attached meanwhile are left as they are."""
        if dispatcher is not None:
            self._add_to(dispatcher)
        self._attachment_state.attach()
        return self

    def detach(self) -> None:
        """Unregister from every dispatcher it was attached to (once no ``capture()`` scope of
        its own is open); queries in flight are dropped. Other handlers are left as they are."""
        self._attachment_state.detach()

    def _register(self, on: bool) -> None:
        if on:
            if not self._dispatchers:
                self._add_to(get_dispatcher())
        else:
            self._unregister()
            self._core.reset()

    def _add_to(self, d: Dispatcher) -> None:
        with self._core.lock:
            if not any(h is self for h in d.event_handlers):
                d.add_event_handler(self)
            if not any(h is self._spans for h in d.span_handlers):
                d.add_span_handler(self._spans)
            if not any(x is d for x in self._dispatchers):
                self._dispatchers.append(d)

    def _unregister(self) -> None:
        with self._core.lock:
            for d in self._dispatchers:
                d.event_handlers = [h for h in d.event_handlers if h is not self]
                d.span_handlers = [h for h in d.span_handlers if h is not self._spans]
            self._dispatchers.clear()

    @property
    def attached(self) -> bool:
        """Whether the handler is registered on a dispatcher."""
        return bool(self._dispatchers)

    def __enter__(self) -> RagmeterEventHandler:
        return self.attach()

    def __exit__(self, *exc: object) -> None:
        self.detach()

    # -- the shared adapter surface -----------------------------------------------------

    @property
    def store(self) -> SampleStore:
        """The :class:`~ragmeter.capture.SampleStore` holding the captured samples."""
        return self._core.store

    @property
    def capture_errors(self) -> int:
        """How many capture problems occurred (each is also noted on its sample when it has one)."""
        return self._core.errors

    @property
    def skipped(self) -> int:
        """Queries LlamaIndex ran on its own (inside an evaluator or a tool) left out."""
        return self._core.skipped

    def _attachment(self) -> Attachment:
        return self._attachment_state

    def _dataset_call(
        self, target: Any, options: dict[str, Any], *, asynchronous: bool
    ) -> Callable[[str], Any]:
        """``run_dataset`` runs ``target.query(query)`` (async: ``aquery``); a chat engine
        gets a fresh conversation per query (``reset()``, then ``chat``/``achat``), so no
        query sees another's history."""
        if isinstance(target, BaseChatEngine):
            return _fresh_chat(target, asynchronous)
        call: Callable[[str], Any] = _entry(
            target, ("aquery", "achat") if asynchronous else ("query", "chat")
        )
        return call

    def _dataset_workers(self, target: Any, concurrency: int) -> int:
        """A chat engine holds one conversation, so its queries run one at a time (several
        threads would share, and may deadlock on, its memory)."""
        return 1 if isinstance(target, BaseChatEngine) else concurrency

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


def _fresh_chat(engine: Any, asynchronous: bool) -> Callable[[str], Any]:
    """``chat(query)`` on ``engine`` in a fresh conversation each time."""
    if asynchronous:

        async def achat(query: str) -> Any:
            engine.reset()
            return await engine.achat(query)

        return achat

    def chat(query: str) -> Any:
        engine.reset()
        return engine.chat(query)

    return chat


def _check_names(stage_names: Mapping[str, Any] | None) -> dict[int, str]:
    """``{id(retriever): name}`` from ``stage_names={name: retriever}``."""
    if stage_names is None:
        return {}
    if not isinstance(stage_names, Mapping):
        raise InvalidInputError(
            "stage_names must be a mapping {stage name: retriever object}, got "
            f"{type(stage_names).__name__}"
        )
    out: dict[int, str] = {}
    for name, retriever in stage_names.items():
        if not isinstance(name, str) or not name or name == CONTEXT:
            raise InvalidInputError(
                f"stage_names: a stage name must be a non-empty str other than {CONTEXT!r}, "
                f"got {name!r}"
            )
        if not isinstance(retriever, BaseRetriever):
            raise InvalidInputError(
                f"stage_names[{name!r}] must be a LlamaIndex retriever (BaseRetriever), got "
                f"{type(retriever).__name__}"
            )
        out[id(retriever)] = name
    return out


def _entry(engine: Any, names: Sequence[str]) -> Any:
    for name in names:
        method = getattr(engine, name, None)
        if callable(method):
            return method
    raise InvalidInputError(
        f"run_dataset needs a query engine or chat engine (with .{names[0]}() or "
        f".{names[1]}()), got {type(engine).__name__}"
    )
