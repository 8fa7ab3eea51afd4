"""The request bodies: pydantic models of ``/evaluate`` and ``/evaluate/retrieval``."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ragmeter.embed.metrics import EMBED_METRICS
from ragmeter.errors import (
    InvalidInputError,
    UnknownMetricError,
)
from ragmeter.evaluation.retrieval import DEFAULT_K_VALUES
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.metrics.registry import BUILTIN_METRICS, METRICS
from ragmeter.schema import RAG_EVAL_ALIASES, RagSample
from ragmeter.server._limits import _TOO_MANY, DEFAULT_MAX_SAMPLES, MAX_K, MAX_K_VALUES

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
Cutoff = Annotated[int, Field(ge=1, le=MAX_K, strict=True)]


def _sample_schema(schema: dict[str, Any]) -> None:
    """Document rag-eval's field names and the kept extra keys in the OpenAPI schema."""
    props = schema.setdefault("properties", {})
    for alias, target in RAG_EVAL_ALIASES.items():
        base = props.get(target, {})
        props[alias] = {
            k: v for k, v in base.items() if k in ("anyOf", "type", "items", "default")
        } | {"description": f"rag-eval's name for {target!r}."}
    schema["additionalProperties"] = True
    schema["description"] = (
        "One RAG interaction (ragmeter's RagSample). rag-eval's field names are accepted; "
        "other keys are kept in metadata."
    )


class Sample(RagSample):
    """A :class:`~ragmeter.schema.RagSample` as the API documents it."""

    model_config = ConfigDict(json_schema_extra=_sample_schema)


def _check_count(data: Any, field: str, limit: int) -> None:
    if isinstance(data, dict):
        items = data.get(field)
        if isinstance(items, (list, dict)) and len(items) > limit:
            raise PydanticCustomError(
                _TOO_MANY,
                "{field} has {count} entries; this server accepts at most {limit} per request",
                {"field": field, "count": len(items), "limit": limit},
            )


def _known_retrieval_metric(name: str) -> str:
    if name not in METRICS:
        raise InvalidInputError(str(UnknownMetricError(name, METRICS.names())))
    return name


def _known_rag_metric(name: str) -> str:
    """A RAG metric name, or an embedding metric's (scored with the offline default model)."""
    if name not in RAG_METRICS and name not in EMBED_METRICS:
        raise InvalidInputError(str(UnknownMetricError(name, [*RAG_METRICS, *EMBED_METRICS])))
    return name


RetrievalMetricName = Annotated[str, AfterValidator(_known_retrieval_metric)]
RagMetricName = Annotated[str, AfterValidator(_known_rag_metric)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Prices(BaseModel):
    """Token prices for ``cost_usd``, in USD per million tokens."""

    model_config = ConfigDict(extra="forbid")

    input: NonNegativeFloat = Field(description="USD per million prompt tokens.")
    output: NonNegativeFloat = Field(description="USD per million completion tokens.")


class EvaluateRequest(BaseModel):
    """``POST /evaluate`` body: rag-eval's ``samples`` + ``k``, plus ragmeter's options."""

    model_config = ConfigDict(extra="forbid")
    max_samples: ClassVar[int] = DEFAULT_MAX_SAMPLES

    samples: list[Sample] = Field(min_length=1, description="The samples to score.")
    k: Cutoff = Field(5, description="Cut-off for retrieval metrics (rag-eval's precision@k).")
    metrics: list[RagMetricName] | None = Field(
        None,
        min_length=1,
        description="Metric names (e.g. token_f1, faithfulness, ndcg; semantic_similarity, "
        "semantic_context_recall and semantic_context_precision with the offline embedding "
        "model of ragmeter[semantic]); default: the defaults some sample can be scored on.",
    )
    prices: Prices | None = Field(None, description="Token prices, needed by cost_usd.")
    claims_only: bool = Field(
        False, description="Score faithfulness only (rag-eval's --claims-only)."
    )

    @model_validator(mode="before")
    @classmethod
    def _cap(cls, data: Any) -> Any:
        _check_count(data, "samples", cls.max_samples)
        return data


class RetrievalRequest(BaseModel):
    """``POST /evaluate/retrieval`` body: a run and its qrels, scored like trec_eval."""

    model_config = ConfigDict(extra="forbid")
    max_samples: ClassVar[int] = DEFAULT_MAX_SAMPLES

    qrels: dict[str, dict[str, FiniteFloat]] = Field(
        description="Judgements {query_id: {doc_id: grade}}; grade > 0 is relevant."
    )
    run: dict[str, list[str]] = Field(
        description="Rankings {query_id: [doc_id, ...]}, best first, no repeated doc id."
    )
    k_values: list[Cutoff] = Field(
        default_factory=lambda: list(DEFAULT_K_VALUES),
        min_length=1,
        max_length=MAX_K_VALUES,
        description="Cut-offs; each an int >= 1.",
    )
    metrics: list[RetrievalMetricName] = Field(
        default_factory=lambda: list(BUILTIN_METRICS),
        min_length=1,
        description="Registered retrieval metric names (bare, e.g. 'ndcg').",
    )
    relevance_level: FiniteFloat | None = Field(
        None, description="A doc is relevant when its grade >= this (trec_eval -l)."
    )

    @model_validator(mode="before")
    @classmethod
    def _cap(cls, data: Any) -> Any:
        _check_count(data, "qrels", cls.max_samples)
        _check_count(data, "run", cls.max_samples)
        return data
