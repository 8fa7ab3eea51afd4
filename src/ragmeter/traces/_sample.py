"""A streamed trace run's ``RagSample`` built straight from values checked here against the
schema's own constraints, so pydantic's validation (most of a sample's cost) is not run again.

:meth:`~ragmeter.capture.RunRecord.to_sample` builds a sample field by field and validates
it; for the common run of a trace (no scope, no ``ragmeter_*`` metadata, the ``context``
stage scored, stages with names of their own whose order no timing race decides) the same
fields are computed here, each value is checked to be what the schema accepts unchanged
(an exact ``str``, a ``list`` of them, a finite non-negative ``float``, an ``int`` >= 0...),
and the models are made without validation. Any other run, or any value that does not
pass, returns ``None`` and the caller builds the sample the general way, so a value the
schema rejects is noted as it always was. A test compares both ways on every fixture and
on generated traces (``==`` and the fields set).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from ragmeter.capture import (
    METADATA_FIELDS,
    NO_CONTEXT,
    StageRecord,
    infer_context,
    ranking,
    run_metadata,
    timing_decides_order,
)
from ragmeter.schema import CONTEXT, STAGE_KINDS, RagSample, Stage

if TYPE_CHECKING:
    from ragmeter.traces._convert import TraceRun

__all__ = ["quick_sample"]

_set = object.__setattr__
_INF = math.inf


def _defaults(model: type[Any]) -> dict[str, Any]:
    """Each field's default, in the fields' order (``None`` for a field with a default
    factory: those, ``id`` and ``metadata``, are always given here)."""
    return {
        name: None if info.default_factory is not None else info.default
        for name, info in model.model_fields.items()
    }


_SAMPLE_DEFAULTS = _defaults(RagSample)


def _made(model: type[Any], defaults: dict[str, Any], values: dict[str, Any]) -> Any:
    """``model`` holding ``values`` (already what validation would keep), the other fields
    at their defaults, ``values``' keys as the fields set: what ``model.model_construct``
    makes, without its per-field work."""
    made = object.__new__(model)
    full = defaults.copy()
    full.update(values)
    _set(made, "__dict__", full)
    _set(made, "__pydantic_fields_set__", set(values))
    _set(made, "__pydantic_extra__", None)
    _set(made, "__pydantic_private__", None)
    return made


_STR = frozenset({str})


def _texts(value: Any) -> bool:
    """A ``list[str]`` the schema keeps as it is (no ``str`` subclass either)."""
    return value.__class__ is list and _STR.issuperset(map(type, value))


def _text(value: Any) -> bool:
    return value is None or value.__class__ is str


def _millis(value: Any) -> bool:
    return value is None or (value.__class__ is float and 0.0 <= value < _INF)


def _count(value: Any) -> bool:
    return value is None or (value.__class__ is int and value >= 0)


def _stage(values: dict[str, Any]) -> Stage | None:
    """A :class:`Stage` of ``values`` (every field, in the schema's order, and ``"set"``: the
    fields given) if each value is what the schema accepts unchanged."""
    name, ids, inputs, depth = values["name"], values["ids"], values["inputs"], values["depth"]
    if (
        name.__class__ is not str
        or not name
        or values["kind"] not in STAGE_KINDS
        or (ids is not None and not _texts(ids))
        or (inputs is not None and not _texts(inputs))
        or not _text(values["query"])
        or not _text(values["error"])
        or not _millis(values["latency_ms"])
        or depth.__class__ is not int
        or depth < 0
    ):
        return None
    given = values.pop("set")
    made = object.__new__(Stage)
    _set(made, "__dict__", values)
    _set(made, "__pydantic_fields_set__", given)
    _set(made, "__pydantic_extra__", None)
    _set(made, "__pydantic_private__", None)
    return made


_ALWAYS = ("name", "kind", "ids", "depth")


def _stage_values(
    stage: StageRecord, name: str, children: Sequence[str] | None, names: Mapping[int, str]
) -> dict[str, Any]:
    """One stage's fields as :func:`ragmeter.capture.stage_list` writes them: every field of
    :class:`Stage` in its order (``None`` where it writes none), and under ``"set"`` the
    fields it writes."""
    ids = stage.ids
    given = set(_ALWAYS)
    inputs: list[str] | None = [
        i if isinstance(i, str) else names.get(id(i), str(i.name)) for i in stage.inputs or ()
    ]
    inputs.extend(children or ())  # type: ignore[union-attr]
    if inputs:
        inputs = list(dict.fromkeys(inputs))
        given.add("inputs")
    else:
        inputs = None
    if stage.query is not None:
        given.add("query")
    latency = None
    if stage.end is not None:
        latency = (stage.end - stage.start) * 1000.0
        given.add("latency_ms")
    if stage.error is not None:
        given.add("error")
    return {
        "name": name,
        "kind": stage.kind,
        "ids": None if ids is None else list(dict.fromkeys(ids)),
        "query": stage.query,
        "inputs": inputs,
        "depth": stage.depth,
        "latency_ms": latency,
        "error": stage.error,
        "same_as": None,
        "set": given,
    }


_OPTIONAL = ("query", "inputs", "latency_ms", "error", "same_as")
_GIVEN: dict[tuple[bool, ...], frozenset[str]] = {}
"""The fields a stage sets, by which of :data:`_OPTIONAL` it has (made once each)."""


def _model(
    name: str,
    kind: str,
    ids: list[str] | None,
    query: str | None,
    inputs: list[str] | None,
    depth: int,
    latency: float | None,
    error: str | None,
    same_as: str | None,
    checked: bool = False,
) -> Stage | None:
    """:func:`_stage` of these values (the fields set: the four always written and each
    optional one that is not ``None``), in one step; ``checked``: ``ids`` and ``inputs``
    were checked already (copies of another stage's)."""
    if (
        name.__class__ is not str
        or not name
        or kind not in STAGE_KINDS
        or (not checked and ids is not None and not _texts(ids))
        or (not checked and inputs is not None and not _texts(inputs))
        or (query is not None and query.__class__ is not str)
        or (error is not None and error.__class__ is not str)
        or (latency is not None and not (latency.__class__ is float and 0.0 <= latency < _INF))
        or depth.__class__ is not int
        or depth < 0
    ):
        return None
    flags = (
        query is not None,
        inputs is not None,
        latency is not None,
        error is not None,
        same_as is not None,
    )
    given = _GIVEN.get(flags)
    if given is None:
        given = _GIVEN[flags] = frozenset(
            (*_ALWAYS, *(field for field, on in zip(_OPTIONAL, flags, strict=True) if on))
        )
    made = _new(Stage)
    _set(
        made,
        "__dict__",
        {
            "name": name,
            "kind": kind,
            "ids": ids,
            "query": query,
            "inputs": inputs,
            "depth": depth,
            "latency_ms": latency,
            "error": error,
            "same_as": same_as,
        },
    )
    _set(made, "__pydantic_fields_set__", set(given))
    _set(made, "__pydantic_extra__", None)
    _set(made, "__pydantic_private__", None)
    return made


_new = object.__new__


def _listed(
    stages: Sequence[StageRecord], context: StageRecord | None
) -> tuple[list[Stage], dict[int, str], dict[int, list[str] | None]] | None:
    """:func:`ragmeter.capture.stage_list` as models, when no name repeats and no two stages
    whose order a name would decide ran concurrently (else ``None``); with each stage's
    unique name and its ids, each once (by ``id()`` of its record)."""
    names: dict[int, str] = {}
    taken: set[str] = set()
    children: dict[int, list[str]] = {}
    for stage in stages:
        name = stage.name or stage.kind
        if name in taken or stage.end is None:
            return None  # "<name>#2" naming, or an unfinished stage: the general way
        taken.add(name)
        names[id(stage)] = name
        if stage.parent is not None:
            children.setdefault(id(stage.parent), []).append(name)
    order = sorted(stages, key=_seq) if len(stages) > 1 else stages
    for a, b in pairwise(order):
        if names[id(b)] < names[id(a)] and timing_decides_order(a, b):
            return None  # they may have run concurrently: stage_list orders them by name
    out = []
    firsts: dict[int, list[str] | None] = {}
    for stage in order:
        ids = stage.ids
        if ids is not None:
            ids = list(dict.fromkeys(ids))
        firsts[id(stage)] = ids
        inputs = _inputs(stage, children.get(id(stage)), names)
        end = stage.end
        model = _model(
            names[id(stage)],
            stage.kind,
            ids,
            stage.query,
            inputs,
            stage.depth,
            None if end is None else (end - stage.start) * 1000.0,
            stage.error,
            None,
        )
        if model is None:
            return None
        out.append(model)
    if context is not None:
        same = names.get(id(context))
        if same is not None:
            ids = firsts[id(context)]
            model = _model(
                CONTEXT,
                "context",
                None if ids is None else list(ids),
                None,
                [same],
                0,
                None,
                context.error,
                same,
                checked=True,  # the ids and the name of a stage listed above
            )
        else:
            entry = _stage_values(context, CONTEXT, None, names)
            entry["kind"] = "context"
            entry["depth"] = 0
            model = _stage(entry)
        if model is None:
            return None
        out.append(model)
    return out, names, firsts


def _inputs(
    stage: StageRecord, children: Sequence[str] | None, names: Mapping[int, str]
) -> list[str] | None:
    """The names of the stages ``stage`` consumed, then of those inside it, each once
    (``None``: none)."""
    given = stage.inputs
    if not given and not children:
        return None
    inputs = [i if isinstance(i, str) else names.get(id(i), str(i.name)) for i in given or ()]
    inputs.extend(children or ())
    return list(dict.fromkeys(inputs))


def _seq(stage: StageRecord) -> int:
    return stage.seq


def quick_sample(run: TraceRun) -> RagSample | None:
    """The run's sample, equal to what :meth:`~ragmeter.capture.RunRecord.to_sample` builds,
    or ``None`` when the run is not the common case or a value is one the schema would not
    keep as it is (the caller builds it the general way)."""
    config = run.config
    meta = run.meta
    if (
        not _WORKS
        or config.legacy
        or config.stage != CONTEXT
        or run.scope is not None
        or run.context_note is not None
        or (meta is not None and not METADATA_FIELDS.keys().isdisjoint(meta))
    ):
        return None
    errors = list(run.errors) if run.errors else []
    stages = run.stages
    listed: list[Stage] | None = None
    context: StageRecord | None = None
    names: dict[int, str] = {}
    firsts: dict[int, list[str] | None] = {}
    if stages or run.context is not None:
        context, why = run.context, None
        if context is None:
            context, why = infer_context(
                stages, flow_known=config.flow_known, hint=config.stage_hint
            )
        if why is not None:
            errors.append(NO_CONTEXT + why)
        got = _listed(stages, context)
        if got is None:
            return None
        listed, names, firsts = got
    ids, contexts, checked = _ranking(context, firsts)
    metadata: dict[str, Any] = {"framework": config.framework}
    metadata.update(run.framework_metadata())
    extra = run_metadata(meta)
    if extra:
        metadata["run_metadata"] = extra
    fields: dict[str, Any] = {
        "user_input": run.user_input,
        "response": run.response,
        "retrieved_ids": ids,
        "latency_ms": None if run.end is None else (run.end - run.start) * 1000.0,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "error": run.error,
        "stages": listed,
        "metadata": metadata,
    }
    if contexts is not None:
        fields["retrieved_contexts"] = contexts
    run.stage_fields(fields, names, firsts)
    fields["id"] = run.sample_id if run.sample_id is not None else run.default_id()
    if errors:
        metadata["capture_errors"] = errors
    return _sample(fields, checked)


def _ranking(
    context: StageRecord | None, firsts: Mapping[int, list[str] | None]
) -> tuple[list[str] | None, list[str] | None, bool]:
    """The sample's ``retrieved_ids`` and ``retrieved_contexts`` (``None``: none) as
    :func:`ragmeter.capture.ranking` of the context makes them, and whether the ids are a
    listed stage's (checked already): where the context's ids are each once, so is each
    ``(id, text)`` pair, and they are its ids and texts as they are."""
    if context is None:
        return None, None, False
    first = firsts.get(id(context))
    whole = context.ids if first is not None else None
    if first is not None and whole is not None and len(first) == len(whole) == len(context.texts):
        return list(first), list(context.texts) if whole else None, True
    ids, pairs = ranking([context])
    contexts = [text for _, text in dict.fromkeys(pairs)] if pairs else None
    return ids, contexts, first is not None


def _sample(fields: dict[str, Any], ids_checked: bool = False) -> RagSample | None:
    """A :class:`RagSample` of ``fields`` if each is what the schema accepts unchanged
    (``ids_checked``: the ids are a listed stage's, checked already)."""
    contexts = fields.get("retrieved_contexts")
    ids = fields["retrieved_ids"]
    if (
        fields["id"].__class__ is not str
        or not _text(fields["user_input"])
        or not _text(fields["response"])
        or not _text(fields["error"])
        or (ids is not None and not ids_checked and not _texts(ids))
        or (contexts is not None and not _texts(contexts))
        or not _millis(fields["latency_ms"])
        or not _count(fields["input_tokens"])
        or not _count(fields["output_tokens"])
        or not _STR.issuperset(map(type, fields["metadata"]))
    ):
        return None
    made: RagSample = _made(RagSample, _SAMPLE_DEFAULTS, fields)
    return made


def _works() -> bool:
    """Whether a model made here equals the validated one (pydantic keeps a model's state
    where :func:`_made` puts it); checked once, else every sample is validated."""
    record = StageRecord("bm25", "q", 0)
    record.done(["d1"], ["x"])
    values = _stage_values(record, "bm25", None, {})
    checked = Stage.model_validate({k: v for k, v in values.items() if k in values["set"]})
    modelled = _model(
        values["name"],
        values["kind"],
        values["ids"],
        values["query"],
        values["inputs"],
        values["depth"],
        values["latency_ms"],
        values["error"],
        values["same_as"],
    )
    made = _stage(values)
    return all(
        model is not None
        and model == checked
        and model.model_fields_set == checked.model_fields_set
        and model.model_dump() == checked.model_dump()
        and list(model.__dict__) == list(checked.__dict__)
        for model in (made, modelled)
    )


_WORKS = _works()
