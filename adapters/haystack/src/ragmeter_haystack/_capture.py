"""How a Haystack pipeline run becomes a record: one rule for the tracer and the recorder.

Both read the run from Haystack's tracing spans (the recorder runs the tracer's capture for
the runs it makes), so they agree on everything:

* **a stage** is any component with a ``documents`` output (a retriever, a custom
  retriever component, a ``DocumentJoiner``, a ranker): its documents become a
  :class:`~ragmeter.capture.StageRecord` named after the component. A stage without a
  ``documents`` input is a ``"retriever"``; one that takes documents from several senders
  (or a ``*Joiner``) a ``"fusion"``; one that takes them from one a ``"reranker"``. The
  stages it consumed are its ``documents`` input's senders.
* **the context** (what reached the generator) is the ``documents`` input of the component
  that feeds the generator (a prompt builder), or of the component named ``contexts``;
  when no such component ran (a retrieval-only pipeline) it is the one stage that no other
  stage consumed, and none when several are left (a note says so).
* **the answer** is the first reply of the last generator to run (the component named
  ``generator``, else any component with a ``replies`` output), its token usage added up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.capture import CaptureConfig, RunRecord, StageRecord
from ragmeter_haystack._documents import DocId, capture_ids, describe_doc_id, generator_output

__all__ = [
    "FRAMEWORK",
    "HaystackRun",
    "Rules",
    "question_of",
]

logger = logging.getLogger("ragmeter_haystack")
logger.addHandler(logging.NullHandler())

FRAMEWORK = "haystack"
"""``sample.metadata["framework"]``."""

_QUESTION_INPUTS = ("query", "question")


class HaystackRun(RunRecord):
    """One pipeline run: the shared record plus what decides its context.

    ``consumers`` are the components that received documents without producing any
    (prompt builders, answer builders): ``(name, receivers of their outputs, the stage whose
    ranking they received or their own record)``; ``generators`` the names of the
    components that replied; ``data`` is the pipeline's input, kept until the run ends (the
    question is read from it then); ``ignored`` marks a run that is not recorded
    (``record="tagged"`` without an id); ``lock`` guards the record against the run's own
    components running on several threads (one lock per run: concurrent runs never wait for
    each other).
    """

    __slots__ = ("consumers", "data", "generators", "given", "ignored", "lock")

    def __init__(
        self,
        config: CaptureConfig,
        *,
        meta: Mapping[str, Any] | None = None,
        sample_id: str | None = None,
    ) -> None:
        super().__init__(config, meta=meta, sample_id=sample_id)
        self.consumers: list[tuple[str, frozenset[str], StageRecord]] | None = None
        self.generators: set[str] | None = None
        self.data: Any = None
        self.given: dict[str, Any] | None = None  # a recorder call's own ground truth
        self.ignored = not self.wanted
        self.lock = threading.Lock()

    def explicit_fields(self) -> dict[str, Any]:
        return self.given or {}

    def framework_fields(
        self,
        fields: dict[str, Any],
        chosen: Sequence[StageRecord],
        pairs: Sequence[tuple[str, str]],
        names: Mapping[int, str],
    ) -> None:
        if chosen:
            fields["retrieved_texts"] = [text for stage in chosen for text in stage.texts]


@dataclass(frozen=True)
class Rules:
    """Which components a capture reads, and how (see the module docstring).

    ``generator``/``contexts`` name a component (``None``: by kind); ``doc_id`` names a
    document; the socket names are the outputs read.
    """

    generator: str | None
    contexts: str | None
    doc_id: DocId
    documents_output: str = "documents"
    replies_output: str = "replies"

    def stage_of(
        self, name: str, type_name: str, inputs: Any, outputs: Any, depth: int
    ) -> StageRecord | None:
        """The stage a component span is, or ``None`` (it has no ``documents`` output)."""
        if not _mapping(outputs) or self.documents_output not in outputs:
            return None
        socket: Any = inputs.get(self.documents_output) if _mapping(inputs) else None
        if socket is not None and _mapping(socket):
            senders = tuple(str(s) for s in socket.get("senders") or ())
            kind = "fusion" if len(senders) > 1 or "Joiner" in type_name else "reranker"
            return StageRecord(name, None, depth, kind=kind, inputs=senders or None)
        return StageRecord(name, None, depth, kind="retriever")

    def consumes(self, name: str, inputs: Any, outputs: Any) -> frozenset[str] | None:
        """For a component that takes documents and gives none (a prompt builder), the
        components its outputs go to; else ``None``."""
        if not _mapping(inputs) or self.documents_output not in inputs:
            return None
        if _mapping(outputs) and self.documents_output in outputs:
            return None
        receivers: set[str] = set()
        if _mapping(outputs):
            for socket in outputs.values():
                if _mapping(socket):
                    receivers.update(socket.get("receivers") or ())
        return frozenset(receivers)

    def is_generator(self, name: str, outputs: Any) -> bool:
        """The answer: the named component, else any component with a replies output."""
        if self.generator is not None:
            return name == self.generator
        return _mapping(outputs) and self.replies_output in outputs

    def documents(self, run: HaystackRun, stage: StageRecord, docs: Any) -> None:
        """A stage returned ``docs``: keep their ids and texts."""
        ids, texts, missing, error = capture_ids(list(docs or ()), self.doc_id)
        stage.done(ids, texts)
        self._note_ids(run, len(ids), missing, error)

    def received(self, run: HaystackRun, name: str, receivers: frozenset[str], docs: Any) -> None:
        """A consumer got ``docs``: remember them (as the stage they came from, if any)."""
        docs = list(docs or ())
        same = self._same_stage(run, docs)
        if same is not None:  # the usual case: a stage's very documents (or copies)
            if run.consumers is None:
                run.consumers = []
            run.consumers.append((name, receivers, same))
            return
        ids, texts, missing, error = capture_ids(docs, self.doc_id)
        self._note_ids(run, len(ids), missing, error)
        record: StageRecord | None = None
        for stage in reversed(run.stages):
            if stage.same_ranking(ids, texts):
                record = stage
                break
        if record is None:
            record = StageRecord(name, None, 0, kind="context")
            record.done(ids, texts)
        if run.consumers is None:
            run.consumers = []
        run.consumers.append((name, receivers, record))

    def _same_stage(self, run: HaystackRun, docs: Sequence[Any]) -> StageRecord | None:
        """The stage that returned exactly these documents, found by identity of their ids
        and texts (Haystack hands a component copies whose strings are the very same
        objects), without computing their ids again; ``None`` when none did."""
        if self.doc_id != "id":
            return None
        for stage in reversed(run.stages):
            ids = stage._ids
            texts = stage.texts
            if ids is None or len(ids) != len(docs):
                continue
            if all(
                getattr(d, "id", None) is i and getattr(d, "content", None) is t
                for d, i, t in zip(docs, ids, texts, strict=True)
            ):
                return stage
        return None

    def _note_ids(
        self, run: HaystackRun, total: int, missing: int, error: BaseException | None
    ) -> None:
        if error is not None:
            run.note(
                f"doc_id raised {type(error).__name__}: {error} on {missing} of {total} "
                "document(s); their Document.id was used instead"
            )
            run.config.problems("doc_id", f"{type(error).__name__}: {error}", error)
        elif missing:
            run.note(
                f"{missing} of {total} retrieved document(s) had no value for "
                f"doc_id={describe_doc_id(self.doc_id)}; their Document.id was used instead"
            )
            run.config.problems("doc_id", f"{missing} document(s) without doc_id")

    def reply(self, run: HaystackRun, name: str, outputs: Mapping[str, Any]) -> None:
        """A generator ran: its first reply is the answer (the last generator's wins)."""
        text, inp, out = generator_output(outputs, self.replies_output)
        if text is not None:
            run.response = text
        run.add_tokens(inp, out)
        if run.generators is None:
            run.generators = set()
        run.generators.add(name)

    def context(self, run: HaystackRun) -> StageRecord | None:
        """What reached the generator (``None``: decided by the shared rule when read)."""
        consumers = run.consumers or ()
        if self.contexts is not None:
            for stage in reversed(run.stages):
                if stage.name == self.contexts:
                    return stage
            for name, _, record in reversed(consumers):
                if name == self.contexts:
                    return record
            return None
        generators = run.generators or set()
        for _, receivers, record in reversed(consumers):
            if receivers & generators:
                return record
        return None


def _mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, quick for a dict (the ABC check costs a microsecond)."""
    return type(value) is dict or isinstance(value, Mapping)


def question_of(
    data: Any, query_input: str | None, stages: Sequence[StageRecord] = ()
) -> str | None:
    """The question of a run: ``query_input`` (``"component.input"`` or an input name), else
    the first retriever's ``query``, else a ``query``/``question`` input anywhere in
    ``data`` (flat or nested by component), else the first stage's query."""
    first = next((s.name for s in stages if s.kind == "retriever"), None)
    if query_input is None and first is not None and _mapping(data):  # the usual place
        scope = data.get(first)
        value = scope.get("query") if _mapping(scope) else None
        if type(value) is str:
            return value
    if _mapping(data):
        candidates: list[tuple[str | None, str]] = []
        if query_input is not None and "." in query_input:
            comp, socket = query_input.split(".", 1)
            candidates += [(comp, socket), (None, socket)]
        else:
            names = (query_input,) if query_input is not None else _QUESTION_INPUTS
            for name in names:
                if first is not None:
                    candidates.append((first, name))
                candidates.append((None, name))
                candidates.extend((c, name) for c in data if isinstance(data[c], Mapping))
        for where, key in candidates:
            scope = data.get(where) if where is not None else data
            if isinstance(scope, Mapping):
                value = scope.get(key)
                if isinstance(value, str):
                    return value
    for stage in stages:
        if stage.query is not None:
            return stage.query
    return None
