"""The run tree behind ``RagmeterCallbackHandler``: open runs in, one record per root run out.

LangChain reports every run (chain, retriever, chat model, LLM, tool) as start/end/error
events carrying ``run_id`` and ``parent_run_id``. :class:`Runs` keeps a small node per open
run, pointing at the record of its *root* run (the run whose parent it has not seen: one
``invoke``, one ``batch`` input, one ``ainvoke``/``astream``). When the root run ends, its
record goes to the store as it is (the ``RagSample`` is built when first read) and every
node of that run is dropped, so memory does not grow with the number of invocations. Every
method is safe to call from several threads and costs about a microsecond.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from ragmeter.capture import CallRecord, CaptureConfig, Retrieval, SampleStore, describe
from ragmeter_langchain._convert import (
    DocIdRule,
    TextFn,
    answer_of,
    fallback_note,
    llm_text_and_usage,
    question_of,
)
from ragmeter_langchain._records import UNSET, LangChainRun, Node, run_name

__all__ = ["FRAMEWORK", "UNSET", "Options", "ResponseFrom", "Retrieval", "Runs"]

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
    doc_id: DocIdRule
    max_open_runs: int


class Runs:
    """Open runs and their roots; finished roots go to ``store`` as records."""

    def __init__(self, options: Options, config: CaptureConfig, store: SampleStore) -> None:
        self.options = options
        self.config = config
        self.store = store
        self.dropped_runs = 0
        self.lock = threading.Lock()  # LangChain may call handlers from several threads
        self.nodes: dict[int, Node] = {}
        self.roots: dict[int, LangChainRun] = {}

    # -- capture problems -------------------------------------------------------------------

    def note(self, root: LangChainRun | None, where: str, message: str) -> None:
        """Record a capture problem on the sample and log it once per kind."""
        if root is not None:
            with self.lock:
                root.note(f"{where}: {message}")
        self.config.problems(where, message)

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
                root = LangChainRun(
                    self.config, key, run_name(serialized, kwargs), inputs, tags, metadata
                )
                self.roots[key] = root
                below = 0
            else:
                root, below, _ = parent
                if root.run_ids is not None:
                    root.run_ids.append(key)
            call = None
            if retriever and not root.ignored:
                query = inputs if isinstance(inputs, str) else None
                call = CallRecord(run_name(serialized, kwargs), query, below)
                root.add_call(call)
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
        for rid in oldest.run_ids or ():
            self.nodes.pop(rid, None)
        self.dropped_runs += 1

    def retriever_end(self, run_id: UUID, documents: Sequence[Any]) -> None:
        """A retriever returned: keep its documents' ids and texts in rank order."""
        node = self.nodes.get(run_id.int)
        if node is None or node[2] is None:
            return
        rule = self.options.doc_id
        if rule.mode == "function":
            token = _IN_USER_CODE.set(True)
            try:
                ids, texts, missing, error = rule.ids_and_texts(documents)
            finally:
                _IN_USER_CODE.reset(token)
        else:
            ids, texts, missing, error = rule.ids_and_texts(documents)
        node[2].done(ids, texts)
        if missing:
            note = fallback_note(rule, missing, len(ids), error)
            if note is not None:
                self.note(node[0], "doc_id", note)

    def retriever_error(self, run_id: UUID, error: BaseException) -> None:
        """A retriever raised: keep the failed call for drill-down."""
        node = self.nodes.get(run_id.int)
        if node is not None and node[2] is not None:
            node[2].failed(error)

    def llm_end(self, run_id: UUID, response: Any) -> None:
        """A model call ended: its text becomes the candidate response; usage is summed."""
        node = self.nodes.get(run_id.int)
        if node is None or node[0].ignored:
            return
        text, inp, out = llm_text_and_usage(response)
        with self.lock:
            root = node[0]
            root.llm_calls += 1
            if text is not None:
                root.llm_text = text
            root.add_tokens(inp, out)

    def finish(
        self,
        run_id: UUID,
        *,
        output: Any = UNSET,
        error: BaseException | None = None,
        kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """If ``run_id`` is a root run, store its record and drop its nodes."""
        key = run_id.int
        if key not in self.roots:  # most runs are not roots: no lock for them
            return
        try:
            with self.lock:
                root = self.roots.pop(key, None)
                if root is None:
                    return
                for rid in root.run_ids or ():
                    self.nodes.pop(rid, None)
                root.run_ids = None
            if root.ignored:
                return
            root.finish(error)
            if kwargs and "inputs" in kwargs:  # streamed runs report their input at the end
                root.inputs = kwargs["inputs"]
            self._texts(root, output)
            self.store.add(root)
        except Exception as exc:  # pragma: no cover - last line of defence
            self.note(None, "finish", describe(exc))

    def _texts(self, root: LangChainRun, output: Any) -> None:
        """The question and answer as text (user functions run here, not captured)."""
        options = self.options
        inputs, root.inputs = root.inputs, None
        token = _IN_USER_CODE.set(True)
        try:
            if type(inputs) is str and options.input_key is None:
                root.user_input = inputs
            else:
                try:
                    root.user_input = question_of(inputs, options.input_key)
                except Exception as exc:
                    self.note(root, "input_key", describe(exc))
            response = root.llm_text if options.response_from == "llm" else None
            if response is None and output is not UNSET:
                if type(output) is str and options.output_key is None:
                    response = output
                else:
                    try:
                        response = answer_of(output, options.output_key)
                    except Exception as exc:
                        self.note(root, "output_key", describe(exc))
            root.response = response
            root.llm_text = None
        finally:
            _IN_USER_CODE.reset(token)
