"""The judge contract: chat messages in, text out (plus optional token usage).

A judge is *the model the user already has*, wrapped by an adapter
(``ragmeter_langchain.judge(chat_model)``, ``ragmeter_llamaindex.judge(llm)``,
``ragmeter_haystack.judge(chat_generator)``) or by :class:`FunctionJudge` around any
async or sync function. ``identity`` names the model and its sampling settings; it is
part of every cache key, so changing model or temperature never reuses a stale verdict.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragmeter import errors as _errors
from ragmeter.judge._fingerprint import JudgeIdentityWarning, _is_secret, function_fingerprint

__all__ = [
    "FunctionJudge",
    "Judge",
    "JudgeIdentityWarning",
    "JudgeReply",
    "Message",
    "TransientJudgeError",
    "clean_identity",
    "function_fingerprint",
    "is_transient",
]


@dataclass(frozen=True)
class Message:
    """One chat message: ``role`` is ``"system"``, ``"user"`` or ``"assistant"``."""

    role: str
    content: str


@dataclass(frozen=True)
class JudgeReply:
    """What a judge answered, with token usage when the model reported it."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None


@runtime_checkable
class Judge(Protocol):
    """Anything with an ``identity`` and an async ``complete(messages) -> JudgeReply``."""

    @property
    def identity(self) -> Mapping[str, Any]:
        """Model identity and sampling settings (JSON-ready), part of the cache key."""
        ...

    async def complete(self, messages: Sequence[Message]) -> JudgeReply:
        """Answer the chat ``messages``."""
        ...


TransientJudgeError = _errors.TransientJudgeError  # defined in ragmeter.errors, re-exported


_TRANSIENT_NAMES = (
    "ratelimit",
    "timeout",
    "serviceunavailable",
    "apiconnection",
    "internalserver",
    "overloaded",
    "tryagain",
)
_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


def is_transient(exc: BaseException) -> bool:
    """True for errors a retry may cure: :class:`TransientJudgeError`, timeouts, connection
    errors, provider errors named like rate-limit/timeout/overloaded, HTTP 408/429/5xx.

    >>> is_transient(TransientJudgeError()), is_transient(ValueError("bad prompt"))
    (True, False)
    """
    if isinstance(exc, (TransientJudgeError, asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    if isinstance(status, int) and status in _TRANSIENT_STATUS:
        return True
    name = type(exc).__name__.lower()
    return any(marker in name for marker in _TRANSIENT_NAMES)


def clean_identity(params: Mapping[str, Any]) -> dict[str, Any]:
    """A model's parameters made fit for a cache key: secrets dropped, values JSON-safe.

    A parameter is a secret when a ``_``-separated part of its name is ``key``, ``token``,
    ``secret``, ``password``, ``authorization`` or ``credentials`` (or the name ends in
    ``key``/``token``/``secret``), so ``api_key`` and ``hf_token`` go while ``max_tokens``
    and ``temperature`` stay. Values that are not JSON scalars, lists or dicts become
    ``str(value)``.

    >>> clean_identity({"api_key": "sk-1", "max_tokens": 64, "temperature": 0.0, "hf_token": "x"})
    {'max_tokens': 64, 'temperature': 0.0}
    """
    return {k: _jsonable(v) for k, v in params.items() if not _is_secret(str(k))}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items() if not _is_secret(str(k))}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


DEFAULT_MODEL = "function"
"""``FunctionJudge.model`` when none is named: the identity then fingerprints the function."""


@dataclass
class FunctionJudge:
    """A judge around a plain function ``messages -> str | JudgeReply`` (sync or async).

    Sync functions run in a worker thread so they never block the event loop.

    ``model`` names what the function asks (``"gpt-4o-mini"``); with ``settings`` it is the
    identity that keys the cache, so the name is a promise: change it (or a setting) when
    the function starts giving other verdicts. Left at the default ``"function"``, the
    identity also carries :func:`function_fingerprint` (the function's qualified name and a
    hash of its code and of the values it reads: defaults, closure variables, globals, and
    for a method or callable object the instance's attributes and the class attributes it
    reads), so two different functions never share cached verdicts, and changing such a
    value (``THRESHOLD = 0.5`` to ``0.9``, on the module or on the class) asks the judge
    again. Values that count by type only (lists, dicts, clients) raise a
    :class:`JudgeIdentityWarning` naming them.

    >>> j = FunctionJudge(lambda msgs: '{"score": 1}', model="always-one")
    >>> asyncio.run(j.complete([Message("user", "hi")])).text
    '{"score": 1}'
    >>> dict(j.identity)
    {'model': 'always-one'}
    >>> sorted(FunctionJudge(lambda msgs: '{"score": 1}').identity)
    ['code', 'function', 'model']
    """

    fn: Callable[[Sequence[Message]], str | JudgeReply | Awaitable[str | JudgeReply]]
    model: str = DEFAULT_MODEL
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def identity(self) -> Mapping[str, Any]:
        """``{"model": ..., **settings}``; with the default model also ``function`` and
        ``code`` from :func:`function_fingerprint`."""
        if self.model != DEFAULT_MODEL:
            return {"model": self.model, **self.settings}
        return {"model": self.model, **function_fingerprint(self.fn), **self.settings}

    async def complete(self, messages: Sequence[Message]) -> JudgeReply:
        """Call the function (in a thread when it is synchronous)."""
        if inspect.iscoroutinefunction(self.fn):
            out = await self.fn(messages)
        else:
            out = await asyncio.to_thread(self.fn, messages)
            if inspect.isawaitable(out):
                out = await out
        return out if isinstance(out, JudgeReply) else JudgeReply(text=str(out))
