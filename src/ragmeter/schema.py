"""The one sample schema: :class:`RagSample`, what every adapter fills and every RAG metric reads.

Field names match Ragas' ``SingleTurnSample`` (``user_input``, ``response``,
``retrieved_contexts``, ``reference``, ``reference_contexts``), plus what retrieval
scoring and operations need. rag-eval's JSONL names are accepted too (``question``,
``answer``, ``context``, ``golden_documents``, ``retrieved``), so rag-eval files load
unchanged. Unknown keys are kept in ``metadata`` (never dropped). Validation errors name
the field.

>>> s = RagSample(question="capital of France?", answer="Paris", context=["Paris is..."])
>>> s.user_input, s.response, s.retrieved_contexts
('capital of France?', 'Paris', ['Paris is...'])
>>> RagSample(user_input="q", retrieved_ids=["d1", "d2"], reference_ids=["d2"]).relevance_map()
{'d2': 1}
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ragmeter.errors import InvalidInputError
from ragmeter.spans import GoldSpan, Span

__all__ = [
    "CONTEXT",
    "RAG_EVAL_ALIASES",
    "STAGE_KINDS",
    "RagSample",
    "SampleKeys",
    "SampleLike",
    "Stage",
    "coerce_sample",
    "sample_keys",
    "samples_to_qrels",
    "samples_to_run",
]

RAG_EVAL_ALIASES: dict[str, str] = {
    "question": "user_input",
    "answer": "response",
    "context": "retrieved_contexts",
    "golden_documents": "reference_contexts",
    "retrieved": "retrieved_texts",
}
"""rag-eval JSONL field name -> RagSample field name."""

_ALIAS_OF: dict[str, str] = {v: k for k, v in RAG_EVAL_ALIASES.items()}


def _new_id() -> str:
    return uuid.uuid4().hex


CONTEXT = "context"
"""The name of the stage that holds the documents that reached the generator."""

STAGE_KINDS: dict[str, str] = {
    "retriever": "a retriever call: a ranking made from the query",
    "fusion": "joins the rankings of several stages (reciprocal rank fusion, an ensemble)",
    "reranker": "re-orders or filters the ranking of one stage (a ranker, a postprocessor, "
    "a compressor)",
    "stage": "a step you marked yourself",
    "context": "the documents that reached the generator (the prompt)",
}
"""What :attr:`Stage.kind` may be, and what each kind means."""


class Stage(BaseModel):
    """One named step of a pipeline that produced a ranking (a :class:`RagSample` keeps them
    in ``stages``, in the order they finished).

    ``ids`` is the step's ranking as doc ids, best first, each doc once at its best rank
    (chunks of one source collapse, as in ``retrieved_ids``); ``None`` when the step raised
    before returning (``error`` says why). ``name`` is unique within a sample (the
    framework's name for the step: a LangChain run name, a Haystack component name, a
    LlamaIndex retriever class; a name seen twice becomes ``"<name>#2"``...). ``inputs`` names
    the stages whose rankings the step consumed, where the framework shows it (a joiner's
    retrievers, a reranker's retriever). The stage named :data:`CONTEXT` holds what reached
    the generator; ``same_as`` names the stage whose ranking it is, if any.

    >>> Stage(name="bm25", ids=["d3", "d1"], query="lift").kind
    'retriever'
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Unique within the sample.")
    kind: str = Field(default="retriever", description="One of STAGE_KINDS.")
    ids: list[str] | None = Field(default=None, description="Doc ids, best first; None: failed.")
    query: str | None = Field(default=None, description="The query the step was given.")
    inputs: list[str] | None = Field(
        default=None, description="Stages whose rankings this step consumed (when known)."
    )
    depth: int = Field(default=0, ge=0, description="Retriever calls enclosing this step.")
    latency_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    error: str | None = Field(default=None, description="What the step raised.")
    same_as: str | None = Field(
        default=None, description="For the context: the stage whose ranking reached the model."
    )

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in STAGE_KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, STAGE_KINDS))}")
        return value


class RagSample(BaseModel):
    """One end-to-end RAG interaction: the unit :func:`ragmeter.evaluate_rag` scores.

    Every field but ``id`` is optional; a metric declares which fields it needs and skips
    samples that lack them (counted in the report's ``coverage``).
    """

    model_config = ConfigDict(populate_by_name=True, validate_assignment=True, extra="forbid")

    id: str = Field(
        default_factory=_new_id, description="Sample id; generated (uuid4 hex) when absent."
    )
    user_input: str | None = Field(
        default=None, description="The user's question (rag-eval: question)."
    )
    response: str | None = Field(
        default=None, description="The generated answer (rag-eval: answer)."
    )
    retrieved_contexts: list[str] | None = Field(
        default=None,
        description="Context texts handed to the generator, in order (rag-eval: context).",
    )
    reference: str | None = Field(default=None, description="The ground-truth answer.")
    references: list[str] | None = Field(
        default=None,
        description="Further acceptable answers; answer metrics take the max over all.",
    )
    reference_contexts: list[str] | None = Field(
        default=None, description="Ground-truth context texts (rag-eval: golden_documents)."
    )
    retrieved_ids: list[str] | None = Field(
        default=None, description="Retrieved doc ids, best first."
    )
    retrieved_texts: list[str] | None = Field(
        default=None, description="Retrieved chunk texts, best first (rag-eval: retrieved)."
    )
    reference_ids: list[str] | None = Field(
        default=None, description="Relevant doc ids (binary relevance)."
    )
    relevance: dict[str, float] | None = Field(
        default=None, description="Graded relevance {doc_id: grade}; wins over reference_ids."
    )
    latency_ms: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Wall-clock latency, milliseconds."
    )
    input_tokens: int | None = Field(
        default=None, ge=0, description="Prompt tokens reported by the model."
    )
    output_tokens: int | None = Field(
        default=None, ge=0, description="Completion tokens reported by the model."
    )
    gold_spans: list[GoldSpan] | None = Field(
        default=None, description="Gold evidence as character spans."
    )
    retrieved_spans: list[Span] | None = Field(
        default=None, description="Character spans of the retrieved chunks, best first."
    )
    error: str | None = Field(default=None, description="The pipeline's error, if the run failed.")
    stages: list[Stage] | None = Field(
        default=None,
        description="Every step that produced a ranking, in the order they finished; the "
        "one named 'context' holds what reached the generator.",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Tags, capture notes, extra keys."
    )

    @model_validator(mode="before")
    @classmethod
    def _accept_aliases(cls, data: Any) -> Any:
        # Fast path: a plain dict that already uses only field names and a str id (or none)
        # needs no renaming, no metadata merge and no id conversion; pydantic validates it.
        if type(data) is dict and _FIELD_NAMES.issuperset(data) and type(data.get("id", "")) is str:
            return data
        if not isinstance(data, Mapping):
            return data
        out: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        fields = cls.model_fields
        for key, value in data.items():
            target = RAG_EVAL_ALIASES.get(key, key)
            if target in fields:
                if target in out:
                    if out[target] != value:
                        alias = key if key != target else _ALIAS_OF[target]
                        raise ValueError(
                            f"both {alias!r} and {target!r} are given with different values; "
                            f"{alias!r} is rag-eval's name for {target!r}, give one"
                        )
                    continue
                out[target] = value
            else:
                extra[str(key)] = value
        if out.get("id") is None:
            out.pop("id", None)
        else:
            out["id"] = str(out["id"])
        if extra:
            meta = dict(out.get("metadata") or {})
            for k, v in extra.items():
                meta.setdefault(k, v)
            out["metadata"] = meta
        return out

    @field_validator("relevance")
    @classmethod
    def _finite_grades(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is not None:
            for doc, grade in value.items():
                if not math.isfinite(grade):
                    shown = "NaN" if grade != grade else repr(grade)
                    raise ValueError(f"grade of doc {doc!r} is {shown}; grades must be finite")
        return value

    def relevance_map(self) -> dict[str, float] | None:
        """The sample's qrels row: ``relevance``, else ``{id: 1}`` per ``reference_ids``.

        ``None`` when the sample carries neither.
        """
        if self.relevance is not None:
            return dict(self.relevance)
        if self.reference_ids is not None:
            return {d: 1 for d in self.reference_ids}
        return None

    def stage(self, name: str) -> Stage | None:
        """The stage called ``name`` (``"context"``: what reached the generator), or ``None``."""
        for stage in self.stages or ():
            if stage.name == name:
                return stage
        return None

    def ranking(self, stage: str | None = None) -> list[str] | None:
        """The doc ids a retrieval metric scores: ``retrieved_ids``, or with ``stage`` the ids
        of that stage (``None`` when the sample has no such stage or it failed)."""
        if stage is None:
            return self.retrieved_ids
        found = self.stage(stage)
        return None if found is None else found.ids

    def all_references(self) -> list[str]:
        """``reference`` followed by ``references``, without ``None``."""
        refs = [self.reference] if self.reference is not None else []
        return refs + list(self.references or [])


_FIELD_NAMES: frozenset[str] = frozenset(RagSample.model_fields)
# RagSample.model_validate without its per-call Python wrapper (this is the hot path).
_validate = RagSample.__pydantic_validator__.validate_python

SampleLike = RagSample | Mapping[str, Any]


def coerce_sample(sample: SampleLike, *, index: int | None = None) -> RagSample:
    """Return ``sample`` as a :class:`RagSample`, validating a mapping.

    A mapping that does not validate raises :class:`~ragmeter.errors.InvalidInputError`
    naming the sample (index and id) and each bad field.
    """
    if isinstance(sample, RagSample):
        return sample
    if type(sample) is not dict and not isinstance(sample, Mapping):
        where = f"sample {index}" if index is not None else "sample"
        raise InvalidInputError(
            f"{where} must be a RagSample or a mapping, got {type(sample).__name__}"
        )
    try:
        validated: RagSample = _validate(sample)
        return validated
    except Exception as exc:  # pydantic.ValidationError
        raise InvalidInputError(_describe(exc, sample, index)) from None


def _describe(exc: Exception, sample: Mapping[str, Any], index: int | None) -> str:
    where = "sample"
    if index is not None:
        where += f" {index}"
    if sample.get("id") is not None:
        where += f" (id {sample.get('id')!r})"
    errors = getattr(exc, "errors", None)
    if callable(errors):
        parts = []
        for err in errors():
            loc = ".".join(str(p) for p in err.get("loc", ())) or "<sample>"
            head = loc.split(".", 1)[0]
            alias = _ALIAS_OF.get(head)
            named = f"field {loc!r}" + (
                f" (rag-eval: {alias!r})" if alias is not None and alias in sample else ""
            )
            parts.append(f"{named}: {err.get('msg')}")
        return f"{where}: " + "; ".join(parts)
    return f"{where}: {exc}"


class SampleKeys:
    """The key each sample is scored under, one sample at a time: its id, or ``"<id>#2"``,
    ``"<id>#3"``... (the first free suffix) when an earlier sample already took it.

    One rule for ``evaluate_rag``'s ``per_sample``, :func:`samples_to_run`,
    :func:`samples_to_qrels`, the judges and the adapters' stores, so no sample is ever
    dropped and every view names the same samples.

    >>> keys = SampleKeys()
    >>> [keys(i) for i in ["q1", "q2", "q1", "q1"]], keys.repeats
    (['q1', 'q2', 'q1#2', 'q1#3'], 2)
    """

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self.repeats = 0
        """How many keys so far were renamed because their id was taken."""

    def __call__(self, sample_id: str) -> str:
        key = sample_id
        if key in self._taken:
            self.repeats += 1
            suffix = 2
            while f"{sample_id}#{suffix}" in self._taken:
                suffix += 1
            key = f"{sample_id}#{suffix}"
        self._taken.add(key)
        return key

    def __contains__(self, key: object) -> bool:
        return key in self._taken


def sample_keys(ids: Iterable[str]) -> list[str]:
    """The key of each id in order (see :class:`SampleKeys`).

    >>> sample_keys(["q1", "q2", "q1", "q1"])
    ['q1', 'q2', 'q1#2', 'q1#3']
    """
    return list(map(SampleKeys(), ids))


def samples_to_run(
    samples: Iterable[SampleLike], *, stage: str | None = None
) -> dict[str, list[str]]:
    """``{sample_id: retrieved_ids}`` for samples that carry ``retrieved_ids`` (with ``stage``:
    the ids of that stage, for samples that have it; see :meth:`RagSample.ranking`).

    No sample is dropped: one whose id an earlier sample already has is keyed
    ``"<id>#2"``, ``"<id>#3"``... (the first free suffix), as in ``evaluate_rag``'s
    ``per_sample``. Every sample is counted for the suffixes, so the keys here and in
    :func:`samples_to_qrels` name the same samples.

    >>> samples_to_run([{"id": "q1", "retrieved_ids": ["d1"]}, {"id": "q1", "retrieved_ids": []}])
    {'q1': ['d1'], 'q1#2': []}
    """
    run: dict[str, list[str]] = {}
    keys = SampleKeys()
    for i, s in enumerate(samples):
        sample = coerce_sample(s, index=i)
        key = keys(sample.id)
        ids = sample.retrieved_ids if stage is None else sample.ranking(stage)
        if ids is not None:
            run[key] = list(ids)
    return run


def samples_to_qrels(
    samples: Sequence[SampleLike] | Iterable[SampleLike],
) -> dict[str, dict[str, float]]:
    """``{sample_id: relevance_map}`` for samples that carry relevance or reference ids.

    Keyed like :func:`samples_to_run` (a repeated id becomes ``"<id>#2"``...).
    """
    qrels: dict[str, dict[str, float]] = {}
    keys = SampleKeys()
    for i, s in enumerate(samples):
        sample = coerce_sample(s, index=i)
        key = keys(sample.id)
        rel = sample.relevance_map()
        if rel is not None:
            qrels[key] = rel
    return qrels
