"""``RagmeterRecorder``: capture a ``RagSample`` from every run of a Haystack pipeline."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ragmeter.capture import (
    CaptureConfig,
    DatasetReport,
    FailedQueries,
    Hints,
    ProblemLog,
    Record,
    SampleStore,
    StoreFront,
    check_record,
    deprecated_option,
    describe,
    prepare_dataset,
)
from ragmeter.capture import Dataset as _Dataset
from ragmeter.errors import InvalidInputError
from ragmeter_haystack._capture import (
    FRAMEWORK,
    HaystackRun,
    Roles,
    logger,
    question_of,
    snapshot_outputs,
)
from ragmeter_haystack._documents import DocId, check_doc_id, describe_doc_id
from ragmeter_haystack._pipeline import (
    check_component,
    consumed_outputs,
    find_component,
    nest_input,
    open_inputs,
)

__all__ = ["RagmeterRecorder", "doc_id_hint", "input_builder"]

SAMPLE_ID_HINT = (
    "Haystack: run each query inside `with recorder.capture(id=qid):` (or pass "
    "recorder.run(data, sample_id=qid), or metadata={'ragmeter_id': qid}); without it a "
    "sample's id is a new uuid."
)

_UNSET: Any = object()


def doc_id_hint(doc_id: DocId) -> str:
    """How a Haystack user makes recorded ids the qrels' doc ids, given ``doc_id``."""
    return (
        f"Haystack: ragmeter reads each document's doc_id={describe_doc_id(doc_id)}; if the "
        "qrels name documents another way, pass doc_id='content' (Haystack's own evaluators "
        "compare 'content' by default) or doc_id='meta.<key>' (or a function document -> "
        "id), or write the documents with the qrels' ids (Document(id=...))."
    )


def doc_id_option(doc_id: Any, doc_id_field: Any, *, owner: str) -> DocId:
    """The checked ``doc_id``, taking the deprecated ``doc_id_field=`` into account."""
    if doc_id_field is _UNSET:
        return check_doc_id("id" if doc_id is None else doc_id)
    deprecated_option(owner, "doc_id_field", "doc_id", stacklevel=4)
    if doc_id is not None:
        raise InvalidInputError(
            f"{owner}: pass doc_id= alone; doc_id_field= is its deprecated older name"
        )
    return check_doc_id(doc_id_field, name="doc_id_field")


def input_builder(
    pipeline: Any, inputs: str | Sequence[str] | Callable[[str], Any] | None
) -> Callable[[str], dict[str, Any]]:
    """``query -> pipeline data`` for ``run_dataset``.

    ``inputs`` is a function ``query -> data``; or where the query goes: a
    ``"component.input"`` or an input name (given to every component that has it open, as
    Haystack's flat inputs), or a list of these; ``None``: every open ``query`` and
    ``question`` input. Raises :class:`~ragmeter.errors.InvalidInputError` when the
    pipeline has none of them.
    """
    if callable(inputs):
        fn = inputs
        return lambda query: dict(fn(query))
    if inputs is None:
        targets = [name for name in ("query", "question") if open_inputs(pipeline, name)]
        if not targets:
            raise InvalidInputError(
                "the pipeline has no open 'query' or 'question' input: say where the query "
                "goes with inputs='<component>.<input>' (or a list, or a function query -> data)"
            )
    else:
        targets = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs]
    for target in targets:  # checked once, up front
        nest_input(pipeline, target, None, role="inputs")

    def build(query: str) -> dict[str, Any]:
        data: dict[str, dict[str, Any]] = {}
        for target in targets:
            for comp, values in nest_input(pipeline, target, query, role="inputs").items():
                data.setdefault(comp, {}).update(values)
        return data

    return build


class RagmeterRecorder(StoreFront):
    """Run a Haystack pipeline as usual and record what it retrieved and answered.

    ``recorder.run(data)`` is a drop-in for ``pipeline.run(data)`` (same arguments,
    ``include_outputs_from`` positional too, the same result): it calls ``pipeline.run``
    asking also for the outputs of the ``retriever`` and ``generator`` components, keeps one
    record, and returns the pipeline's *normal* result (the extra outputs it asked for are
    removed again). ``run_async`` does the same with ``pipeline.run_async`` (Haystack 3.x
    ``Pipeline`` or 2.x ``AsyncPipeline``). To capture a pipeline you do not call yourself
    (loaded from YAML, served by Hayhooks), use :class:`~ragmeter_haystack.RagmeterTracer`.

    What a sample holds:

    * ``id``: ``sample_id=``, else ``metadata["ragmeter_id"]``, else the id of the active
      ``with recorder.capture(id=...)`` scope, else a new uuid. Use your query ids so
      :meth:`to_run` joins your qrels.
    * ``user_input``: the ``query_input`` value from ``data`` (default: the retriever's
      ``query``, else a ``query`` or ``question`` input).
    * ``retrieved_ids``: the retriever's ``documents`` by ``doc_id`` (``"id"``,
      ``"content"``, ``"meta.<key>"`` or a function; a document without that value falls
      back to its ``id``), best first, each kept at its best rank (chunks of one source
      collapse to one entry). ``retrieved_texts``: their contents, all of them, in order.
      ``metadata["retriever_calls"]`` has the call, as in every adapter.
    * ``retrieved_contexts``: the contents of the ``contexts`` component's documents (the
      retriever unless a ranker or joiner in between is named).
    * ``response``: the text of the generator's first reply (``ChatMessage.text``, a
      ``str``, or a ``GeneratedAnswer``'s ``data``); ``input_tokens``/``output_tokens``
      from its ``meta["usage"]``, or the generator's ``meta`` output (``OpenAIGenerator``).
    * ``latency_ms`` of the whole run; ``error`` when the pipeline raised (the exception is
      re-raised unchanged). A run that failed *after* its retriever ran keeps the retrieved
      documents (read from the exception's pipeline snapshot).
    * ``reference``, ``reference_ids``, ``relevance`` from the keyword arguments, the
      ``ragmeter_*`` metadata keys (:mod:`ragmeter.capture`) or the scope; your other
      ``metadata`` keys go, JSON-safe, to ``metadata["run_metadata"]`` (as in every adapter),
      next to ``metadata["framework"] == "haystack"``.

    By default the retriever is the one component with a ``documents`` output (a class
    named ``*Retriever*`` wins) and the generator the one with a ``replies`` output; name
    them when that is ambiguous. ``record="tagged"`` records only runs with a sample id. A
    failure while *capturing* never reaches your pipeline: it is logged once per kind and
    recorded in the sample's ``metadata["capture_errors"]`` (a value that does not
    validate, such as a NaN grade, is left out and the rest of the sample kept). The
    recorder has the surface every adapter shares (:class:`~ragmeter.capture.StoreFront`):
    ``samples``, ``store``, ``drain()``, ``to_run()``, ``to_qrels()``, ``clear()``,
    ``to_jsonl()``, ``evaluate()``, ``evaluate_retrieval(qrels)``, ``capture(...)`` and
    :meth:`run_dataset`. ``doc_id_field=`` is the deprecated name of ``doc_id``.
    """

    def __init__(
        self,
        pipeline: Any,
        retriever: str | None = None,
        generator: str | None = None,
        *,
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
        :param retriever: Component whose ``documents_output`` is the ranking to record.
        :param generator: Component whose ``replies_output`` holds the answer.
        :param contexts: Component whose documents were handed to the generator
            (default: the retriever).
        :param query_input: Where the question is in ``data``: ``"<component>.<input>"`` or
            an input name.
        :param doc_id: ``"id"`` (default), ``"content"``, ``"meta.<key>"`` or a function
            ``document -> id``: a document's id in the recorded run.
        :param record: ``"all"`` runs, or only ``"tagged"`` ones (with a sample id).
        :raises ValueError: When a named component is not in the pipeline (or lacks the
            output), the default choice is ambiguous, or an option is invalid.
        """
        rule = doc_id_option(doc_id, doc_id_field, owner="RagmeterRecorder")
        record = check_record(record)
        self.pipeline = pipeline
        self.documents_output = documents_output
        self.replies_output = replies_output
        self.doc_id = rule
        if retriever is not None:
            check_component(pipeline, retriever, role="retriever", socket=documents_output)
        else:
            retriever = find_component(
                pipeline, role="retriever", socket=documents_output, prefer="Retriever"
            )
        if generator is not None:
            check_component(pipeline, generator, role="generator", socket=replies_output)
        else:
            generator = find_component(
                pipeline, role="generator", socket=replies_output, prefer="Generator"
            )
        if contexts is not None:
            check_component(pipeline, contexts, role="contexts", socket=documents_output)
        if retriever is None and generator is None:
            raise InvalidInputError(
                "the pipeline has no component with a 'documents' or 'replies' output; name "
                "them with retriever='<component name>' and generator='<component name>'"
            )
        self.retriever = retriever
        self.generator = generator
        self.contexts = contexts if contexts is not None else retriever
        if query_input is not None and "." in query_input:
            nest_input(pipeline, query_input, None, role="query_input")
        self.query_input = query_input
        self._watched = {c for c in (retriever, generator, self.contexts) if c is not None}
        self._consumed = {name: consumed_outputs(pipeline, name) for name in self._watched}
        self._roles = Roles(
            retriever, generator, self.contexts, rule, documents_output, replies_output
        )
        self.config = CaptureConfig(FRAMEWORK, ProblemLog(logger, "Haystack"), record=record)
        hints = Hints(FRAMEWORK, SAMPLE_ID_HINT, doc_id_hint(rule), label="Haystack")
        self._store = SampleStore(max_samples=max_samples, hints=hints)

    @property
    def store(self) -> SampleStore:
        """The :class:`~ragmeter.capture.SampleStore` holding the samples."""
        return self._store

    @property
    def doc_id_field(self) -> DocId:
        """The deprecated name of :attr:`doc_id`."""
        return self.doc_id

    @property
    def capture_errors(self) -> int:
        """How many capture problems were logged (each is noted on its sample too)."""
        return self.config.problems.count

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
        run = self._start(data, sample_id, metadata, reference, reference_ids, relevance)
        include, added = self._include(include_outputs_from)
        try:
            result = self.pipeline.run(data, include_outputs_from=include, **kwargs)
        except Exception as exc:
            self._finish(run, None, exc)
            raise
        self._finish(run, result, None)
        return self._restore(result, added)

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
        run = self._start(data, sample_id, metadata, reference, reference_ids, relevance)
        include, added = self._include(include_outputs_from)
        try:
            result = await self.pipeline.run_async(data, include_outputs_from=include, **kwargs)
        except Exception as exc:
            self._finish(run, None, exc)
            raise
        self._finish(run, result, None)
        return self._restore(result, added)

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
        query goes (:func:`input_builder`; default: every open ``query`` and ``question``
        input). Each query runs inside :meth:`capture` with its id and ground truth,
        ``concurrency`` at a time (threads, each in a copy of your context), with a rich
        progress bar on stderr (``progress=False`` hides it). A query that raises is
        recorded and the loop goes on. Returns a :class:`~ragmeter.capture.DatasetReport`
        (``retrieval``, ``answers``, ``samples``, ``failed``; ``k_values``/``metrics``/
        ``failed_queries`` as in :meth:`evaluate_retrieval`).
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

    def _include(self, user: Any) -> tuple[set[str], set[str]]:
        requested = set(user) if user else set()
        return requested | self._watched, self._watched - requested

    def _restore(self, result: dict[str, Any], added: set[str]) -> dict[str, Any]:
        """Drop the outputs only ``include_outputs_from`` put in the result (never raises)."""
        if not added:
            return result
        try:
            out = dict(result)
            for name in added:
                outputs = out.get(name)
                if not isinstance(outputs, Mapping):
                    continue
                consumed = self._consumed.get(name) or set()
                kept = {k: v for k, v in outputs.items() if k not in consumed}
                if kept:
                    out[name] = kept
                else:
                    del out[name]
            return out
        except Exception as exc:
            self.config.problems("result", describe(exc), exc)
            return result

    # -- capture ---------------------------------------------------------------------------

    def _start(
        self,
        data: Any,
        sample_id: str | None,
        metadata: Mapping[str, Any] | None,
        reference: str | None,
        reference_ids: list[str] | None,
        relevance: Mapping[str, float] | None,
    ) -> HaystackRun | None:
        try:
            meta = dict(metadata) if metadata else {}
            for key, value in (
                ("ragmeter_reference", reference),
                ("ragmeter_reference_ids", reference_ids),
                ("ragmeter_relevance", relevance),
            ):
                if value is not None:
                    meta[key] = value
            ident = None if sample_id is None else str(sample_id)
            run = HaystackRun(self.config, meta=meta or None, sample_id=ident)
            run.data = data
            return run
        except Exception as exc:
            self.config.problems("run", describe(exc), exc)
            return None

    def _finish(self, run: HaystackRun | None, result: Any, error: BaseException | None) -> None:
        """Fill the record from the result (or the failed run's snapshot) and store it."""
        if run is None or run.ignored:
            return
        try:
            run.finish(error)
            outputs = result if error is None else snapshot_outputs(error)
            if isinstance(outputs, Mapping):
                self._roles.outputs(run, outputs, self.retriever, self.generator)
            calls = run.calls
            run.user_input = question_of(run.data, self.query_input, self.retriever, calls)
        except Exception as exc:
            run.note(f"capture: {describe(exc)}")
            self.config.problems("capture", describe(exc), exc)
        run.data = None
        self._store.add(run)
