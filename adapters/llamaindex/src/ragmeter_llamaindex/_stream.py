"""Recording a streamed answer as the caller reads it, without ever reading it ourselves.

LlamaIndex returns a ``StreamingResponse`` (or ``AsyncStreamingResponse``) whose
``response_gen`` the caller drains. :func:`tap_stream` swaps that generator for one that
yields the very same tokens and, when the caller has read to the end (or closed the stream
early), reports the text (or ``None``) with a status to a callback.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

from llama_index.core.base.response.schema import AsyncStreamingResponse

__all__ = ["STREAM_DONE", "STREAM_PARTIAL", "STREAM_PENDING", "Done", "tap_stream"]

logger = logging.getLogger("ragmeter_llamaindex")
logger.addHandler(logging.NullHandler())

STREAM_PENDING = "stream not consumed yet"
STREAM_DONE = "streamed"
STREAM_PARTIAL = "stream closed before the end; text unknown"
STREAM_NONE = "no stream"

Done = Callable[[str | None, str], None]
"""``done(text, status)``: the full text and :data:`STREAM_DONE`, or ``None`` and another status."""


def tap_stream(response: Any, done: Done) -> None:
    """Wrap ``response.response_gen`` so ``done`` hears the text once the caller has read it.

    A response without a generator reports ``done(None, "no stream")`` at once.
    """
    gen = response.response_gen
    if gen is None:
        done(None, STREAM_NONE)
    elif isinstance(response, AsyncStreamingResponse):
        response.response_gen = _atap(gen, done)
    else:
        response.response_gen = _tap(gen, done)


def _finish(done: Done, parts: list[str], finished: bool) -> None:
    try:
        done("".join(parts) if finished else None, STREAM_DONE if finished else STREAM_PARTIAL)
    except Exception:
        logger.debug("ragmeter could not record a streamed response", exc_info=True)


def _tap(gen: Any, done: Done) -> Generator[str, None, None]:
    parts: list[str] = []
    finished = False
    try:
        for token in gen:
            parts.append(token)
            yield token
        finished = True
    finally:
        _finish(done, parts, finished)


async def _atap(gen: Any, done: Done) -> AsyncGenerator[str, None]:
    parts: list[str] = []
    finished = False
    try:
        async for token in gen:
            parts.append(token)
            yield token
        finished = True
    finally:
        _finish(done, parts, finished)
