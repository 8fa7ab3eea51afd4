"""A LangChain ``Embeddings`` model as a ragmeter embedder (issue 22)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings

from ragmeter.embed import Vector, model_identity, vectors_for
from ragmeter.errors import InvalidTypeError

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


def _public_settings(model: Any) -> Mapping[str, Any]:
    """The model's fields: pydantic ``model_dump`` when it is a pydantic model, else its
    instance attributes (:func:`ragmeter.embed.model_identity` keeps the public plain ones)."""
    try:
        dump = getattr(model, "model_dump", None)
        return dump() if callable(dump) else vars(model)  # type: ignore[no-any-return]
    except Exception:  # a model whose fields cannot be read still embeds
        return {}


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
        return model_identity(
            "langchain", self.embeddings, _public_settings(self.embeddings), _NOT_IDENTITY
        )

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order: ``await embeddings.aembed_documents(texts)``."""
        vectors = await self.embeddings.aembed_documents(list(texts))
        where = f"langchain {type(self.embeddings).__name__}.aembed_documents"
        return vectors_for(texts, vectors, where)


def embedder(embeddings: Embeddings) -> LangChainEmbedder:
    """Use ``embeddings`` (any LangChain ``Embeddings``) as the model of ragmeter's
    embedding metrics, e.g. ``SemanticSimilarity(embedder=embedder(model))``.

    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> e = embedder(DeterministicFakeEmbedding(size=3))
    >>> dict(e.identity)
    {'framework': 'langchain', 'class': 'DeterministicFakeEmbedding', 'size': 3}
    """
    return LangChainEmbedder(embeddings)
