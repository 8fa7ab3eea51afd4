"""The compact run record: references while a run goes, a ``RagSample`` when first read."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragmeter.capture._calls import CallRecord, call_record, ranking, select_calls
from ragmeter.capture._ids import (
    ID_KEY,
    describe,
    fields_from_metadata,
    run_metadata,
    validated_sample,
)
from ragmeter.capture._rules import ProblemLog, Record, Retrieval
from ragmeter.capture._scope import SCOPE, Scope
from ragmeter.schema import RagSample

__all__ = ["CaptureConfig", "RunRecord"]


@dataclass(frozen=True)
class CaptureConfig:
    """What one adapter instance captures; every record it makes points here (one pointer).

    ``retrieval``/``retriever_name``/``name_hint`` feed :func:`select_calls`; ``record``
    says which runs become samples (:data:`RECORD`); ``problems`` logs capture problems.
    """

    framework: str
    problems: ProblemLog
    retrieval: Retrieval = "last"
    retriever_name: str | None = None
    name_hint: str = ""
    record: Record = "all"


_BUILD_LOCK = threading.RLock()  # one RagSample per record, and stream updates in order


class RunRecord:
    """One top-level run, held as references until its :class:`RagSample` is first read.

    An adapter makes one when a top-level run starts (it picks up the active :class:`Scope`),
    fills the cheap slots while the run goes (``user_input``, ``response``, token counts,
    one :class:`CallRecord` per retriever call in ``calls``; capture problems via
    :meth:`note`), calls :meth:`finish` and adds it to a :class:`SampleStore`.
    :meth:`to_sample` builds the sample once (retriever choice, content hashes, JSON-safe
    metadata, ground truth from the scope and the run's metadata, validation) and keeps it;
    a field that does not validate is left out and noted, never raised. Adapters subclass
    it to add their framework's metadata (:meth:`framework_metadata`) and fields
    (:meth:`framework_fields`).

    Ground truth and ids, from weakest to strongest: :meth:`default_id`, the scope, the
    run's own ``ragmeter_*`` metadata (``meta``), ``sample_id``.
    """

    __slots__ = (
        "_calls",
        "config",
        "end",
        "error",
        "errors",
        "input_tokens",
        "meta",
        "output_tokens",
        "response",
        "sample",
        "sample_id",
        "scope",
        "start",
        "user_input",
    )

    def __init__(
        self,
        config: CaptureConfig,
        *,
        meta: Mapping[str, Any] | None = None,
        sample_id: str | None = None,
        scope: Scope | Literal[False] | None = False,
    ) -> None:
        self.config = config
        self.meta = meta or None
        self.sample_id = sample_id
        self.scope: Scope | str | None = _compact(SCOPE.get() if scope is False else scope)
        self.start = time.perf_counter()
        self.end: float | None = None
        self._calls: CallRecord | tuple[CallRecord, ...] | None = None  # one call: no tuple
        self.user_input: str | None = None
        self.response: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.error: str | None = None
        self.errors: list[str] | None = None
        self.sample: RagSample | None = None

    @property
    def tagged(self) -> bool:
        """Whether the run carries a sample id (its own, its metadata's or its scope's)."""
        if self.sample_id is not None:
            return True
        meta = self.meta
        if meta is not None and meta.get(ID_KEY) is not None:
            return True
        scope = self.scope
        return scope is not None and (isinstance(scope, str) or scope.tagged)

    @property
    def wanted(self) -> bool:
        """Whether the run becomes a sample under the config's ``record`` option."""
        return self.config.record == "all" or self.tagged

    def note(self, message: str) -> None:
        """Record a capture problem on the sample (``metadata["capture_errors"]``)."""
        if self.errors is None:
            self.errors = [message]
        else:
            self.errors.append(message)

    @property
    def calls(self) -> tuple[CallRecord, ...]:
        """The run's retriever calls, in the order they started."""
        calls = self._calls
        if calls is None:
            return ()
        return (calls,) if isinstance(calls, CallRecord) else calls

    def add_call(self, call: CallRecord) -> None:
        """Keep one retriever call of the run (adapters call it under their lock)."""
        calls = self._calls
        if calls is None:
            self._calls = call
        elif isinstance(calls, CallRecord):
            self._calls = (calls, call)
        else:
            self._calls = (*calls, call)

    def add_tokens(self, input_tokens: int | None, output_tokens: int | None) -> None:
        """Add one model call's reported token usage."""
        if input_tokens is not None:
            self.input_tokens = (self.input_tokens or 0) + input_tokens
        if output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + output_tokens

    def finish(self, error: BaseException | str | None = None) -> None:
        """The run ended (``error``: it raised)."""
        self.end = time.perf_counter()
        if error is not None:
            self.error = error if isinstance(error, str) else describe(error)

    # -- hooks for adapters ---------------------------------------------------------------

    def default_id(self) -> str | None:
        """The sample id when nothing gives one (``None``: a new uuid)."""
        return None

    def framework_metadata(self) -> dict[str, Any]:
        """What the framework adds to ``sample.metadata`` (after ``framework``)."""
        return {}

    def framework_fields(
        self,
        fields: dict[str, Any],
        chosen: Sequence[CallRecord],
        pairs: Sequence[tuple[str, str]],
    ) -> None:
        """Fill framework-specific fields; by default ``retrieved_contexts`` is every distinct
        ``(id, text)`` of the chosen calls' documents, in rank order."""
        if chosen:
            fields["retrieved_contexts"] = [text for _, text in dict.fromkeys(pairs)]

    def release(self) -> None:
        """Drop what is no longer needed once the sample is built."""
        self._calls = None
        self.meta = None
        self.scope = None
        self.errors = None

    # -- building the sample --------------------------------------------------------------

    def to_sample(self) -> RagSample:
        """The run's :class:`RagSample`, built on first call (thread-safe) and kept."""
        sample = self.sample
        if sample is None:
            with _BUILD_LOCK:
                sample = self.sample
                if sample is None:
                    sample = self._safe_build()
                    self.sample = sample
                    self.release()
        return sample

    def amend(self, raw: Callable[[], None], built: Callable[[RagSample], None]) -> None:
        """Change the record: ``raw()`` while the sample is not built yet, else ``built(sample)``
        (e.g. the text of a stream the caller has finished reading)."""
        with _BUILD_LOCK:
            if self.sample is None:
                raw()
            else:
                built(self.sample)

    def _safe_build(self) -> RagSample:
        try:
            return self._build()
        except Exception as exc:  # never lose a run because building its sample failed
            message = describe(exc)
            self.config.problems("sample", message, exc)
            fallback: dict[str, Any] = {
                "error": self.error,
                "latency_ms": self._latency(),
                "metadata": {"framework": self.config.framework},
            }
            ident = self.sample_id if self.sample_id is not None else self.default_id()
            if ident is not None:
                fallback["id"] = ident
            return validated_sample(fallback, [*(self.errors or ()), f"sample: {message}"])

    def _latency(self) -> float | None:
        return None if self.end is None else (self.end - self.start) * 1000.0

    def _build(self) -> RagSample:
        config = self.config
        errors = list(self.errors) if self.errors else []
        calls = self.calls
        chosen: list[CallRecord] = []
        if calls:
            chosen, notes = select_calls(
                calls, config.retrieval, config.retriever_name, name_hint=config.name_hint
            )
            errors.extend(f"{where}: {message}" for where, message in notes)
        ids, pairs = ranking(chosen) if chosen else (None, [])
        metadata: dict[str, Any] = {"framework": config.framework}
        metadata.update(self.framework_metadata())
        scope = self.scope
        given = self.meta
        if isinstance(scope, Scope) and scope.metadata:
            given = {**scope.metadata, **(given or {})}
        extra = run_metadata(given)
        if extra:
            metadata["run_metadata"] = extra
        if calls:
            used = {id(c) for c in chosen}
            metadata["retriever_calls"] = [call_record(c, id(c) in used) for c in calls]
        fields: dict[str, Any] = {
            "user_input": self.user_input,
            "response": self.response,
            "retrieved_ids": ids,
            "latency_ms": self._latency(),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "error": self.error,
            "metadata": metadata,
        }
        ident = self.default_id()
        if ident is not None:
            fields["id"] = ident
        self.framework_fields(fields, chosen, pairs)
        if isinstance(scope, Scope):
            fields.update(scope.fields())
        elif scope is not None:
            fields["id"] = scope
        if self.meta:
            fields.update(fields_from_metadata(self.meta))
        if self.sample_id is not None:
            fields["id"] = self.sample_id
        noted = len(errors)
        sample = validated_sample(fields, errors)
        if len(errors) > noted:  # a value did not validate and was left out
            config.problems("sample", errors[-1])
        return sample


def _compact(scope: Scope | None) -> Scope | str | None:
    """What a record keeps of its scope: the id alone when that is all the scope gives (a str
    costs nothing more: the caller's id), else the scope."""
    if scope is None or scope._records is not None or scope.metadata is not None:
        return scope
    if (
        scope.reference is None
        and scope.references is None
        and scope.reference_ids is None
        and scope.relevance is None
    ):
        return scope.id
    return scope
