"""The compact run record: references while a run goes, a ``RagSample`` whenever it is read."""

from __future__ import annotations

import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ragmeter.capture._ids import (
    ID_KEY,
    describe,
    fields_from_metadata,
    run_metadata,
    validated_sample,
)
from ragmeter.capture._rules import ProblemLog, Record, Retrieval
from ragmeter.capture._scope import Scope, Truth, scope_for
from ragmeter.capture._stages import (
    StageRecord,
    infer_context,
    ranking,
    select_calls,
    stage_list,
)
from ragmeter.evaluation.capture_rules import NO_CONTEXT
from ragmeter.schema import CONTEXT, RagSample

__all__ = ["NO_CONTEXT", "CaptureConfig", "RunRecord"]


@dataclass(frozen=True)
class CaptureConfig:
    """What one adapter instance captures; every record it makes points here (one pointer).

    ``stage`` names the ranking a sample's ``retrieved_ids`` hold (``"context"``, the
    default: what reached the generator); the deprecated ``retrieval``/``retriever_name``
    (``None``: not given) choose among retriever calls the older way (:func:`select_calls`);
    ``name_hint`` says how to name a retriever in the framework and ``stage_hint`` how to
    tell ragmeter which ranking reached the generator; ``flow_known`` says the framework
    shows what each stage consumed (:func:`infer_context`); ``record`` says which runs
    become samples (:data:`RECORD`); ``problems`` logs capture problems; ``owner`` is the
    observer whose own ``capture()`` scopes apply (see
    :func:`~ragmeter.capture._scope.scope_for`).
    """

    framework: str
    problems: ProblemLog
    stage: str = CONTEXT
    retrieval: Retrieval | None = None
    retriever_name: str | None = None
    name_hint: str = ""
    stage_hint: str = ""
    flow_known: bool = False
    record: Record = "all"
    owner: Any = field(default=None, compare=False, repr=False)

    @property
    def legacy(self) -> bool:
        """Whether the deprecated ``retrieval=``/``retriever_name=`` choose the ranking."""
        return self.retrieval is not None or self.retriever_name is not None


_BUILD_LOCK = threading.RLock()  # one RagSample per record at a time, stream updates in order


class RunRecord:
    """One top-level run, held as references; its :class:`RagSample` is built when read.

    An adapter makes one when a top-level run starts (it picks up the :class:`Scope` that
    applies to its observer), fills the cheap slots while the run goes (``user_input``,
    ``response``, token counts, one :class:`StageRecord` per step that produced a ranking
    via :meth:`add_stage`, the ``context`` stage when the framework shows what reached the
    generator, or ``context_note`` when it shows that what reached it is no ranking;
    capture problems via :meth:`note`), calls :meth:`finish` and adds it to a
    :class:`SampleStore`. :meth:`to_sample` builds the sample (stage names and order, the
    context, content hashes, JSON-safe metadata, ground truth, validation); a field that
    does not validate is left out and noted, never raised. The record keeps only ids and
    texts, never the framework's objects, and holds the built sample weakly: a sample you
    keep is the same object on every read; one you dropped is built again, equal, when
    read again, so reading samples never grows the store's memory. Adapters subclass it to
    add their framework's metadata (:meth:`framework_metadata`) and fields
    (:meth:`framework_fields`).

    Ground truth and ids, from weakest to strongest: :meth:`default_id`, a scope that
    belongs to every observer, the run's own ``ragmeter_*`` metadata (``meta``), a scope of
    this observer's own, ``sample_id``.
    """

    __slots__ = (
        "_auto_id",
        "_ref",
        "_stages",
        "config",
        "context",
        "context_note",
        "end",
        "error",
        "errors",
        "input_tokens",
        "meta",
        "output_tokens",
        "own",
        "response",
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
        found = scope_for(config.owner) if scope is False else scope
        self.own = found is not None and found._owner is not None
        # the whole scope until the store takes the record (a batch claims its id then, a
        # dataset scope collects it); then what a finished run needs of it (settle())
        self.scope: Truth | str | None = found
        self.start = time.perf_counter()
        self.end: float | None = None
        self._stages: StageRecord | tuple[StageRecord, ...] | None = None  # one: no tuple
        self.context: StageRecord | None = None
        self.context_note: str | None = None  # why the adapter saw no context ranking
        self.user_input: str | None = None
        self.response: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.error: str | None = None
        self.errors: list[str] | None = None
        self._ref: weakref.ref[RagSample] | None = None
        self._auto_id: int | None = None  # a uuid4 as an int (44 bytes; its hex: 81)

    @property
    def tagged(self) -> bool:
        """Whether the run carries a sample id (its own, its metadata's or its scope's)."""
        if self.sample_id is not None:
            return True
        meta = self.meta
        if meta is not None and meta.get(ID_KEY) is not None:
            return True
        scope = self.scope
        return scope is not None and (type(scope) is str or scope.tagged)  # type: ignore[union-attr]

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
    def stages(self) -> tuple[StageRecord, ...]:
        """The run's stages, in the order they started."""
        stages = self._stages
        if stages is None:
            return ()
        return (stages,) if isinstance(stages, StageRecord) else stages

    calls = stages  # the older name: a retriever call is a stage

    def add_stage(self, stage: StageRecord) -> None:
        """Keep one stage of the run (adapters call it under their lock)."""
        stages = self._stages
        if stages is None:
            self._stages = stage
        elif isinstance(stages, StageRecord):
            self._stages = (stages, stage)
        else:
            self._stages = (*stages, stage)

    add_call = add_stage

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

    def claim_batch(self) -> None:
        """Under a batch scope, take the id of the batch query this run's question asked
        (:meth:`Scope.member_for`); the store calls it when the run is added."""
        scope = self.scope
        if isinstance(scope, Scope) and scope.batch is not None:
            member = scope.member_for(self.user_input)
            if member is not None:
                self.scope = member
            else:
                self.note(
                    f"batch: the question {self.user_input!r:.80} is not one of the batch's "
                    "queries not yet run, so the sample has no id from it"
                )

    def settle(self) -> None:
        """Keep only what a finished run needs of its scope (its id and ground truth): the
        store calls it once the record is taken, so a stored record holds no open scope."""
        scope = self.scope
        if isinstance(scope, Truth):
            self.scope = scope.settled()

    # -- hooks for adapters ---------------------------------------------------------------

    def default_id(self) -> str | None:
        """The sample id when nothing gives one (``None``: a new uuid, kept by the record)."""
        return None

    def framework_metadata(self) -> dict[str, Any]:
        """What the framework adds to ``sample.metadata`` (after ``framework``)."""
        return {}

    def explicit_fields(self) -> dict[str, Any]:
        """Ground truth given with the call itself (a recorder's ``relevance=``): it wins over
        every scope and the run's metadata, as ``sample_id`` does."""
        return {}

    def framework_fields(
        self,
        fields: dict[str, Any],
        chosen: Sequence[StageRecord],
        pairs: Sequence[tuple[str, str]],
        names: Mapping[int, str],
    ) -> None:
        """Fill framework-specific fields (``chosen``: the stage(s) ``retrieved_ids`` holds,
        ``pairs`` their ``(id, text)`` pairs, ``names`` each stage's name in the sample by
        ``id()`` of its record). ``retrieved_contexts`` is already the text of every
        distinct ``(id, text)`` of the context (else of the chosen stage), in order."""

    # -- building the sample --------------------------------------------------------------

    @property
    def sample(self) -> RagSample | None:
        """The built sample while someone holds it, else ``None``."""
        ref = self._ref
        return None if ref is None else ref()

    def to_sample(self) -> RagSample:
        """The run's :class:`RagSample` (thread-safe): the same object while it is alive,
        built again, equal, once it was dropped."""
        ref = self._ref
        sample = None if ref is None else ref()
        if sample is None:
            with _BUILD_LOCK:
                ref = self._ref
                sample = None if ref is None else ref()
                if sample is None:
                    sample = self._safe_build()
                    self._ref = weakref.ref(sample, self._forget)
        return sample

    def fresh_sample(self) -> RagSample:
        """A new :class:`RagSample` of the run, not kept by the record (for a one-pass stream
        that drops each record after it: no lock, no weak reference)."""
        return self._safe_build()

    def _forget(self, ref: weakref.ref[RagSample]) -> None:
        """The built sample died: drop the dead reference too (80 bytes a record)."""
        if self._ref is ref:
            self._ref = None

    def amend(self, raw: Callable[[], None], built: Callable[[RagSample], None]) -> None:
        """Change the record: ``raw()`` always, and ``built(sample)`` on a built sample that is
        still alive (e.g. the text of a stream the caller has finished reading)."""
        with _BUILD_LOCK:
            raw()
            sample = self.sample
            if sample is not None:
                built(sample)

    def _id(self) -> str:
        ident = self.default_id()
        if ident is None:
            number = self._auto_id
            if number is None:
                number = self._auto_id = uuid.uuid4().int
            ident = uuid.UUID(int=number).hex
        return ident

    def _safe_build(self) -> RagSample:
        try:
            return self._build()
        except Exception as exc:  # never lose a run because building its sample failed
            message = describe(exc)
            self.config.problems("sample", message, exc)
            fallback: dict[str, Any] = {
                "id": self.sample_id if self.sample_id is not None else self._id(),
                "error": self.error,
                "latency_ms": self._latency(),
                "metadata": {"framework": self.config.framework},
            }
            return validated_sample(fallback, [*(self.errors or ()), f"sample: {message}"])

    def _latency(self) -> float | None:
        return None if self.end is None else (self.end - self.start) * 1000.0

    def _scored(
        self, stages: Sequence[StageRecord], errors: list[str]
    ) -> tuple[list[dict[str, Any]] | None, list[StageRecord], StageRecord | None, dict[int, str]]:
        """The sample's stages, the stage(s) whose ranking ``retrieved_ids`` holds, the
        context, and each stage's name (by ``id()`` of its record)."""
        config = self.config
        if not stages and self.context is None:
            return None, [], None, {}
        context, why = self.context, None
        if context is None and self.context_note is not None:
            why = self.context_note  # the adapter saw what reached the model: no ranking
        elif context is None:
            context, why = infer_context(
                stages, flow_known=config.flow_known, hint=config.stage_hint
            )
        if why is not None:
            errors.append(NO_CONTEXT + why)
        listed, names, notes = stage_list(stages, context)
        errors.extend(f"stages: {note}" for note in notes)
        if config.legacy:
            chosen, legacy_notes = select_calls(
                stages,
                config.retrieval or "last",
                config.retriever_name,
                name_hint=config.name_hint,
            )
            errors.extend(f"{where}: {message}" for where, message in legacy_notes)
            return listed, chosen, context, names
        if config.stage == CONTEXT:
            return listed, [] if context is None else [context], context, names
        for stage in stages:
            if names[id(stage)] == config.stage:
                return listed, [stage] if stage.finished else [], context, names
        seen = ", ".join(str(s["name"]) for s in listed)
        errors.append(
            f"stage: {config.stage!r} is not a stage of this run (stages: {seen or 'none'}); "
            f"{config.name_hint or 'name a stage as the framework names it'}"
        )
        return listed, [], context, names

    def _build(self) -> RagSample:
        config = self.config
        errors = list(self.errors) if self.errors else []
        listed, chosen, context, names = self._scored(self.stages, errors)
        ids, pairs = ranking(chosen) if chosen else (None, [])
        metadata: dict[str, Any] = {"framework": config.framework}
        metadata.update(self.framework_metadata())
        scope = self.scope
        given = self.meta
        if isinstance(scope, Truth) and scope.metadata:
            given = (
                {**(given or {}), **scope.metadata}
                if self.own
                else {**scope.metadata, **(given or {})}
            )
        extra = run_metadata(given)
        if extra:
            metadata["run_metadata"] = extra
        fields: dict[str, Any] = {
            "user_input": self.user_input,
            "response": self.response,
            "retrieved_ids": ids,
            "latency_ms": self._latency(),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "error": self.error,
            "stages": listed,
            "metadata": metadata,
        }
        # the texts that reached the generator, whichever stage retrieved_ids scores
        shown = pairs
        if context is not None and not config.legacy and chosen != [context]:
            shown = ranking([context])[1]
        if shown:
            fields["retrieved_contexts"] = [text for _, text in dict.fromkeys(shown)]
        self.framework_fields(fields, chosen, pairs, names)
        scoped: dict[str, Any] = {}
        if isinstance(scope, Truth):
            scoped = scope.fields()
        elif scope is not None:
            scoped = {"id": scope}
        if not self.own:
            fields.update(scoped)
        if self.meta:
            fields.update(fields_from_metadata(self.meta))
        if self.own:
            fields.update(scoped)
        fields.update(self.explicit_fields())
        if self.sample_id is not None:
            fields["id"] = self.sample_id
        if fields.get("id") is None:  # nothing named the sample: the framework's id, or ours
            fields["id"] = self._id()
        noted = len(errors)
        sample = validated_sample(fields, errors)
        if len(errors) > noted:  # a value did not validate and was left out
            config.problems("sample", errors[-1])
        return sample
