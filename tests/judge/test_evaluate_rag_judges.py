"""Judge metrics inside evaluate_rag: one report, honest missing values, cache counters."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.language_models import FakeListChatModel
from ragmeter_langchain import judge as langchain_judge

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.judge import (
    AnswerRelevancy,
    Correctness,
    Faithfulness,
    FunctionJudge,
    JudgeOptions,
)

SAMPLES = [
    {
        "id": "a",
        "user_input": "capital of France?",
        "response": "Paris",
        "reference": "Paris",
        "retrieved_contexts": ["Paris is the capital of France."],
    },
    {
        "id": "b",
        "user_input": "2 + 2?",
        "response": "five",
        "reference": "four",
        "retrieved_contexts": ["2 + 2 = 4"],
    },
    {
        "id": "c",
        "user_input": "no reference here",
        "response": "something",
        "retrieved_contexts": ["ctx"],
    },
]


def _judge(reply: str = '{"score": 0.5}') -> FunctionJudge:
    return FunctionJudge(lambda messages: reply, model="fixed")


def test_judge_and_lexical_metrics_in_one_report(tmp_path: Path) -> None:
    judge = _judge()
    report = evaluate_rag(
        SAMPLES,
        metrics=["token_f1", Faithfulness(judge=judge), Correctness(judge=judge)],
        judge_cache=tmp_path / "cache.sqlite",
    )
    assert report.metrics["token_f1"] == pytest.approx(0.5)
    assert report.metrics["judge_faithfulness"] == 0.5
    assert report.coverage["judge_faithfulness"] == 3
    # Correctness needs a reference: sample c is None (missing), never 0 or NaN.
    assert report.per_sample["c"]["judge_correctness"] is None
    assert report.coverage["judge_correctness"] == 2
    assert report.summary("judge_correctness").missing == 1
    assert "reference" in report.details["c"]["judge_correctness"]["reason"]
    assert report.judge_calls == 5 and report.judge_cache_hits == 0


def test_second_run_is_served_from_the_cache(tmp_path: Path) -> None:
    model = FakeListChatModel(responses=['{"score": 1}'])
    metrics = [AnswerRelevancy(judge=langchain_judge(model))]
    first = evaluate_rag(SAMPLES, metrics=metrics, judge_cache=tmp_path / "c.sqlite")
    second = evaluate_rag(SAMPLES, metrics=metrics, judge_cache=tmp_path / "c.sqlite")
    assert (first.judge_calls, first.judge_cache_hits) == (3, 0)
    assert (second.judge_calls, second.judge_cache_hits) == (0, 3)
    assert first.metrics == second.metrics


def test_no_cache_when_judge_cache_is_none() -> None:
    report = evaluate_rag(SAMPLES, metrics=[Faithfulness(judge=_judge())], judge_cache=None)
    again = evaluate_rag(SAMPLES, metrics=[Faithfulness(judge=_judge())], judge_cache=None)
    assert report.judge_calls == again.judge_calls == 3


def test_garbage_verdicts_are_missing_not_nan(tmp_path: Path) -> None:
    report = evaluate_rag(
        SAMPLES, metrics=[Faithfulness(judge=_judge("looks fine to me"))], judge_cache=None
    )
    assert "judge_faithfulness" not in report.metrics  # not a 0.0 that means nothing
    assert all(row["judge_faithfulness"] is None for row in report.per_sample.values())
    assert "scored no sample" in report.extra["not_computed"]["judge_faithfulness"]
    assert "unparseable verdict" in report.details["a"]["judge_faithfulness"]["reason"]
    assert any("scored no sample" in w for w in report.warnings)


def test_budget_marks_the_report_incomplete() -> None:
    report = evaluate_rag(
        SAMPLES,
        metrics=[Faithfulness(judge=_judge())],
        judge_cache=None,
        judge_options=JudgeOptions(concurrency=1, max_calls=1),
    )
    assert report.incomplete and report.judge_calls == 1
    assert report.coverage["judge_faithfulness"] == 1
    assert report.to_dict()["extra"]["stop_reason"].startswith("call budget of 1")


def test_judge_metric_no_sample_can_satisfy_is_refused_up_front() -> None:
    calls: list[object] = []
    judge = FunctionJudge(lambda m: calls.append(m) or '{"score": 1}', model="x")
    with pytest.raises(InvalidInputError, match="judge_correctness needs reference, response"):
        evaluate_rag([SAMPLES[2]], metrics=[Correctness(judge=judge)], judge_cache=None)
    assert calls == []


def test_repeated_sample_ids_are_kept_apart() -> None:
    report = evaluate_rag(
        [SAMPLES[0], SAMPLES[0]],
        metrics=["exact_match", Faithfulness(judge=_judge())],
        judge_cache=None,
    )
    assert set(report.per_sample) == {"a", "a#2"}
    assert report.per_sample["a#2"]["judge_faithfulness"] == 0.5


def test_progress_callback_sees_every_call() -> None:
    seen: list[tuple[int, int]] = []
    evaluate_rag(
        SAMPLES,
        metrics=[Faithfulness(judge=_judge())],
        judge_cache=None,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen[-1] == (3, 3)


def test_k_values_reach_the_retrieval_metrics_beside_judge_metrics() -> None:
    ranked = [
        {**SAMPLES[0], "retrieved_ids": ["d1", "d2"], "reference_ids": ["d2"]},
        {**SAMPLES[1], "retrieved_ids": ["d3"], "reference_ids": ["d3"]},
    ]
    judge = Faithfulness(judge=_judge())
    report = evaluate_rag(ranked, metrics=["precision", judge], k_values=(1, 2), judge_cache=None)
    alone = evaluate_rag(ranked, metrics=["precision"], k_values=(1, 2))
    assert list(report.metrics) == ["precision@1", "precision@2", "judge_faithfulness"]
    assert {key: report.metrics[key] for key in alone.metrics} == alone.metrics
    assert report.extra["k"] == [1, 2]
    with pytest.warns(DeprecationWarning, match="k_values") as caught:
        old = evaluate_rag(ranked, metrics=["precision", judge], k=2, judge_cache=None)
    assert len(caught) == 1  # once, not again for the judged pass's inner call
    assert (
        old.metrics
        == evaluate_rag(ranked, metrics=["precision", judge], k_values=2, judge_cache=None).metrics
    )
