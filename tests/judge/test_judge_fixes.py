"""Fixes made while wiring the judge core into the CLI (issue 8, helper H11)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.judged import evaluate_with_judges
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.judge import Faithfulness, FunctionJudge, JudgeOptions, Message, run_judges
from ragmeter.schema import RagSample


def _samples(n: int) -> list[RagSample]:
    # Distinct prompts: identical ones share one judge call since issue 12.
    return [
        RagSample(
            id=f"s{i}",
            user_input=f"q{i}?",
            response=f"a{i}",
            retrieved_contexts=[f"a{i}"],
            reference=f"a{i}",
        )
        for i in range(n)
    ]


class Counting:
    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[Message]) -> str:
        with self._lock:
            self.calls += 1
        return '{"score": 1}'


def test_call_budget_holds_with_a_rate_limit_and_concurrency() -> None:
    # Tasks waiting for the rate limiter used to pass the budget check first, then all
    # send: max_calls=2 sent 5 calls. The budget is now checked after the wait.
    fn = Counting()
    run = run_judges(
        _samples(8),
        [Faithfulness(judge=FunctionJudge(fn))],
        options=JudgeOptions(concurrency=4, requests_per_minute=6000, max_calls=2),
    )
    assert fn.calls == run.calls == 2
    assert run.incomplete
    assert sum(row["judge_faithfulness"] is None for row in run.scores.values()) == 6


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": 0}, r"timeout must be > 0 seconds or None \(no timeout\), got 0"),
        ({"timeout": -1.5}, r"timeout must be > 0 seconds or None \(no timeout\), got -1\.5"),
        ({"max_calls": -1}, r"max_calls must be an int >= 0 or None \(no budget\), got -1"),
        ({"max_tokens": -10}, r"max_tokens must be an int >= 0 or None \(no budget\), got -10"),
        ({"max_calls": True}, r"max_calls must be an int >= 0 or None \(no budget\), got True"),
    ],
)
def test_judge_options_refuse_bad_limits(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        JudgeOptions(**kwargs)  # type: ignore[arg-type]


def test_zero_budget_and_no_timeout_are_valid() -> None:
    opts = JudgeOptions(timeout=None, max_calls=0, max_tokens=0)
    fn = Counting()
    run = run_judges(_samples(2), [Faithfulness(judge=FunctionJudge(fn))], options=opts)
    assert fn.calls == 0 and run.incomplete


def test_other_metrics_none_scores_the_default_metrics_too() -> None:
    judge = FunctionJudge(Counting())
    samples = _samples(3)
    report = evaluate_with_judges(
        samples,
        judge_metrics=[Faithfulness(judge=judge)],
        other_metrics=None,
        evaluate=evaluate_rag,
        judge_cache=None,
    )
    plain = evaluate_rag(samples)  # what metrics=None gives without a judge
    assert set(report.metrics) == set(plain.metrics) | {"judge_faithfulness"}
    assert report.metrics["exact_match"] == plain.metrics["exact_match"] == 1.0
    assert report.extra["not_computed"] == plain.extra["not_computed"]
    assert report.metrics["judge_faithfulness"] == 1.0
    judge_only = evaluate_with_judges(
        samples,
        judge_metrics=[Faithfulness(judge=judge)],
        other_metrics=[],
        evaluate=evaluate_rag,
        judge_cache=None,
    )
    assert list(judge_only.metrics) == ["judge_faithfulness"]
