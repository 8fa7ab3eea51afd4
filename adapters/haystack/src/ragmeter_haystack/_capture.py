"""What the recorder and the tracer share: the run record and how component outputs fill it.

Both turn one pipeline run into a :class:`HaystackRun` (a
:class:`~ragmeter.capture.RunRecord`): each run of a retriever component becomes a
:class:`~ragmeter.capture.CallRecord` (its documents' ids by ``doc_id`` and their texts,
as references), a generator's first reply the response, its reported token usage added
up. The recorder reads the components' outputs from the pipeline's result (or, when the
run failed, from the exception's pipeline snapshot); the tracer from Haystack's tracing
spans.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.capture import CallRecord, CaptureConfig, RunRecord
from ragmeter_haystack._documents import DocId, capture_ids, describe_doc_id, generator_output

__all__ = [
    "FRAMEWORK",
    "HaystackRun",
    "Roles",
    "question_of",
    "snapshot_outputs",
]

logger = logging.getLogger("ragmeter_haystack")
logger.addHandler(logging.NullHandler())

FRAMEWORK = "haystack"
"""``sample.metadata["framework"]``."""

_QUESTION_INPUTS = ("query", "question")


class HaystackRun(RunRecord):
    """One pipeline run: the shared record plus the texts the generator was given.

    ``contexts`` are the contents of the ``contexts`` component's documents (``None``: the
    chosen retriever calls' documents); ``data`` is the pipeline's input, kept until the
    run ends (the question is read from it then); ``ignored`` marks a run that
    ``record="tagged"`` does not record; ``lock`` guards the record against the run's own
    components running on several threads (one lock per run: concurrent runs never wait
    for each other).
    """

    __slots__ = ("contexts", "data", "ignored", "lock")

    def __init__(
        self,
        config: CaptureConfig,
        *,
        meta: Mapping[str, Any] | None = None,
        sample_id: str | None = None,
    ) -> None:
        super().__init__(config, meta=meta, sample_id=sample_id)
        self.contexts: tuple[str, ...] | None = None
        self.data: Any = None
        self.ignored = not self.wanted
        self.lock = threading.Lock()

    def framework_fields(
        self,
        fields: dict[str, Any],
        chosen: Sequence[CallRecord],
        pairs: Sequence[tuple[str, str]],
    ) -> None:
        texts = [text for call in chosen for text in call.texts]
        if chosen:
            fields["retrieved_texts"] = texts
        if self.contexts is not None:
            fields["retrieved_contexts"] = list(self.contexts)
        elif chosen:
            fields["retrieved_contexts"] = texts

    def release(self) -> None:
        super().release()
        self.contexts = None
        self.data = None


@dataclass(frozen=True)
class Roles:
    """Which components a capture reads, and how.

    ``retriever``/``generator``/``contexts`` are component names (``None``: by kind, see
    :meth:`retriever_kind`); ``doc_id`` names a document; the socket names are the outputs
    read.
    """

    retriever: str | None
    generator: str | None
    contexts: str | None
    doc_id: DocId
    documents_output: str = "documents"
    replies_output: str = "replies"

    def is_retriever(self, name: str, type_name: str, outputs: Any) -> bool:
        """A retriever call: the named component, else a ``*Retriever*`` with documents."""
        if self.retriever is not None:
            return name == self.retriever
        return "Retriever" in type_name and self.documents_output in outputs

    def is_generator(self, name: str, outputs: Any) -> bool:
        """The answer: the named component, else any component with a replies output."""
        if self.generator is not None:
            return name == self.generator
        return self.replies_output in outputs

    def documents(self, run: HaystackRun, call: CallRecord, docs: Any) -> None:
        """A retriever call returned ``docs``: keep their ids and texts."""
        ids, texts, missing, error = capture_ids(list(docs or ()), self.doc_id)
        call.done(ids, texts)
        if error is not None:
            run.note(
                f"doc_id raised {type(error).__name__}: {error} on {missing} of {len(ids)} "
                "document(s); their Document.id was used instead"
            )
            run.config.problems("doc_id", f"{type(error).__name__}: {error}", error)
        elif missing:
            run.note(
                f"{missing} of {len(ids)} retrieved document(s) had no value for "
                f"doc_id={describe_doc_id(self.doc_id)}; their Document.id was used instead"
            )
            run.config.problems("doc_id", f"{missing} document(s) without doc_id")

    def context_texts(self, run: HaystackRun, docs: Any) -> None:
        """The documents handed to the generator (the ``contexts`` component's)."""
        run.contexts = tuple(
            text if type(text := getattr(d, "content", None)) is str else "" for d in docs or ()
        )

    def reply(self, run: HaystackRun, outputs: Mapping[str, Any]) -> None:
        """A generator ran: its first reply is the answer (the last generator's wins)."""
        text, inp, out = generator_output(outputs, self.replies_output)
        if text is not None:
            run.response = text
        run.add_tokens(inp, out)

    def outputs(
        self,
        run: HaystackRun,
        result: Mapping[str, Any],
        retriever: str | None,
        generator: str | None,
    ) -> None:
        """Fill ``run`` from a pipeline result ``{component: outputs}`` (the recorder)."""
        if retriever is not None:
            outputs = result.get(retriever)
            if isinstance(outputs, Mapping) and self.documents_output in outputs:
                call = CallRecord(retriever, _query(run.data, retriever), 0)
                run.add_call(call)
                self.documents(run, call, outputs[self.documents_output])
        if self.contexts is not None and self.contexts != retriever:
            outputs = result.get(self.contexts)
            if isinstance(outputs, Mapping) and self.documents_output in outputs:
                self.context_texts(run, outputs[self.documents_output])
        if generator is not None:
            outputs = result.get(generator)
            if isinstance(outputs, Mapping):
                self.reply(run, outputs)


def _query(data: Any, component: str) -> str | None:
    scope = data.get(component) if isinstance(data, Mapping) else None
    value = scope.get("query") if isinstance(scope, Mapping) else None
    return value if isinstance(value, str) else None


def question_of(
    data: Any, query_input: str | None, retriever: str | None, calls: Sequence[CallRecord] = ()
) -> str | None:
    """The question of a run: ``query_input`` (``"component.input"`` or an input name),
    else the retriever's ``query``, else a ``query``/``question`` input anywhere in ``data``
    (flat or nested by component), else the first retriever call's query."""
    if isinstance(data, Mapping):
        candidates: list[tuple[str | None, str]] = []
        if query_input is not None and "." in query_input:
            comp, socket = query_input.split(".", 1)
            candidates += [(comp, socket), (None, socket)]
        else:
            names = (query_input,) if query_input is not None else _QUESTION_INPUTS
            for name in names:
                if retriever is not None:
                    candidates.append((retriever, name))
                candidates.append((None, name))
                candidates.extend((c, name) for c in data if isinstance(data[c], Mapping))
        for where, key in candidates:
            scope = data.get(where) if where is not None else data
            if isinstance(scope, Mapping):
                value = scope.get(key)
                if isinstance(value, str):
                    return value
    for call in calls:
        if call.query is not None:
            return call.query
    return None


def snapshot_outputs(error: BaseException) -> dict[str, Any] | None:
    """The outputs a failed run had produced, from the exception's pipeline snapshot.

    Haystack (>= 2.16) attaches a ``pipeline_snapshot`` to the ``PipelineRuntimeError`` of
    a run that failed; its ``pipeline_state.pipeline_outputs`` hold the outputs of the
    components in ``include_outputs_from`` that had run. ``None`` when there is none (or it
    cannot be read: older Haystack).
    """
    snapshot = getattr(error, "pipeline_snapshot", None)
    state = getattr(snapshot, "pipeline_state", None)
    serialized = getattr(state, "pipeline_outputs", None)
    if not serialized:
        return None
    try:
        from haystack.utils.base_serialization import _deserialize_value_with_schema

        outputs = _deserialize_value_with_schema(serialized)
    except Exception:  # a Haystack without this layout: nothing to recover
        logger.debug("ragmeter could not read a pipeline snapshot", exc_info=True)
        return None
    return outputs if isinstance(outputs, dict) else None
