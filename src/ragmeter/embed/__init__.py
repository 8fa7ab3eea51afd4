"""Embedding-based answer metrics with any framework's embedding model: cached, bounded."""

from ragmeter.embed.protocol import DEFAULT_EMBED_MODEL, Embedder, FunctionEmbedder, Vector

__all__ = ["DEFAULT_EMBED_MODEL", "Embedder", "FunctionEmbedder", "Vector"]
