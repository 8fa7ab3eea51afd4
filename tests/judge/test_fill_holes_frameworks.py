"""fill_holes with each framework's own fake model as the judge, through the adapters'
judge bridges: LangChain's FakeListChatModel, LlamaIndex's MockLLM, a Haystack chat
generator component. No network."""

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
from sklearn.metrics import cohen_kappa_score

from ragmeter import fill_holes
from ragmeter.judge import JudgeCache

QUERIES = {"q1": "wing flutter at supersonic speed", "q2": "boundary layer transition"}
CORPUS = {
    f"d{i}": f"passage number {i} about {'wings' if i % 2 else 'boundary layers'}"
    for i in range(12)
}
QRELS = {"q1": {"d1": 2, "d3": 1, "d5": 0, "d7": 3}, "q2": {"d2": 3, "d4": 0, "d6": 1}}
RUNS = {
    "a": {"q1": ["d1", "d9", "d3", "d11", "d5"], "q2": ["d2", "d8", "d4", "d10", "d0"]},
    "b": {"q1": ["d9", "d7", "d11", "d1", "d0"], "q2": ["d10", "d6", "d8", "d2", "d4"]},
}
HOLES = {"q1": {"d9", "d11", "d0"}, "q2": {"d8", "d10", "d0"}}


def _passage_grade(messages_text: str) -> int:
    """The grade a stand-in model gives: the passage's number modulo 4."""
    passage = messages_text.split("Passage: passage number ", 1)[1]
    return int(passage.split(" ", 1)[0]) % 4


def test_langchain_fake_chat_model_fills_holes_and_counts_bad_replies(tmp_path: Path) -> None:
    model = FakeListChatModel(responses=['{"grade": 2}', "I think it is relevant."])
    j = langchain_judge(model)
    cache = JudgeCache(tmp_path / "lc.sqlite")
    result = fill_holes(
        RUNS,
        QRELS,
        judge=j,
        corpus=CORPUS,
        queries=QUERIES,
        depth=5,
        sample_size=0,
        judge_cache=cache,
    )
    assert {q: set(d) for q, d in result.holes.items()} == HOLES
    assert result.calls == 6 and result.n_filled == 3 and result.bad_replies == 3
    assert {g for docs in result.judged_by_model.values() for g in docs.values()} == {2}
    assert all(
        why.startswith("unparseable verdict") for d in result.failed.values() for why in d.values()
    )
    again = fill_holes(
        RUNS,
        QRELS,
        judge=j,
        corpus=CORPUS,
        queries=QUERIES,
        depth=5,
        sample_size=0,
        judge_cache=cache,
    )
    assert again.calls == 0 and again.cache_hits == 6 and again.qrels == result.qrels
    cache.close()


def test_llamaindex_mock_llm_fills_holes_and_is_measured() -> None:
    # MockLLM echoes its prompt; messages_to_prompt makes that prompt the model's grade.
    llm = MockLLM(
        messages_to_prompt=lambda msgs: f'{{"grade": {_passage_grade(str(msgs[-1].content))}}}'
    )
    result = fill_holes(
        RUNS,
        QRELS,
        judge=llamaindex_judge(llm),
        corpus=CORPUS,
        queries=QUERIES,
        depth=5,
        sample_size=10,
        judge_cache=None,
    )
    for q, docs in result.judged_by_model.items():
        assert docs == {d: int(d[1:]) % 4 for d in HOLES[q]}
    a = result.agreement
    assert a is not None and a.n == a.asked == 7  # every judged doc of the top 5
    human = [p[2] for p in a.pairs]
    judge = [p[3] for p in a.pairs]
    assert judge == [int(p[1][1:]) % 4 for p in a.pairs]
    assert a.kappa_quadratic == pytest.approx(
        cohen_kappa_score(human, judge, weights="quadratic"), abs=1e-12
    )
    assert a.tau is not None and set(a.system_scores) == {"a", "b"}


@component
class GradingChatGenerator:
    """A Haystack chat generator that grades by passage number and reports token usage."""

    def __init__(self) -> None:
        self.calls = 0

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
        self.calls += 1
        grade = _passage_grade(messages[-1].text or "")
        usage = {"prompt_tokens": 100, "completion_tokens": 5}
        return {
            "replies": [ChatMessage.from_assistant(f'{{"grade": {grade}}}', meta={"usage": usage})]
        }


def test_haystack_chat_generator_fills_holes_with_token_cost() -> None:
    generator = GradingChatGenerator()
    result = fill_holes(
        RUNS["a"],
        QRELS,
        judge=haystack_judge(generator),
        corpus=CORPUS,
        queries=QUERIES,
        depth=5,
        sample_size=0,
        judge_cache=None,
    )
    assert generator.calls == result.calls == 5  # run "a" alone: d9, d11 and d8, d10, d0
    assert result.input_tokens == 500 and result.output_tokens == 25
    assert result.judged_by_model == {"q1": {"d9": 1, "d11": 3}, "q2": {"d8": 0, "d10": 2, "d0": 0}}
    assert all(type(g) is int for docs in result.qrels.values() for g in docs.values())
    assert [s.name for s in result.systems] == ["run"]


def test_dry_run_sends_nothing_to_the_framework_model() -> None:
    generator = GradingChatGenerator()
    result = fill_holes(
        RUNS,
        QRELS,
        judge=haystack_judge(generator),
        corpus=CORPUS,
        queries=QUERIES,
        depth=5,
        dry_run=True,
        judge_cache=None,
    )
    assert generator.calls == 0 and result.estimate is not None
    assert result.estimate.calls == 6 + 7
