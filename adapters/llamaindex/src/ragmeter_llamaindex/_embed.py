"""A LlamaIndex ``BaseEmbedding`` as a ragmeter embedder (issue 22)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding

from ragmeter.embed import Vector, model_identity, vectors_for
from ragmeter.errors import InvalidTypeError

__all__ = ["LlamaIndexEmbedder", "embedder"]

# Fields that change how the model is called, never which vectors it returns.
_NOT_IDENTITY = frozenset(
    {
        "embed_batch_size",
        "num_workers",
        "embeddings_cache",
        "callback_manager",
        "class_name",
        "max_retries",
        "timeout",
        "reuse_client",
        "show_progress",
    }
)


class LlamaIndexEmbedder:
    """Wraps any LlamaIndex ``BaseEmbedding``; each batch is one
    ``aget_text_embedding_batch`` call (the model's own batching and ``num_workers`` apply).

    Texts are embedded as *text* (``get_text_embedding``), not as queries, which is what
    LlamaIndex's own ``SemanticSimilarityEvaluator`` does. ``identity`` is the framework, the
    model's class and its public fields (``model_name``, ``embed_dim``,
    ``dimensions``, ...), secrets and batching settings left out.
    """

    def __init__(self, embed_model: BaseEmbedding) -> None:
        if not isinstance(embed_model, BaseEmbedding):
            raise InvalidTypeError(
                f"embedder() needs a llama_index BaseEmbedding, got {type(embed_model).__name__}"
            )
        self.embed_model = embed_model

    @property
    def identity(self) -> Mapping[str, Any]:
        """Framework, class name and public fields (secrets left out)."""
        try:
            fields = self.embed_model.model_dump()
        except Exception:  # a model whose fields cannot be read still embeds
            fields = {"model_name": getattr(self.embed_model, "model_name", None)}
        return model_identity("llamaindex", self.embed_model, fields, _NOT_IDENTITY)

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order: ``await embed_model.aget_text_embedding_batch``."""
        vectors = await self.embed_model.aget_text_embedding_batch(list(texts))
        where = f"llamaindex {type(self.embed_model).__name__}.aget_text_embedding_batch"
        return vectors_for(texts, vectors, where)


def embedder(embed_model: BaseEmbedding) -> LlamaIndexEmbedder:
    """Use ``embed_model`` (any LlamaIndex ``BaseEmbedding``) as the model of ragmeter's
    embedding metrics, e.g. ``SemanticSimilarity(embedder=embedder(embed_model))``.

    >>> from llama_index.core.embeddings import MockEmbedding
    >>> dict(embedder(MockEmbedding(embed_dim=8)).identity)
    {'framework': 'llamaindex', 'class': 'MockEmbedding', 'model_name': 'unknown', 'embed_dim': 8}
    """
    return LlamaIndexEmbedder(embed_model)
