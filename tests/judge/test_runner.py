"""Judge execution: fake judges that answer well, badly, slowly, or fail."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from ragmeter.errors import InvalidInputError
from ragmeter.judge import (
    AnswerRelevancy,
    Correctness,
    Faithfulness,
    FunctionJudge,
    JudgeCache,
    JudgeOptions,
    JudgeReply,
    Message,
    TransientJudgeError,
    arun_judges,
    estimate_judges,
    parse_verdict,
    run_judges,
)
from ragmeter.judge.metrics import VerdictError
from ragmeter.schema import RagSample


def _samples(n: int = 6) -> list[RagSample]:
    return [
        RagSample(
            id=f"s{i}",
            user_input=f"question {i}?",
            response=f"answer {i}",
            retrieved_contexts=[f"context {i}"],
            reference=f"answer {i}",
        )
        for i in range(n)
    ]


def _score_from_prompt(messages: Sequence[Message]) -> str:
    # A deterministic "model": the score depends on the sample number in the prompt.
    match = re.search(r"answer (\d)", messages[-1].content)
    digit = int(match.group(1)) if match else 0
    return json.dumps({"score": digit / 10, "reason": "ok"})


class CountingJudge:
    """An async judge that counts calls and can fail in scripted ways."""

    def __init__(
        self,
        *,
        fail_first: int = 0,
        exc: type[Exception] = TransientJudgeError,
        delay: float = 0.0,
        reply: str | None = None,
    ) -> None:
        self.calls = 0
        self.fail_first = fail_first
        self.exc = exc
        self.delay = delay
        self.reply = reply
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def identity(self) -> dict[str, object]:
        return {"model": "counting", "temperature": 0}

    async def complete(self, messages: Sequence[Message]) -> JudgeReply:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.calls <= self.fail_first:
                raise self.exc("scripted failure")
            text = self.reply if self.reply is not None else _score_from_prompt(messages)
            return JudgeReply(text, input_tokens=10, output_tokens=5)
        finally:
            self.in_flight -= 1


def test_good_judge_scores_every_sample() -> None:
    judge = CountingJudge()
    run = run_judges(_samples(), [Faithfulness(judge=judge)])
    assert run.calls == 6 and run.cache_hits == 0
    assert run.scores["s3"]["judge_faithfulness"] == pytest.approx(0.3)
    assert run.input_tokens == 60 and run.output_tokens == 30
    assert not run.incomplete


def test_garbage_reply_is_none_with_reason_never_nan() -> None:
    judge = CountingJudge(reply="I think it's pretty good!")
    run = run_judges(_samples(2), [AnswerRelevancy(judge=judge)])
    assert run.scores["s0"]["judge_answer_relevancy"] is None
    assert "unparseable verdict" in run.reasons["s0"]["judge_answer_relevancy"]


@pytest.mark.parametrize(
    "text", ["1.5", '{"score": -0.1}', '{"reason": "x"}', "NaN", "true", '"0.5"']
)
def test_parse_verdict_rejects_out_of_range_and_non_numbers(text: str) -> None:
    with pytest.raises(VerdictError):
        parse_verdict(text)


def test_parse_verdict_accepts_fenced_json() -> None:
    assert parse_verdict('```json\n{"score": 0.4}\n```') == 0.4


def test_transient_errors_are_retried_then_succeed() -> None:
    judge = CountingJudge(fail_first=2)
    run = run_judges(_samples(1), [Faithfulness(judge=judge)], options=JudgeOptions(backoff=0.001))
    assert run.scores["s0"]["judge_faithfulness"] == 0.0
    assert run.calls == 3  # two failures + one success, all actually sent


def test_rate_limit_error_by_name_is_retried() -> None:
    class RateLimitError(Exception):
        pass

    judge = CountingJudge(fail_first=1, exc=RateLimitError)
    run = run_judges(_samples(1), [Faithfulness(judge=judge)], options=JudgeOptions(backoff=0.001))
    assert run.scores["s0"]["judge_faithfulness"] is not None


def test_permanent_errors_are_not_retried() -> None:
    judge = CountingJudge(fail_first=100, exc=ValueError)
    run = run_judges(_samples(1), [Faithfulness(judge=judge)], options=JudgeOptions(backoff=0.001))
    assert run.calls == 1
    assert run.scores["s0"]["judge_faithfulness"] is None
    assert "ValueError" in run.reasons["s0"]["judge_faithfulness"]


def test_retries_exhausted_gives_none_with_reason() -> None:
    judge = CountingJudge(fail_first=100)
    run = run_judges(
        _samples(1), [Faithfulness(judge=judge)], options=JudgeOptions(retries=2, backoff=0.001)
    )
    assert run.calls == 3
    assert "after 3 attempt(s)" in run.reasons["s0"]["judge_faithfulness"]


def test_timeout_is_enforced() -> None:
    judge = CountingJudge(delay=5.0)
    run = run_judges(
        _samples(1),
        [Faithfulness(judge=judge)],
        options=JudgeOptions(timeout=0.05, retries=1, backoff=0.001),
    )
    assert run.scores["s0"]["judge_faithfulness"] is None
    assert "timed out" in run.reasons["s0"]["judge_faithfulness"]


def test_concurrency_limit_holds_under_slow_judge() -> None:
    judge = CountingJudge(delay=0.02)
    run = run_judges(_samples(12), [Faithfulness(judge=judge)], options=JudgeOptions(concurrency=3))
    assert judge.max_in_flight <= 3
    assert judge.max_in_flight >= 2  # it did run concurrently
    assert all(row["judge_faithfulness"] is not None for row in run.scores.values())


def test_cache_serves_a_rerun_entirely(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "c.sqlite")
    judge = CountingJudge()
    first = run_judges(_samples(), [Faithfulness(judge=judge)], cache=cache)
    second = run_judges(_samples(), [Faithfulness(judge=judge)], cache=cache)
    assert first.calls == 6 and second.calls == 0 and second.cache_hits == 6
    assert first.scores == second.scores


def test_cache_key_changes_with_model_identity(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "c.sqlite")
    run_judges(
        _samples(2), [Faithfulness(judge=FunctionJudge(_score_from_prompt, model="a"))], cache=cache
    )
    other = run_judges(
        _samples(2), [Faithfulness(judge=FunctionJudge(_score_from_prompt, model="b"))], cache=cache
    )
    assert other.cache_hits == 0 and other.calls == 2


def test_cache_hits_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    script = textwrap.dedent(
        f"""
        import json
        from ragmeter.judge import Faithfulness, FunctionJudge, JudgeCache, run_judges
        from ragmeter.schema import RagSample
        samples = [
            RagSample(id=f"s{{i}}", response=f"a{{i}}", retrieved_contexts=["c"])
            for i in range(4)
        ]
        judge = FunctionJudge(lambda m: '{{"score": 0.5}}', model="proc")
        run = run_judges(samples, [Faithfulness(judge=judge)], cache=JudgeCache({str(path)!r}))
        print(json.dumps([run.calls, run.cache_hits]))
        """
    )
    outs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", script], check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(2)
    ]
    assert outs == [[4, 0], [0, 4]]


def test_budget_cap_stops_cleanly_and_marks_incomplete() -> None:
    judge = CountingJudge()
    run = run_judges(
        _samples(10), [Faithfulness(judge=judge)], options=JudgeOptions(concurrency=1, max_calls=4)
    )
    assert judge.calls == 4 and run.calls == 4
    assert run.incomplete and "call budget of 4" in (run.stop_reason or "")
    missing = [s for s, row in run.scores.items() if row["judge_faithfulness"] is None]
    assert len(missing) == 6
    assert all(run.reasons[s]["judge_faithfulness"] == "budget exhausted" for s in missing)


def test_token_budget() -> None:
    judge = CountingJudge()
    run = run_judges(
        _samples(10),
        [Faithfulness(judge=judge)],
        options=JudgeOptions(concurrency=1, max_tokens=45),
    )
    assert run.calls == 3  # 15 tokens a call: stops once 45 are used
    assert run.incomplete


def test_dry_run_estimates_without_calling(tmp_path: Path) -> None:
    judge = CountingJudge()
    cache = JudgeCache(tmp_path / "c.sqlite")
    run_judges(_samples(2), [Faithfulness(judge=judge)], cache=cache)
    est = estimate_judges(
        _samples(5), [Faithfulness(judge=judge), Correctness(judge=judge)], cache=cache
    )
    assert judge.calls == 2  # the dry run sent nothing
    assert est.cached == 2 and est.calls == 8 and est.input_tokens > 0


def test_repeats_report_spread() -> None:
    replies = iter(['{"score": 0.2}', '{"score": 0.6}', '{"score": 0.4}'])
    judge = FunctionJudge(lambda m: next(replies), model="noisy")
    run = run_judges(
        _samples(1), [Faithfulness(judge=judge, repeats=3)], options=JudgeOptions(concurrency=1)
    )
    assert run.scores["s0"]["judge_faithfulness"] == pytest.approx(0.4)
    spread = run.spread["s0"]["judge_faithfulness"]
    assert spread["n"] == 3 and spread["min"] == 0.2 and spread["max"] == 0.6


def test_samples_lacking_fields_are_none_with_reason() -> None:
    judge = CountingJudge()
    samples = [RagSample(id="x", response="a")]  # no reference
    run = run_judges(samples, [Correctness(judge=judge)])
    assert run.scores["x"]["judge_correctness"] is None
    assert "reference" in run.reasons["x"]["judge_correctness"]
    assert judge.calls == 0


def test_cancel_half_way_leaves_no_background_task() -> None:
    judge = CountingJudge(delay=10.0)

    async def main() -> int:
        task = asyncio.ensure_future(
            arun_judges(
                _samples(8), [Faithfulness(judge=judge)], options=JudgeOptions(concurrency=4)
            )
        )
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return len(others)

    assert asyncio.run(main()) == 0
    assert judge.in_flight == 0


def test_run_judges_works_inside_a_running_loop() -> None:
    async def main() -> float | None:
        run = run_judges(_samples(1), [Faithfulness(judge=CountingJudge())])
        return run.scores["s0"]["judge_faithfulness"]

    assert asyncio.run(main()) == 0.0


def test_bad_judge_and_options_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="needs a judge"):
        Faithfulness(judge=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="repeats must be"):
        Faithfulness(judge=CountingJudge(), repeats=0)
    with pytest.raises(InvalidInputError, match="concurrency must be"):
        JudgeOptions(concurrency=0)
