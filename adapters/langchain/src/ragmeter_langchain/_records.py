"""What the handler collects per root run: its retriever calls and the root record.

Plain ``__slots__`` classes (a dozen are touched per invocation, so they stay cheap), plus
the rule that turns the chosen retriever calls into one ranking.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from ragmeter.capture import call_record
from ragmeter.evaluation.retrieval import dedupe_best_rank

__all__ = ["UNSET", "Call", "Node", "Root", "ranking", "run_name"]

UNSET: Any = object()
"""A root output not seen yet (``None`` is a real output)."""


class Call:
    """One retriever call inside a root run (kept for drill-down)."""

    __slots__ = (
        "depth",
        "end",
        "error",
        "ids",
        "name",
        "query",
        "seq",
        "start",
        "texts",
        "thread",
    )

    def __init__(self, name: str | None, query: Any, depth: int) -> None:
        self.name = name
        self.query = query if isinstance(query, str) else None
        self.depth = depth
        self.start = time.perf_counter()
        self.end: float | None = None
        self.thread = threading.get_ident()
        self.ids: list[str] | None = None
        self.texts: list[str] | None = None
        self.error: str | None = None
        self.seq = -1

    def to_dict(self, used: bool) -> dict[str, Any]:
        return call_record(self, used)


class Root:
    """What is collected for one root run until it ends."""

    __slots__ = (
        "calls",
        "errors",
        "input_tokens",
        "inputs",
        "llm_calls",
        "llm_text",
        "metadata",
        "name",
        "output",
        "output_tokens",
        "run_id",
        "run_ids",
        "start",
        "tags",
    )

    def __init__(
        self, run_id: UUID, name: str | None, inputs: Any, tags: Any, metadata: Any
    ) -> None:
        self.run_id = run_id
        self.name = name
        self.inputs = inputs
        self.tags: list[Any] = list(tags) if tags else []
        self.metadata: dict[str, Any] = dict(metadata) if isinstance(metadata, dict) else {}
        self.start = time.perf_counter()
        self.run_ids: list[int] = [run_id.int]
        self.calls: list[Call] = []
        self.errors: list[str] = []
        self.llm_text: str | None = None
        self.llm_calls = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.output: Any = UNSET


Node = tuple[Root, int, "Call | None"]
"""An open run: its root's record, how many retrievers it is nested in (itself included),
and its retriever call if it is a retriever. Keyed by ``run_id.int`` (``UUID.__hash__`` is
Python code; an int hashes in C)."""


def run_name(serialized: Any, kwargs: Mapping[str, Any]) -> str | None:
    name = kwargs.get("name")
    if isinstance(name, str):
        return name
    if isinstance(serialized, dict):
        if isinstance(serialized.get("name"), str):
            return str(serialized["name"])
        ids = serialized.get("id")
        if isinstance(ids, list) and ids:
            return str(ids[-1])
    return None


def ranking(used: list[Call]) -> tuple[list[str], list[str]]:
    """The chosen calls' documents as one ranking: each id once, at its best rank.

    Chunks of one source (or one document from several merged calls) collapse to one id;
    every distinct ``(id, text)`` is kept in ``texts``, in rank order (what the chain saw).
    """
    pairs = [pair for call in used for pair in zip(call.ids or (), call.texts or (), strict=True)]
    ids = dedupe_best_rank(doc_id for doc_id, _ in pairs)
    if len(ids) == len(pairs):
        return ids, [text for _, text in pairs]
    return ids, [text for _, text in dict.fromkeys(pairs)]
