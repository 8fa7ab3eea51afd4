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

Bad input never gives a 500: a body sent without ``Content-Type: application/json`` is a
415; a body that is not JSON a 400 saying where it breaks; a payload that does not validate,
or that the core refuses (unknown metric, duplicate doc ids, nothing to score), is a 422 whose
``detail`` lists ``{"loc": [...field path...], "msg": ..., "type": ...}``; a body larger than
``max_body_bytes`` or more than ``max_samples`` samples (queries, for retrieval) is a 413.

Guards against slow and heavy clients (each limit is an argument of :func:`create_app`, or of
:func:`run` for the connection-level ones, and an option of ``ragmeter serve``):

* **admission**: at most ``max_concurrent`` requests with a body (the scoring endpoints) are
  read, parsed and scored at once; up to ``max_queued`` more wait, unread, for at most
  ``queue_timeout`` seconds; past either, the answer is a 429 with ``Retry-After``. An
  in-flight 10 MiB request costs tens of MiB of memory, so this also caps the server's
  memory. ``GET /health`` is never queued. A 413 or 429 is sent before the body is read;
  the rest of the body is then read and discarded (at most ``MIN_DRAIN_BYTES`` or 4 x
  ``max_body_bytes``, within ``body_timeout`` s) before the connection closes, so that clients
  that send the whole body before reading (``http.client``) get the answer, not a reset.
* **slow bodies and slow readers**: a body must arrive within ``body_timeout`` seconds of
  being admitted (408 otherwise, and the connection is closed); an answer the client does
  not read within ``body_timeout`` seconds is dropped with the connection.
* **bounded work**: parsing, validation and scoring run in a worker thread, never on the
  event loop (so ``/health`` answers while a large request is scored), and stop between two
  samples when the client disconnects or when ``score_timeout`` seconds have been spent (503).
* **connections** (:func:`run`, i.e. ``ragmeter serve``): a connection that has not sent a
  complete request head within ``header_timeout`` seconds is closed (half-open and
  slow-header clients), as is a keep-alive connection idle for ``keep_alive_timeout`` s.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from typing import Annotated, Any, ClassVar, TypeVar

from ragmeter.errors import (
    InvalidInputError,
    MissingDependencyError,
    NoScorableQueriesError,
    RagmeterError,
    UnknownMetricError,
)

try:
    import anyio
    import anyio.to_thread
    from fastapi import FastAPI, Request
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
except ImportError as exc:  # pragma: no cover - exercised by a test that hides fastapi
    raise MissingDependencyError(exc.name or "fastapi", "server") from None

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import models_json_schema
from pydantic_core import PydanticCustomError

from ragmeter._version import __version__
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.evaluation.retrieval import DEFAULT_K_VALUES, evaluate_run
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.metrics.registry import BUILTIN_METRICS, METRICS
from ragmeter.schema import RAG_EVAL_ALIASES, RagSample

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_KEEP_ALIVE_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_CONCURRENT",
    "DEFAULT_MAX_QUEUED",
    "DEFAULT_MAX_SAMPLES",
    "DEFAULT_QUEUE_TIMEOUT",
    "DEFAULT_SCORE_TIMEOUT",
    "create_app",
    "run",
]

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
"""Largest request body accepted, in bytes (10 MiB); larger bodies get a 413."""
DEFAULT_MAX_SAMPLES = 10_000
"""Most samples per ``/evaluate`` request (and queries per ``/evaluate/retrieval``)."""
DEFAULT_MAX_CONCURRENT = 2
"""Requests with a body (the scoring endpoints) read, parsed and scored at once."""
DEFAULT_MAX_QUEUED = 16
"""Further such requests that wait for a free slot (their bodies unread); more get a 429."""
DEFAULT_QUEUE_TIMEOUT = 30.0
"""Seconds a queued request waits for a slot before it gets a 429."""
DEFAULT_BODY_TIMEOUT = 30.0
"""Seconds for an admitted request's whole body to arrive (408 after), and for the client to
read the answer (the connection is dropped after)."""
DEFAULT_SCORE_TIMEOUT = 60.0
"""Seconds of parsing, validating and scoring one request may take; past it, scoring stops
between two samples and the answer is a 503."""
DEFAULT_HEADER_TIMEOUT = 10.0
"""Seconds a connection may take to send a complete request head (``ragmeter serve``)."""
DEFAULT_KEEP_ALIVE_TIMEOUT = 5
"""Seconds an idle keep-alive connection is kept open (``ragmeter serve``; uvicorn's
``timeout_keep_alive``)."""
RETRY_AFTER_SECONDS = 1
"""The ``Retry-After`` of a 429."""
MIN_DRAIN_BYTES = 64 * 1024 * 1024
"""A refused request's body (413, 429) is read and discarded after the answer, up to
``max(MIN_DRAIN_BYTES, 4 * max_body_bytes)`` bytes (64 MiB with the default limit) and
within ``body_timeout`` seconds, so that a client still sending it can read the answer."""
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

_T = TypeVar("_T")

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
    if name not in RAG_METRICS:
        raise InvalidInputError(str(UnknownMetricError(name, RAG_METRICS)))
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


def _report_content(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` made JSON-safe; a non-finite number (none should reach here: the metrics
    and reports refuse them) is sent as ``null`` *and* named in ``warnings``."""
    content: dict[str, Any] = _finite(report)
    if content != report:  # NaN != NaN, so this is also true when a NaN was replaced
        warnings = content.setdefault("warnings", [])
        if isinstance(warnings, list):
            warnings.append("a non-finite number (NaN or infinity) in this report was sent as null")
    return content


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


_CLOSE = {"connection": "close"}


def _too_large(message: str, *, close: bool = False) -> JSONResponse:
    return _JSON(status_code=413, content={"detail": message}, headers=_CLOSE if close else None)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return _JSON(status_code=status, content={"detail": message}, headers=headers)


# --------------------------------------------------------------------------- admission


class _Gate:
    """Admission control: at most ``max_concurrent`` holders; ``max_queued`` more may wait.

    Single event loop, no locks: state changes only between awaits. A released slot is
    handed straight to the longest waiter (FIFO). Loop-independent (no semaphore bound to a
    loop), so one app can serve from several event loops (as test clients do).
    """

    def __init__(self, *, max_concurrent: int, max_queued: int, queue_timeout: float) -> None:
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.queue_timeout = queue_timeout
        self.active = 0
        self._waiters: deque[anyio.Event] = deque()

    def _refusal(self, why: str) -> str:
        return (
            f"server busy: it scores at most {self.max_concurrent} request(s) at once and "
            f"queues {self.max_queued} more; {why}. Retry after {RETRY_AFTER_SECONDS} s"
        )

    async def acquire(self) -> str | None:
        """Take a slot (``None``), or say why not (the 429's message)."""
        if self.active < self.max_concurrent and not self._waiters:
            self.active += 1
            return None
        if len(self._waiters) >= self.max_queued:
            return self._refusal("the queue is full")
        event = anyio.Event()
        self._waiters.append(event)
        try:
            with anyio.move_on_after(self.queue_timeout):
                await event.wait()
        except BaseException:  # cancelled while waiting (shutdown)
            self._abandon(event)
            raise
        if event.is_set():
            return None  # the slot was handed over by release()
        self._abandon(event)
        return self._refusal(f"this request waited {self.queue_timeout:g} s for a free slot")

    def _abandon(self, event: anyio.Event) -> None:
        try:
            self._waiters.remove(event)
        except ValueError:  # already handed a slot: give it back
            if event.is_set():
                self.release()

    def release(self) -> None:
        """Free a slot, handing it to the longest waiter if there is one."""
        if self._waiters:
            self._waiters.popleft().set()
        else:
            self.active -= 1


class _SendTimeout(Exception):
    """The client did not read the answer within ``body_timeout`` seconds."""


class _BodyLimit:
    """ASGI middleware guarding every request with a body (POST, PUT, PATCH).

    In order: a ``Content-Length`` over ``max_body_bytes`` is a 413 (an unparsable one a
    400); the request then takes a slot of the :class:`_Gate` (429 when none is free in
    time, before any of the body is read); the body must arrive within ``body_timeout``
    seconds (408) and hold at most ``max_body_bytes`` (413; a chunked body has no length, so
    the bytes received are counted); it is handed on as one message. Answers the guard
    gives itself close the connection (the client may still be sending). Sending the answer
    must finish within ``body_timeout`` seconds too, or the connection is dropped. Requests
    without a body pass straight through.

    A 413 or 429 is sent at once, and then the rest of the request body is read and
    discarded (a lingering close, see :meth:`_refuse`) before the answer ends and the
    connection closes: a client that sends its whole body before reading (Python's
    ``http.client``, ``requests``) otherwise gets a reset connection instead of the answer,
    because closing a socket with unread data in it makes the kernel send a TCP reset.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        gate: _Gate | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.drain_bytes = max(MIN_DRAIN_BYTES, 4 * max_body_bytes)
        self.gate = gate or _Gate(
            max_concurrent=DEFAULT_MAX_CONCURRENT,
            max_queued=DEFAULT_MAX_QUEUED,
            queue_timeout=DEFAULT_QUEUE_TIMEOUT,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        timeout = self.body_timeout

        async def timed_send(message: Message) -> None:
            with anyio.move_on_after(timeout) as late:
                await send(message)
            if late.cancelled_caught:
                raise _SendTimeout(f"the client did not read the answer within {timeout:g} s")

        try:
            await self._guard(scope, receive, timed_send)
        except _SendTimeout as exc:
            # The answer is half sent; returning lets the server close the connection.
            logger.warning("%s %s: %s; dropping it", scope.get("method"), scope.get("path"), exc)

    async def _guard(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_body_bytes
        message = f"request body is larger than this server's limit of {limit} bytes"
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    response = _error(400, "Content-Length is not an integer", _CLOSE)
                    await response(scope, receive, send)
                    return
                if declared > limit:
                    drain = declared <= self.drain_bytes  # else the client is reset anyway
                    too_large = _too_large(message, close=True)
                    await self._refuse(too_large, scope, receive, send, drain=drain)
                    return
        refusal = await self.gate.acquire()
        if refusal is not None:
            headers = {"retry-after": str(RETRY_AFTER_SECONDS), **_CLOSE}
            await self._refuse(_error(429, refusal, headers), scope, receive, send, drain=True)
            return
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.gate.release()

        try:
            await self._admitted(scope, receive, send, limit, message, release)
        finally:
            release()

    async def _refuse(
        self, response: Response, scope: Scope, receive: Receive, send: Send, *, drain: bool
    ) -> None:
        """Send ``response`` (its ``Connection: close`` ends the connection), reading and
        discarding the rest of the request body before its end when ``drain`` is true.

        The answer goes out at once; only its end (an empty last body message) waits until
        the body has been read to its end, the client hung up, ``drain_bytes`` were read or
        ``body_timeout`` seconds passed. A client that reads the answer early (curl, httpx)
        may hang up at once; one that sends its whole body first (``http.client``) finds
        the answer waiting, where a socket closed with unread data would send it a reset.
        """
        if not drain:
            await response(scope, receive, send)
            return

        async def hold_the_end(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                message = {**message, "more_body": True}
            await send(message)

        await response(scope, receive, hold_the_end)
        left = self.drain_bytes
        with anyio.move_on_after(self.body_timeout):
            while left >= 0:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    break
                if msg["type"] != "http.request":
                    continue
                left -= len(msg.get("body", b""))
                if not msg.get("more_body", False):
                    break
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _admitted(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        limit: int,
        too_large: str,
        release: Callable[[], None],
    ) -> None:
        chunks: list[bytes] = []
        size = 0
        complete = False
        with anyio.move_on_after(self.body_timeout) as late:
            while size <= limit:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return  # the client is gone: nothing to answer
                if msg["type"] != "http.request":
                    continue
                chunk = msg.get("body", b"")
                size += len(chunk)
                chunks.append(chunk)
                if not msg.get("more_body", False):
                    complete = True
                    break
        if size > limit:
            del chunks
            release()  # the slot is not needed to read and discard the rest
            response = _too_large(too_large, close=True)
            await self._refuse(response, scope, receive, send, drain=not complete)
            return
        if late.cancelled_caught:
            stalled = (
                f"the request body did not arrive within this server's body timeout of "
                f"{self.body_timeout:g} s ({size} bytes received)"
            )
            await _error(408, stalled, _CLOSE)(scope, receive, send)
            return
        buffered: deque[Message] = deque(
            [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
        )
        del chunks

        async def replay() -> Message:
            return buffered.popleft() if buffered else await receive()

        await self.app(scope, replay, send)


# --------------------------------------------------------------------------- the work


class _Stopped(Exception):
    """Scoring stopped early: the client hung up, or the time budget ran out."""

    def __init__(self, stop: _Stop) -> None:
        super().__init__("client disconnected" if stop.disconnected else "time budget spent")
        self.disconnected = stop.disconnected
        self.seconds = stop.seconds
        self.done = stop.done
        self.total = stop.total


class _Stop:
    """What a worker thread checks between two samples: a hang-up or the time budget.

    ``disconnected`` is set from the event loop (a bool write, atomic under the GIL); the
    deadline is ``seconds`` after the work starts.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.disconnected = False
        self.done = 0
        self.total: int | None = None

    def check(self) -> None:
        if self.disconnected or time.monotonic() > self.deadline:
            raise _Stopped(self)

    def each(self, items: Sequence[_T]) -> Iterator[_T]:
        """``items``, checking before each one (and counting them)."""
        self.total = len(items)
        for done, item in enumerate(items):
            self.done = done
            self.check()
            yield item
        self.done = len(items)


def _stopped(exc: _Stopped, unit: str) -> Response:
    progress = "" if exc.total is None else f" after {exc.done} of {exc.total} {unit}"
    if exc.disconnected:
        logger.info("client disconnected: scoring stopped%s", progress)
        return Response(status_code=499)  # nobody reads it (nginx's "client closed request")
    logger.warning("time budget of %g s spent: scoring stopped%s", exc.seconds, progress)
    return _error(
        503,
        f"scoring stopped{progress}: this request needs more than this server's time budget "
        f"of {exc.seconds:g} s per request; send fewer samples per request",
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


def _evaluate_work(model: type[EvaluateRequest], body: bytes, stop: _Stop) -> Response:
    """``POST /evaluate`` from the raw body to the answer (runs in a worker thread)."""
    try:
        payload = model.model_validate(_parse(body))
    except _BadJSON as exc:
        return _bad_json(exc)
    except ValidationError as exc:
        return _invalid(exc)
    stop.check()
    metrics = ["faithfulness"] if payload.claims_only else payload.metrics
    try:
        prices = payload.prices.model_dump() if payload.prices is not None else None
        report = evaluate_rag(
            stop.each(payload.samples),
            metrics=metrics,
            k=payload.k,
            prices=prices,
            per_sample=True,  # the response carries every sample's scores
        )
    except UnknownMetricError as exc:
        return _unprocessable(("body", "metrics"), exc)
    except (RagmeterError, ValueError) as exc:
        return _unprocessable(("body",), exc)
    del payload
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


def _check_seconds(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidInputError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def _check_count_setting(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


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


# --------------------------------------------------------------------------- serving


def _slow_client_protocol(header_timeout: float) -> Any:
    """uvicorn's h11 protocol, closing connections that send no complete request head.

    uvicorn times out idle keep-alive connections, but not a connection that never sends a
    complete request head (a half-open or slow-header client holds it for ever), nor one
    still sending a body the app answered without reading. This subclass closes the first
    ``header_timeout`` seconds after the connection opened (or after its previous answer),
    and the second at once. ``"h11"`` when uvicorn's internals are not as expected.
    """
    try:
        import h11
        from uvicorn.protocols.http.h11_impl import H11Protocol
    except ImportError:  # pragma: no cover - uvicorn without h11
        return "auto"

    class SlowClientH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._track_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._track_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
                self.transport.close()  # answered; the rest of the body will not be read
            self._track_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

        def _track_head(self) -> None:
            """Time the request head from its first byte (or the connection's opening)."""
            waiting = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
            if not waiting:
                self._cancel_head_timer()
            elif self._head_timer is None:
                self._head_timer = self.loop.call_later(header_timeout, self._head_too_slow)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return SlowClientH11Protocol


def _log_config() -> dict[str, Any]:
    """uvicorn's logging config, with ragmeter.server's messages on its default handler."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["ragmeter"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config


GC_THRESHOLD = (50_000, 10, 10)
"""``gc.set_threshold`` of a :func:`run` process. Python's default (700, 10, 10) runs a full
collection, which holds the interpreter for ~50-70 ms per 10 MiB request in flight, several
times while such a request is parsed; with these, young collections are rarer and full ones
happen about once per 5 million allocations."""
SWITCH_INTERVAL = 0.002
"""``sys.setswitchinterval`` of a :func:`run` process (default 0.005): how long a scoring
thread may hold the interpreter before the event loop gets it back."""


def _tune_process() -> None:
    """Process-wide settings for low event-loop latency while threads score (see :func:`run`)."""
    gc.collect()
    gc.freeze()  # what is loaded by now is never garbage: keep it out of every collection
    gc.set_threshold(*GC_THRESHOLD)
    sys.setswitchinterval(SWITCH_INTERVAL)


def run(
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    keep_alive_timeout: int = DEFAULT_KEEP_ALIVE_TIMEOUT,
    log_level: str = "info",
    **limits: Any,
) -> None:
    """Serve :func:`create_app` ``(**limits)`` with uvicorn (what ``ragmeter serve`` runs).

    Adds the connection-level timeouts an ASGI app cannot set: a connection that has not
    sent a complete request head ``header_timeout`` seconds after it opened (or after its
    previous answer) is closed, and so is a keep-alive connection idle for
    ``keep_alive_timeout`` seconds (uvicorn's ``timeout_keep_alive``).

    The process is tuned for event-loop latency (it is the server's own process): garbage
    collection thresholds :data:`GC_THRESHOLD` (objects loaded at start-up frozen out of
    collections) and a thread switch interval of :data:`SWITCH_INTERVAL` s, so ``/health``
    answers within tens of milliseconds while a 10 MiB request is scored
    (``benchmarks/bench_server.py``). An app from :func:`create_app` served another way
    keeps Python's defaults.
    """
    import uvicorn

    header_timeout = _check_seconds("header_timeout", header_timeout)
    keep_alive_timeout = _check_count_setting("keep_alive_timeout", keep_alive_timeout, 1)
    app = create_app(**limits)
    _tune_process()
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=_log_config(),
        timeout_keep_alive=keep_alive_timeout,
        http=_slow_client_protocol(header_timeout),
    )
