"""A Haystack text or document embedder component as a ragmeter embedder (issue 22)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from haystack import Document
from haystack.core.serialization import component_to_dict

from ragmeter.embed import Vector, model_identity, vectors_for
from ragmeter.errors import InvalidTypeError, RagmeterError

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
    flight). ``run_async`` is used when the component has it (the remote embedders: several
    batches in flight), else ``run`` in a worker thread, one ``run`` at a time: as in a
    Haystack pipeline, a component's ``run`` is never called from two threads at once (and
    a local model, such as Sentence Transformers', does not share its CPU with its own
    concurrent calls).
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
        self._run_lock = threading.Lock()  # one synchronous run() at a time

    @property
    def max_concurrency(self) -> int | None:
        """1 for a component with no ``run_async`` (its ``run`` goes to a worker thread, one
        at a time), ``None`` (the runner's ``concurrency``) for one with it."""
        return None if callable(getattr(self.component, "run_async", None)) else 1

    @property
    def identity(self) -> Mapping[str, Any]:
        """Framework, component class and its init parameters (secrets left out)."""
        try:
            params = dict(component_to_dict(self.component, "embedder").get("init_parameters", {}))
        except Exception:  # a token secret or a lambda cannot serialise: read the attributes
            params = _init_attributes(self.component)  # named like the init parameters
        return model_identity("haystack", self.component, params, _NOT_IDENTITY)

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
            result = await asyncio.to_thread(self._run_sync, inputs)
        if not isinstance(result, Mapping):
            raise RagmeterError(
                f"haystack {type(self.component).__name__}.run returned "
                f"{type(result).__name__}, not a dict of outputs"
            )
        return result

    def _run_sync(self, inputs: Mapping[str, Any]) -> Any:
        with self._run_lock:
            return self.component.run(**inputs)

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order (see the class docstring for how it runs)."""
        if not self._warm:
            await asyncio.to_thread(self._warm_up)
        if self.kind == "documents":
            result = await self._run(documents=[Document(content=t) for t in texts])
            docs = list(result.get("documents") or [])
            vectors = [getattr(d, "embedding", None) for d in docs]
        else:
            vectors = [(await self._run(text=t)).get("embedding") for t in texts]
        return vectors_for(texts, vectors, f"haystack {type(self.component).__name__}.run")


def embedder(component: Any) -> HaystackEmbedder:
    """Use a Haystack text or document embedder component as the model of ragmeter's
    embedding metrics, e.g. ``SemanticSimilarity(embedder=embedder(text_embedder))``.

    >>> from haystack.components.embedders import MockTextEmbedder
    >>> e = embedder(MockTextEmbedder(dimension=4, model="mock"))
    >>> e.kind, e.identity["class"], e.identity["dimension"]
    ('text', 'MockTextEmbedder', 4)
    """
    return HaystackEmbedder(component)
