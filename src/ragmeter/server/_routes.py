"""The HTTP routes (``/health``, ``/evaluate``, ``/evaluate/retrieval``) and their answers.

The routes live on :data:`router`, which :func:`ragmeter.server.create_app` includes; what
differs per app (the request models with their ``max_samples``, the ``score_timeout``) is
read from ``request.app.state``, where the factory put it.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ragmeter.errors import MissingDependencyError

try:
    from fastapi import APIRouter, Request
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
except ImportError as exc:  # pragma: no cover - exercised by a test that hides fastapi
    raise MissingDependencyError(exc.name or "fastapi", "server") from None

from ragmeter.server._limits import _TOO_MANY
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


router = APIRouter(default_response_class=_JSON)


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's 422 for a request that does not validate, made JSON-safe (the echoed input
    may hold NaN/Infinity); a 413 when what failed is the count of samples or queries."""
    errors = exc.errors()
    for err in errors:
        if err.get("type") == _TOO_MANY:
            return _too_large(str(err.get("msg")))
    return _JSON(status_code=422, content={"detail": _finite(jsonable_encoder(errors))})


@router.get("/health")
def health() -> dict[str, str]:
    """Liveness probe."""
    return {"status": "ok"}


# The bodies are read and validated in a worker thread (not by FastAPI, on the event loop),
# so their schemas are declared here and added to the app's components by create_app.
@router.post("/evaluate", responses=_RESPONSES, openapi_extra=_request_body("EvaluateRequest"))
async def evaluate(request: Request) -> Response:
    """Score RAG samples; the answer is the RagEvalReport as JSON."""
    state = request.app.state
    work = partial(_evaluate_work, state.evaluate_model, embed_cache=state.embed_cache)
    return await _score(request, work, state.score_timeout, "samples")


@router.post(
    "/evaluate/retrieval",
    responses=_RESPONSES,
    openapi_extra=_request_body("RetrievalRequest"),
)
async def evaluate_retrieval(request: Request) -> Response:
    """Score a run against qrels; the answer is the RetrievalEvalReport as JSON."""
    state = request.app.state
    work = partial(_retrieval_work, state.retrieval_model)
    return await _score(request, work, state.score_timeout, "queries")
