"""The hub: the one process-wide Haystack tracer that hands every span to each attached
ragmeter tracer and forwards it to the tracer that was active before.

Each span is a :class:`_HubSpan`; what one observer keeps of it is a :class:`_Part` (the
run it belongs to and the span's role: a stage, the generator, the component feeding the
generator, or the pipeline's root). Only references are kept while a run goes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from haystack.tracing.tracer import NullTracer, Span, Tracer
from haystack.tracing.tracer import tracer as _proxy

from ragmeter.capture import StageRecord, describe
from ragmeter_haystack._capture import HaystackRun

if TYPE_CHECKING:
    from ragmeter_haystack._tracer import RagmeterTracer

__all__ = ["HUB", "RECORDING"]


_PIPELINE = frozenset({"haystack.pipeline.run", "haystack.async_pipeline.run"})
_COMPONENT = "haystack.component.run"
_INPUT = "haystack.component.input"
_OUTPUT = "haystack.component.output"

_CURRENT: ContextVar[_HubSpan | None] = ContextVar("ragmeter_haystack_span", default=None)

Recording = tuple[Any, str | None, Mapping[str, Any] | None, dict[str, Any] | None]

RECORDING: ContextVar[Recording | None] = ContextVar("ragmeter_haystack_recording", default=None)
"""Set by :class:`~ragmeter_haystack.RagmeterRecorder` while it runs its pipeline: ``(the
observer that records the run, sample id, run metadata, the call's own ground truth)``."""

# what a span is to one observer
_OTHER, _STAGE, _GENERATOR, _CONSUMER, _ROOT = 0, 1, 2, 3, 4


class _Part:
    """What one observer keeps of one span: the run it belongs to and the span's role."""

    __slots__ = ("depth", "name", "observer", "receivers", "role", "run", "stage")

    def __init__(self, observer: RagmeterTracer, run: HaystackRun, role: int, depth: int) -> None:
        self.observer = observer
        self.run = run
        self.role = role
        self.depth = depth  # stages enclosing the span (a sub-pipeline inside a stage)
        self.name = ""
        self.stage: StageRecord | None = None
        self.receivers: frozenset[str] = frozenset()

    def content(self, key: str, value: Any) -> None:
        """One content tag of the span (its component's inputs or outputs)."""
        role, run = self.role, self.run
        rules = self.observer.rules
        if type(value) is not dict and not isinstance(value, Mapping):
            return
        if key == _OUTPUT:
            if role == _STAGE and self.stage is not None and self.stage.end is None:
                docs = value.get(rules.documents_output)
                if docs is not None:
                    with run.lock:
                        rules.documents(run, self.stage, docs)
            elif role == _GENERATOR:
                with run.lock:
                    rules.reply(run, self.name, value)
        elif key == _INPUT:
            if role == _STAGE and self.stage is not None:
                query = value.get("query")
                if isinstance(query, str):
                    self.stage.query = query
            elif role == _CONSUMER:
                docs = value.get(rules.documents_output)
                if isinstance(docs, list):
                    with run.lock:
                        rules.received(run, self.name, self.receivers, docs)

    def close(self, exc: BaseException | None) -> None:
        """The span ended (``exc``: what it raised)."""
        if self.role == _STAGE and self.stage is not None and self.stage.end is None:
            if exc is not None:
                self.stage.failed(exc)
            else:
                self.stage.failed("the component returned no documents output")
        elif self.role == _ROOT:
            self.observer._finish(self.run, exc)


def _open_part(
    observer: RagmeterTracer, name: str, tags: Mapping[str, Any] | None, enclosing: _Part | None
) -> _Part | None:
    """The observer's part of a new span, or ``None`` when it has nothing to do with it."""
    run = enclosing.run if enclosing is not None else None
    if name in _PIPELINE:
        if run is None:  # a top-level pipeline run: a new record
            run = observer._start(tags)
            return None if run is None else _Part(observer, run, _ROOT, 0)
        return _Part(observer, run, _OTHER, enclosing.depth if enclosing is not None else 0)
    if run is None:
        return None
    depth = enclosing.depth if enclosing is not None else 0
    if name != _COMPONENT or not tags:
        return _Part(observer, run, _OTHER, depth)
    component = str(tags.get("haystack.component.name"))
    inputs = tags.get("haystack.component.input_spec")
    outputs = tags.get("haystack.component.output_spec")
    rules = observer.rules
    stage = rules.stage_of(
        component, str(tags.get("haystack.component.type")), inputs, outputs, depth
    )
    if stage is not None:
        part = _Part(observer, run, _STAGE, depth + 1)
        part.stage = stage
        with run.lock:  # components of one run may run on several threads
            run.add_stage(stage)
    elif rules.is_generator(component, outputs):
        part = _Part(observer, run, _GENERATOR, depth)
    else:
        receivers = rules.consumes(component, inputs, outputs)
        if receivers is not None:
            part = _Part(observer, run, _CONSUMER, depth)
            part.receivers = receivers
        else:
            part = _Part(observer, run, _OTHER, depth)
    part.name = component
    return part


class _HubSpan(Span):
    """One Haystack span, handed to every observer that has a part in it, and forwarded."""

    __slots__ = ("_inner", "_inner_cm", "_parts", "_token", "operation_name")

    def __init__(
        self,
        observers: Sequence[RagmeterTracer],
        inner: Tracer | None,
        operation_name: str,
        tags: dict[str, Any] | None,
        parent_span: Span | None,
    ) -> None:
        self.operation_name = operation_name
        parent = parent_span if isinstance(parent_span, _HubSpan) else _CURRENT.get()
        parts: list[_Part] = []
        for observer in observers:
            try:
                enclosing = parent.part_of(observer) if parent is not None else None
                part = _open_part(observer, operation_name, tags, enclosing)
                if part is not None:
                    parts.append(part)
            except Exception as exc:  # never into the pipeline
                observer.config.problems("span", describe(exc), exc)
        self._parts = tuple(parts)
        self._inner: Span | None = None
        self._inner_cm: Any = None
        self._token: Token[_HubSpan | None] | None = None
        if inner is not None:
            inner_parent = parent_span._inner if isinstance(parent_span, _HubSpan) else parent_span
            self._inner_cm = inner.trace(operation_name, tags=tags, parent_span=inner_parent)

    def part_of(self, observer: RagmeterTracer) -> _Part | None:
        """The observer's part of this span (``None``: it has none)."""
        for part in self._parts:
            if part.observer is observer:
                return part
        return None

    # -- the Span protocol ----------------------------------------------------------------

    def set_tag(self, key: str, value: Any) -> None:
        """Tags are forwarded to the tracer that was active before (if any)."""
        if self._inner is not None:
            self._inner.set_tag(key, value)

    def set_content_tag(self, key: str, value: Any) -> None:
        """Every observer reads the component's inputs and outputs (always: this is what it
        is for); the tag is forwarded to the previous tracer under Haystack's content rule."""
        for part in self._parts:
            if part.role != _OTHER:
                try:
                    part.content(key, value)
                except Exception as exc:
                    part.run.note(f"{part.name}: {describe(exc)}")
                    part.observer.config.problems("component", describe(exc), exc)
        if self._inner is not None:
            self._inner.set_content_tag(key, value)

    def raw_span(self) -> Any:
        """The previous tracer's span, else this one."""
        return self._inner.raw_span() if self._inner is not None else self

    def get_correlation_data_for_logs(self) -> dict[str, Any]:
        """The previous tracer's correlation data (ragmeter adds none)."""
        return self._inner.get_correlation_data_for_logs() if self._inner is not None else {}

    # -- context manager ------------------------------------------------------------------

    def __enter__(self) -> _HubSpan:
        if self._inner_cm is not None:
            self._inner = self._inner_cm.__enter__()
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool | None:
        token, self._token = self._token, None
        if token is not None:
            try:  # noqa: SIM105 - a span closed in another context cannot reset the var
                _CURRENT.reset(token)
            except ValueError:
                pass
        for part in self._parts:
            try:
                part.close(exc)
            except Exception as problem:
                part.observer.config.problems("span", describe(problem), problem)
        if self._inner_cm is not None:
            return bool(self._inner_cm.__exit__(exc_type, exc, tb))
        return None


class _Hub(Tracer):
    """The one tracer ragmeter installs: every span goes to each attached observer, and to
    the tracer that was active before (``prior``)."""

    def __init__(self) -> None:
        self.observers: tuple[RagmeterTracer, ...] = ()
        self.prior: Tracer | None = None
        self.lock = threading.RLock()

    @property
    def active(self) -> bool:
        """Whether the hub is Haystack's tracer."""
        return _proxy.actual_tracer is self

    def forward_to(self) -> Tracer | None:
        """The tracer spans are forwarded to (the one active before, unless it is none or
        one of the observers, which get the spans anyway)."""
        prior = self.prior
        if prior is None or isinstance(prior, NullTracer) or prior in self.observers:
            return None
        return prior

    def add(self, observer: RagmeterTracer) -> None:
        with self.lock:
            if not any(o is observer for o in self.observers):
                self.observers = (*self.observers, observer)
            if _proxy.actual_tracer is not self:
                self.prior = _proxy.actual_tracer
                _proxy.actual_tracer = self

    def remove(self, observer: RagmeterTracer) -> None:
        with self.lock:
            self.observers = tuple(o for o in self.observers if o is not observer)
            if not self.observers:
                if _proxy.actual_tracer is self and self.prior is not None:
                    _proxy.actual_tracer = self.prior
                self.prior = None

    def trace(  # type: ignore[override]
        self,
        operation_name: str,
        tags: dict[str, Any] | None = None,
        parent_span: Span | None = None,
    ) -> _HubSpan:
        """A span for one traced operation (a context manager, as the protocol asks)."""
        return _HubSpan(self.observers, self.forward_to(), operation_name, tags, parent_span)

    def current_span(self) -> Span | None:
        """The span active in this thread or task (``None`` outside any)."""
        return _CURRENT.get()


HUB = _Hub()
