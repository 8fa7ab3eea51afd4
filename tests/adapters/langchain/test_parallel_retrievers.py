"""Two retrievers running at once (``RunnableParallel``): which one is "last" depends on thread
timing, so no context is picked from them and the sample says so; a step marked with
``ragmeter_langchain.stage`` (fusion in a lambda) is the context.

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
from ragmeter_langchain import RagmeterCallbackHandler, stage

from ragmeter.errors import InvalidInputError

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


def test_concurrent_retrievers_without_a_fused_stage_have_no_context() -> None:
    handler = RagmeterCallbackHandler()
    parallel_chain().invoke("question", config=cfg(handler))
    [sample] = handler.samples
    assert sample.retrieved_ids is None  # never a pick that depends on thread timing
    assert sorted(s.name for s in sample.stages or []) == ["dense", "sparse"]
    [note] = notes(handler)
    assert note.startswith("context: 2 stages produced rankings (dense, sparse) and none")
    assert "they ran concurrently" in note and "ragmeter_langchain.stage('fused')" in note
    report = handler.evaluate_retrieval(QRELS, k_values=(2,))
    [warning] = [w for w in report.warnings if "(no_context)" in w]
    assert "1 captured samples had several stages" in warning and "dense, sparse" in warning
    assert "ragmeter_langchain.stage('fused')" in warning
    assert report.extra["capture"]["no_context"] == 1
    assert report.metrics["ndcg@2"] == 0.0


@pytest.mark.parametrize("retrieval", ["last", "first", "merge"])
def test_the_deprecated_retrieval_option_still_picks_and_notes_the_race(retrieval: Any) -> None:
    with pytest.warns(DeprecationWarning, match="retrieval="):
        handler = RagmeterCallbackHandler(retrieval=retrieval)
    parallel_chain().invoke("question", config=cfg(handler))
    [sample] = handler.samples
    expected = 4 if retrieval == "merge" else 2
    assert sample.retrieved_ids is not None and len(sample.retrieved_ids) == expected
    race = [n for n in notes(handler) if n.startswith("retrieval: ")]
    assert race and "depends on thread timing" in race[0]


def test_concurrent_retrievers_under_asyncio_have_no_context() -> None:
    handler = RagmeterCallbackHandler()
    asyncio.run(parallel_chain().ainvoke("question", config=cfg(handler)))
    assert any(n.startswith("context: ") and "concurrently" in n for n in notes(handler))
    assert handler.samples[0].retrieved_ids is None


def test_naming_one_stage_makes_the_pick_deterministic() -> None:
    handler = RagmeterCallbackHandler(stage="sparse")
    parallel_chain().invoke("question", config=cfg(handler))
    assert handler.samples[0].retrieved_ids == ["b1", "b2"]
    # the sample still says that no context could be identified, but scores what was asked
    assert [n[:9] for n in notes(handler)] == ["context: "]
    assert handler.to_run(stage="dense") == {"q": ["a1", "a2"]}


def rrf(out: dict[str, list[Document]]) -> list[Document]:
    """Reciprocal rank fusion (k = 60) of the two rankings, ties by doc id."""
    score: dict[str, float] = {}
    docs: dict[str, Document] = {}
    for ranking in (out["dense"], out["sparse"]):
        for rank, doc in enumerate(ranking, 1):
            score[str(doc.id)] = score.get(str(doc.id), 0.0) + 1 / (60 + rank)
            docs[str(doc.id)] = doc
    return [docs[d] for d in sorted(score, key=lambda d: (-score[d], d))]


@pytest.mark.parametrize("spelling", ["marker", "function", "decorator"])
def test_fusion_marked_as_a_stage_is_the_context(spelling: str) -> None:
    dense, sparse = pair(meet=True)
    both = RunnableParallel(dense=dense, sparse=sparse)
    if spelling == "marker":
        chain = both | RunnableLambda(rrf) | stage("fused")
    elif spelling == "function":
        chain = both | stage("fused", rrf)
    else:
        chain = both | stage("fused")(rrf)
    handler = RagmeterCallbackHandler()
    fused = chain.invoke("question", config=cfg(handler))
    [sample] = handler.samples
    assert sample.retrieved_ids == [d.id for d in fused] == ["a1", "b1", "a2", "b2"]
    assert notes(handler) == []
    stages = {s.name: s for s in sample.stages or []}
    assert stages["fused"].kind == "fusion" and stages["context"].same_as == "fused"
    assert sorted(stages) == ["context", "dense", "fused", "sparse"]


def test_a_marker_on_something_that_is_not_documents_is_noted() -> None:
    handler = RagmeterCallbackHandler()
    chain = RunnableLambda(lambda q: {"not": "documents"}) | stage("fused")
    chain.invoke("question", config=cfg(handler))
    [sample] = handler.samples
    [fused] = sample.stages or []
    assert fused.ids is None and "not a list of Documents" in (fused.error or "")
    assert any("not a list of Documents" in n for n in notes(handler))


def test_a_bad_stage_marker_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"other than 'context'"):
        stage("context")
    with pytest.raises(InvalidInputError, match="stage kind must be one of"):
        stage("fused", kind="blender")


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
    assert [s.name for s in sample.stages or []] == ["dense", "sparse", "context"]
    assert notes(handler) == []
