"""Two retrievers running at once (``RunnableParallel``): which ranking ``retrieval="last"``
(or ``"first"``, ``"merge"``) scores depends on thread timing, so the sample says so.

The retrievers meet at a barrier, so both calls are guaranteed to be in flight together;
the controls run the same retrievers one after the other, where the pick is deterministic.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnableParallel
from pydantic import ConfigDict
from ragmeter_langchain import RagmeterCallbackHandler

QRELS = {"q": {"a1": 1, "b1": 1}}


class Meeting(BaseRetriever):
    """Returns fixed documents; with a barrier, waits until its partner is running too."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    ids: list[str]
    barrier: Any = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.barrier is not None:
            self.barrier.wait(timeout=10)
        return [Document(i, id=i) for i in self.ids]


def pair(meet: bool) -> tuple[Any, Any]:
    barrier = threading.Barrier(2) if meet else None
    dense = Meeting(ids=["a1", "a2"], barrier=barrier).with_config(run_name="dense")
    sparse = Meeting(ids=["b1", "b2"], barrier=barrier).with_config(run_name="sparse")
    return dense, sparse


def parallel_chain() -> Any:
    dense, sparse = pair(meet=True)
    both = RunnableParallel(dense=dense, sparse=sparse)
    return both | RunnableLambda(lambda out: out["dense"] + out["sparse"])


def sequential_chain() -> Any:
    dense, sparse = pair(meet=False)
    return dense | RunnableLambda(lambda docs: docs[0].page_content) | sparse


def cfg(handler: RagmeterCallbackHandler) -> dict[str, Any]:
    return {"callbacks": [handler], "metadata": {"ragmeter_id": "q"}}


def notes(handler: RagmeterCallbackHandler) -> list[str]:
    [sample] = handler.samples
    return list(sample.metadata.get("capture_errors", []))


@pytest.mark.parametrize("retrieval", ["last", "first", "merge"])
def test_concurrent_retrievers_are_noted_and_reach_the_report(retrieval: Any) -> None:
    handler = RagmeterCallbackHandler(retrieval=retrieval)
    parallel_chain().invoke("question", config=cfg(handler))
    [sample] = handler.samples
    calls = sample.metadata["retriever_calls"]
    assert sorted(c["name"] for c in calls) == ["dense", "sparse"]
    assert sum(c["used"] for c in calls) == (2 if retrieval == "merge" else 1)
    [note] = notes(handler)
    assert note.startswith("retrieval: 2 retriever calls (dense, sparse) ran concurrently")
    assert "depends on thread timing" in note and "retriever_name=" in note
    report = handler.evaluate_retrieval(QRELS, k_values=(2,))
    assert any("ran concurrently" in w for w in report.warnings)
    assert report.extra["capture"]["capture_errors"] == 1


def test_concurrent_retrievers_under_asyncio_are_noted() -> None:
    handler = RagmeterCallbackHandler()
    asyncio.run(parallel_chain().ainvoke("question", config=cfg(handler)))
    assert any("ran concurrently" in n for n in notes(handler))


def test_naming_one_retriever_makes_the_pick_deterministic() -> None:
    handler = RagmeterCallbackHandler(retriever_name="sparse")
    parallel_chain().invoke("question", config=cfg(handler))
    assert handler.samples[0].retrieved_ids == ["b1", "b2"]
    assert notes(handler) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_retrievers_one_after_the_other_are_not_noted(mode: str) -> None:
    handler = RagmeterCallbackHandler()
    chain = sequential_chain()
    if mode == "sync":
        chain.invoke("question", config=cfg(handler))
    else:
        asyncio.run(chain.ainvoke("question", config=cfg(handler)))
    [sample] = handler.samples
    assert sample.retrieved_ids == ["b1", "b2"]  # the last, deterministically
    assert len(sample.metadata["retriever_calls"]) == 2
    assert notes(handler) == []
