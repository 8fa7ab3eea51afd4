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
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from ragmeter.capture import (
    CaptureConfig,
    Retrieval,
    SampleStore,
    StageRecord,
    describe,
    frontier,
)
from ragmeter_langchain._convert import (
    DocIdRule,
    TextFn,
    answer_of,
    fallback_note,
    llm_text_and_usage,
    question_of,
)
from ragmeter_langchain._records import UNSET, LangChainRun, Node, run_name

__all__ = ["FRAMEWORK", "STAGE_KEY", "UNSET", "Options", "ResponseFrom", "Retrieval", "Runs"]

FRAMEWORK = "langchain"
"""``sample.metadata["framework"]`` (the name ``ragmeter_langchain.judge`` reports too)."""

STAGE_KEY = "ragmeter_stage"
"""Run metadata of a :func:`~ragmeter_langchain.stage` marker: ``{STAGE_KEY: name}`` (the
marker's run name too, so a run that merely inherits the metadata is not a marker)."""

ResponseFrom = Literal["llm", "output"]

_IN_USER_CODE: ContextVar[bool] = ContextVar("ragmeter_langchain_in_user_code", default=False)
"""Set while the handler runs a user function (``doc_id``, a callable ``input_key``...):
runs started from there (e.g. a lookup that invokes a retriever) are not captured, so they
cannot re-enter the handler or show up as extra samples."""


_KIND_KEY = "ragmeter_stage_kind"
"""Run metadata of a stage marker: the kind of step it marks (``"fusion"``, ``"reranker"``...)."""

_NO_FORK: tuple[tuple[int, str], ...] = ()

_BRANCHES: dict[tuple[tuple[int, str], ...], tuple[tuple[int, str], ...]] = {}


def _branch(fork: tuple[tuple[int, str], ...], index: int, arm: str) -> tuple[tuple[int, str], ...]:
    """``fork`` and one more ``(parallel #index of the run, branch key)``, as one shared tuple:
    the runs of one chain have the same branches, so their stages point at the same object
    (nothing stored per run)."""
    new = (*fork, (index, arm))
    if len(_BRANCHES) > 4096:
        _BRANCHES.clear()
    return _BRANCHES.setdefault(new, new)


def _is_documents(value: Any) -> bool:
    """Whether ``value`` is a list of documents (or empty): what a stage marker records."""
    return isinstance(value, (list, tuple)) and all(hasattr(doc, "page_content") for doc in value)


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
        # the stage open in this thread or task: a retriever called inside another one is
        # nested in it even where LangChain reports it as the other's sibling (members of an
        # EnsembleRetriever named with .with_config(run_name=...))
        self.open_stage: ContextVar[StageRecord | None] = ContextVar(
            f"ragmeter_langchain_open_stage_{id(self)}", default=None
        )
        self.tokens: dict[int, Token[StageRecord | None]] = {}

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
        """A run started: a new root, or a node under its parent's root (an event seen twice,
        when the handler is reached twice, is recorded once)."""
        if _IN_USER_CODE.get():
            return
        key = run_id.int
        evicted = False
        nodes = self.nodes
        with self.lock:
            if key in nodes:
                return
            parent = nodes.get(parent_run_id.int) if parent_run_id is not None else None
            if parent is None:
                if len(self.roots) >= self.options.max_open_runs:
                    self._evict_oldest()
                    evicted = True
                name = run_name(serialized, kwargs)
                root = LangChainRun(self.config, key, name, inputs, tags, metadata)
                self.roots[key] = root
                below, enclosing, fork = 0, None, _NO_FORK
            else:
                root, below, _, enclosing, fork = parent
                if root.run_ids is not None:
                    root.run_ids.append(key)
                if tags:  # a RunnableParallel branch: LangChain tags it map:key:<key>
                    for tag in tags:
                        if type(tag) is str and tag.startswith("map:key:"):
                            index = root.fork_index(parent_run_id.int)  # type: ignore[union-attr]
                            fork = _branch(fork, index, tag[8:])
                            break
            stage = None
            if not root.ignored and (retriever or (metadata and STAGE_KEY in metadata)):
                name = run_name(serialized, kwargs)
                if retriever or (name is not None and metadata.get(STAGE_KEY) == name):
                    inside = self.open_stage.get()
                    if (
                        inside is not None
                        and inside is not enclosing
                        and inside.end is None
                        and any(s is inside for s in root.stages)
                    ):
                        enclosing, below = inside, inside.depth + 1
                    query = inputs if retriever and type(inputs) is str else None
                    kind = "retriever" if retriever else str(metadata.get(_KIND_KEY) or "stage")
                    stage = StageRecord(
                        name,
                        query,
                        below,
                        kind=kind,
                        parent=enclosing,
                        branch=fork,
                        inputs=None if retriever else frontier(root.stages, enclosing),
                    )
                    if enclosing is not None:
                        enclosing.nest()  # a retriever made of others reranks or fuses
                    root.add_stage(stage)
                    below += 1
                    enclosing = stage
                    self.tokens[key] = self.open_stage.set(stage)
            nodes[key] = (root, below, stage, enclosing, fork)
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
        """A retriever (or a stage marker) returned: keep its documents' ids and texts in
        rank order (once, however often the event arrives)."""
        node = self.nodes.get(run_id.int)
        if node is None or node[2] is None or node[2].end is not None:
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
        """A retriever (or a stage marker) raised: keep the failed stage for drill-down."""
        node = self.nodes.get(run_id.int)
        if node is not None and node[2] is not None and node[2].end is None:
            node[2].failed(error)

    def stage_end(self, run_id: UUID, output: Any) -> None:
        """A chain ended: if it is a stage marker, its output is the stage's ranking."""
        node = self.nodes.get(run_id.int)
        if node is None or node[2] is None or node[2].end is not None:
            return
        if _is_documents(output):
            self.retriever_end(run_id, output)
        else:
            node[2].failed(
                f"the stage marker's output is a {type(output).__name__}, not a list of "
                "Documents (mark a step that returns documents)"
            )
            self.note(node[0], "stage", f"{node[2].name}: {node[2].error}")

    def llm_end(self, run_id: UUID, response: Any) -> None:
        """A model call ended: its text becomes the candidate response; usage is summed
        (once: a model run's node is dropped here, so an event seen twice adds nothing)."""
        key = run_id.int
        node = self.nodes.get(key)
        if node is None or node[0].ignored:
            return
        if key not in self.roots:  # a root model run's node goes when the root finishes
            with self.lock:
                if self.nodes.pop(key, None) is None:
                    return
        text, inp, out = llm_text_and_usage(response)
        root = node[0]
        with self.lock:
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
        if self.tokens:  # a stage ended: it is no longer the one open here
            token = self.tokens.pop(key, None)
            if token is not None:
                try:  # noqa: SIM105 - an end reported from another context cannot reset it
                    self.open_stage.reset(token)
                except ValueError:
                    pass
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
                root.forks = None
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
