"""A real ``SubQuestionQueryEngine`` (offline): one query, two retriever calls.

The engine splits a question into one sub-question per tool and retrieves for each; a
sample must keep each call's ranking (``metadata["retriever_calls"]``) and score the one
``retrieval=`` / ``retriever_name=`` pick (LangChain's vocabulary), never a concatenation
of two top-10s that no retriever returned. The LLM is LlamaIndex's ``MockLLM`` taught to
emit the sub-question JSON.
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


def test_each_retriever_call_keeps_its_own_ranking(cranfield: Any) -> None:
    expected = rankings(cranfield)
    sample = capture(cranfield)
    calls = sample.metadata["retriever_calls"]
    assert [c["query"] for c in calls] == [s["sub_question"] for s in SUB_QUESTIONS]
    assert [c["ids"] for c in calls] == [expected["wings"], expected["heat"]]
    assert [c["name"] for c in calls] == ["VectorIndexRetriever"] * 2
    assert all(c["depth"] == 0 and c["latency_ms"] > 0 for c in calls)
    # the default is LangChain's: the last call to finish, one real ranking of 10
    assert [c["used"] for c in calls] == [False, True]
    assert sample.retrieved_ids == expected["heat"]
    assert sample.metadata["node_ids"] == expected["heat"]
    assert "capture_errors" not in sample.metadata  # sequential: the pick is deterministic


def test_first_and_merge_make_the_choice_explicit(cranfield: Any) -> None:
    expected = rankings(cranfield)
    assert capture(cranfield, retrieval="first").retrieved_ids == expected["wings"]
    merged = capture(cranfield, retrieval="merge")
    assert merged.retrieved_ids == list(dict.fromkeys(expected["wings"] + expected["heat"]))
    assert [c["used"] for c in merged.metadata["retriever_calls"]] == [True, True]


def test_retriever_name_that_matches_nothing_is_noted(cranfield: Any) -> None:
    sample = capture(cranfield, retriever_name="BM25Retriever")
    assert sample.retrieved_ids is None
    [note] = sample.metadata["capture_errors"]
    assert "'BM25Retriever' matched no finished retriever call" in note
    assert "VectorIndexRetriever" in note


def test_sub_questions_run_concurrently_are_noted(cranfield: Any) -> None:
    handler = RagmeterEventHandler()
    with handler, instrument_tags({"ragmeter_id": "sq"}):
        asyncio.run(engine(cranfield, use_async=True).aquery("compare wings and heat"))
    [sample] = handler.samples
    assert len(sample.metadata["retriever_calls"]) == 2
    [note] = sample.metadata["capture_errors"]
    assert "ran concurrently" in note and "retriever_name=" in note


def test_bad_retrieval_option() -> None:
    with pytest.raises(
        InvalidInputError, match="retrieval must be one of 'last', 'first', 'merge'"
    ):
        RagmeterEventHandler(retrieval="best")  # type: ignore[arg-type]
