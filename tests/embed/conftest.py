"""Deterministic embedders for the embedding-metric tests: hashed bag-of-words vectors
(no model, no network), with call counting and a record of every batch."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

DIM = 32


def bow(text: str, dim: int = DIM) -> list[float]:
    """A hashed bag-of-words vector: word ``w`` adds 1 at ``md5(w) % dim``."""
    vector = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    return vector


@dataclass
class CountingEmbedder:
    """An :class:`~ragmeter.embed.Embedder` over :func:`bow` that records its batches and
    how many batches were in flight at once."""

    model: str = "bow-test"
    delay: float = 0.0
    batches: list[list[str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    @property
    def identity(self) -> dict[str, Any]:
        return {"model": self.model, "dim": DIM}

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            return [bow(t) for t in texts]
        finally:
            self.in_flight -= 1

    @property
    def calls(self) -> int:
        return len(self.batches)

    @property
    def texts(self) -> list[str]:
        return [t for batch in self.batches for t in batch]


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture(autouse=True)
def _isolated_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: Any) -> None:
    # "default" caches go to a fresh directory, never the user's
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def vec() -> Any:
    """:func:`bow` itself, for tests that compute the expected vectors."""
    return bow
