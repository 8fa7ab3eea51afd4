"""``run``: serve the app with uvicorn, tuned against slow clients (``ragmeter serve``)."""

from __future__ import annotations

import asyncio
import gc
import sys
from typing import Any

from ragmeter.server._app import create_app
from ragmeter.server._limits import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEEP_ALIVE_TIMEOUT,
    _check_count_setting,
    _check_seconds,
)

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
