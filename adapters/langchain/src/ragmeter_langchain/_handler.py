"""``RagmeterCallbackHandler``: one :class:`~ragmeter.schema.RagSample` per root run.

The handler is the LangChain-facing shell: it checks its options, hands every callback
event to :class:`~ragmeter_langchain._runs.Runs` (which keeps the run tree and the run
records) and gets the captured-data surface every adapter shares from
:class:`ragmeter.capture.StoreFront`. ``handler.capture(...)`` also makes LangChain attach
the handler to every run inside the block (a configure hook, as ``collect_runs()`` does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.callbacks.base import BaseCallbackManager
from langchain_core.tracers.context import register_configure_hook

from ragmeter.capture import (
    CaptureConfig,
    DatasetFront,
    Hints,
    ProblemLog,
    Record,
    SampleStore,
    Scope,
    check_record,
    check_retrieval,
    check_stage,
    deprecated_selection,
)
from ragmeter.errors import InvalidInputError
from ragmeter.schema import CONTEXT
from ragmeter_langchain._convert import UNSET_KEY, DocId, DocIdRule, TextFn, doc_id_rule
from ragmeter_langchain._runs import FRAMEWORK, UNSET, Options, ResponseFrom, Retrieval, Runs

__all__ = ["RagmeterCallbackHandler"]

logger = logging.getLogger("ragmeter_langchain")
logger.addHandler(logging.NullHandler())

_RESPONSE_FROM = ("llm", "output")

SAMPLE_ID_HINT = (
    "LangChain: run each query inside `with handler.capture(id=qid):` (or pass "
    "config={'metadata': {'ragmeter_id': qid}}; for batch, a list of configs, one per "
    "input); without it a sample's id is the run's run_id."
)

STAGE_HINT = (
    "LangChain: when retrievers run side by side (RunnableParallel) and your own code fuses "
    "their rankings, mark the fused list: `fuse | ragmeter_langchain.stage('fused')` (or "
    "decorate the function with @ragmeter_langchain.stage('fused')); or score one stage by "
    "its run name with stage='<name>' (name a retriever with .with_config(run_name=...))."
)

_ACTIVE: ContextVar[BaseCallbackHandler | None] = ContextVar(
    "ragmeter_langchain_active_handler", default=None
)
register_configure_hook(_ACTIVE, inheritable=True)  # LangChain adds it to runs in capture()

_EVENTS = (
    "on_llm_start",
    "on_chat_model_start",
    "on_llm_new_token",
    "on_llm_end",
    "on_llm_error",
    "on_chain_start",
    "on_chain_end",
    "on_chain_error",
    "on_tool_start",
    "on_tool_end",
    "on_tool_error",
    "on_retriever_start",
    "on_retriever_end",
    "on_retriever_error",
    "on_text",
    "on_retry",
    "on_agent_action",
    "on_agent_finish",
    "on_custom_event",
)


class _Fanout(BaseCallbackHandler):
    """The handlers whose ``capture()`` scopes are open here, as the one handler LangChain's
    configure hook adds: every event goes to each of them (a handler also passed in
    ``callbacks`` sees an event twice and records it once)."""

    raise_error: bool = False
    run_inline: bool = True

    def __init__(self, members: tuple[RagmeterCallbackHandler, ...]) -> None:
        super().__init__()
        self.members = members


def _forward(event: str) -> Any:
    def method(self: _Fanout, *args: Any, **kwargs: Any) -> None:
        for member in self.members:
            try:  # noqa: SIM105 - one handler's failure must not stop the others
                getattr(member, event)(*args, **kwargs)
            except Exception:  # the handlers never raise; this is the last line of defence
                pass

    method.__name__ = event
    return method


for _event in _EVENTS:
    setattr(_Fanout, _event, _forward(_event))


def _joined(current: BaseCallbackHandler | None, handler: RagmeterCallbackHandler) -> Any:
    """What LangChain's configure hook adds once ``handler``'s scope opens under ``current``."""
    if current is None or current is handler:
        return handler
    members = current.members if isinstance(current, _Fanout) else (current,)
    if any(m is handler for m in members):
        return current
    return _Fanout((*members, handler))


def doc_id_hint(rule: DocIdRule) -> str:
    """How a LangChain user makes retrieved ids the qrels' doc ids, given the current rule."""
    return (
        f"LangChain: {rule.describe()}. Pass RagmeterCallbackHandler(doc_id="
        "'metadata.<your id key>') or doc_id=lambda doc: ..., or give the documents the "
        "qrels' ids (vector stores: add_documents(docs, ids=[...]))."
    )


class RagmeterCallbackHandler(DatasetFront, BaseCallbackHandler):
    """Capture every root run of a LangChain runnable as a :class:`~ragmeter.schema.RagSample`.

    Scope it: ``with handler.capture(id=qid, relevance=qrels[qid]): chain.invoke(q)`` --
    LangChain then attaches the handler to every run inside the block (threads and asyncio
    tasks see their own scope), and each root run gets that sample id and ground truth. Or
    attach it per call, ``chain.invoke(q, config={"callbacks": [handler]})``, with the id in
    ``config["metadata"]["ragmeter_id"]``. ``handler.run_dataset(chain, queries, qrels=...)``
    runs a whole dataset with bounded concurrency and a progress bar and returns the report.

    Each root run (an ``invoke``, each input of a ``batch``, an ``ainvoke``, an
    ``astream``) becomes one sample, stored when the run ends (completion order):

    * ``id``: ``config["metadata"]["ragmeter_id"]``, else the scope's id, else the root run's
      LangChain ``run_id`` (so a sample joins to its trace). The other ``ragmeter_*``
      metadata keys of :mod:`ragmeter.capture` (or the scope) set ``reference``,
      ``references``, ``reference_ids`` and ``relevance``.
    * ``user_input``: the root input (``input_key`` rule, see below).
    * ``stages``: every step that produced a ranking, named by its run name (a retriever's
      class name unless you name it with ``.with_config(run_name=...)``; a name seen twice
      becomes ``"<name>#2"``), in the order they finished: each retriever call (a retriever
      made of others, ``EnsembleRetriever``, ``MultiQueryRetriever``, is a ``"fusion"`` stage,
      one wrapping a single retriever, ``ContextualCompressionRetriever``, a ``"reranker"``;
      the ones inside it are stages too), each step marked with :func:`~ragmeter_langchain.stage`
      (fusion in your own code), and ``context``: the last outermost step before the prompt.
      When outermost steps ran side by side (``RunnableParallel``, ``asyncio.gather``) and no
      marked step joined them, no context can be identified: the sample has no ranking, says
      so in ``capture_errors``, and the report counts it (never a pick that depends on thread
      timing).
    * ``retrieved_ids`` / ``retrieved_contexts``: the ``context`` stage's documents (or the
      stage named by ``stage=``). Ids by ``doc_id``
      (:class:`~ragmeter_langchain._convert.DocIdRule`): ``None`` (default) ``Document.id``,
      else ``metadata["doc_id"]``, else a content hash; ``"id"``, ``"content"``,
      ``"metadata.<key>"`` or a function; a document is never dropped. ``retrieved_ids``
      lists each id once, at its best rank (chunks of one source collapse),
      ``retrieved_contexts`` every distinct text in rank order. Rankings are kept in list
      order (ties included), never re-sorted by score.
    * ``response``: the text of the last LLM / chat-model call to finish, else the root
      output (``response_from="output"`` reads the root output, with ``output_key``).
    * ``latency_ms`` (root start to end), ``input_tokens``/``output_tokens`` summed over the
      model calls that report usage, ``error`` when the root run raised.
    * ``metadata``: ``framework`` (``"langchain"``), ``run_id``, ``run_name``, ``tags``,
      ``run_metadata`` (the run's other metadata, made JSON-safe; the same key in every
      adapter), ``llm_calls`` and, if anything in the capture itself
      went wrong (say a ``ragmeter_relevance`` that does not validate: it is left out, the
      rest of the sample kept), ``capture_errors``.

    ``record="tagged"`` records only root runs that carry a sample id (a scope's or
    ``ragmeter_id``); ``"all"`` (default) records every root run. ``input_key`` /
    ``output_key``: ``None`` reads a plain string or message, or a dict's
    ``question``/``input``/``query`` (output: ``answer``/``output``/``result``/``response``/
    ``text``) key; a string reads that key; a callable gets the whole value.

    While the chain runs the handler only keeps references (about a microsecond per event);
    content hashes, JSON-safe metadata and validation happen when a sample is first read.
    It never raises into the chain: a capture problem is recorded in the sample's
    ``metadata["capture_errors"]`` and logged once per kind. It does not read streamed
    tokens. State is guarded by a lock (LangChain calls handlers from worker threads);
    ``max_samples`` bounds the stored samples, ``max_open_runs`` the runs in flight (the
    oldest open run is dropped past it, see :attr:`dropped_runs`). ``id_key=`` (the
    metadata key of the default id rule) is a deprecated form of ``doc_id``;
    ``retrieval=`` and ``retriever_name=`` (choosing among retriever calls) are deprecated
    forms of ``stage=``.

    Any number of handlers can observe one chain at once: each keeps its own samples, and
    ``handler.capture(...)`` is that handler's own scope (a scope of another handler, nested
    or not, gives it nothing). Precedence of ids and ground truth: the handler's own scope,
    then the run's ``ragmeter_*`` metadata, then a ``ragmeter.capture.capture()`` scope.

    Raises :class:`~ragmeter.errors.InvalidInputError` for an unknown ``retrieval``,
    ``record``, ``response_from``, ``stage`` or ``doc_id``, and a ``max_open_runs`` below 1.
    """

    raise_error: bool = False
    run_inline: bool = True  # cheap and non-blocking: no executor hop under asyncio

    def __init__(
        self,
        *,
        input_key: str | TextFn | None = None,
        output_key: str | TextFn | None = None,
        response_from: ResponseFrom | None = None,
        stage: str = CONTEXT,
        retrieval: Retrieval | None = None,
        retriever_name: str | None = None,
        doc_id: DocId = None,
        record: Record = "all",
        max_samples: int | None = None,
        max_open_runs: int = 10_000,
        id_key: Any = UNSET_KEY,
    ) -> None:
        super().__init__()
        stage = check_stage(stage)
        if retrieval is not None:
            deprecated_selection("RagmeterCallbackHandler", "retrieval")
            retrieval = check_retrieval(retrieval)
        if retriever_name is not None:
            deprecated_selection("RagmeterCallbackHandler", "retriever_name")
        record = check_record(record)
        rule = doc_id_rule(doc_id, id_key, owner="RagmeterCallbackHandler")
        if response_from is not None and response_from not in _RESPONSE_FROM:
            raise InvalidInputError(
                f"response_from must be 'llm' or 'output' (or None: 'output' when output_key "
                f"is given, else 'llm'), got {response_from!r}"
            )
        if (
            isinstance(max_open_runs, bool)
            or not isinstance(max_open_runs, int)
            or max_open_runs < 1
        ):
            raise InvalidInputError(f"max_open_runs must be an int >= 1, got {max_open_runs!r}")
        self.options = Options(
            input_key=input_key,
            output_key=output_key,
            response_from=response_from or ("output" if output_key is not None else "llm"),
            doc_id=rule,
            max_open_runs=max_open_runs,
        )
        self.config = CaptureConfig(
            FRAMEWORK,
            ProblemLog(logger, "LangChain"),
            stage=stage,
            retrieval=retrieval,
            retriever_name=retriever_name,
            name_hint="name a retriever with retriever.with_config(run_name=...)",
            stage_hint=STAGE_HINT,
            record=record,
            owner=self,
        )
        hints = Hints(
            FRAMEWORK, SAMPLE_ID_HINT, doc_id_hint(rule), label="LangChain", stage=STAGE_HINT
        )
        self._store = SampleStore(max_samples=max_samples, hints=hints)
        self._runs = Runs(self.options, self.config, self._store)

    # -- the captured data (the surface every ragmeter adapter shares) --------------------

    @property
    def store(self) -> SampleStore:
        """The :class:`~ragmeter.capture.SampleStore` holding the captured samples."""
        return self._store

    @property
    def open_runs(self) -> int:
        """How many root runs have started and not yet ended."""
        with self._runs.lock:
            return len(self._runs.roots)

    @property
    def dropped_runs(self) -> int:
        """Root runs dropped without a sample because ``max_open_runs`` were open at once."""
        return self._runs.dropped_runs

    @property
    def capture_errors(self) -> int:
        """How many capture problems were logged (each is noted on its sample too)."""
        return self.config.problems.count

    def _scope_opened(self, scope: Scope) -> None:
        # LangChain's configure hook adds the handler (with the others whose scopes are open)
        scope._state = _ACTIVE.set(_joined(_ACTIVE.get(), self))

    def _scope_closed(self, scope: Scope) -> None:
        token, scope._state = scope._state, None
        if token is not None:
            _ACTIVE.reset(token)

    def _dataset_call(
        self, target: Any, options: dict[str, Any], *, asynchronous: bool
    ) -> Callable[[str], Any]:
        """``run_dataset`` runs ``target.invoke(query, config=config)`` (``ainvoke`` when
        async); ``config`` is the option, with this handler added to its callbacks."""
        run_config = self._config(options.pop("config", None))
        name = "ainvoke" if asynchronous else "invoke"
        method = getattr(target, name, None)
        if not callable(method):
            raise InvalidInputError(
                f"run_dataset needs a LangChain runnable with .{name}(), got "
                f"{type(target).__name__}"
            )
        return lambda query: method(query, config=run_config)

    def _config(self, config: Mapping[str, Any] | None) -> dict[str, Any]:
        """``config`` with this handler among its callbacks."""
        out = dict(config or {})
        callbacks = out.get("callbacks")
        if callbacks is None:
            out["callbacks"] = [self]
        elif isinstance(callbacks, BaseCallbackManager):
            manager = callbacks.copy()
            if not any(h is self for h in manager.handlers):
                manager.add_handler(self, inherit=True)
            out["callbacks"] = manager
        elif not any(h is self for h in callbacks):
            out["callbacks"] = [*callbacks, self]
        return out

    # -- LangChain events -------------------------------------------------------------------

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: dict[str, Any] | Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A chain (any runnable) started."""
        try:
            self._runs.start(run_id, parent_run_id, serialized, kwargs, inputs, tags, metadata)
        except Exception as exc:
            self._runs.failed("on_chain_start", run_id, exc)

    def on_chain_end(self, outputs: dict[str, Any] | Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A chain ended; a stage marker's documents become a stage, a root chain a sample."""
        runs = self._runs
        if run_id.int in runs.tokens:  # a stage marker (most chains are not: one dict lookup)
            try:
                runs.stage_end(run_id, outputs)
            except Exception as exc:
                runs.failed("on_chain_end", run_id, exc)
        runs.finish(run_id, output=outputs, kwargs=kwargs)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A chain raised; a root chain becomes a sample with ``error`` set."""
        runs = self._runs
        if run_id.int in runs.tokens:  # a stage marker raised
            try:
                runs.retriever_error(run_id, error)
            except Exception as exc:
                runs.failed("on_chain_error", run_id, exc)
        runs.finish(run_id, error=error, kwargs=kwargs)

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A retriever started: open a retriever call on the root's record."""
        try:
            self._runs.start(
                run_id,
                parent_run_id,
                serialized,
                kwargs,
                query,
                tags,
                metadata,
                retriever=True,
            )
        except Exception as exc:
            self._runs.failed("on_retriever_start", run_id, exc)

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        """A retriever returned: record its documents' ids and texts in rank order."""
        try:
            self._runs.retriever_end(run_id, documents)
        except Exception as exc:
            self._runs.failed("on_retriever_end", run_id, exc)
        self._runs.finish(run_id, output=documents, kwargs=kwargs)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A retriever raised: keep the failed call for drill-down."""
        try:
            self._runs.retriever_error(run_id, error)
        except Exception as exc:
            self._runs.failed("on_retriever_error", run_id, exc)
        self._runs.finish(run_id, error=error, kwargs=kwargs)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A (text-completion) LLM started."""
        try:
            first = prompts[0] if prompts else None
            self._runs.start(run_id, parent_run_id, serialized, kwargs, first, tags, metadata)
        except Exception as exc:
            self._runs.failed("on_llm_start", run_id, exc)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A chat model started."""
        try:
            first = messages[0] if messages else None
            self._runs.start(run_id, parent_run_id, serialized, kwargs, first, tags, metadata)
        except Exception as exc:
            self._runs.failed("on_chat_model_start", run_id, exc)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A model call ended: its text becomes the candidate response; usage is summed."""
        try:
            self._runs.llm_end(run_id, response)
        except Exception as exc:
            self._runs.failed("on_llm_end", run_id, exc)
        self._runs.finish(run_id, output=UNSET, kwargs=kwargs)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A model call raised."""
        self._runs.finish(run_id, error=error, kwargs=kwargs)

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A tool started (tracked so retrievers it calls join the right run)."""
        try:
            given = inputs if inputs is not None else input_str
            self._runs.start(run_id, parent_run_id, serialized, kwargs, given, tags, metadata)
        except Exception as exc:
            self._runs.failed("on_tool_start", run_id, exc)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool ended."""
        self._runs.finish(run_id, output=output, kwargs=kwargs)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool raised."""
        self._runs.finish(run_id, error=error, kwargs=kwargs)
