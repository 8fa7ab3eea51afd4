"""ragmeter's HTTP server: a FastAPI app over the same core the CLI uses.

Needs the optional ``server`` extra (``pip install 'ragmeter[server]'``: fastapi, uvicorn);
``import ragmeter`` never loads this module. Run it with ``ragmeter serve`` or any ASGI
server (``uvicorn --factory ragmeter.server:create_app``).

Endpoints (the OpenAPI schema is served at ``/openapi.json``, docs at ``/docs``):

* ``GET /health`` -> ``{"status": "ok"}``.
* ``POST /evaluate`` -> :meth:`ragmeter.RagEvalReport.to_dict`. Body: ``samples`` (ragmeter's
  :class:`~ragmeter.schema.RagSample` fields or rag-eval's ``question``/``answer``/
  ``context``/``golden_documents``/``retrieved``), optional ``k`` (default 5),
  ``metrics``, ``claims_only`` (faithfulness only) and ``prices`` (``{"input": ...,
  "output": ...}`` USD per million tokens, for ``cost_usd``). rag-eval's payload works
  unchanged.
* ``POST /evaluate/retrieval`` -> :meth:`ragmeter.RetrievalEvalReport.to_dict`. Body:
  ``qrels`` (``{query_id: {doc_id: grade}}``), ``run`` (``{query_id: [doc_id, ...]}``, best
  first), optional ``k_values``, ``metrics``, ``relevance_level``.

Bad input never gives a 500: a payload that does not validate, or that the core refuses
(unknown metric, duplicate doc ids, nothing to score), is a 422 whose ``detail`` lists
``{"loc": [...field path...], "msg": ..., "type": ...}``; a body larger than
``max_body_bytes`` or more than ``max_samples`` samples (queries, for retrieval) is a 413.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any, ClassVar

from ragmeter.errors import (
    MissingDependencyError,
    NoScorableQueriesError,
    RagmeterError,
    UnknownMetricError,
)

try:
    from fastapi import FastAPI, Request
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
except ImportError as exc:  # pragma: no cover - exercised by a test that hides fastapi
    raise MissingDependencyError(exc.name or "fastapi", "server") from None

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from ragmeter._version import __version__
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.evaluation.retrieval import DEFAULT_K_VALUES, evaluate_run
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.metrics.registry import BUILTIN_METRICS, METRICS
from ragmeter.schema import RAG_EVAL_ALIASES, RagSample

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_SAMPLES", "create_app"]

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
"""Largest request body accepted, in bytes (10 MiB); larger bodies get a 413."""
DEFAULT_MAX_SAMPLES = 10_000
"""Most samples per ``/evaluate`` request (and queries per ``/evaluate/retrieval``)."""
MAX_K = 1_000_000
"""Largest cut-off accepted (a bigger one would only cost time)."""
MAX_K_VALUES = 64
"""Most cut-offs in one ``k_values``."""

_TOO_MANY = "too_many_samples"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

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
        raise ValueError(str(UnknownMetricError(name, METRICS.names())))
    return name


def _known_rag_metric(name: str) -> str:
    if name not in RAG_METRICS:
        raise ValueError(str(UnknownMetricError(name, RAG_METRICS)))
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
        description="Metric names (e.g. token_f1, faithfulness, ndcg); default: the defaults "
        "some sample can be scored on.",
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


def _finite(value: Any) -> Any:
    """JSON-safe copy: non-finite floats (JSON has none) become ``null``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class _JSON(JSONResponse):
    """A JSON response that never fails to encode.

    A request may carry a lone surrogate (JSON's ``"\\ud800"``), which a Python str holds but
    UTF-8 cannot encode; echoed back in a claim, an id or an error message it would turn a
    good answer into a 500. Such a body is sent with non-ASCII characters escaped instead.
    """

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(
                content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
            ).encode("ascii")


def _unprocessable(loc: tuple[str | int, ...], exc: Exception) -> JSONResponse:
    return _JSON(
        status_code=422,
        content={"detail": [{"loc": list(loc), "msg": str(exc), "type": type(exc).__name__}]},
    )


def _too_large(message: str) -> JSONResponse:
    return _JSON(status_code=413, content={"detail": message})


class _BodyLimit:
    """ASGI middleware: refuse a request body over ``max_body_bytes`` with a 413.

    Checks ``Content-Length`` first, then counts the bytes actually received (a chunked
    body has no length), buffering at most ``max_body_bytes`` before handing it on.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        message = f"request body is larger than this server's limit of {limit} bytes"
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await JSONResponse(
                        status_code=400, content={"detail": "Content-Length is not an integer"}
                    )(scope, receive, send)
                    return
                if declared > limit:
                    await _too_large(message)(scope, receive, send)
                    return
        buffered: list[Message] = []
        size = 0
        while True:
            msg = await receive()
            if msg["type"] != "http.request":
                buffered.append(msg)
                break
            size += len(msg.get("body", b""))
            if size > limit:
                await _too_large(message)(scope, receive, send)
                return
            buffered.append(msg)
            if not msg.get("more_body", False):
                break

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)


def create_app(
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_samples: int = DEFAULT_MAX_SAMPLES,
) -> FastAPI:
    """Build the ASGI app.

    ``max_body_bytes`` caps the request body and ``max_samples`` the number of samples in
    ``/evaluate`` (queries in ``/evaluate/retrieval``); over either, the answer is a 413.

    >>> from fastapi.testclient import TestClient
    >>> TestClient(create_app()).get("/health").json()
    {'status': 'ok'}
    """
    for name, value in (("max_body_bytes", max_body_bytes), ("max_samples", max_samples)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")

    evaluate_model = type("EvaluateRequest", (EvaluateRequest,), {"max_samples": max_samples})
    retrieval_model = type("RetrievalRequest", (RetrievalRequest,), {"max_samples": max_samples})

    app = FastAPI(
        default_response_class=_JSON,
        title="ragmeter",
        version=__version__,
        description="Score RAG samples and retrieval runs (trec_eval-exact, no LLM needed).",
    )
    app.add_middleware(_BodyLimit, max_body_bytes=max_body_bytes)
    app.state.max_body_bytes = max_body_bytes
    app.state.max_samples = max_samples

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        for err in errors:
            if err.get("type") == _TOO_MANY:
                return _too_large(str(err.get("msg")))
        # FastAPI's own 422 body, made JSON-safe: the echoed input may hold NaN/Infinity.
        return _JSON(status_code=422, content={"detail": _finite(jsonable_encoder(errors))})

    @app.get("/health")
    def health() -> dict[str, str]:
        """Liveness probe."""
        return {"status": "ok"}

    too_large: dict[int | str, dict[str, Any]] = {
        413: {"description": "Body or sample count over the server's limits."}
    }

    def evaluate(payload: EvaluateRequest) -> JSONResponse:
        """Score RAG samples; the answer is the RagEvalReport as JSON."""
        metrics = ["faithfulness"] if payload.claims_only else payload.metrics
        try:
            prices = payload.prices.model_dump() if payload.prices is not None else None
            report = evaluate_rag(payload.samples, metrics=metrics, k=payload.k, prices=prices)
        except UnknownMetricError as exc:
            return _unprocessable(("body", "metrics"), exc)
        except (RagmeterError, ValueError) as exc:
            return _unprocessable(("body",), exc)
        return _JSON(_finite(report.to_dict()))

    def evaluate_retrieval(payload: RetrievalRequest) -> JSONResponse:
        """Score a run against qrels; the answer is the RetrievalEvalReport as JSON."""
        try:
            report = evaluate_run(
                payload.qrels,
                payload.run,
                k_values=payload.k_values,
                metrics=payload.metrics,
                relevance_level=payload.relevance_level,
            )
        except UnknownMetricError as exc:
            return _unprocessable(("body", "metrics"), exc)
        except NoScorableQueriesError as exc:
            return _unprocessable(("body", "qrels"), exc)
        except (RagmeterError, ValueError) as exc:
            query = getattr(exc, "query_id", None)
            loc: tuple[str | int, ...] = ("body", "run", query) if query else ("body",)
            return _unprocessable(loc, exc)
        return _JSON(_finite(report.to_dict()))

    # The request models carry this app's sample cap, so the annotations are set here.
    evaluate.__annotations__ = {"payload": evaluate_model, "return": JSONResponse}
    evaluate_retrieval.__annotations__ = {"payload": retrieval_model, "return": JSONResponse}
    app.post("/evaluate", responses=too_large)(evaluate)
    app.post("/evaluate/retrieval", responses=too_large)(evaluate_retrieval)
    return app
