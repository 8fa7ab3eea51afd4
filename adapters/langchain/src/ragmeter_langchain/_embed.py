"""A LangChain ``Embeddings`` model as a ragmeter embedder (issue 22)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings

from ragmeter.embed import Vector
from ragmeter.errors import InvalidTypeError, RagmeterError
from ragmeter.judge import clean_identity

__all__ = ["LangChainEmbedder", "embedder"]

# Settings that change how a model is called, never which vectors it returns: left out of
# the identity so that, say, a new retry count does not throw the embedding cache away.
_NOT_IDENTITY = frozenset(
    {
        "chunk_size",
        "embed_batch_size",
        "batch_size",
        "max_retries",
        "request_timeout",
        "timeout",
        "show_progress_bar",
        "show_progress",
        "retry_min_seconds",
        "retry_max_seconds",
        "http_client",
        "http_async_client",
        "client",
        "async_client",
    }
)


def _plain(value: Any) -> bool:
    """A value fit for an identity: a JSON scalar, or lists/dicts of them (no client objects,
    whose ``str`` would carry a memory address and change every run)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _public_settings(model: Any) -> dict[str, Any]:
    """The model's public fields (pydantic ``model_dump`` when it is a pydantic model, else
    its public instance attributes), plain values only, secrets removed."""
    fields: Mapping[str, Any]
    try:
        dump = getattr(model, "model_dump", None)
        fields = dump() if callable(dump) else vars(model)
    except Exception:  # a model whose fields cannot be read still embeds
        fields = {}
    kept = {
        str(k): v
        for k, v in fields.items()
        if not str(k).startswith("_") and str(k) not in _NOT_IDENTITY and _plain(v)
    }
    return clean_identity(kept)


class LangChainEmbedder:
    """Wraps any LangChain ``Embeddings``; each batch is one ``aembed_documents`` call.

    ``aembed_documents`` is the model's own async path; for a model that only implements
    the sync ``embed_documents``, LangChain runs it in a worker thread, so the event loop is
    never blocked. Texts are embedded as *documents* (not queries): the answer, the reference
    and the contexts are all passages. ``identity`` is the framework, the model class and its
    public settings (model name, dimensions, ...), secrets and transport settings left out.
    """

    def __init__(self, embeddings: Embeddings) -> None:
        if not isinstance(embeddings, Embeddings):
            raise InvalidTypeError(
                "embedder() needs a langchain_core Embeddings model, "
                f"got {type(embeddings).__name__}"
            )
        self.embeddings = embeddings

    @property
    def identity(self) -> Mapping[str, Any]:
        """Framework, model class and public settings (secrets left out)."""
        return {
            "framework": "langchain",
            "class": type(self.embeddings).__name__,
            **_public_settings(self.embeddings),
        }

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order: ``await embeddings.aembed_documents(texts)``."""
        vectors = await self.embeddings.aembed_documents(list(texts))
        if len(vectors) != len(texts):
            raise RagmeterError(
                f"langchain {type(self.embeddings).__name__}.aembed_documents returned "
                f"{len(vectors)} vectors for {len(texts)} texts"
            )
        return [[float(x) for x in vector] for vector in vectors]


def embedder(embeddings: Embeddings) -> LangChainEmbedder:
    """Use ``embeddings`` (any LangChain ``Embeddings``) as the model of ragmeter's
    embedding metrics, e.g. ``SemanticSimilarity(embedder=embedder(model))``.

    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> e = embedder(DeterministicFakeEmbedding(size=3))
    >>> dict(e.identity)
    {'framework': 'langchain', 'class': 'DeterministicFakeEmbedding', 'size': 3}
    """
    return LangChainEmbedder(embeddings)
