"""``RagmeterCallbackHandler``: one :class:`~ragmeter.schema.RagSample` per root run.

LangChain reports every run (chain, retriever, chat model, LLM, tool) to a callback
handler as start/end/error events carrying ``run_id`` and ``parent_run_id``. The handler
keeps a small node per open run, pointing at the record of its *root* run (the run whose
parent it has not seen: one ``invoke``, one ``batch`` input, one ``ainvoke``/``astream``).
When the root run ends, its record becomes a sample and every node of that run is
dropped, so memory does not grow with the number of invocations.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Literal, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from pydantic import ValidationError

from ragmeter.capture import METADATA_FIELDS, SampleStore, fields_from_metadata
from ragmeter.errors import InvalidInputError
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.schema import RagSample
from ragmeter_langchain._convert import (
    DEFAULT_ID_KEY,
    DocIdFn,
    TextFn,
    answer_of,
    doc_ids_and_texts,
    llm_text_and_usage,
    question_of,
)

__all__ = ["RagmeterCallbackHandler"]

logger = logging.getLogger("ragmeter_langchain")
logger.addHandler(logging.NullHandler())

Retrieval = Literal["last", "first", "merge"]
ResponseFrom = Literal["llm", "output"]
_RETRIEVAL = ("last", "first", "merge")
_RESPONSE_FROM = ("llm", "output")
_UNSET: Any = object()

_IN_USER_CODE: ContextVar[bool] = ContextVar("ragmeter_langchain_in_user_code", default=False)
"""Set while the handler runs a user function (``doc_id``, a callable ``input_key``...):
runs started from there (e.g. a lookup that invokes a retriever) are not captured, so they
cannot re-enter the handler or show up as extra samples."""


class _Call:
    """One retriever call inside a root run (kept for drill-down)."""

    __slots__ = ("depth", "error", "ids", "latency_ms", "name", "query", "seq", "start", "texts")

    def __init__(self, name: str | None, query: Any, depth: int) -> None:
        self.name = name
        self.query = query if isinstance(query, str) else None
        self.depth = depth
        self.start = time.perf_counter()
        self.ids: list[str] | None = None
        self.texts: list[str] | None = None
        self.error: str | None = None
        self.latency_ms: float | None = None
        self.seq = -1

    def to_dict(self, used: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "query": self.query,
            "depth": self.depth,
            "ids": self.ids,
            "latency_ms": self.latency_ms,
            "used": used,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


class _Root:
    """What is collected for one root run until it ends."""

    __slots__ = (
        "calls",
        "errors",
        "input_tokens",
        "inputs",
        "llm_calls",
        "llm_text",
        "metadata",
        "name",
        "output",
        "output_tokens",
        "run_id",
        "run_ids",
        "start",
        "tags",
    )

    def __init__(
        self, run_id: UUID, name: str | None, inputs: Any, tags: Any, metadata: Any
    ) -> None:
        self.run_id = run_id
        self.name = name
        self.inputs = inputs
        self.tags: list[Any] = list(tags) if tags else []
        self.metadata: dict[str, Any] = dict(metadata) if isinstance(metadata, dict) else {}
        self.start = time.perf_counter()
        self.run_ids: list[int] = [run_id.int]
        self.calls: list[_Call] = []
        self.errors: list[str] = []
        self.llm_text: str | None = None
        self.llm_calls = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.output: Any = _UNSET


_Node = tuple[_Root, int, "_Call | None"]
"""An open run: its root's record, how many retrievers it is nested in (itself included),
and its retriever call if it is a retriever. Keyed by ``run_id.int`` (``UUID.__hash__`` is
Python code; an int hashes in C)."""


def _run_name(serialized: Any, kwargs: Mapping[str, Any]) -> str | None:
    name = kwargs.get("name")
    if isinstance(name, str):
        return name
    if isinstance(serialized, dict):
        if isinstance(serialized.get("name"), str):
            return str(serialized["name"])
        ids = serialized.get("id")
        if isinstance(ids, list) and ids:
            return str(ids[-1])
    return None


def _jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` made JSON-safe for the sample's metadata (``to_jsonl`` must not fail on it)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return (
            value if value == value and value not in (float("inf"), float("-inf")) else str(value)
        )
    if depth < 8:
        if isinstance(value, Mapping):
            return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_jsonable(v, depth + 1) for v in value]
    return str(value)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class RagmeterCallbackHandler(BaseCallbackHandler):
    """Capture every root run of a LangChain runnable as a :class:`~ragmeter.schema.RagSample`.

    Attach it per call: ``chain.invoke(q, config={"callbacks": [handler]})``. Each root run
    (an ``invoke``, each input of a ``batch``, an ``ainvoke``, an ``astream``) becomes one
    sample, appended to :attr:`samples` when the run ends (completion order):

    * ``id``: ``config["metadata"]["ragmeter_id"]`` when given (so samples join to qrels),
      else the root run's LangChain ``run_id`` (so a sample joins to its trace). The other
      ``ragmeter_*`` metadata keys of :mod:`ragmeter.capture` set ``reference``,
      ``references``, ``reference_ids`` and ``relevance``.
    * ``user_input``: the root input (``input_key`` rule, see below).
    * ``retrieved_ids`` / ``retrieved_contexts``: the documents of the *outermost* retriever
      call (one not nested in another retriever), the last one to finish when it ran several
      times (``retrieval="first"`` takes the first, ``"merge"`` joins them all);
      ``retriever_name`` picks calls of one named retriever instead, at any depth. Ids:
      ``doc_id(doc)`` if given, else ``Document.id``, else ``metadata[id_key]``, else a
      content hash (:func:`ragmeter.capture.content_doc_id`); a document is never dropped.
      ``retrieved_ids`` lists each id once, at its best rank (a ranking repeats no document;
      chunks of one source collapse), ``retrieved_contexts`` every distinct text in rank
      order. Every retriever call (name, query, depth, raw ids, latency, error) is kept in
      ``metadata["retriever_calls"]``, with ``used`` marking the one(s) chosen.
    * ``response``: the text of the last LLM / chat-model call to finish, else the root
      output (``response_from="output"`` reads the root output, with ``output_key``).
    * ``latency_ms`` (root start to end), ``input_tokens``/``output_tokens`` summed over the
      model calls that report usage, ``error`` when the root run raised.
    * ``metadata``: ``run_id``, ``run_name``, ``tags``, ``run_metadata`` (the run's other
      metadata, made JSON-safe), ``retriever_calls``, ``llm_calls`` and, if anything in the
      capture itself went wrong, ``capture_errors``.

    ``input_key`` / ``output_key``: ``None`` reads a plain string or message, or a dict's
    ``question``/``input``/``query`` (output: ``answer``/``output``/``result``/``response``/
    ``text``) key; a string reads that key; a callable gets the whole value.

    The handler never raises into the chain: a failure while capturing is recorded in the
    sample's ``metadata["capture_errors"]`` and logged once per kind. It does not read
    streamed tokens. State is guarded by a lock (LangChain calls handlers from worker
    threads); ``max_samples`` bounds the stored samples, ``max_open_runs`` the runs in
    flight (the oldest open run is dropped past it, see :attr:`dropped_runs`).

    Raises :class:`~ragmeter.errors.InvalidInputError` for an unknown ``retrieval`` or
    ``response_from`` and a ``max_open_runs`` below 1.
    """

    raise_error: bool = False
    run_inline: bool = True  # cheap and non-blocking: no executor hop under asyncio

    def __init__(
        self,
        *,
        input_key: str | TextFn | None = None,
        output_key: str | TextFn | None = None,
        response_from: ResponseFrom | None = None,
        retrieval: Retrieval = "last",
        retriever_name: str | None = None,
        id_key: str | None = DEFAULT_ID_KEY,
        doc_id: DocIdFn | None = None,
        max_samples: int | None = None,
        max_open_runs: int = 10_000,
    ) -> None:
        super().__init__()
        if retrieval not in _RETRIEVAL:
            raise InvalidInputError(
                f"retrieval must be one of {', '.join(map(repr, _RETRIEVAL))}, got {retrieval!r}"
            )
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
        self.input_key = input_key
        self.output_key = output_key
        self.response_from: ResponseFrom = response_from or (
            "output" if output_key is not None else "llm"
        )
        self.retrieval: Retrieval = retrieval
        self.retriever_name = retriever_name
        self.id_key = id_key
        self.doc_id = doc_id
        self.max_open_runs = max_open_runs
        self.dropped_runs = 0
        self._store = SampleStore(max_samples=max_samples)
        self._lock = threading.RLock()  # LangChain may call handlers from several threads
        self._nodes: dict[int, _Node] = {}
        self._roots: dict[int, _Root] = {}
        self._seq = itertools.count()
        self._logged: set[str] = set()

    # -- the captured data (the surface every ragmeter adapter shares) --------------------

    @property
    def store(self) -> SampleStore:
        """The :class:`~ragmeter.capture.SampleStore` holding the captured samples."""
        return self._store

    @property
    def samples(self) -> list[RagSample]:
        """The captured samples in completion order (a copy)."""
        return self._store.samples

    def __len__(self) -> int:
        return len(self._store)

    @property
    def open_runs(self) -> int:
        """How many root runs have started and not yet ended."""
        with self._lock:
            return len(self._roots)

    def to_run(self) -> dict[str, list[str]]:
        """``{sample_id: [doc_id, ...]}`` for :func:`ragmeter.evaluation.retrieval.evaluate_run`."""
        return self._store.to_run()

    def to_qrels(self) -> dict[str, dict[str, float]]:
        """``{sample_id: {doc_id: grade}}`` from ``ragmeter_relevance`` / ``_reference_ids``."""
        return self._store.to_qrels()

    def to_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write the samples as JSONL; returns how many were written."""
        return self._store.to_jsonl(path)

    def evaluate(self, **kwargs: Any) -> RagEvalReport:
        """Score the samples with ``ragmeter.evaluate_rag`` (keyword arguments pass through)."""
        return cast(RagEvalReport, self._store.evaluate(**kwargs))

    def evaluate_retrieval(
        self, qrels: Mapping[str, Mapping[str, float]] | None = None, **kwargs: Any
    ) -> RetrievalEvalReport:
        """Score the captured run with ``evaluate_run`` (``qrels`` default: the samples' own).

        trec_eval's rule applies: a judged query missing from the run scores 0, so pass the
        qrels of the queries you captured.
        """
        return cast(RetrievalEvalReport, self._store.evaluate_retrieval(qrels, **kwargs))

    def clear(self) -> None:
        """Forget the captured samples (runs still in flight are kept and finish normally)."""
        self._store.clear()

    # -- bookkeeping ------------------------------------------------------------------------

    def _note(self, root: _Root | None, where: str, message: str) -> None:
        """Record a capture problem on the sample and log it once per kind."""
        with self._lock:
            if root is not None:
                root.errors.append(f"{where}: {message}")
            first = where not in self._logged
            if first:
                self._logged.add(where)
        if first:
            logger.warning(
                "ragmeter could not capture part of a LangChain run (%s: %s); recorded in the "
                "sample's metadata['capture_errors']. Logged once.",
                where,
                message,
            )

    def _failed(self, event: str, run_id: UUID, exc: BaseException) -> None:
        try:
            node = self._nodes.get(run_id.int)
            self._note(node[0] if node else None, event, _describe(exc))
        except Exception:  # never raise into the chain, whatever happened
            pass

    def _start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        serialized: Any,
        kwargs: Mapping[str, Any],
        inputs: Any,
        tags: Any,
        metadata: Any,
        *,
        retriever: bool = False,
    ) -> None:
        if _IN_USER_CODE.get():
            return
        key = run_id.int
        evicted = False
        with self._lock:
            parent = self._nodes.get(parent_run_id.int) if parent_run_id is not None else None
            if parent is None:
                if len(self._roots) >= self.max_open_runs:
                    self._evict_oldest()
                    evicted = True
                root = _Root(run_id, _run_name(serialized, kwargs), inputs, tags, metadata)
                self._roots[key] = root
                below = 0
            else:
                root, below, _ = parent
                root.run_ids.append(key)
            call = None
            if retriever:
                call = _Call(_run_name(serialized, kwargs), inputs, below)
                root.calls.append(call)
                below += 1
            self._nodes[key] = (root, below, call)
        if evicted:
            self._note(
                None,
                "max_open_runs",
                f"more than {self.max_open_runs} root runs were open at once; the oldest was "
                "dropped without a sample (a run that never ended?)",
            )

    def _evict_oldest(self) -> None:
        oldest = self._roots.pop(next(iter(self._roots)))
        for rid in oldest.run_ids:
            self._nodes.pop(rid, None)
        self.dropped_runs += 1

    def _finish(
        self,
        run_id: UUID,
        *,
        output: Any = _UNSET,
        error: BaseException | None = None,
        kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """If ``run_id`` is a root run, turn its record into a sample and drop its nodes."""
        try:
            with self._lock:
                root = self._roots.pop(run_id.int, None)
                if root is None:
                    return
                for rid in root.run_ids:
                    self._nodes.pop(rid, None)
            elapsed_ms = (time.perf_counter() - root.start) * 1000.0
            if kwargs and "inputs" in kwargs:  # streamed runs report their input at the end
                root.inputs = kwargs["inputs"]
            root.output = output
            token = _IN_USER_CODE.set(True)
            try:
                sample = self._build(root, elapsed_ms, error)
            except Exception as exc:
                self._note(root, "sample", _describe(exc))
                sample = RagSample.model_validate(
                    {
                        "id": str(root.run_id),
                        "error": None if error is None else _describe(error),
                        "metadata": {"run_id": str(root.run_id), "capture_errors": root.errors},
                    }
                )
            finally:
                _IN_USER_CODE.reset(token)
            self._store.add(sample)
        except Exception as exc:  # pragma: no cover - last line of defence
            self._note(None, "finish", _describe(exc))

    # -- sample building --------------------------------------------------------------------

    def _select(self, root: _Root) -> list[_Call]:
        done = sorted((c for c in root.calls if c.ids is not None), key=lambda c: c.seq)
        if self.retriever_name is not None:
            chosen = [c for c in done if c.name == self.retriever_name]
            if not chosen and root.calls:
                seen = sorted({str(c.name) for c in root.calls})
                self._note(
                    root,
                    "retriever_name",
                    f"{self.retriever_name!r} matched no finished retriever call (names seen: "
                    f"{seen}); name a retriever with retriever.with_config(run_name=...)",
                )
        else:
            chosen = [c for c in done if c.depth == 0]
        if not chosen:
            return []
        if self.retrieval == "last":
            return [chosen[-1]]
        if self.retrieval == "first":
            return [chosen[0]]
        return chosen

    def _build(self, root: _Root, elapsed_ms: float, error: BaseException | None) -> RagSample:
        errors = root.errors
        user_input = None
        try:
            user_input = question_of(root.inputs, self.input_key)
        except Exception as exc:
            self._note(root, "input_key", _describe(exc))
        response = root.llm_text if self.response_from == "llm" else None
        if response is None and root.output is not _UNSET:
            try:
                response = answer_of(root.output, self.output_key)
            except Exception as exc:
                self._note(root, "output_key", _describe(exc))
        used = self._select(root)
        ids: list[str] | None = None
        texts: list[str] | None = None
        if len(used) == 1 and len(set(used[0].ids or ())) == len(used[0].ids or ()):
            ids, texts = used[0].ids, used[0].texts  # the common case: nothing to collapse
        elif used:
            # A ranking lists each document once, at its best rank (chunks of one source, or
            # the same document from several merged calls); every distinct text is kept.
            ids, texts = [], []
            seen_ids: set[str] = set()
            seen: set[tuple[str, str]] = set()
            for call in used:
                for doc_id, text in zip(call.ids or (), call.texts or (), strict=True):
                    if doc_id not in seen_ids:
                        seen_ids.add(doc_id)
                        ids.append(doc_id)
                    if (doc_id, text) not in seen:
                        seen.add((doc_id, text))
                        texts.append(text)
        sample_id = str(root.run_id)
        metadata: dict[str, Any] = {"run_id": sample_id, "run_name": root.name}
        if root.tags:
            metadata["tags"] = [str(t) for t in root.tags]
        extra = {k: v for k, v in root.metadata.items() if k not in METADATA_FIELDS}
        if extra:
            metadata["run_metadata"] = _jsonable(extra)
        if root.calls:
            used_ids = {id(c) for c in used}
            metadata["retriever_calls"] = [c.to_dict(id(c) in used_ids) for c in root.calls]
        if root.llm_calls:
            metadata["llm_calls"] = root.llm_calls
        fields: dict[str, Any] = {
            "id": sample_id,
            "user_input": user_input,
            "response": response,
            "retrieved_contexts": texts,
            "retrieved_ids": ids,
            "latency_ms": elapsed_ms,
            "input_tokens": root.input_tokens,
            "output_tokens": root.output_tokens,
            "error": None if error is None else _describe(error),
            "metadata": metadata,
        }
        fields.update(fields_from_metadata(root.metadata))
        if errors:
            metadata["capture_errors"] = list(errors)
        try:
            return RagSample.model_validate(fields)
        except ValidationError as exc:
            bad = sorted({str(e["loc"][0]) for e in exc.errors() if e.get("loc")})
            self._note(
                root, "sample", f"invalid value for {bad}, left out: {exc.errors()[0]['msg']}"
            )
            for name in bad:
                fields.pop(name, None)
            fields.setdefault("id", sample_id)
            metadata["capture_errors"] = list(errors)
            return RagSample.model_validate(fields)

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
            self._start(run_id, parent_run_id, serialized, kwargs, inputs, tags, metadata)
        except Exception as exc:
            self._failed("on_chain_start", run_id, exc)

    def on_chain_end(self, outputs: dict[str, Any] | Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A chain ended; a root chain becomes a sample."""
        self._finish(run_id, output=outputs, kwargs=kwargs)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A chain raised; a root chain becomes a sample with ``error`` set."""
        self._finish(run_id, error=error, kwargs=kwargs)

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
            self._start(
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
            self._failed("on_retriever_start", run_id, exc)

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        """A retriever returned: record its documents' ids and texts in rank order."""
        try:
            node = self._nodes.get(run_id.int)
            call = node[2] if node is not None else None
            if node is not None and call is not None:
                root = node[0]
                notes: list[str] = []
                token = _IN_USER_CODE.set(True)
                try:
                    ids, texts = doc_ids_and_texts(
                        documents, id_key=self.id_key, doc_id=self.doc_id, errors=notes
                    )
                finally:
                    _IN_USER_CODE.reset(token)
                with self._lock:
                    call.ids, call.texts = ids, texts
                    call.latency_ms = (time.perf_counter() - call.start) * 1000.0
                    call.seq = next(self._seq)
                for note in notes:
                    self._note(root, "doc_id", note)
        except Exception as exc:
            self._failed("on_retriever_end", run_id, exc)
        self._finish(run_id, output=documents, kwargs=kwargs)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A retriever raised: keep the failed call for drill-down."""
        try:
            node = self._nodes.get(run_id.int)
            if node is not None and node[2] is not None:
                call = node[2]
                with self._lock:
                    call.error = _describe(error)
                    call.latency_ms = (time.perf_counter() - call.start) * 1000.0
        except Exception as exc:
            self._failed("on_retriever_error", run_id, exc)
        self._finish(run_id, error=error, kwargs=kwargs)

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
            self._start(run_id, parent_run_id, serialized, kwargs, first, tags, metadata)
        except Exception as exc:
            self._failed("on_llm_start", run_id, exc)

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
            self._start(run_id, parent_run_id, serialized, kwargs, first, tags, metadata)
        except Exception as exc:
            self._failed("on_chat_model_start", run_id, exc)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A model call ended: its text becomes the candidate response; usage is summed."""
        try:
            node = self._nodes.get(run_id.int)
            if node is not None:
                text, inp, out = llm_text_and_usage(response)
                with self._lock:
                    root = node[0]
                    root.llm_calls += 1
                    if text is not None:
                        root.llm_text = text
                    if inp is not None:
                        root.input_tokens = (root.input_tokens or 0) + inp
                    if out is not None:
                        root.output_tokens = (root.output_tokens or 0) + out
        except Exception as exc:
            self._failed("on_llm_end", run_id, exc)
        self._finish(run_id, output=_UNSET, kwargs=kwargs)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A model call raised."""
        self._finish(run_id, error=error, kwargs=kwargs)

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
            self._start(run_id, parent_run_id, serialized, kwargs, given, tags, metadata)
        except Exception as exc:
            self._failed("on_tool_start", run_id, exc)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool ended."""
        self._finish(run_id, output=output, kwargs=kwargs)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool raised."""
        self._finish(run_id, error=error, kwargs=kwargs)
