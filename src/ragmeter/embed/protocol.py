"""The embedder contract: texts in, one vector per text out, and an identity for caching.

An embedder is *the embedding model the user already has*, wrapped by an adapter
(``ragmeter_langchain.embedder(embeddings)``, ``ragmeter_llamaindex.embedder(embed_model)``,
``ragmeter_haystack.embedder(text_embedder)``) or by :class:`FunctionEmbedder` around any
sync or async function. ``identity`` names the model and its settings; it is part of every
cache key, so changing model or dimensions never reuses a stale vector. Embedding metrics
call :meth:`Embedder.embed` with batches of at most ``batch_size`` texts, never an empty one,
at most ``concurrency`` at once, or fewer when the embedder has a ``max_concurrency``
(:func:`max_concurrency`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragmeter.judge import function_fingerprint

__all__ = [
    "DEFAULT_EMBED_MODEL",
    "Embedder",
    "FunctionEmbedder",
    "Vector",
    "as_floats",
    "max_concurrency",
]

Vector = list[float]
"""One embedding: a list of floats (any length; all vectors of one model share it)."""


def as_floats(vectors: Sequence[Sequence[float]] | Any) -> list[Vector]:
    """Each vector as a list of Python floats: one numpy conversion when the vectors form a
    matrix (the usual case: it is many times faster), else vector by vector.

    >>> as_floats([(1, 2), [3.5, 4]]), as_floats([[1], [2, 3]])
    ([[1.0, 2.0], [3.5, 4.0]], [[1.0], [2.0, 3.0]])
    """
    import numpy as np

    try:
        matrix = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError):  # ragged: the runner names the vector of another length
        matrix = None
    if matrix is not None and matrix.ndim == 2:
        rows: list[Vector] = matrix.tolist()
        return rows
    return [[float(x) for x in vector] for vector in vectors]


@runtime_checkable
class Embedder(Protocol):
    """Anything with an ``identity`` and an async ``embed(texts) -> list[Vector]``."""

    @property
    def identity(self) -> Mapping[str, Any]:
        """Model identity and settings (JSON-ready), part of the cache key."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in the order of ``texts``."""
        ...


def max_concurrency(embedder: object) -> int | None:
    """How many :meth:`Embedder.embed` calls the embedder takes at once, when it says
    (an optional ``max_concurrency`` attribute, an int >= 1; e.g. 1 for a local model that
    runs in a worker thread and would only compete with itself for the CPU); ``None``: no
    limit of its own (the runner's ``concurrency`` applies).

    >>> max_concurrency(object()), max_concurrency(type("E", (), {"max_concurrency": 1})())
    (None, 1)
    """
    limit = getattr(embedder, "max_concurrency", None)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1:
        return limit
    return None


DEFAULT_EMBED_MODEL = "function"
"""``FunctionEmbedder.model`` when none is named: the identity then fingerprints the function."""


@dataclass
class FunctionEmbedder:
    """An embedder around a plain function ``texts -> vectors`` (sync or async).

    Sync functions run in a worker thread so they never block the event loop. ``model``
    (with ``settings``) is the identity that keys the cache; left at the default
    ``"function"``, the identity also carries the function's fingerprint (qualified name,
    a hash of its code and of the values it reads), as :class:`~ragmeter.judge.FunctionJudge`
    does.

    >>> e = FunctionEmbedder(lambda texts: [[float(len(t)), 1.0] for t in texts], model="len")
    >>> asyncio.run(e.embed(["ab", "c"]))
    [[2.0, 1.0], [1.0, 1.0]]
    >>> dict(e.identity)
    {'model': 'len'}
    """

    fn: Callable[[Sequence[str]], Sequence[Sequence[float]] | Awaitable[Sequence[Sequence[float]]]]
    model: str = DEFAULT_EMBED_MODEL
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def identity(self) -> Mapping[str, Any]:
        """``{"model": ..., **settings}``; with the default model also ``function`` and
        ``code`` from :func:`~ragmeter.judge.function_fingerprint`."""
        if self.model != DEFAULT_EMBED_MODEL:
            return {"model": self.model, **self.settings}
        fingerprint = function_fingerprint(self.fn, owner="FunctionEmbedder")
        return {"model": self.model, **fingerprint, **self.settings}

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Call the function (in a thread when it is synchronous)."""
        if inspect.iscoroutinefunction(self.fn):
            out = await self.fn(texts)
        else:
            out = await asyncio.to_thread(self.fn, texts)
            if inspect.isawaitable(out):
                out = await out
        return as_floats(out)
