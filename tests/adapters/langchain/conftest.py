"""Fixtures for the LangChain adapter tests; the building blocks live in ``lc_testkit``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import Runnable

from ragmeter.datasets import load_cranfield

sys.path.insert(
    0, str(Path(__file__).parent)
)  # --import-mode=importlib: make lc_testkit importable

from lc_testkit import BM25Retriever, EchoChatModel, rag_chain


@pytest.fixture(scope="session")
def cranfield() -> Any:
    return load_cranfield()


@pytest.fixture(scope="session")
def bm25(cranfield: Any) -> BM25Retriever:
    return BM25Retriever(corpus=cranfield.corpus, k=10)


@pytest.fixture(scope="session")
def judged_queries(cranfield: Any) -> dict[str, str]:
    """Twenty judged Cranfield queries ``{qid: text}``."""
    qids = [q for q in cranfield.qrels if q in cranfield.queries][:20]
    return {q: cranfield.queries[q] for q in qids}


@pytest.fixture
def make_chain(bm25: BM25Retriever) -> Callable[..., Runnable[Any, str]]:
    def make(
        retriever: Runnable[Any, Any] | None = None, llm: Runnable[Any, Any] | None = None
    ) -> Runnable[Any, str]:
        return rag_chain(retriever or bm25, llm or EchoChatModel())

    return make
