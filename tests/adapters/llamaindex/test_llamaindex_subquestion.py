"""A real ``SubQuestionQueryEngine`` (offline): one query, two retriever calls.

The engine splits a question into one sub-question per tool and retrieves for each, then
answers from the sub-answers: what reached the LLM is no ranking of documents. A sample
keeps each call's ranking as a stage, has no context ranking and says so (never a
3-word sub-question's ranking passed off as the question's), and scores a stage when one
is named. The LLM is LlamaIndex's ``MockLLM`` taught to emit the sub-question JSON.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.llms import MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import SubQuestionQueryEngine
from llama_index.core.question_gen import LLMQuestionGenerator
from llama_index.core.schema import TextNode
from llama_index.core.tools import QueryEngineTool, ToolMetadata
from ragmeter_llamaindex import RagmeterEventHandler

from ragmeter.errors import InvalidInputError

SUB_QUESTIONS = [
    {"sub_question": "pressure distribution on wings", "tool_name": "wings"},
    {"sub_question": "heat transfer in boundary layers", "tool_name": "heat"},
]


class SubQuestionLLM(MockLLM):
    """``MockLLM`` that answers the question generator's prompt with ``SUB_QUESTIONS``."""

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if "tool_name" in prompt:
            return CompletionResponse(text="```json\n" + json.dumps(SUB_QUESTIONS) + "\n```")
        return CompletionResponse(text="an answer")


def hash_embed(text: str) -> list[float]:
    """A hashed bag of words (deterministic, offline)."""
    vec = [0.0] * 256
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % 256] += 1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


class SlowEmbedding(BaseEmbedding):
    """Awaits a little when embedding a query asynchronously, so gathered calls overlap."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return hash_embed(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        await asyncio.sleep(0.02)
        return hash_embed(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return hash_embed(text)


def engine(cranfield: Any, *, use_async: bool = False) -> SubQuestionQueryEngine:
    corpus = cranfield[0]
    embed = SlowEmbedding(model_name="slow-hash")
    llm = SubQuestionLLM()
    tools = []
    for name, parity in (("wings", 0), ("heat", 1)):
        nodes = [
            TextNode(id_=d, text=t) for i, (d, t) in enumerate(corpus.items()) if i % 2 == parity
        ]
        qe = VectorStoreIndex(nodes, embed_model=embed).as_query_engine(
            llm=llm, similarity_top_k=10, use_async=use_async
        )
        tools.append(QueryEngineTool(qe, ToolMetadata(name=name, description=f"about {name}")))
    return SubQuestionQueryEngine.from_defaults(
        query_engine_tools=tools,
        llm=llm,
        question_gen=LLMQuestionGenerator.from_defaults(llm=llm),
        use_async=use_async,
        verbose=False,
    )


def rankings(cranfield: Any) -> dict[str, list[str]]:
    """What each tool's retriever returns for its sub-question (run without the handler)."""
    out: dict[str, list[str]] = {}
    corpus = cranfield[0]
    for (name, parity), sub in zip((("wings", 0), ("heat", 1)), SUB_QUESTIONS, strict=True):
        nodes = [
            TextNode(id_=d, text=t) for i, (d, t) in enumerate(corpus.items()) if i % 2 == parity
        ]
        index = VectorStoreIndex(nodes, embed_model=SlowEmbedding(model_name="hash"))
        found = index.as_retriever(similarity_top_k=10).retrieve(sub["sub_question"])
        out[name] = [n.node.node_id for n in found]
    return out


def capture(cranfield: Any, **options: Any) -> Any:
    handler = RagmeterEventHandler(**options)
    with handler, instrument_tags({"ragmeter_id": "sq"}):
        engine(cranfield).query("compare wing pressure and heat transfer")
    [sample] = handler.samples
    return sample


def test_each_retriever_call_is_a_stage_and_none_is_the_context(cranfield: Any) -> None:
    expected = rankings(cranfield)
    sample = capture(cranfield)
    stages = sample.stages or []
    assert [s.name for s in stages] == ["VectorIndexRetriever", "VectorIndexRetriever#2"]
    assert [s.query for s in stages] == [s["sub_question"] for s in SUB_QUESTIONS]
    assert [s.ids for s in stages] == [expected["wings"], expected["heat"]]
    assert all(s.depth == 0 and (s.latency_ms or 0) > 0 for s in stages)
    assert sample.retrieved_ids is None  # the LLM saw sub-answers, not a ranking
    [note] = sample.metadata["capture_errors"]
    assert note.startswith("context: the response's ") and "sub-question" in note
    assert sample.retrieved_contexts  # what the LLM saw is kept for answer metrics


def test_a_named_stage_is_scored(cranfield: Any) -> None:
    expected = rankings(cranfield)
    assert capture(cranfield, stage="VectorIndexRetriever#2").retrieved_ids == expected["heat"]
    handler = RagmeterEventHandler()
    with handler, instrument_tags({"ragmeter_id": "sq"}):
        engine(cranfield).query("compare wing pressure and heat transfer")
    assert handler.to_run(stage="VectorIndexRetriever") == {"sq": expected["wings"]}
    report = handler.evaluate_retrieval({"sq": {expected["wings"][0]: 1}}, k_values=(10,))
    assert report.extra["capture"]["no_context"] == 1
    assert any("(no_context)" in w and "stage=" in w for w in report.warnings)


def test_the_deprecated_options_still_choose(cranfield: Any) -> None:
    expected = rankings(cranfield)
    with pytest.warns(DeprecationWarning):
        assert capture(cranfield, retrieval="first").retrieved_ids == expected["wings"]
    with pytest.warns(DeprecationWarning):
        merged = capture(cranfield, retrieval="merge")
    assert merged.retrieved_ids == list(dict.fromkeys(expected["wings"] + expected["heat"]))
    with pytest.warns(DeprecationWarning):
        nothing = capture(cranfield, retriever_name="BM25Retriever")
    assert nothing.retrieved_ids is None
    assert any(
        "'BM25Retriever' matched no finished retriever call" in n and "VectorIndexRetriever" in n
        for n in nothing.metadata["capture_errors"]
    )


def test_sub_questions_run_concurrently_have_no_context(cranfield: Any) -> None:
    handler = RagmeterEventHandler()
    with handler, instrument_tags({"ragmeter_id": "sq"}):
        asyncio.run(engine(cranfield, use_async=True).aquery("compare wings and heat"))
    [sample] = handler.samples
    assert len(sample.stages or []) == 2 and sample.retrieved_ids is None
    assert any(n.startswith("context: ") for n in sample.metadata["capture_errors"])


def test_bad_options() -> None:
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(InvalidInputError, match="retrieval must be one of 'last', 'first', 'merge'"),
    ):
        RagmeterEventHandler(retrieval="best")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="stage must name a stage"):
        RagmeterEventHandler(stage="")
    with pytest.raises(InvalidInputError, match=r"stage_names\['bm25'\] must be a LlamaIndex"):
        RagmeterEventHandler(stage_names={"bm25": "not a retriever"})
