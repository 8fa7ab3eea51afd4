"""Metric families: ranking primitives and the retrieval registry (answer metrics alongside)."""
