"""A LlamaIndex ``BaseEmbedding`` as a ragmeter embedder (issue 22)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding

from ragmeter.embed import Vector
from ragmeter.errors import InvalidTypeError, RagmeterError
from ragmeter.judge import clean_identity

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


def _plain(value: Any) -> bool:
    """A JSON scalar, or lists/dicts of them (no client objects in an identity)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


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
        kept = {
            str(k): v
            for k, v in fields.items()
            if not str(k).startswith("_") and str(k) not in _NOT_IDENTITY and _plain(v)
        }
        return {
            "framework": "llamaindex",
            "class": type(self.embed_model).__name__,
            **clean_identity(kept),
        }

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order: ``await embed_model.aget_text_embedding_batch``."""
        vectors = await self.embed_model.aget_text_embedding_batch(list(texts))
        if len(vectors) != len(texts):
            raise RagmeterError(
                f"llamaindex {type(self.embed_model).__name__}.aget_text_embedding_batch "
                f"returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return [[float(x) for x in vector] for vector in vectors]


def embedder(embed_model: BaseEmbedding) -> LlamaIndexEmbedder:
    """Use ``embed_model`` (any LlamaIndex ``BaseEmbedding``) as the model of ragmeter's
    embedding metrics, e.g. ``SemanticSimilarity(embedder=embedder(embed_model))``.

    >>> from llama_index.core.embeddings import MockEmbedding
    >>> dict(embedder(MockEmbedding(embed_dim=8)).identity)
    {'framework': 'llamaindex', 'class': 'MockEmbedding', 'model_name': 'unknown', 'embed_dim': 8}
    """
    return LlamaIndexEmbedder(embed_model)
