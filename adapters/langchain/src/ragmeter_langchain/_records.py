"""What the handler keeps per root run: a :class:`~ragmeter.capture.RunRecord` with LangChain's
run id, name, tags and model-call count (each step that produced a ranking is the core's
:class:`~ragmeter.capture.StageRecord`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from ragmeter.capture import CaptureConfig, RunRecord, StageRecord

__all__ = ["UNSET", "LangChainRun", "Node", "run_name"]

UNSET: Any = object()
"""A root output not seen yet (``None`` is a real output)."""


class LangChainRun(RunRecord):
    """One root run (an ``invoke``, a ``batch`` input, an ``ainvoke``/``astream``).

    ``key`` is the root's ``run_id.int`` (the sample id when nothing else gives one);
    ``run_ids`` the keys of its open runs (dropped when it ends); ``inputs`` is kept until
    the run ends (a streamed root reports its input only then); ``ignored`` marks a root
    that ``record="tagged"`` does not record (its runs are still tracked, so none of them
    becomes a root of its own).
    """

    __slots__ = (
        "forks",
        "ignored",
        "inputs",
        "key",
        "llm_calls",
        "llm_text",
        "name",
        "run_ids",
        "tags",
    )

    def __init__(
        self,
        config: CaptureConfig,
        key: int,
        name: str | None,
        inputs: Any,
        tags: Any,
        metadata: Any,
    ) -> None:
        meta = metadata if type(metadata) is dict or isinstance(metadata, Mapping) else None
        super().__init__(config, meta=meta)
        self.key = key
        self.name = name
        self.inputs = inputs
        self.tags: list[Any] | None = tags or None
        self.run_ids: list[int] | None = [key]
        self.llm_text: str | None = None
        self.llm_calls = 0
        self.forks: dict[int, int] | None = None  # parallel run key -> its index in this run
        self.ignored = not self.wanted

    def fork_index(self, key: int) -> int:
        """The index of the ``RunnableParallel`` run ``key`` within this run (0, 1, ...): the
        same in every run of one chain (dropped when the run ends)."""
        forks = self.forks
        if forks is None:
            forks = self.forks = {}
        return forks.setdefault(key, len(forks))

    def default_id(self) -> str:
        return str(UUID(int=self.key))

    def framework_metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": str(UUID(int=self.key)), "run_name": self.name}
        if self.tags:
            out["tags"] = [str(t) for t in self.tags]
        if self.llm_calls:
            out["llm_calls"] = self.llm_calls
        return out


Node = tuple[LangChainRun, int, StageRecord | None, StageRecord | None, tuple[tuple[int, str], ...]]
"""An open run: its root's record, how many stages enclose it (itself included), its
:class:`~ragmeter.capture.StageRecord` if it is a stage (a retriever, a marker), the nearest
stage enclosing it, and the ``RunnableParallel`` branches it runs in (``((index of the
parallel run in the root, branch key), ...)``, from LangChain's ``map:key:<key>`` tags). A
plain tuple (a ``NamedTuple`` costs a Python-level ``__new__`` per run); keyed by
``run_id.int`` (``UUID.__hash__`` is Python code; an int hashes in C)."""


def run_name(serialized: Any, kwargs: Mapping[str, Any]) -> str | None:
    """The run's name: ``name=`` (LangChain 1.x), else the serialized name or class path."""
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
