"""The run tree behind ``RagmeterCallbackHandler``: open runs in, one sample per root run out.

LangChain reports every run (chain, retriever, chat model, LLM, tool) as start/end/error
events carrying ``run_id`` and ``parent_run_id``. :class:`Runs` keeps a small node per open
run, pointing at the record of its *root* run (the run whose parent it has not seen: one
``invoke``, one ``batch`` input, one ``ainvoke``/``astream``). When the root run ends, its
record becomes a sample and every node of that run is dropped, so memory does not grow
with the number of invocations. Every method is safe to call from several threads.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from ragmeter.capture import (
    Retrieval,
    SampleStore,
    describe,
    fields_from_metadata,
    run_metadata,
    select_calls,
    validated_sample,
)
from ragmeter.schema import RagSample
from ragmeter_langchain._convert import (
    DocIdFn,
    TextFn,
    answer_of,
    doc_ids_and_texts,
    llm_text_and_usage,
    question_of,
)
from ragmeter_langchain._records import UNSET, Call, Node, Root, ranking, run_name

__all__ = ["FRAMEWORK", "UNSET", "Options", "ResponseFrom", "Retrieval", "Runs"]

logger = logging.getLogger("ragmeter_langchain")
logger.addHandler(logging.NullHandler())

FRAMEWORK = "langchain"
"""``sample.metadata["framework"]`` (the name ``ragmeter_langchain.judge`` reports too)."""

ResponseFrom = Literal["llm", "output"]

_IN_USER_CODE: ContextVar[bool] = ContextVar("ragmeter_langchain_in_user_code", default=False)
"""Set while the handler runs a user function (``doc_id``, a callable ``input_key``...):
runs started from there (e.g. a lookup that invokes a retriever) are not captured, so they
cannot re-enter the handler or show up as extra samples."""


@dataclass(frozen=True)
class Options:
    """What the handler was told to capture (checked by the handler)."""

    input_key: str | TextFn | None
    output_key: str | TextFn | None
    response_from: ResponseFrom
    retrieval: Retrieval
    retriever_name: str | None
    id_key: str | None
    doc_id: DocIdFn | None
    max_open_runs: int


class Runs:
    """Open runs and their roots; finished roots go to ``store`` as samples."""

    def __init__(self, options: Options, store: SampleStore) -> None:
        self.options = options
        self.store = store
        self.dropped_runs = 0
        self.lock = threading.RLock()  # LangChain may call handlers from several threads
        self.nodes: dict[int, Node] = {}
        self.roots: dict[int, Root] = {}
        self._seq = itertools.count()
        self._logged: set[str] = set()

    # -- capture problems -------------------------------------------------------------------

    def note(self, root: Root | None, where: str, message: str) -> None:
        """Record a capture problem on the sample and log it once per kind."""
        if root is not None:
            with self.lock:
                root.errors.append(f"{where}: {message}")
        self._log_once(where, message)

    def _log_once(self, where: str, message: str) -> None:
        with self.lock:
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

    def failed(self, event: str, run_id: UUID, exc: BaseException) -> None:
        """A handler method raised: note it on the run's sample, never raise."""
        try:
            node = self.nodes.get(run_id.int)
            self.note(node[0] if node else None, event, describe(exc))
        except Exception:  # never raise into the chain, whatever happened
            pass

    # -- events -----------------------------------------------------------------------------

    def start(
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
        """A run started: a new root, or a node under its parent's root."""
        if _IN_USER_CODE.get():
            return
        key = run_id.int
        evicted = False
        with self.lock:
            parent = self.nodes.get(parent_run_id.int) if parent_run_id is not None else None
            if parent is None:
                if len(self.roots) >= self.options.max_open_runs:
                    self._evict_oldest()
                    evicted = True
                root = Root(run_id, run_name(serialized, kwargs), inputs, tags, metadata)
                self.roots[key] = root
                below = 0
            else:
                root, below, _ = parent
                root.run_ids.append(key)
            call = None
            if retriever:
                call = Call(run_name(serialized, kwargs), inputs, below)
                root.calls.append(call)
                below += 1
            self.nodes[key] = (root, below, call)
        if evicted:
            self.note(
                None,
                "max_open_runs",
                f"more than {self.options.max_open_runs} root runs were open at once; the "
                "oldest was dropped without a sample (a run that never ended?)",
            )

    def _evict_oldest(self) -> None:
        oldest = self.roots.pop(next(iter(self.roots)))
        for rid in oldest.run_ids:
            self.nodes.pop(rid, None)
        self.dropped_runs += 1

    def retriever_end(self, run_id: UUID, documents: Sequence[Any]) -> None:
        """A retriever returned: record its documents' ids and texts in rank order."""
        node = self.nodes.get(run_id.int)
        call = node[2] if node is not None else None
        if node is None or call is None:
            return
        notes: list[str] = []
        token = _IN_USER_CODE.set(True)
        try:
            ids, texts = doc_ids_and_texts(
                documents, id_key=self.options.id_key, doc_id=self.options.doc_id, errors=notes
            )
        finally:
            _IN_USER_CODE.reset(token)
        with self.lock:
            call.ids, call.texts = ids, texts
            call.end = time.perf_counter()
            call.seq = next(self._seq)
        for note in notes:
            self.note(node[0], "doc_id", note)

    def retriever_error(self, run_id: UUID, error: BaseException) -> None:
        """A retriever raised: keep the failed call for drill-down."""
        node = self.nodes.get(run_id.int)
        if node is not None and node[2] is not None:
            call = node[2]
            with self.lock:
                call.error = describe(error)
                call.end = time.perf_counter()

    def llm_end(self, run_id: UUID, response: Any) -> None:
        """A model call ended: its text becomes the candidate response; usage is summed."""
        node = self.nodes.get(run_id.int)
        if node is None:
            return
        text, inp, out = llm_text_and_usage(response)
        with self.lock:
            root = node[0]
            root.llm_calls += 1
            if text is not None:
                root.llm_text = text
            if inp is not None:
                root.input_tokens = (root.input_tokens or 0) + inp
            if out is not None:
                root.output_tokens = (root.output_tokens or 0) + out

    def finish(
        self,
        run_id: UUID,
        *,
        output: Any = UNSET,
        error: BaseException | None = None,
        kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """If ``run_id`` is a root run, turn its record into a sample and drop its nodes."""
        try:
            with self.lock:
                root = self.roots.pop(run_id.int, None)
                if root is None:
                    return
                for rid in root.run_ids:
                    self.nodes.pop(rid, None)
            elapsed_ms = (time.perf_counter() - root.start) * 1000.0
            if kwargs and "inputs" in kwargs:  # streamed runs report their input at the end
                root.inputs = kwargs["inputs"]
            root.output = output
            token = _IN_USER_CODE.set(True)
            try:
                sample = self._build(root, elapsed_ms, error)
            except Exception as exc:
                self.note(root, "sample", describe(exc))
                fallback = {
                    "id": str(root.run_id),
                    "error": None if error is None else describe(error),
                    "metadata": {"framework": FRAMEWORK, "run_id": str(root.run_id)},
                }
                sample = validated_sample(fallback, root.errors)
            finally:
                _IN_USER_CODE.reset(token)
            self.store.add(sample)
        except Exception as exc:  # pragma: no cover - last line of defence
            self.note(None, "finish", describe(exc))

    # -- sample building --------------------------------------------------------------------

    def _select(self, root: Root) -> list[Call]:
        options = self.options
        chosen, notes = select_calls(
            root.calls,
            options.retrieval,
            options.retriever_name,
            name_hint="name a retriever with retriever.with_config(run_name=...)",
        )
        for where, message in notes:
            self.note(root, where, message)
        return chosen

    def _build(self, root: Root, elapsed_ms: float, error: BaseException | None) -> RagSample:
        options = self.options
        user_input = None
        try:
            user_input = question_of(root.inputs, options.input_key)
        except Exception as exc:
            self.note(root, "input_key", describe(exc))
        response = root.llm_text if options.response_from == "llm" else None
        if response is None and root.output is not UNSET:
            try:
                response = answer_of(root.output, options.output_key)
            except Exception as exc:
                self.note(root, "output_key", describe(exc))
        used = self._select(root)
        ids, texts = ranking(used) if used else (None, None)
        sample_id = str(root.run_id)
        metadata: dict[str, Any] = {
            "framework": FRAMEWORK,
            "run_id": sample_id,
            "run_name": root.name,
        }
        if root.tags:
            metadata["tags"] = [str(t) for t in root.tags]
        extra = run_metadata(root.metadata)
        if extra:
            metadata["run_metadata"] = extra
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
            "error": None if error is None else describe(error),
            **fields_from_metadata(root.metadata),
            "metadata": metadata,
        }
        noted = len(root.errors)
        sample = validated_sample(fields, root.errors)
        if len(root.errors) > noted:  # a field did not validate and was left out
            self._log_once("sample", root.errors[-1])
        return sample
