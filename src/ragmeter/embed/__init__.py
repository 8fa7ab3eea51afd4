"""Embedding-based answer metrics with any framework's embedding model: cached, bounded."""

from ragmeter.embed.cache import EmbedCache, default_embed_cache_path, embed_key
from ragmeter.embed.identity import is_plain, model_identity, vectors_for
from ragmeter.embed.metrics import (
    EMBED_METRICS,
    EmbedMetric,
    SemanticContextPrecision,
    SemanticContextRecall,
    SemanticSimilarity,
    load_default_embedder,
)
from ragmeter.embed.protocol import DEFAULT_EMBED_MODEL, Embedder, FunctionEmbedder, Vector
from ragmeter.embed.runner import (
    EmbedEstimate,
    EmbedOptions,
    EmbedRun,
    arun_embeddings,
    estimate_embeddings,
    run_embeddings,
)
from ragmeter.embed.similarity import DEFAULT_MATCH_THRESHOLD, cosine

__all__ = [
    "DEFAULT_EMBED_MODEL",
    "DEFAULT_MATCH_THRESHOLD",
    "EMBED_METRICS",
    "EmbedCache",
    "EmbedEstimate",
    "EmbedMetric",
    "EmbedOptions",
    "EmbedRun",
    "Embedder",
    "FunctionEmbedder",
    "SemanticContextPrecision",
    "SemanticContextRecall",
    "SemanticSimilarity",
    "Vector",
    "arun_embeddings",
    "cosine",
    "default_embed_cache_path",
    "embed_key",
    "estimate_embeddings",
    "is_plain",
    "load_default_embedder",
    "model_identity",
    "run_embeddings",
    "vectors_for",
]
