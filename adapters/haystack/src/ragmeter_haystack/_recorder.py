"""``RagmeterRecorder``: capture a ``RagSample`` from every run of a Haystack pipeline you call.

The recorder runs the tracer's capture (:class:`~ragmeter_haystack.RagmeterTracer`) for the
runs it makes, and only for those: one rule for what a stage, the context and the answer
are, whichever of the two a user picks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from ragmeter.capture import (
    Attachment,
    DatasetReport,
    FailedQueries,
    Record,
    SampleStore,
    StoreFront,
    check_stage,
    deprecated_selection,
    prepare_dataset,
)
from ragmeter.capture import Dataset as _Dataset
from ragmeter.errors import InvalidInputError
from ragmeter.schema import CONTEXT
from ragmeter_haystack._documents import _UNSET, DocId, doc_id_option
from ragmeter_haystack._pipeline import (
    check_component,
    components_with,
    input_builder,
    nest_input,
)
from ragmeter_haystack._tracer import RECORDING, RagmeterTracer

__all__ = ["RagmeterRecorder"]

SAMPLE_ID_HINT = (
    "Haystack: run each query inside `with recorder.capture(id=qid):` (or pass "
    "recorder.run(data, sample_id=qid), or metadata={'ragmeter_id': qid}); without it a "
    "sample's id is a new uuid."
)


class RagmeterRecorder(StoreFront):
    """Run a Haystack pipeline as usual and record what it retrieved and answered.

    ``recorder.run(data)`` is a drop-in for ``pipeline.run(data)`` (same arguments,
    ``include_outputs_from`` positional too, the same result, untouched): it runs the
    pipeline with the capture of :class:`~ragmeter_haystack.RagmeterTracer` listening to
    this one run (Haystack's tracing, not extra outputs), so the recorder and the tracer
    record the same sample. ``run_async`` does the same with ``pipeline.run_async``. To
    capture a pipeline you do not call yourself (loaded from YAML, served by Hayhooks), use
    the tracer.

    What a sample holds:

    * ``id``: ``sample_id=``, else ``metadata["ragmeter_id"]``, else the id of the active
      ``with recorder.capture(id=...)`` scope, else a new uuid. Use your query ids so
      :meth:`to_run` joins your qrels.
    * ``stages``: one per component with a ``documents`` output (retrievers, custom
      retriever components, joiners, rankers), named after it, and ``context``: the
      documents the component feeding the generator (a prompt builder) received, or those
      of the component named ``contexts``.
    * ``retrieved_ids``: the context's ranking (or the stage named by ``stage=``), by
      ``doc_id`` (``"id"``, ``"content"``, ``"meta.<key>"`` or a function; a document
      without that value falls back to its ``id``), best first, each kept at its best rank
      (chunks of one source collapse to one entry), in list order (never re-sorted by
      score). ``retrieved_texts``: their contents, all of them, in order;
      ``retrieved_contexts``: the texts that reached the generator.
    * ``user_input``: the ``query_input`` value from ``data`` (default: the first
      retriever's ``query``, else a ``query`` or ``question`` input).
    * ``response``: the text of the generator's first reply (``ChatMessage.text``, a
      ``str``, or a ``GeneratedAnswer``'s ``data``); ``input_tokens``/``output_tokens``
      from its ``meta["usage"]``, or the generator's ``meta`` output (``OpenAIGenerator``).
    * ``latency_ms`` of the whole run; ``error`` when the pipeline raised (the exception is
      re-raised unchanged). A run that failed *after* retrieval keeps its stages.
    * ``reference``, ``reference_ids``, ``relevance`` from the keyword arguments, the
      ``ragmeter_*`` metadata keys (:mod:`ragmeter.capture`) or the scope; your other
      ``metadata`` keys go, JSON-safe, to ``metadata["run_metadata"]`` (as in every adapter),
      next to ``metadata["framework"] == "haystack"``.

    ``generator`` names the component whose reply is the answer when the default (any
    component with a ``replies`` output, the last to run) does not fit. ``retriever=``
    (second positional argument) is the deprecated way to pick the scored stage (use
    ``stage=``); ``doc_id_field=`` the deprecated name of ``doc_id``. ``record="tagged"``
    records only runs with a sample id. A failure while *capturing* never reaches your
    pipeline: it is logged once per kind and recorded in the sample's
    ``metadata["capture_errors"]``. The recorder has the surface every adapter shares
    (:class:`~ragmeter.capture.StoreFront`): ``samples``, ``store``, ``drain()``,
    ``to_run()``, ``to_qrels()``, ``clear()``, ``to_jsonl()``, ``evaluate()``,
    ``evaluate_retrieval(qrels, stages=...)``, ``capture(...)`` and :meth:`run_dataset`.
    """

    def __init__(
        self,
        pipeline: Any,
        retriever: str | None = None,
        generator: str | None = None,
        *,
        stage: str = CONTEXT,
        contexts: str | None = None,
        query_input: str | None = None,
        doc_id: DocId | None = None,
        documents_output: str = "documents",
        replies_output: str = "replies",
        record: Record = "all",
        max_samples: int | None = None,
        doc_id_field: Any = _UNSET,
    ) -> None:
        """Wrap ``pipeline``; nothing about it is changed.

        :param pipeline: A ``haystack.Pipeline`` (or 2.x ``AsyncPipeline``).
        :param retriever: Deprecated: the stage to score (use ``stage=``).
        :param generator: Component whose ``replies_output`` holds the answer.
        :param stage: The ranking ``retrieved_ids`` holds: ``"context"`` (what reached the
            generator, the default) or a component's name.
        :param contexts: Component whose documents count as what reached the generator
            (default: those the component feeding the generator received).
        :param query_input: Where the question is in ``data``: ``"<component>.<input>"`` or
            an input name.
        :param doc_id: ``"id"`` (default), ``"content"``, ``"meta.<key>"`` or a function
            ``document -> id``: a document's id in the recorded run.
        :param record: ``"all"`` runs, or only ``"tagged"`` ones (with a sample id).
        :raises ValueError: When a named component is not in the pipeline (or lacks the
            output), the pipeline has no component with documents or replies, or an option
            is invalid.
        """
        rule = doc_id_option(doc_id, doc_id_field, owner="RagmeterRecorder")
        stage = check_stage(stage)
        if retriever is not None:
            deprecated_selection("RagmeterRecorder", "retriever", stacklevel=3)
            check_component(pipeline, retriever, role="retriever", socket=documents_output)
            stage = retriever
        if generator is not None:
            check_component(pipeline, generator, role="generator", socket=replies_output)
        if contexts is not None:
            check_component(pipeline, contexts, role="contexts", socket=None)
        if stage != CONTEXT and retriever is None:
            check_component(pipeline, stage, role="stage", socket=documents_output)
        if not components_with(pipeline, documents_output) and not components_with(
            pipeline, replies_output
        ):
            raise InvalidInputError(
                f"the pipeline has no component with a {documents_output!r} or "
                f"{replies_output!r} output, so there is nothing to record; set "
                "documents_output=/replies_output= to the outputs your components have"
            )
        if query_input is not None and "." in query_input:
            nest_input(pipeline, query_input, None, role="query_input")
        self.pipeline = pipeline
        self.retriever = retriever
        self.generator = generator
        self.contexts = contexts
        self.stage = stage
        self.query_input = query_input
        self.doc_id = rule
        self.documents_output = documents_output
        self.replies_output = replies_output
        observer = RagmeterTracer(
            stage=stage,
            generator=generator,
            contexts=contexts,
            query_input=query_input,
            doc_id=rule,
            record=record,
            max_samples=max_samples,
            documents_output=documents_output,
            replies_output=replies_output,
        )
        observer._recorder = self  # it records the runs this recorder makes, and no other
        observer.config = replace(observer.config, owner=self)  # the recorder's scopes apply
        observer.store.hints = replace(observer.store.hints, sample_id=SAMPLE_ID_HINT)
        self._observer = observer
        self.config = observer.config

    @property
    def store(self) -> SampleStore:
        """The :class:`~ragmeter.capture.SampleStore` holding the samples."""
        return self._observer.store

    @property
    def doc_id_field(self) -> DocId:
        """The deprecated name of :attr:`doc_id`."""
        return self.doc_id

    @property
    def capture_errors(self) -> int:
        """How many capture problems were logged (each is noted on its sample too)."""
        return self.config.problems.count

    def _attachment(self) -> Attachment:
        return self._observer._attachment()

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        data: dict[str, Any],
        include_outputs_from: set[str] | None = None,
        *,
        sample_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reference: str | None = None,
        reference_ids: list[str] | None = None,
        relevance: Mapping[str, float] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """``pipeline.run(data, include_outputs_from, **kwargs)``, recording one sample.

        :returns: exactly what ``pipeline.run`` returns.
        """
        with self._recording(sample_id, metadata, reference, reference_ids, relevance):
            result: dict[str, Any] = self.pipeline.run(
                data, include_outputs_from=include_outputs_from, **kwargs
            )
        return result

    async def run_async(
        self,
        data: dict[str, Any],
        include_outputs_from: set[str] | None = None,
        *,
        sample_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reference: str | None = None,
        reference_ids: list[str] | None = None,
        relevance: Mapping[str, float] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """``await pipeline.run_async(...)`` and record one sample, like :meth:`run`."""
        with self._recording(sample_id, metadata, reference, reference_ids, relevance):
            result: dict[str, Any] = await self.pipeline.run_async(
                data, include_outputs_from=include_outputs_from, **kwargs
            )
        return result

    @contextmanager
    def _recording(
        self,
        sample_id: str | None,
        metadata: Mapping[str, Any] | None,
        reference: str | None,
        reference_ids: list[str] | None,
        relevance: Mapping[str, float] | None,
    ) -> Iterator[None]:
        """The observer listens while the body runs, to this call's runs only; the call's own
        ground truth wins over every scope and the run's metadata, as ``sample_id`` does."""
        given = {
            name: value
            for name, value in (
                ("reference", reference),
                ("reference_ids", reference_ids),
                ("relevance", relevance),
            )
            if value is not None
        }
        ident = None if sample_id is None else str(sample_id)
        meta = dict(metadata) if metadata else None
        token = RECORDING.set((self._observer, ident, meta, given or None))
        attachment = self._attachment()
        attachment.open()
        try:
            yield
        finally:
            attachment.close()
            RECORDING.reset(token)

    def run_dataset(
        self,
        dataset: _Dataset,
        *,
        inputs: str | Sequence[str] | Callable[[str], Any] | None = None,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        concurrency: int = 4,
        progress: bool = True,
        k_values: Iterable[int] | None = None,
        metrics: Iterable[str] | None = None,
        answer_metrics: Sequence[Any] | None = None,
        failed_queries: FailedQueries = "zero",
    ) -> DatasetReport:
        """Run the pipeline for every query of ``dataset`` and score the samples.

        ``dataset``: ``{query_id: query}`` (with ``qrels=``), a BEIR directory or a JSONL
        file of samples (:func:`ragmeter.capture.load_dataset`). ``inputs`` says where the
        query goes (:func:`~ragmeter_haystack._pipeline.input_builder`; default: every open
        ``query`` and ``question`` input). Each query runs inside :meth:`capture` with its
        id and ground truth, ``concurrency`` at a time (threads, each in a copy of your
        context), with a rich progress bar on stderr (``progress=False`` hides it). A query
        that raises is recorded and the loop goes on. Returns a
        :class:`~ragmeter.capture.DatasetReport` (``retrieval``, ``answers``, ``samples``,
        ``failed``; ``k_values``/``metrics``/``failed_queries`` as in
        :meth:`evaluate_retrieval`).
        """
        build = input_builder(self.pipeline, inputs if inputs is not None else self.query_input)
        job = prepare_dataset(
            dataset,
            qrels=qrels,
            concurrency=concurrency,
            progress=progress,
            k_values=k_values,
            metrics=metrics,
            answer_metrics=answer_metrics,
            failed_queries=failed_queries,
        )
        return job.run(lambda query: self.run(build(query)), self.store)
