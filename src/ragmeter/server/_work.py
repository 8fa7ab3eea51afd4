"""The work of a request, off the event loop: parse, validate, score; stop on disconnect."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ragmeter.errors import (
    MissingDependencyError,
    NoScorableQueriesError,
    RagmeterError,
    UnknownMetricError,
)

try:
    import anyio
    import anyio.to_thread
    from fastapi import Request
    from fastapi.encoders import jsonable_encoder
    from fastapi.responses import JSONResponse, Response
except ImportError as exc:  # pragma: no cover - exercised by a test that hides fastapi
    raise MissingDependencyError(exc.name or "fastapi", "server") from None

from pydantic import (
    ValidationError,
)

from ragmeter.embed.metrics import EMBED_METRICS, load_default_embedder
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.server._limits import _TOO_MANY, Receive, _Stop, _Stopped, _stopped, logger
from ragmeter.server._models import EvaluateRequest, RetrievalRequest
from ragmeter.server._responses import (
    _JSON,
    _error,
    _finite,
    _report_content,
    _too_large,
    _unprocessable,
)

_JSON_MEDIA = "application/json"


def _content_type_problem(content_type: str | None) -> str | None:
    """Why ``content_type`` is not JSON (the 415's message), or ``None`` when it is."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime == _JSON_MEDIA or (mime.startswith("application/") and mime.endswith("+json")):
        return None
    got = f"got {content_type!r}" if content_type else "got no Content-Type"
    return f"send the body as JSON with Content-Type: application/json ({got})"


class _BadJSON(Exception):
    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


def _parse(body: bytes) -> Any:
    """The JSON value of ``body``, or :class:`_BadJSON` saying why not and where."""
    if not body.strip():
        raise _BadJSON("body is empty: send a JSON object", 0)
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise _BadJSON(f"body is not valid JSON: {exc.msg} ({where})", exc.pos) from None
    except UnicodeDecodeError as exc:
        raise _BadJSON(
            f"body is not valid JSON: it is not UTF-8 text ({exc.reason} at byte {exc.start})",
            exc.start,
        ) from None
    except RecursionError:
        raise _BadJSON("body is not valid JSON for this server: nested too deeply", 0) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        reason = str(exc)
        if "integer string conversion" in reason:
            reason = "a number has more than 4300 digits"
        raise _BadJSON(f"body is not valid JSON for this server: {reason}", 0) from None


def _bad_json(exc: _BadJSON) -> JSONResponse:
    error = {"type": "json_invalid", "loc": ["body", exc.position], "msg": str(exc)}
    return _JSON(status_code=400, content={"detail": [error]})


def _invalid(exc: ValidationError) -> JSONResponse:
    """FastAPI's 422 body for a request model that did not validate (413 for too many)."""
    errors = exc.errors(include_url=False)
    for err in errors:
        if err.get("type") == _TOO_MANY:
            return _too_large(str(err.get("msg")))
    detail: list[dict[str, Any]] = []
    for err in errors:
        item: dict[str, Any] = {**err, "loc": ["body", *err["loc"]]}
        ctx = item.get("ctx")
        if isinstance(ctx, dict):  # a validator's exception object becomes its message
            item["ctx"] = {k: str(v) if isinstance(v, BaseException) else v for k, v in ctx.items()}
        detail.append(item)
    # FastAPI's own 422 body, made JSON-safe: the echoed input may hold NaN/Infinity.
    return _JSON(status_code=422, content={"detail": _finite(jsonable_encoder(detail))})


def _evaluate_work(
    model: type[EvaluateRequest], body: bytes, stop: _Stop, *, embed_cache: Any = "default"
) -> Response:
    """``POST /evaluate`` from the raw body to the answer (runs in a worker thread).

    The embedding metrics' names use the offline default model (``ragmeter[semantic]``),
    with the embedding cache ``embed_cache`` (the app's; its path is not sent to the
    client); without the extra they are a 422 naming it, before anything is scored. The
    time budget and a hang-up are checked between samples, and between two batches of
    texts to embed.
    """
    try:
        payload = model.model_validate(_parse(body))
    except _BadJSON as exc:
        return _bad_json(exc)
    except ValidationError as exc:
        return _invalid(exc)
    stop.check()
    metrics = ["faithfulness"] if payload.claims_only else payload.metrics
    try:
        if any(name in EMBED_METRICS and name not in RAG_METRICS for name in metrics or ()):
            load_default_embedder()  # loaded once per process; refused here without the extra
        prices = payload.prices.model_dump() if payload.prices is not None else None
        report = evaluate_rag(
            stop.each(payload.samples),
            metrics=metrics,
            k_values=payload.k,
            prices=prices,
            per_sample=True,  # the response carries every sample's scores
            embed_cache=embed_cache,
            progress=stop.progress,
        )
    except (UnknownMetricError, MissingDependencyError) as exc:
        return _unprocessable(("body", "metrics"), exc)
    except (RagmeterError, ValueError) as exc:
        return _unprocessable(("body",), exc)
    del payload
    report.extra.pop("embed_cache", None)  # the server's file system is not the client's
    return _JSON(_report_content(report.to_dict()))


def _retrieval_work(model: type[RetrievalRequest], body: bytes, stop: _Stop) -> Response:
    """``POST /evaluate/retrieval`` from the raw body to the answer (in a worker thread).

    ``evaluate_run`` is one call (no check between queries): its cost is bounded by the body
    size (~30 ms for a 10 MiB run of 6,500 queries; ~0.15 s for one query ranking 900,000
    docs at 64 cut-offs); the budget is checked before and after it.
    """
    try:
        payload = model.model_validate(_parse(body))
    except _BadJSON as exc:
        return _bad_json(exc)
    except ValidationError as exc:
        return _invalid(exc)
    stop.check()
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
    stop.check()
    return _JSON(_report_content(report.to_dict()))


Work = Callable[[bytes, _Stop], Response]


def _run_work(work: Work, body: bytes, stop: _Stop, unit: str) -> Response:
    try:
        return work(body, stop)
    except _Stopped as exc:
        return _stopped(exc, unit)
    except Exception:  # a bug, not bad input: logged, and answered as JSON
        logger.exception("scoring failed")
        return _error(500, "internal error while scoring; see the server log")


async def _watch_disconnect(receive: Receive, stop: _Stop) -> None:
    """Set ``stop.disconnected`` when the client hangs up (the body has been read, so the
    next message is ``http.disconnect``, sent when the connection is lost)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            stop.disconnected = True
            return
        await anyio.sleep(0.05)  # not expected after the body; do not spin


async def _score(request: Request, work: Work, seconds: float, unit: str) -> Response:
    """Run ``work`` on the request body in a worker thread, off the event loop.

    The body must be JSON (415 otherwise). While the thread works, a task watches for the
    client hanging up; the work checks that, and the ``seconds`` budget, between samples.
    """
    problem = _content_type_problem(request.headers.get("content-type"))
    if problem is not None:
        return _error(415, problem)
    body = await request.body()
    stop = _Stop(seconds)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_watch_disconnect, request.receive, stop)
        response: Response = await anyio.to_thread.run_sync(_run_work, work, body, stop, unit)
        tasks.cancel_scope.cancel()
    return response
