"""A Haystack text or document embedder component as a ragmeter embedder (issue 22)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from haystack import Document
from haystack.core.serialization import component_to_dict

from ragmeter.embed import Vector
from ragmeter.errors import InvalidTypeError, RagmeterError
from ragmeter.judge import clean_identity

__all__ = ["HaystackEmbedder", "embedder"]

# Init parameters that change how the model runs, never which vectors it returns.
_NOT_IDENTITY = frozenset(
    {
        "batch_size",
        "progress_bar",
        "device",
        "timeout",
        "max_retries",
        "http_client_kwargs",
        "http_client",
    }
)


def _plain(value: Any) -> bool:
    """A JSON scalar, or lists/dicts of them (no live objects in an identity)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _kind(component: Any) -> str:
    """``"documents"`` for a document embedder (``run(documents=...)``), ``"text"`` for a text
    embedder (``run(text=...)``); anything else is refused."""
    run = getattr(component, "run", None)
    if callable(run):
        try:
            params = inspect.signature(run).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        for kind in ("documents", "text"):
            if kind in params:
                return kind
    raise InvalidTypeError(
        "embedder() needs a Haystack text embedder (run(text=...) -> embedding) or document "
        "embedder (run(documents=...) -> documents with .embedding), "
        f"got {type(component).__name__}"
    )


def _init_attributes(component: Any) -> dict[str, Any]:
    """The component's attributes named like its ``__init__`` parameters (what
    ``component_to_dict`` would have serialised, for a component that cannot serialise)."""
    try:
        names = inspect.signature(type(component).__init__).parameters
    except (TypeError, ValueError):
        return {}
    return {n: getattr(component, n) for n in names if n != "self" and hasattr(component, n)}


class HaystackEmbedder:
    """Wraps a Haystack embedder component: a text embedder (``run(text=...)`` ->
    ``{"embedding": [...]}``) or a document embedder (``run(documents=[Document])`` ->
    ``{"documents": [...]}`` with ``.embedding`` set).

    The component is warmed up once (``warm_up()``, in a worker thread) before its first run.
    A document embedder embeds a whole batch in one ``run``; a text embedder is run once per
    text, one after another within a batch (ragmeter's runner bounds how many batches are in
    flight). ``run_async`` is used when the component has it, else ``run`` in a worker thread.
    A document embedder embeds ``Document(content=text)`` with no meta, so
    ``meta_fields_to_embed`` add nothing; its ``prefix``/``suffix`` apply as in an indexing
    pipeline. ``identity`` is the framework, the component class and its serialised init
    parameters (model, dimensions, prefix, normalisation, ...), secrets and
    transport settings (batch size, device, timeouts) left out.
    """

    def __init__(self, component: Any) -> None:
        self.kind = _kind(component)
        self.component = component
        self._warm = False
        self._warm_lock = threading.Lock()

    @property
    def identity(self) -> Mapping[str, Any]:
        """Framework, component class and its init parameters (secrets left out)."""
        try:
            params = dict(component_to_dict(self.component, "embedder").get("init_parameters", {}))
        except Exception:  # a token secret or a lambda cannot serialise: read the attributes
            params = _init_attributes(self.component)  # named like the init parameters
        kept = {k: v for k, v in params.items() if k not in _NOT_IDENTITY and _plain(v)}
        return {
            "framework": "haystack",
            "class": type(self.component).__name__,
            **clean_identity(kept),
        }

    def _warm_up(self) -> None:
        with self._warm_lock:
            if not self._warm:
                warm_up = getattr(self.component, "warm_up", None)
                if callable(warm_up):
                    warm_up()
                self._warm = True

    async def _run(self, **inputs: Any) -> Mapping[str, Any]:
        run_async = getattr(self.component, "run_async", None)
        if callable(run_async):
            result = await run_async(**inputs)
        else:
            result = await asyncio.to_thread(self.component.run, **inputs)
        if not isinstance(result, Mapping):
            raise RagmeterError(
                f"haystack {type(self.component).__name__}.run returned "
                f"{type(result).__name__}, not a dict of outputs"
            )
        return result

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order (see the class docstring for how it runs)."""
        if not self._warm:
            await asyncio.to_thread(self._warm_up)
        name = type(self.component).__name__
        if self.kind == "documents":
            result = await self._run(documents=[Document(content=t) for t in texts])
            docs = list(result.get("documents") or [])
            if len(docs) != len(texts):
                raise RagmeterError(
                    f"haystack {name} returned {len(docs)} documents for {len(texts)} texts"
                )
            vectors = [getattr(d, "embedding", None) for d in docs]
        else:
            vectors = [(await self._run(text=t)).get("embedding") for t in texts]
        out: list[Vector] = []
        for text, vector in zip(texts, vectors, strict=True):
            if vector is None:
                raise RagmeterError(f"haystack {name} gave no embedding for the text {text[:60]!r}")
            out.append([float(x) for x in vector])
        return out


def embedder(component: Any) -> HaystackEmbedder:
    """Use a Haystack text or document embedder component as the model of ragmeter's
    embedding metrics, e.g. ``SemanticSimilarity(embedder=embedder(text_embedder))``.

    >>> from haystack.components.embedders import MockTextEmbedder
    >>> e = embedder(MockTextEmbedder(dimension=4, model="mock"))
    >>> e.kind, e.identity["class"], e.identity["dimension"]
    ('text', 'MockTextEmbedder', 4)
    """
    return HaystackEmbedder(component)
