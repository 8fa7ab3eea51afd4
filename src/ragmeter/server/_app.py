"""``create_app``: the FastAPI app, its limits on ``app.state``, wired to the routes."""

from __future__ import annotations

import os
from typing import Any

from ragmeter.errors import (
    InvalidInputError,
    MissingDependencyError,
)

try:
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
except ImportError as exc:  # pragma: no cover - exercised by a test that hides fastapi
    raise MissingDependencyError(exc.name or "fastapi", "server") from None

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ragmeter._version import __version__
from ragmeter.server._limits import (
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
)
from ragmeter.server._models import EvaluateRequest, RetrievalRequest
from ragmeter.server._responses import _JSON
from ragmeter.server._routes import router, validation_error


def create_app(
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    max_queued: int = DEFAULT_MAX_QUEUED,
    queue_timeout: float = DEFAULT_QUEUE_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    score_timeout: float = DEFAULT_SCORE_TIMEOUT,
    embed_cache: str | os.PathLike[str] | None = "default",
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

    ``embed_cache`` is where the embedding metrics (``semantic_similarity``,
    ``semantic_context_recall``, ``semantic_context_precision``: the offline model of
    ``ragmeter[semantic]``) keep their vectors: ``"default"`` is ``embed-cache.sqlite`` in
    ``$RAGMETER_CACHE_DIR`` (else the user cache directory), a path names the file (shared
    by every request and process that names it), ``None`` keeps none.

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
    app.state.embed_cache = _check_embed_cache(embed_cache)
    # the request models of this app: their max_samples is this app's (read by the routes)
    models = {"max_samples": max_samples}
    app.state.evaluate_model = type("EvaluateRequest", (EvaluateRequest,), models)
    app.state.retrieval_model = type("RetrievalRequest", (RetrievalRequest,), models)

    app.exception_handler(RequestValidationError)(validation_error)
    app.include_router(router)
    _add_body_schemas(app, [app.state.evaluate_model, app.state.retrieval_model])
    return app


def _check_embed_cache(embed_cache: object) -> str | None:
    """``embed_cache`` as the requests open it: ``"default"``, a path, or ``None``."""
    if embed_cache is None:
        return None
    if isinstance(embed_cache, (str, os.PathLike)) and str(embed_cache):
        return str(embed_cache)
    raise InvalidInputError(
        f"embed_cache must be 'default', a file path or None, got {embed_cache!r:.80}"
    )


def _add_body_schemas(app: FastAPI, models: list[type[BaseModel]]) -> None:
    """Add the request models' schemas to the app's OpenAPI components (the routes read
    and validate their bodies themselves, so FastAPI does not see the models)."""
    _, schemas = models_json_schema(
        [(model, "validation") for model in models],
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
