"""The capture state of :class:`~ragmeter_llamaindex.RagmeterEventHandler` and its logic.

:class:`Capture` keeps the span tree (``span id -> parent id``) and spots *top-level*
spans: a ``query``/``aquery`` call on any ``BaseQueryEngine`` (``CustomQueryEngine``
included, which emits no ``QueryStartEvent``) or a ``chat``/``achat``/``stream_chat``/
``astream_chat`` call on any ``BaseChatEngine`` (``context``, ``condense_plus_context``...),
with no enclosing top-level span being captured. Every retriever call inside it
(``RetrievalStartEvent``/``EndEvent``, sub-engines' too) becomes a stage
(:class:`~ragmeter.capture.StageRecord`) of its :class:`LlamaIndexRun`, with its own
ranking, depth (how many retriever calls enclose it; a ``QueryFusionRetriever``'s members
are inside it, which is a ``"fusion"`` stage) and timing; every LLM call's reported token
usage is added up. What reached the LLM is the response's source nodes: when they are a
retriever call's nodes, that call is the context; when the engine's node postprocessors
re-ordered or cut them, they are one more stage (``"reranker"``, named after the
postprocessors) and the context; when they are not a ranking of retrieved nodes (a
sub-question engine answers from sub-answers, a router combines engines) the sample has
no context ranking and says so. Queries LlamaIndex runs on its own (an evaluator's query
over the contexts, a query engine inside a tool) are not the user's: they are not
recorded unless asked. The run a span belongs to is found through the context (as
LlamaIndex finds a span's parent), so concurrent ``aquery`` calls and threads never mix
their samples. While a query runs only references (ids and texts, never nodes) are kept;
the sample is built when read.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from sys import intern
from types import FrameType
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.chat_engine.types import (
    AgentChatResponse,
    BaseChatEngine,
    StreamingAgentChatResponse,
)
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMCompletionEndEvent
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.schema import NodeWithScore

from ragmeter.capture import (
    CaptureConfig,
    RunRecord,
    SampleStore,
    StageRecord,
    describe,
)
from ragmeter_llamaindex._retriever import DocId, describe_id_field, node_doc_id
from ragmeter_llamaindex._run import (
    LlamaIndexRun,
    _extra,
    _packed,
    _query_text,
    _text,
    token_usage,
)
from ragmeter_llamaindex._stream import STREAM_PENDING, tap_stream

__all__ = ["FRAMEWORK", "Capture", "LlamaIndexRun"]  # LlamaIndexRun: from _run

logger = logging.getLogger("ragmeter_llamaindex")
logger.addHandler(logging.NullHandler())

FRAMEWORK = "llamaindex"
"""``sample.metadata["framework"]`` (the name ``ragmeter_llamaindex.judge`` reports too)."""

_QUERY_METHODS = frozenset({"query", "aquery"})
_CHAT_METHODS = frozenset({"chat", "achat", "stream_chat", "astream_chat"})
_WRITE_METHODS = frozenset({"write_response_to_history", "awrite_response_to_history"})


def _method_of(span_id: str) -> str:
    """``"query"`` from a span id ``"RetrieverQueryEngine.query-<uuid4>"``."""
    name = span_id[:-37] if len(span_id) > 37 and span_id[-37] == "-" else span_id
    return name.rpartition(".")[2]


def _class_of(span_id: str) -> str:
    """``"VectorIndexRetriever"`` from a span id ``"VectorIndexRetriever.retrieve-<uuid4>"``
    (interned: every record of a retriever class shares one string)."""
    name = span_id[:-37] if len(span_id) > 37 and span_id[-37] == "-" else span_id
    return sys.intern(name.rpartition(".")[0] or name)


class Capture:
    """The capture state and logic shared by the event handler and the span tracker.

    The run a span belongs to is found the way LlamaIndex finds a span's parent: through
    the context. Entering a top-level span sets this capture's run :class:`ContextVar` (and
    a retriever call its depth), leaving it resets them; every span, event and LLM call in
    between, in this thread or task or the ones LlamaIndex starts from it, reads them, so a
    span inside a captured run costs one context lookup and no bookkeeping.
    """

    def __init__(
        self,
        doc_id: DocId,
        config: CaptureConfig,
        store: SampleStore,
        *,
        names: Mapping[int, str] | None = None,
        internal: bool = False,
    ) -> None:
        self.doc_id = doc_id
        self.config = config
        self.store = store
        self.names = dict(names or {})  # id(retriever) -> the stage name the user gave it
        self.internal = internal  # record LlamaIndex's own queries (evaluators, tools) too
        self.skipped = 0  # LlamaIndex's own queries left out
        self.lock = threading.Lock()
        self.run: ContextVar[LlamaIndexRun | None] = ContextVar(
            f"ragmeter_llamaindex_run_{id(self)}", default=None
        )
        self.enclosing: ContextVar[StageRecord | None] = ContextVar(
            f"ragmeter_llamaindex_stage_{id(self)}", default=None
        )
        # open top-level span -> its run; open retrieval span -> its stage (with the tokens
        # that reset the context when the span closes)
        self.roots: dict[str, tuple[LlamaIndexRun, Token[LlamaIndexRun | None]]] = {}
        self.retrievals: dict[str, tuple[StageRecord, Token[StageRecord | None]]] = {}
        self.chat_streams: dict[int, tuple[Any, LlamaIndexRun]] = {}  # id(response) -> run
        self.named_spans: dict[str, str] = {}  # retrieve span id -> the user's stage name

    @property
    def errors(self) -> int:
        """How many capture problems were logged."""
        return self.config.problems.count

    def reset(self) -> None:
        with self.lock:
            self.roots.clear()
            self.retrievals.clear()
            self.chat_streams.clear()
            self.named_spans.clear()

    def failed(self, exc: BaseException | None, run: RunRecord | None, message: str = "") -> None:
        """Log a capture problem (a warning once per kind, then DEBUG); note it on ``run``."""
        text = message or (describe(exc) if exc is not None else "?")
        if run is not None:
            with self.lock:
                run.note(text)
        self.config.problems("capture", text, exc)

    # -- span hooks ---------------------------------------------------------------------

    def span_enter(
        self, id_: str, bound_args: Any, instance: Any, parent_id: str | None, tags: Any
    ) -> None:
        try:  # called outside captured runs only (the span tracker checks)
            if isinstance(instance, BaseQueryEngine):
                if _method_of(id_) not in _QUERY_METHODS:
                    return
                argument = "str_or_query_bundle"
            elif isinstance(instance, BaseChatEngine):
                if _method_of(id_) not in _CHAT_METHODS:
                    return
                argument = "message"
            else:
                return
            if not self.internal and _internal_query():
                with self.lock:
                    self.skipped += 1
                return
            run = LlamaIndexRun(self.config, tags, self.doc_id, id_)
            arguments = getattr(bound_args, "arguments", None) or {}
            run.user_input = _query_text(arguments.get(argument))
            token = self.run.set(run)
            with self.lock:
                self.roots[id_] = (run, token)
        except Exception as exc:
            self.failed(exc, None)

    def name_span(self, id_: str, instance: Any) -> None:
        """A retriever the user named (``stage_names=``) starts a call: remember the name."""
        name = self.names.get(id(instance))
        if name is not None:
            self.named_spans[id_] = name

    def span_closed(
        self, span_id: str, instance: Any, result: Any, err: BaseException | None
    ) -> None:
        try:
            if self.retrievals:
                call_entry = self.retrievals.pop(span_id, None)  # dict.pop is atomic
                if call_entry is not None:
                    call, stage_token = call_entry
                    _reset(self.enclosing, stage_token)
                    if not call.finished and err is not None:
                        call.failed(err)
            if self.roots:
                root_entry = self.roots.pop(span_id, None)
                if root_entry is not None:  # a top-level span closed
                    run, run_token = root_entry
                    _reset(self.run, run_token)
                    run.span = None  # the id string is not kept with the sample
                    if not run.ignored:
                        self.finish(run, result, err, instance)
            if (  # a chat stream's writer (a thread LlamaIndex may start inside the chat span)
                self.chat_streams
                and isinstance(instance, StreamingAgentChatResponse)
                and _method_of(span_id) in _WRITE_METHODS
            ):
                self._stream_written(instance, err)
        except Exception as exc:
            self.failed(exc, None)

    def _stream_written(self, response: Any, err: BaseException | None) -> None:
        """A streamed chat answer was written (its writer thread's span closed)."""
        with self.lock:
            waiting = self.chat_streams.pop(id(response), None)
        if waiting is not None:
            text = getattr(response, "response", None) if err is None else None
            waiting[1].stream_done(
                text if isinstance(text, str) else None,
                "streamed" if err is None else f"stream failed: {describe(err)}",
            )

    # -- events -------------------------------------------------------------------------

    def retrieval_start(self, event: RetrievalStartEvent) -> None:
        sid = event.span_id
        run = self.run.get()
        if run is None or sid is None or run.ignored:
            return  # outside any captured run
        parent = self.enclosing.get()
        query = _query_text(getattr(event, "str_or_query_bundle", None))
        name = self.named_spans.pop(sid, None) if self.named_spans else None
        call = StageRecord(
            name or _class_of(sid), query, 0 if parent is None else parent.depth + 1, parent=parent
        )
        with self.lock:
            if parent is not None:
                parent.nest()  # a fusion retriever's members run inside it
            run.add_stage(call)
        # retriever calls inside this one (a fusion retriever's members) are one deeper
        self.retrievals[sid] = (call, self.enclosing.set(call))

    def retrieval_end(self, event: RetrievalEndEvent) -> None:
        sid = event.span_id or ""
        entry = self.retrievals.get(sid)
        if entry is None or entry[0].finished:
            return
        call = entry[0]
        rule = self.doc_id
        ids: list[str | None] = []
        node_ids: list[str] = []
        texts: list[str] = []
        scores: list[Any] = []
        missing = 0
        failure: Exception | None = None
        for scored in event.nodes:
            node = scored.node
            node_id = node.id_
            node_ids.append(node_id)
            text = getattr(node, "text", None)
            # interned: a retriever that hands out copies of its nodes (BM25Retriever) would
            # otherwise keep a copy of each text per query; the same text is kept once
            texts.append(intern(text) if type(text) is str else str(node.get_content()))
            scores.append(scored.score)
            if rule == "node_id":
                ids.append(node_id)
            elif rule == "content":
                ids.append(None)  # hashed from the text when the sample is read
            else:
                found: str | None = None
                try:
                    found = node_doc_id(node, rule)
                except Exception as exc:
                    failure = failure or exc
                if found is None:
                    missing += 1
                    found = node_id
                ids.append(found)
        packed = _packed(scores)
        # node ids are the ids unless another rule names the documents: keep them only then
        extra = packed if rule == "node_id" and type(packed) is bytes else (tuple(node_ids), packed)
        call.done(ids, texts, unhashed=rule == "content", extra=extra)
        run = self.run.get()
        if run is not None:  # until the run ends: are the response's sources these nodes?
            run.last = (call, event.nodes)
        if failure is not None or missing:
            run = self.run.get()
            if failure is not None:
                self.failed(failure, run)
            else:
                if run is not None:
                    with self.lock:
                        run.note(
                            f"{missing} of {len(ids)} retrieved node(s) had no value for "
                            f"doc_id={describe_id_field(rule)}; their node_id was used instead"
                        )

    def llm_end(self, event: LLMChatEndEvent | LLMCompletionEndEvent) -> None:
        inp, out = token_usage(event.response)
        if inp is None and out is None:
            return
        run = self.run.get()
        if run is not None and not run.ignored:
            with self.lock:
                run.add_tokens(inp, out)

    # -- samples ------------------------------------------------------------------------

    def finish(
        self, run: LlamaIndexRun, response: Any, err: BaseException | None, engine: Any = None
    ) -> None:
        run.finish(err)
        stream: Any = None
        try:
            if isinstance(response, (StreamingResponse, AsyncStreamingResponse)):
                stream = response
                run.status = STREAM_PENDING
            elif isinstance(response, StreamingAgentChatResponse):
                run.status = STREAM_PENDING
                with self.lock:
                    if response.is_done:  # the writer thread already finished
                        run.response, run.status = response.response, "streamed"
                    else:
                        self.chat_streams[id(response)] = (response, run)
            elif isinstance(response, (Response, AgentChatResponse)):
                run.response = response.response
            elif response is not None:
                run.response = str(response)
            sources = getattr(response, "source_nodes", None)
            last, run.last = run.last, None
            if sources:
                if last is not None and _same(sources, last[1]):
                    run.context = last[0]  # the usual case: the last call's very nodes
                else:
                    self._context_from(run, sources, engine)
        except Exception as exc:
            self.failed(exc, run)
        self.store.add(run)
        if stream is not None:
            try:
                tap_stream(stream, run.stream_done)
            except Exception as exc:
                self.failed(exc, None)
                run.stream_done(None, f"not captured: {exc}")

    def _context_from(
        self, run: LlamaIndexRun, sources: Sequence[NodeWithScore], engine: Any
    ) -> None:
        """The response's source nodes are not the last call's: a postprocessed ranking of an
        outermost call's nodes (one more stage, the context), or no ranking at all."""
        source_ids = [s.node.node_id for s in sources]
        wanted = set(source_ids)
        for stage in reversed(run.stages):
            if not stage.finished or stage.depth != 0:
                continue
            own = _extra(stage)[0]
            node_ids = own if own is not None else tuple(stage.ids or ())
            if not wanted <= set(node_ids):
                continue
            doc_of = dict(zip(node_ids, stage._ids or (), strict=False))
            post = StageRecord(
                _postprocessors(engine), stage.query, 0, kind="reranker", inputs=(stage,)
            )
            ids = [doc_of.get(n) for n in source_ids]
            packed = _packed([s.score for s in sources])
            extra = (
                packed
                if self.doc_id == "node_id" and type(packed) is bytes
                else (
                    tuple(source_ids),
                    packed,
                )
            )
            post.start = stage.end or stage.start
            post.done(ids, [_text(s.node) for s in sources], extra=extra)
            with self.lock:
                run.add_stage(post)
            run.context = post
            return
        run.seen = tuple(_text(s.node) for s in sources)
        run.source_ids = tuple(source_ids)
        names = ", ".join(sorted({str(s.name) for s in run.stages})) or "none"
        run.context_note = (
            f"the response's {len(sources)} source nodes (what reached the LLM) are not a "
            f"ranking of any one retriever call (stages: {names}): a sub-question engine "
            "answers from its sub-answers, a router combines several engines, so the sample "
            "has no context ranking. Score one retriever call with stage='<name>' (a "
            "LlamaIndex stage is named after its retriever's class; name it with "
            "stage_names={'bm25': retriever})."
        )


def _postprocessors(engine: Any) -> str:
    """The stage name of an engine's node postprocessors: their classes, joined by ``+``."""
    found = getattr(engine, "_node_postprocessors", None) or ()
    names = [type(p).__name__ for p in found]
    return "+".join(names) if names else "postprocessed"


_OWN_CALLERS = frozenset(
    {
        # BaseEvaluator's entry points (an evaluator queries an index of the contexts)
        "evaluate",
        "aevaluate",
        "evaluate_response",
        "aevaluate_response",
        # BaseTool's (an agent calls a query engine tool)
        "call",
        "acall",
        "__call__",
    }
)
_STACK_DEPTH = 32  # an evaluator's or a tool's frame sits well within this above the query


def _internal_query() -> bool:
    """Whether the query starting now is LlamaIndex's own: asked by an evaluator (a
    ``BaseEvaluator`` queries an index of the contexts) or by a tool (a ``BaseTool`` called
    by an agent), found on the call stack (a few microseconds, once per top-level query)."""
    frame: FrameType | None = sys._getframe(2)
    names = _OWN_CALLERS
    for _ in range(_STACK_DEPTH):
        if frame is None:
            return False
        if frame.f_code.co_name in names:
            owner = frame.f_locals.get("self")
            if isinstance(owner, _owners()):
                return True
        frame = frame.f_back
    return False


@functools.cache
def _owners() -> tuple[type, ...]:
    from llama_index.core.evaluation.base import BaseEvaluator
    from llama_index.core.tools.types import BaseTool

    return (BaseEvaluator, BaseTool)


def _reset(var: ContextVar[Any], token: Token[Any]) -> None:
    """Reset ``var`` (a span closed in another context cannot: there it was never set)."""
    try:  # noqa: SIM105 - contextlib.suppress costs a context manager per span
        var.reset(token)
    except ValueError:
        pass


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether two node lists hold the very same objects, in order (both are alive)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def scored_nodes(response: Any) -> list[NodeWithScore]:
    """The response's source nodes (what the LLM saw), or ``[]``."""
    return list(getattr(response, "source_nodes", None) or [])
