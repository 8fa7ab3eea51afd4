"""``create_app``: the FastAPI app, its routes and their documented answers."""

from __future__ import annotations

from typing import Any

from ragmeter.errors import (
    InvalidInputError,
    MissingDependencyError,
)

try:
    from fastapi import FastAPI, Request
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
except ImportError as exc:  # pragma: no cover - exercised by a test that hides fastapi
    raise MissingDependencyError(exc.name or "fastapi", "server") from None

from pydantic.json_schema import models_json_schema

from ragmeter._version import __version__
from ragmeter.server._limits import (
    _TOO_MANY,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_QUEUED,
    DEFAULT_MAX_SAMPLES,
    DEFAULT_QUEUE_TIMEOUT,
    DEFAULT_SCORE_TIMEOUT,
    _BodyLimit,
    _check_count_setting,
    _check_seconds,
    _Gate,
    _Stop,
)
from ragmeter.server._models import EvaluateRequest, RetrievalRequest
from ragmeter.server._responses import _JSON, _finite, _too_large
from ragmeter.server._work import _JSON_MEDIA, _evaluate_work, _retrieval_work, _score

_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "The body is not valid JSON (`detail[0].msg` says where)."},
    408: {"description": "The body did not arrive within the server's body timeout."},
    413: {"description": "Body or sample count over the server's limits."},
    415: {"description": "The body was not sent with `Content-Type: application/json`."},
    422: {"description": "The payload does not validate, or the core refuses it."},
    429: {"description": "Too many requests in flight; retry after `Retry-After` seconds."},
    503: {"description": "Scoring needed more than the server's time budget per request."},
}


def _request_body(model: str) -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{model}"}
    return {"requestBody": {"required": True, "content": {_JSON_MEDIA: {"schema": schema}}}}


def create_app(
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    max_queued: int = DEFAULT_MAX_QUEUED,
    queue_timeout: float = DEFAULT_QUEUE_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    score_timeout: float = DEFAULT_SCORE_TIMEOUT,
) -> FastAPI:
    """Build the ASGI app.

    ``max_body_bytes`` caps the request body and ``max_samples`` the number of samples in
    ``/evaluate`` (queries in ``/evaluate/retrieval``); over either, the answer is a 413.
    ``max_concurrent`` requests with a body are read, parsed and scored at once, and
    ``max_queued`` more wait at most ``queue_timeout`` seconds for a slot; others get a 429
    with ``Retry-After``. An admitted body must arrive within ``body_timeout`` seconds (408),
    and the answer be read within as long. Parsing, validation and scoring run in a worker
    thread and stop, between samples, when the client disconnects or after
    ``score_timeout`` seconds (503). Timeouts are in seconds, finite and > 0; ``max_queued``
    may be 0 (no queue). Connection-level timeouts (request head, keep-alive) belong to the
    server: see :func:`run`.

    >>> from fastapi.testclient import TestClient
    >>> TestClient(create_app()).get("/health").json()
    {'status': 'ok'}
    """
    for name, value in (("max_body_bytes", max_body_bytes), ("max_samples", max_samples)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInputError(f"{name} must be an int >= 1, got {value!r}")
    max_concurrent = _check_count_setting("max_concurrent", max_concurrent, 1)
    max_queued = _check_count_setting("max_queued", max_queued, 0)
    queue_timeout = _check_seconds("queue_timeout", queue_timeout)
    body_timeout = _check_seconds("body_timeout", body_timeout)
    score_timeout = _check_seconds("score_timeout", score_timeout)

    evaluate_model = type("EvaluateRequest", (EvaluateRequest,), {"max_samples": max_samples})
    retrieval_model = type("RetrievalRequest", (RetrievalRequest,), {"max_samples": max_samples})

    app = FastAPI(
        default_response_class=_JSON,
        title="ragmeter",
        version=__version__,
        description="Score RAG samples and retrieval runs (trec_eval-exact, no LLM needed).",
    )
    gate = _Gate(max_concurrent=max_concurrent, max_queued=max_queued, queue_timeout=queue_timeout)
    app.add_middleware(
        _BodyLimit,
        max_body_bytes=max_body_bytes,
        body_timeout=body_timeout,
        gate=gate,
    )
    app.state.max_body_bytes = max_body_bytes
    app.state.max_samples = max_samples
    app.state.max_concurrent = max_concurrent
    app.state.max_queued = max_queued
    app.state.queue_timeout = queue_timeout
    app.state.body_timeout = body_timeout
    app.state.score_timeout = score_timeout

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

    def evaluate_work(body: bytes, stop: _Stop) -> Response:
        return _evaluate_work(evaluate_model, body, stop)

    def retrieval_work(body: bytes, stop: _Stop) -> Response:
        return _retrieval_work(retrieval_model, body, stop)

    # The bodies are read and validated in a worker thread (not by FastAPI, on the event
    # loop), so their schemas are declared here and added to the components below.
    @app.post("/evaluate", responses=_RESPONSES, openapi_extra=_request_body("EvaluateRequest"))
    async def evaluate(request: Request) -> Response:
        """Score RAG samples; the answer is the RagEvalReport as JSON."""
        return await _score(request, evaluate_work, score_timeout, "samples")

    @app.post(
        "/evaluate/retrieval",
        responses=_RESPONSES,
        openapi_extra=_request_body("RetrievalRequest"),
    )
    async def evaluate_retrieval(request: Request) -> Response:
        """Score a run against qrels; the answer is the RetrievalEvalReport as JSON."""
        return await _score(request, retrieval_work, score_timeout, "queries")

    _, schemas = models_json_schema(
        [(evaluate_model, "validation"), (retrieval_model, "validation")],
        ref_template="#/components/schemas/{model}",
    )
    components: dict[str, Any] = schemas.get("$defs", {})

    def openapi() -> dict[str, Any]:
        schema = FastAPI.openapi(app)
        known = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, value in components.items():
            known.setdefault(name, value)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
