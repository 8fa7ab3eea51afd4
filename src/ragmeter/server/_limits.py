"""The server's limits: defaults, setting checks, admission (the gate), body size and time."""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from typing import Any, TypeVar

from ragmeter.errors import (
    InvalidInputError,
    MissingDependencyError,
)

try:
    import anyio
    from fastapi.responses import Response
except ImportError as exc:  # pragma: no cover - exercised by a test that hides fastapi
    raise MissingDependencyError(exc.name or "fastapi", "server") from None


from ragmeter.server._responses import _CLOSE, _error, _too_large

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
        self.unit = stop.unit


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
        self.unit: str | None = None
        """What ``done`` and ``total`` count when not the route's unit (samples, queries)."""

    def check(self) -> None:
        if self.disconnected or time.monotonic() > self.deadline:
            raise _Stopped(self)

    def progress(self, done: int, total: int) -> None:
        """A ``progress(done, total)`` callback of the embedding runner: checks between two
        batches of texts (and counts them)."""
        self.unit = "texts to embed"
        self.done, self.total = done, total
        self.check()

    def each(self, items: Sequence[_T]) -> Iterator[_T]:
        """``items``, checking before each one (and counting them)."""
        self.total = len(items)
        for done, item in enumerate(items):
            self.done = done
            self.check()
            yield item
        self.done = len(items)


def _stopped(exc: _Stopped, unit: str) -> Response:
    counted = exc.unit or unit
    progress = "" if exc.total is None else f" after {exc.done} of {exc.total} {counted}"
    if exc.disconnected:
        logger.info("client disconnected: scoring stopped%s", progress)
        return Response(status_code=499)  # nobody reads it (nginx's "client closed request")
    logger.warning("time budget of %g s spent: scoring stopped%s", exc.seconds, progress)
    return _error(
        503,
        f"scoring stopped{progress}: this request needs more than this server's time budget "
        f"of {exc.seconds:g} s per request; send fewer samples per request",
    )


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
