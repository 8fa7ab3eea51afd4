"""``RagmeterTracer``: capture every pipeline run through Haystack's tracing, without wrapping it.

Haystack reports each ``Pipeline.run``/``run_async`` as a ``haystack.pipeline.run`` span and
each component run inside it as a ``haystack.component.run`` span, whose content tags carry
the component's inputs and outputs. A top-level pipeline span becomes a
:class:`~ragmeter_haystack._capture.HaystackRun`, each component with a ``documents`` output
a stage, the documents a prompt builder received the context, a generator's reply the
answer (the rules: :mod:`ragmeter_haystack._capture`). So a pipeline loaded from YAML, run
by a framework, or served by Hayhooks is captured as it is.

Haystack has one process-wide tracer. However many ragmeter tracers (and recorders) are
attached, ragmeter installs one **hub** as that tracer, which hands every span to each of
them and forwards it to the tracer that was active before (Langfuse, OpenTelemetry, the
logging tracer). Attaching and detaching in any order leaves Haystack's tracer exactly as
it was once the last one detaches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from haystack.tracing.tracer import Span, Tracer
from haystack.tracing.tracer import tracer as _proxy

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
    describe,
)
from ragmeter.errors import InvalidInputError
from ragmeter.schema import CONTEXT
from ragmeter_haystack._capture import FRAMEWORK, HaystackRun, Rules, logger, question_of
from ragmeter_haystack._documents import DocId, check_doc_id, describe_doc_id
from ragmeter_haystack._hub import _CURRENT, HUB, RECORDING, _HubSpan
from ragmeter_haystack._pipeline import input_builder

__all__ = ["RECORDING", "RagmeterTracer", "doc_id_hint"]

SAMPLE_ID_HINT = (
    "Haystack: run each query inside `with tracer.capture(id=qid):` (tracer.run_dataset(...) "
    "does it for a whole dataset); without it a sample's id is a new uuid."
)

STAGE_HINT = (
    "Haystack: the context is the documents a prompt builder (a component feeding the "
    "generator) received; in a pipeline without one, name the component whose documents "
    "count with contexts='<component>', or score one stage with stage='<component>'."
)


def doc_id_hint(doc_id: DocId) -> str:
    """How a Haystack user makes recorded ids the qrels' doc ids, given ``doc_id``."""
    return (
        f"Haystack: ragmeter reads each document's doc_id={describe_doc_id(doc_id)}; if the "
        "qrels name documents another way, pass doc_id='content' (Haystack's own evaluators "
        "compare 'content' by default) or doc_id='meta.<key>' (or a function document -> "
        "id), or write the documents with the qrels' ids (Document(id=...))."
    )


class RagmeterTracer(DatasetFront, Tracer):
    """A Haystack tracer that records one :class:`~ragmeter.schema.RagSample` per pipeline run.

    ``tracer = RagmeterTracer().attach()`` makes it receive Haystack's spans (process-wide,
    as ``haystack.tracing.enable_tracing`` does; a tracer that was active keeps receiving
    every span, forwarded, and several ragmeter tracers can be attached at once);
    ``tracer.detach()`` stops it; ``with RagmeterTracer() as tracer:`` does both. Every
    top-level ``Pipeline.run``/``run_async`` (one not inside another captured run) becomes a
    sample, without wrapping ``run``: a pipeline loaded from YAML, called by your framework
    or served by Hayhooks is captured as it is. ``with tracer.capture(id=qid,
    relevance=qrels[qid]): pipeline.run(data)`` gives a run its sample id and ground truth
    (the tracer receives spans while the block runs, attached or not; another tracer does
    not see the scope); ``tracer.run_dataset(pipeline, queries, qrels=...)`` runs a dataset
    with bounded concurrency and a progress bar.

    A sample holds (:mod:`ragmeter_haystack._capture` has the rules, the same for
    :class:`~ragmeter_haystack.RagmeterRecorder`): ``stages``, one per component with a
    ``documents`` output (retrievers, custom retriever components, joiners, rankers),
    named after the component, and ``context``, the documents the prompt builder (the
    component feeding the generator) received; ``retrieved_ids`` is the context's ranking
    (or ``stage=``'s), ids by ``doc_id``, each at its best rank, in list order (ties
    included, never re-sorted by score); ``retrieved_contexts`` the context's texts; the
    question (``query_input`` from the run's data, else the first retriever's ``query``);
    the answer and token usage of the last generator to run; latency and the error of a
    failed run (a run that failed after retrieval keeps its stages and context).
    ``generator`` and ``contexts`` name those components when the defaults do not fit.
    ``retriever=``, ``retrieval=`` and ``retriever_name=`` are deprecated (every component
    with documents is a stage; ``stage=`` picks one).

    The tracer reads the components' inputs and outputs whatever
    ``HAYSTACK_CONTENT_TRACING_ENABLED`` says (that setting still governs what a forwarded
    tracer receives), keeps only references while a run goes, and never raises into the
    pipeline: capture problems are logged once per kind and noted on the sample.
    """

    def __init__(
        self,
        *,
        stage: str = CONTEXT,
        generator: str | None = None,
        contexts: str | None = None,
        query_input: str | None = None,
        doc_id: DocId = "id",
        record: Record = "all",
        max_samples: int | None = None,
        documents_output: str = "documents",
        replies_output: str = "replies",
        retriever: str | None = None,
        retrieval: Retrieval | None = None,
        retriever_name: str | None = None,
    ) -> None:
        rule = check_doc_id(doc_id)
        stage = check_stage(stage)
        if retriever is not None:
            deprecated_selection("RagmeterTracer", "retriever")
            stage = check_stage(retriever, "retriever")
        if retrieval is not None:
            deprecated_selection("RagmeterTracer", "retrieval")
            retrieval = check_retrieval(retrieval)
        if retriever_name is not None:
            deprecated_selection("RagmeterTracer", "retriever_name")
        self.query_input = query_input
        self.rules = Rules(generator, contexts, rule, documents_output, replies_output)
        self.config = CaptureConfig(
            FRAMEWORK,
            ProblemLog(logger, "Haystack"),
            stage=stage,
            retrieval=retrieval,
            retriever_name=retriever_name,
            name_hint="a Haystack stage is named after its component",
            stage_hint=STAGE_HINT,
            flow_known=True,
            record=check_record(record),
            owner=self,
        )
        hints = Hints(
            FRAMEWORK, SAMPLE_ID_HINT, doc_id_hint(rule), label="Haystack", stage=STAGE_HINT
        )
        self._store = SampleStore(max_samples=max_samples, hints=hints)
        self._attachment_state = Attachment(self._register)
        self._recorder: Any = None  # the recorder this observer records for (its runs only)

    @property
    def store(self) -> SampleStore:
        """The :class:`~ragmeter.capture.SampleStore` holding the samples."""
        return self._store

    @property
    def capture_errors(self) -> int:
        """How many capture problems were logged (each is noted on its sample too)."""
        return self.config.problems.count

    # -- registration -----------------------------------------------------------------------

    @property
    def attached(self) -> bool:
        """Whether this tracer receives Haystack's spans (through the hub, or set directly
        with ``enable_tracing``)."""
        if _proxy.actual_tracer is self:
            return True
        return HUB.active and any(o is self for o in HUB.observers)

    @property
    def inner(self) -> Tracer | None:
        """The tracer spans are forwarded to (the one that was active before), if any."""
        return HUB.forward_to() if self.attached else None

    def attach(self) -> RagmeterTracer:
        """Receive Haystack's spans (idempotent); the tracer active before keeps receiving
        them, forwarded."""
        self._attachment_state.attach()
        if not self.attached:  # Haystack's tracer was replaced meanwhile: install again
            self._attachment_state.refresh()
        return self

    def detach(self) -> None:
        """Stop receiving spans; once the last ragmeter tracer detaches, Haystack's tracer is
        the one that was active before the first attached."""
        self._attachment_state.detach()

    def _register(self, on: bool) -> None:
        if on:
            HUB.add(self)
        else:
            HUB.remove(self)

    def _attachment(self) -> Attachment:
        return self._attachment_state

    def __enter__(self) -> RagmeterTracer:
        return self.attach()

    def __exit__(self, *exc: object) -> None:
        self.detach()

    # -- the Tracer protocol (used when set directly with enable_tracing) -------------------

    def trace(  # type: ignore[override]
        self,
        operation_name: str,
        tags: dict[str, Any] | None = None,
        parent_span: Span | None = None,
    ) -> _HubSpan:
        """A span for one traced operation, recorded by this tracer alone."""
        return _HubSpan((self,), None, operation_name, tags, parent_span)

    def current_span(self) -> Span | None:
        """The span active in this thread or task (``None`` outside any)."""
        return _CURRENT.get()

    # -- capture ------------------------------------------------------------------------------

    def _start(self, tags: Mapping[str, Any] | None) -> HaystackRun | None:
        """A new record for a top-level pipeline run, or ``None`` when it is not recorded."""
        sample_id: str | None = None
        meta: Mapping[str, Any] | None = None
        given: dict[str, Any] | None = None
        if self._recorder is not None:  # a recorder's observer: only the runs it makes
            recording = RECORDING.get()
            if recording is None or recording[0] is not self:
                return None
            _, sample_id, meta, given = recording
        run = HaystackRun(self.config, meta=meta, sample_id=sample_id)
        if run.ignored:
            return None
        run.given = given
        run.data = tags.get("haystack.pipeline.input_data") if tags else None
        return run

    def _finish(self, run: HaystackRun, error: BaseException | None) -> None:
        run.finish(error)
        try:
            with run.lock:
                run.context = self.rules.context(run)
                run.user_input = question_of(run.data, self.query_input, run.stages)
        except Exception as exc:
            run.note(f"question: {describe(exc)}")
            self.config.problems("capture", describe(exc), exc)
        run.data = None
        run.consumers = None
        run.generators = None
        self._store.add(run)

    def _dataset_call(
        self, target: Any, options: dict[str, Any], *, asynchronous: bool
    ) -> Callable[[str], Any]:
        """``run_dataset`` runs ``target.run(inputs)``, the query placed by ``inputs=``
        (:func:`input_builder`; default: every open ``query`` and ``question`` input)."""
        inputs = options.pop("inputs", None)
        if asynchronous:
            raise InvalidInputError(
                "arun_dataset is not available for Haystack: Pipeline.run is synchronous; use "
                "run_dataset (concurrency= runs several pipelines at once in threads)"
            )
        build = input_builder(target, inputs if inputs is not None else self.query_input)
        return lambda query: target.run(build(query))
