"""Each framework's own fake/mock model works as a ragmeter judge, with caching."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from haystack import component
from haystack.dataclasses import ChatMessage
from langchain_core.language_models import FakeListChatModel
from llama_index.core.llms import MockLLM
from ragmeter_haystack import judge as haystack_judge
from ragmeter_langchain import judge as langchain_judge
from ragmeter_llamaindex import judge as llamaindex_judge

from ragmeter.judge import Correctness, Faithfulness, JudgeCache, run_judges
from ragmeter.schema import RagSample


def _samples() -> list[RagSample]:
    return [
        RagSample(
            id=f"s{i}",
            user_input="q?",
            response=f"answer {i}",
            retrieved_contexts=["ctx"],
            reference="answer",
        )
        for i in range(3)
    ]


@component
class FakeChatGenerator:
    """A minimal Haystack chat generator answering a fixed verdict, reporting usage."""

    def __init__(self, reply: str = '{"score": 0.7}') -> None:
        self.reply = reply
        self.calls = 0
        self.seen: list[list[ChatMessage]] = []

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
        self.calls += 1
        self.seen.append(messages)
        return {
            "replies": [
                ChatMessage.from_assistant(
                    self.reply, meta={"usage": {"prompt_tokens": 11, "completion_tokens": 3}}
                )
            ]
        }


def test_langchain_chat_model_as_judge(tmp_path: Path) -> None:
    model = FakeListChatModel(responses=['{"score": 0.9, "reason": "supported"}'])
    j = langchain_judge(model)
    assert j.identity["framework"] == "langchain"
    cache = JudgeCache(tmp_path / "c.sqlite")
    run = run_judges(_samples(), [Faithfulness(judge=j)], cache=cache)
    assert run.calls == 3
    assert all(row["judge_faithfulness"] == 0.9 for row in run.scores.values())
    again = run_judges(_samples(), [Faithfulness(judge=j)], cache=cache)
    assert again.calls == 0 and again.cache_hits == 3


def test_llamaindex_mock_llm_as_judge() -> None:
    # MockLLM echoes its prompt; messages_to_prompt makes that prompt a verdict.
    llm = MockLLM(messages_to_prompt=lambda msgs: '{"score": 0.25}')
    j = llamaindex_judge(llm)
    assert j.identity["class"] == "MockLLM"
    run = run_judges(_samples(), [Correctness(judge=j)])
    assert [row["judge_correctness"] for row in run.scores.values()] == [0.25] * 3


def test_llamaindex_echoing_mock_is_not_a_verdict() -> None:
    run = run_judges(_samples()[:1], [Faithfulness(judge=llamaindex_judge(MockLLM()))])
    assert run.scores["s0"]["judge_faithfulness"] is None
    assert "unparseable verdict" in run.reasons["s0"]["judge_faithfulness"]


def test_haystack_chat_generator_as_judge() -> None:
    gen = FakeChatGenerator()
    j = haystack_judge(gen)
    assert j.identity["class"] == "FakeChatGenerator"
    assert j.identity["reply"] == '{"score": 0.7}'  # init params are part of the cache key
    run = run_judges(_samples(), [Faithfulness(judge=j)])
    assert gen.calls == 3
    assert gen.seen[0][0].is_from("system") and "Contexts:" in (gen.seen[0][1].text or "")
    assert run.input_tokens == 33 and run.output_tokens == 9
    assert all(row["judge_faithfulness"] == 0.7 for row in run.scores.values())


@pytest.mark.parametrize("factory", [langchain_judge, llamaindex_judge, haystack_judge])
def test_wrong_object_is_refused(factory: Any) -> None:
    with pytest.raises(TypeError, match="judge\\(\\) needs"):
        factory(object())


@pytest.mark.parametrize("factory", [langchain_judge, llamaindex_judge, haystack_judge])
def test_wrong_object_is_a_ragmeter_error_too(factory: Any) -> None:
    from ragmeter.errors import RagmeterError

    with pytest.raises(RagmeterError):
        factory(42)


def test_identity_drops_secrets_but_keeps_sampling_settings() -> None:
    from ragmeter.judge import clean_identity

    params = {
        "api_key": "sk-x",
        "openai_api_key": "sk-y",
        "max_tokens": 64,
        "temperature": 0.2,
        "model_kwargs": {"top_p": 0.9, "auth_token": "t"},
        "stop": ("\n",),
    }
    assert clean_identity(params) == {
        "max_tokens": 64,
        "temperature": 0.2,
        "model_kwargs": {"top_p": 0.9},
        "stop": ["\n"],
    }
