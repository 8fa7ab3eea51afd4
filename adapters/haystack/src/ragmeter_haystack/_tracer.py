"""``RagmeterTracer``: capture every pipeline run through Haystack's tracing, without wrapping it.

Haystack reports each ``Pipeline.run``/``run_async`` as a ``haystack.pipeline.run`` span and
each component run inside it as a ``haystack.component.run`` span, whose content tags carry
the component's inputs and outputs. :class:`RagmeterTracer` implements the
``haystack.tracing.Tracer`` protocol: a top-level pipeline span becomes a
:class:`~ragmeter_haystack._capture.HaystackRun`, each retriever component span a
:class:`~ragmeter.capture.CallRecord`, a generator's output the answer. So a pipeline
loaded from YAML, run by a framework, or served by Hayhooks is captured as it is. A tracer
that was active before (Langfuse, OpenTelemetry, the logging tracer) keeps receiving every
span: the ragmeter tracer forwards to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from typing import Any

from haystack.tracing.tracer import (
    Span,
    Tracer,
    disable_tracing,
    enable_tracing,
    is_tracing_enabled,
)
from haystack.tracing.tracer import tracer as _proxy

from ragmeter.capture import (
    CallRecord,
    CaptureConfig,
    DatasetFront,
    Hints,
    ProblemLog,
    Record,
    Retrieval,
    SampleStore,
    check_record,
    check_retrieval,
    describe,
)
from ragmeter.errors import InvalidInputError
from ragmeter_haystack._capture import FRAMEWORK, HaystackRun, Roles, logger, question_of
from ragmeter_haystack._documents import DocId, check_doc_id
from ragmeter_haystack._recorder import doc_id_hint, input_builder

__all__ = ["RagmeterTracer"]

SAMPLE_ID_HINT = (
    "Haystack: run each query inside `with tracer.capture(id=qid):` (tracer.run_dataset(...) "
    "does it for a whole dataset); without it a sample's id is a new uuid."
)

_PIPELINE = frozenset({"haystack.pipeline.run", "haystack.async_pipeline.run"})
_COMPONENT = "haystack.component.run"
_INPUT = "haystack.component.input"
_OUTPUT = "haystack.component.output"

_CURRENT: ContextVar[_RagmeterSpan | None] = ContextVar("ragmeter_haystack_span", default=None)

# what a component span is to the capture
_OTHER, _RETRIEVER, _GENERATOR, _CONTEXTS = 0, 1, 2, 3


class _RagmeterSpan(Span):
    """One Haystack span, as the ragmeter tracer sees it (and a context manager for it)."""

    __slots__ = (
        "_call",
        "_inner",
        "_inner_cm",
        "_name",
        "_parent",
        "_role",
        "_run",
        "_token",
        "_tracer",
        "depth",
        "operation_name",
    )

    def __init__(
        self,
        tracer: RagmeterTracer,
        operation_name: str,
        tags: dict[str, Any] | None,
        parent_span: Span | None,
    ) -> None:
        self._tracer = tracer
        self.operation_name = operation_name
        self._parent = parent_span
        self._run: HaystackRun | None = None
        self._call: CallRecord | None = None
        self._role = _OTHER
        self._name = ""
        self.depth = 0  # retriever calls enclosing this span
        self._inner: Span | None = None
        self._inner_cm: Any = None
        self._token: Token[_RagmeterSpan | None] | None = None
        try:
            self._open(tags)
        except Exception as exc:
            tracer.config.problems("span", describe(exc), exc)
        inner = tracer.inner
        if inner is not None:
            parent = parent_span._inner if isinstance(parent_span, _RagmeterSpan) else parent_span
            self._inner_cm = inner.trace(operation_name, tags=tags, parent_span=parent)

    def _open(self, tags: dict[str, Any] | None) -> None:
        enclosing = self._parent if isinstance(self._parent, _RagmeterSpan) else _CURRENT.get()
        run = enclosing._run if enclosing is not None else None
        self.depth = enclosing.depth if enclosing is not None else 0
        name = self.operation_name
        if name in _PIPELINE:
            if run is None:  # a top-level pipeline run: a new record
                run = HaystackRun(self._tracer.config)
                run.data = tags.get("haystack.pipeline.input_data") if tags else None
                if run.ignored:
                    run = None
                else:
                    self._role = -1  # the root: finishes the record
            self._run = run
            return
        self._run = run
        if run is None or name != _COMPONENT or not tags:
            return
        self._name = component = str(tags.get("haystack.component.name"))
        outputs = tags.get("haystack.component.output_spec") or ()
        roles = self._tracer.roles
        if roles.is_retriever(component, str(tags.get("haystack.component.type")), outputs):
            self._role = _RETRIEVER
            self._call = CallRecord(component, None, self.depth)
            with run.lock:  # components of one run may run on several threads
                run.add_call(self._call)
            self.depth += 1
        elif roles.is_generator(component, outputs):
            self._role = _GENERATOR
        elif component == roles.contexts:
            self._role = _CONTEXTS

    # -- the Span protocol ----------------------------------------------------------------

    def set_tag(self, key: str, value: Any) -> None:
        """Tags are forwarded to the tracer that was active before (if any)."""
        if self._inner is not None:
            self._inner.set_tag(key, value)

    def set_content_tag(self, key: str, value: Any) -> None:
        """Read a captured component's inputs and outputs (always: this is what the tracer
        is for); forward the tag to the previous tracer under Haystack's own content rule."""
        role = self._role
        if role > 0 and self._run is not None:
            try:
                with self._run.lock:
                    self._content(role, key, value)
            except Exception as exc:
                self._run.note(f"{self._name}: {describe(exc)}")
                self._tracer.config.problems("component", describe(exc), exc)
        if self._inner is not None:
            self._inner.set_content_tag(key, value)

    def _content(self, role: int, key: str, value: Any) -> None:
        run = self._run
        assert run is not None  # checked by the caller
        roles = self._tracer.roles
        if key == _OUTPUT and isinstance(value, Mapping):
            if role == _RETRIEVER and self._call is not None:
                roles.documents(run, self._call, value.get(roles.documents_output))
            elif role == _GENERATOR:
                roles.reply(run, value)
            elif role == _CONTEXTS:
                roles.context_texts(run, value.get(roles.documents_output))
        elif key == _INPUT and role == _RETRIEVER and isinstance(value, Mapping):
            query = value.get("query")
            if isinstance(query, str) and self._call is not None:
                self._call.query = query

    def raw_span(self) -> Any:
        """The previous tracer's span, else this one."""
        return self._inner.raw_span() if self._inner is not None else self

    def get_correlation_data_for_logs(self) -> dict[str, Any]:
        """The previous tracer's correlation data (ragmeter adds none)."""
        return self._inner.get_correlation_data_for_logs() if self._inner is not None else {}

    # -- context manager ------------------------------------------------------------------

    def __enter__(self) -> _RagmeterSpan:
        if self._inner_cm is not None:
            self._inner = self._inner_cm.__enter__()
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool | None:
        token, self._token = self._token, None
        if token is not None:
            _CURRENT.reset(token)
        try:
            if self._role == _RETRIEVER and exc is not None and self._call is not None:
                if not self._call.finished:
                    self._call.failed(exc)
            elif self._role == -1 and self._run is not None:
                self._tracer._finish(self._run, exc)
        except Exception as problem:
            self._tracer.config.problems("span", describe(problem), problem)
        if self._inner_cm is not None:
            return bool(self._inner_cm.__exit__(exc_type, exc, tb))
        return None


class RagmeterTracer(DatasetFront, Tracer):
    """A Haystack tracer that records one :class:`~ragmeter.schema.RagSample` per pipeline run.

    ``tracer = RagmeterTracer().attach()`` makes it Haystack's tracer (process-wide, as
    ``haystack.tracing.enable_tracing`` does; a tracer that was active keeps receiving every
    span, forwarded); ``tracer.detach()`` restores the previous one; ``with RagmeterTracer()
    as tracer:`` does both. Every top-level ``Pipeline.run``/``run_async`` (one not inside
    another captured run) becomes a sample, without wrapping ``run``: a pipeline loaded
    from YAML, called by your framework or served by Hayhooks is captured as it is.
    ``with tracer.capture(id=qid, relevance=qrels[qid]): pipeline.run(data)`` gives a run its
    sample id and ground truth (a tracer that is not attached is attached while the block
    runs); ``tracer.run_dataset(pipeline,
    queries, qrels=...)`` runs a dataset with bounded concurrency and a progress bar.

    A sample holds what :class:`~ragmeter_haystack.RagmeterRecorder` records: the question
    (``query_input`` from the run's data, else the retriever's ``query``), each retriever
    component's documents as a retriever call (``metadata["retriever_calls"]``; the scored
    ranking is chosen with ``retrieval=``/``retriever_name=`` as in every adapter: by default
    the last outermost call), ids by ``doc_id``, the ``contexts`` component's texts (default:
    the retriever's), the answer and token usage of the last generator to run, latency and
    the error of a failed run (a run that failed after its retriever ran keeps the ranking).
    Retriever components are those named ``retriever`` when given, else every component whose
    class name contains ``Retriever`` and that has a ``documents`` output; the generator is
    the one named ``generator``, else any component with a ``replies`` output.

    The tracer reads the components' inputs and outputs whatever
    ``HAYSTACK_CONTENT_TRACING_ENABLED`` says (that setting still governs what a forwarded
    tracer receives), keeps only references while a run goes, and never raises into the
    pipeline: capture problems are logged once per kind and noted on the sample.
    """

    def __init__(
        self,
        *,
        retriever: str | None = None,
        generator: str | None = None,
        contexts: str | None = None,
        query_input: str | None = None,
        doc_id: DocId = "id",
        retrieval: Retrieval = "last",
        retriever_name: str | None = None,
        record: Record = "all",
        max_samples: int | None = None,
        documents_output: str = "documents",
        replies_output: str = "replies",
    ) -> None:
        rule = check_doc_id(doc_id)
        self.query_input = query_input
        self.roles = Roles(retriever, generator, contexts, rule, documents_output, replies_output)
        self.config = CaptureConfig(
            FRAMEWORK,
            ProblemLog(logger, "Haystack"),
            retrieval=check_retrieval(retrieval),
            retriever_name=retriever_name,
            name_hint="a Haystack retriever call is named after its component",
            record=check_record(record),
        )
        hints = Hints(FRAMEWORK, SAMPLE_ID_HINT, doc_id_hint(rule), label="Haystack")
        self._store = SampleStore(max_samples=max_samples, hints=hints)
        self.inner: Tracer | None = None

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
        """Whether this is Haystack's active tracer."""
        return _proxy.actual_tracer is self

    def attach(self) -> RagmeterTracer:
        """Make this Haystack's tracer, forwarding to the one that was active; idempotent."""
        current = _proxy.actual_tracer
        if current is not self:
            self.inner = current if is_tracing_enabled() else None
            enable_tracing(self)
        return self

    def detach(self) -> None:
        """Give Haystack back the tracer that was active before :meth:`attach`."""
        if _proxy.actual_tracer is self:
            if self.inner is not None:
                enable_tracing(self.inner)
            else:
                disable_tracing()
        self.inner = None

    def __enter__(self) -> RagmeterTracer:
        return self.attach()

    def __exit__(self, *exc: object) -> None:
        self.detach()

    # -- the Tracer protocol ----------------------------------------------------------------

    def trace(  # type: ignore[override]
        self,
        operation_name: str,
        tags: dict[str, Any] | None = None,
        parent_span: Span | None = None,
    ) -> _RagmeterSpan:
        """A span for one traced operation (a context manager, as the protocol asks)."""
        return _RagmeterSpan(self, operation_name, tags, parent_span)

    def current_span(self) -> Span | None:
        """The span active in this thread or task (``None`` outside any)."""
        return _CURRENT.get()

    # -- capture ------------------------------------------------------------------------------

    def _attached(self) -> bool:
        return self.attached

    def _attach_for_scopes(self, on: bool) -> None:
        if on:
            self.attach()
        else:
            self.detach()

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

    def _finish(self, run: HaystackRun, error: BaseException | None) -> None:
        run.finish(error)
        try:
            retriever = self.roles.retriever
            calls: Sequence[CallRecord] = run.calls
            run.user_input = question_of(run.data, self.query_input, retriever, calls)
        except Exception as exc:
            run.note(f"question: {describe(exc)}")
        run.data = None
        self._store.add(run)
