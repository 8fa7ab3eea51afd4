"""``ragmeter eval --judge MODULE:FACTORY``: a judge from user code, cached, bounded, honest.

The factory modules are written to ``tmp_path`` and imported the way a user's would be
(from the current directory, or by file path). The judges are fakes whose verdict depends
on the answer in the prompt, so every assertion ties a score to its sample.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from ragmeter import cli
from ragmeter.cli import _progress
from ragmeter.judge import JudgeCache, default_cache_path

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
        "user_input": "colour of the sky?",
        "response": "blue, mostly",
        "retrieved_contexts": ["The sky looks blue."],
    },
]
# Sample c has no reference: correctness applies to a and b only.
N_CALLS = 3 + 3 + 2  # faithfulness, answer_relevancy, correctness

FACTORY_SOURCE = """
import re

from ragmeter.judge import FunctionJudge

CALLS = []
SCORES = {"Paris": 1.0, "five": 0.0}


def verdict(messages):
    CALLS.append(messages)
    answer = re.search(r"Answer:\\n(.*?)\\n\\n", messages[-1].content, re.S).group(1)
    return '{"score": %s, "reason": "fake"}' % SCORES.get(answer, 0.5)


def make_judge():
    return FunctionJudge(verdict, model="fake-verdicts")


def broken_judge():
    def fn(messages):
        CALLS.append(messages)
        raise ValueError("model refused")

    return FunctionJudge(fn, model="broken")


def raising_factory():
    raise RuntimeError("no API key configured")


def not_a_judge():
    return {"model": "gpt"}


NOT_CALLABLE = 42


def langchain_model():
    from langchain_core.language_models import FakeListChatModel

    return FakeListChatModel(responses=['{"score": 0.75}'])


def llamaindex_llm():
    from llama_index.core.llms import MockLLM

    return MockLLM(messages_to_prompt=lambda messages: '{"score": 0.75}')


def haystack_generator():
    from haystack.components.generators.chat import MockChatGenerator

    return MockChatGenerator(responses='{"score": 0.75}')
"""


@click.command(context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def entry(args: tuple[str, ...]) -> None:
    """The console script: ``cli.run`` owns error handling and exit codes."""
    sys.exit(cli.run(list(args)))


class Env:
    """A working directory with data, a factory module and a private cache dir."""

    def __init__(self, root: Path, module: str) -> None:
        self.root = root
        self.module = module
        self.data = root / "data.jsonl"
        self.cache = root / "judge.sqlite"

    def spec(self, factory: str = "make_judge") -> str:
        return f"{self.module}:{factory}"

    @property
    def calls(self) -> list[Any]:
        mod: ModuleType = sys.modules[self.module]
        calls: list[Any] = mod.CALLS
        return calls

    def invoke(self, *args: str) -> Result:
        return CliRunner().invoke(entry, [str(a) for a in args])

    def eval(self, *args: str) -> Result:
        return self.invoke("eval", str(self.data), *args)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    module = f"judges_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{module}.py").write_text(FACTORY_SOURCE)
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / "user-cache"))
    yield Env(tmp_path, module)
    sys.modules.pop(module, None)


def _json(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _row(out: str, metric: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.strip("│ ").startswith(metric + " "))
    return [c.strip() for c in line.strip("│ ").split("│")]


# ---------------------------------------------------------------- scoring and caching


def test_judge_from_a_module_in_the_current_directory(env: Env) -> None:
    result = env.eval("--judge", env.spec(), "--judge-cache", str(env.cache))
    assert result.exit_code == 0, result.stderr
    assert len(env.calls) == N_CALLS
    # metric, mean, median, coverage, better: verdicts 1.0 (a), 0.0 (b), 0.5 (c)
    row = _row(result.stdout, "judge_faithfulness")
    assert row == ["judge_faithfulness", "0.5000", "0.5000", "3/3", "higher"]
    assert _row(result.stdout, "judge_correctness")[1:4] == ["0.5000", "0.5000", "2/3"]
    assert _row(result.stdout, "token_f1")[3] == "2/3"  # deterministic defaults still run
    assert f"judge calls: {N_CALLS} sent, 0 served from the cache (cache {env.cache})" in (
        result.stdout
    )
    assert "judge_correctness: 1 sample(s) not scored: sample lacks one of" in result.stderr


def test_second_run_is_served_entirely_from_the_cache(env: Env) -> None:
    first = _json(env.eval("--judge", env.spec(), "--judge-cache", str(env.cache), "--json"))
    second = env.eval("--judge", env.spec(), "--judge-cache", str(env.cache))
    assert second.exit_code == 0, second.stderr
    assert len(env.calls) == N_CALLS  # nothing new was sent
    assert f"judge calls: 0 sent, {N_CALLS} served from the cache" in second.stdout
    assert first["extra"]["judge_calls"] == N_CALLS and first["extra"]["judge_cache_hits"] == 0
    again = _json(env.eval("--judge", env.spec(), "--judge-cache", str(env.cache), "--json"))
    assert again["extra"]["judge_calls"] == 0
    assert again["extra"]["judge_cache_hits"] == N_CALLS
    assert again["per_sample"] == first["per_sample"]


def test_json_carries_per_sample_judge_scores_and_none_for_missing(env: Env) -> None:
    data = _json(env.eval("--judge", env.spec(), "--no-judge-cache", "--json", "-m", "token_f1"))
    assert list(data["metrics"]) == [
        "token_f1",
        "judge_faithfulness",
        "judge_answer_relevancy",
        "judge_correctness",
    ]
    assert data["per_sample"]["a"]["judge_faithfulness"] == 1.0
    assert data["per_sample"]["b"]["judge_answer_relevancy"] == 0.0
    assert data["per_sample"]["c"]["judge_correctness"] is None
    assert "reference" in data["details"]["c"]["judge_correctness"]["reason"]
    assert data["coverage"]["judge_correctness"] == 2
    assert data["summaries"]["judge_correctness"]["missing"] == 1
    assert data["extra"]["judge_calls"] == N_CALLS
    assert "incomplete" not in data["extra"]


def test_factory_by_file_path(env: Env) -> None:
    sub = env.root / "pkg"
    sub.mkdir()
    (sub / "my_judges.py").write_text(FACTORY_SOURCE)
    result = env.eval("--judge", "pkg/my_judges.py:make_judge", "--no-judge-cache", "--json")
    data = _json(result)
    assert data["metrics"]["judge_faithfulness"] == 0.5
    assert data["extra"]["judge_calls"] == N_CALLS
    sys.modules.pop("my_judges", None)


def test_default_cache_is_the_user_cache_dir(env: Env) -> None:
    result = env.eval("--judge", env.spec())
    assert result.exit_code == 0, result.stderr
    path = default_cache_path()
    assert path.parent == env.root / "user-cache"
    assert len(JudgeCache(path)) == N_CALLS
    assert f"(cache {path})" in result.stdout


def test_judge_cache_may_name_a_directory(env: Env) -> None:
    folder = env.root / "caches"
    folder.mkdir()
    assert env.eval("--judge", env.spec(), "--judge-cache", str(folder)).exit_code == 0
    assert len(JudgeCache(folder / "judge-cache.sqlite")) == N_CALLS


def test_no_judge_cache_calls_every_time(env: Env) -> None:
    for _ in range(2):
        data = _json(env.eval("--judge", env.spec(), "--no-judge-cache", "--json"))
        assert data["extra"]["judge_calls"] == N_CALLS
    assert len(env.calls) == 2 * N_CALLS
    assert not (env.root / "user-cache").exists()


def test_judge_metrics_option_selects(env: Env) -> None:
    data = _json(
        env.eval(
            "--judge", env.spec(), "--no-judge-cache", "--json", "-m", "token_f1",
            "--judge-metrics", "judge_correctness,answer-relevancy",
        )
    )  # fmt: skip
    assert list(data["metrics"]) == ["token_f1", "judge_answer_relevancy", "judge_correctness"]
    assert data["extra"]["judge_calls"] == 3 + 2


def test_default_judge_metrics_leave_out_what_no_sample_can_satisfy(env: Env) -> None:
    env.data.write_text(
        "".join(
            json.dumps({k: v for k, v in s.items() if k != "reference"}) + "\n" for s in SAMPLES
        )
    )
    result = env.eval("--judge", env.spec(), "--no-judge-cache", "-m", "non_empty_rate")
    assert result.exit_code == 0, result.stderr
    assert "judge_correctness" not in result.stdout
    assert "not computed: judge_correctness needs reference, response" in result.stderr
    assert len(env.calls) == 6


def test_repeats_multiply_calls_and_report_spread(env: Env) -> None:
    data = _json(
        env.eval(
            "--judge", env.spec(), "--no-judge-cache", "--json", "--repeats", "3",
            "--judge-metrics", "faithfulness",
        )
    )  # fmt: skip
    assert data["extra"]["judge_calls"] == 9
    spread = data["details"]["a"]["judge_faithfulness"]["spread"]
    assert spread == {"n": 3.0, "std": 0.0, "min": 1.0, "max": 1.0}


def test_failing_judge_gives_none_with_reason_never_nan(env: Env) -> None:
    result = env.eval(
        "--judge", env.spec("broken_judge"), "--no-judge-cache", "--judge-metrics", "faithfulness"
    )
    assert result.exit_code == 0, result.stderr
    assert "judge_faithfulness" not in result.stdout  # no row: nothing was measured
    assert "judge_faithfulness: the judge scored no sample" in result.stderr
    assert "nan" not in result.stdout.lower()
    assert "judge_faithfulness: 3 sample(s) not scored: judge raised ValueError" in result.stderr
    assert len(env.calls) == 3  # a permanent error is not retried


# ---------------------------------------------------------------- cost control


def test_dry_run_sends_nothing_and_counts_cached_calls(env: Env) -> None:
    result = env.eval("--judge", env.spec(), "--judge-cache", str(env.cache), "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert env.calls == []
    assert f"judge calls to send: {N_CALLS}" in result.stdout
    assert "already cached:      0" in result.stdout
    assert "nothing was sent" in result.stdout
    assert not env.cache.exists()  # a dry run creates no cache file
    # Score faithfulness for real, then the dry run sees those calls as cached.
    env.eval(
        "--judge", env.spec(), "--judge-cache", str(env.cache), "--judge-metrics", "faithfulness"
    )
    assert len(env.calls) == 3
    estimate = _json(
        env.eval("--judge", env.spec(), "--judge-cache", str(env.cache), "--dry-run", "--json")
    )
    assert len(env.calls) == 3
    assert estimate["calls"] == N_CALLS - 3 and estimate["cached"] == 3
    assert estimate["samples"] == 3 and estimate["dry_run"] is True
    assert estimate["input_tokens"] > 0


def test_call_budget_stops_cleanly_and_marks_incomplete(env: Env) -> None:
    args = ("--judge", env.spec(), "--judge-cache", str(env.cache), "--concurrency", "1")
    result = env.eval(*args, "--max-calls", "2")
    assert result.exit_code == 0, result.stderr
    assert len(env.calls) == 2
    assert "judge calls: 2 sent" in result.stdout
    assert f"incomplete: call budget of 2 reached; {N_CALLS - 2} judge scores" in result.stdout
    assert "budget exhausted" in result.stderr
    data = _json(env.eval(*args, "--max-calls", "3", "--json"))
    assert data["extra"]["incomplete"] is True
    assert data["extra"]["judge_calls"] == 3 and data["extra"]["judge_cache_hits"] == 2
    done = _json(env.eval(*args, "--json"))  # no budget: the rest, and the report is whole
    assert "incomplete" not in done["extra"]
    assert done["extra"]["judge_calls"] == N_CALLS - 5
    assert len(env.calls) == N_CALLS


def test_token_budget_of_zero_serves_only_from_the_cache(env: Env) -> None:
    data = _json(env.eval("--judge", env.spec(), "--no-judge-cache", "--max-tokens", "0", "--json"))
    assert env.calls == []
    assert data["extra"]["incomplete"] is True
    assert "token budget of 0" in data["extra"]["stop_reason"]


# ---------------------------------------------------------------- framework models


@pytest.mark.parametrize("factory", ["langchain_model", "llamaindex_llm", "haystack_generator"])
def test_a_framework_model_is_wrapped_by_its_adapter(env: Env, factory: str) -> None:
    data = _json(
        env.eval(
            "--judge", env.spec(factory), "--judge-cache", str(env.cache), "--json",
            "--judge-metrics", "faithfulness,correctness",
        )
    )  # fmt: skip
    assert data["metrics"]["judge_faithfulness"] == 0.75
    assert data["coverage"]["judge_correctness"] == 2
    assert data["extra"]["judge_calls"] == 5
    with sqlite3.connect(env.cache) as conn:
        assert conn.execute("SELECT COUNT(*) FROM judge_calls").fetchone()[0] == 5


def test_framework_model_without_its_adapter_is_a_clear_error(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ragmeter_langchain", None)  # "not installed"
    result = env.eval("--judge", env.spec("langchain_model"))
    assert result.exit_code == 1
    assert result.stderr.strip().endswith("needs the adapter: pip install ragmeter-langchain")
    assert len(result.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- progress bar


def test_progress_bar_only_on_a_terminal_and_never_with_json(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    real = _progress.judge_progress

    def spy(enabled: bool) -> Any:
        seen.append(enabled)
        return real(enabled)

    monkeypatch.setattr(_progress, "judge_progress", spy)
    assert env.eval("--judge", env.spec(), "--no-judge-cache").exit_code == 0  # not a TTY
    monkeypatch.setattr(_progress, "stderr_is_tty", lambda: True)
    result = env.eval("--judge", env.spec(), "--no-judge-cache")
    assert result.exit_code == 0, result.stderr
    assert _json(env.eval("--judge", env.spec(), "--no-judge-cache", "--json"))
    assert seen == [False, True, False]


def test_progress_callback_drives_the_bar_to_the_total(monkeypatch: pytest.MonkeyPatch) -> None:
    updates: list[dict[str, Any]] = []
    from rich.progress import Progress

    real_update = Progress.update

    def record(self: Progress, task: Any, **kw: Any) -> None:
        updates.append(kw)
        real_update(self, task, **kw)

    monkeypatch.setattr(Progress, "update", record)
    with _progress.judge_progress(True) as progress:
        assert progress is not None
        progress(0, 4)
        progress(4, 4)
    assert updates[-1] == {"completed": 4, "total": 4}
    with _progress.judge_progress(False) as off:
        assert off is None


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("spec", "code", "message"),
    [
        ("{mod}", 2, r"--judge {mod}: expected MODULE:FACTORY, e\.g\. mypkg\.judges:make_judge"),
        ("{mod}:", 2, r"expected MODULE:FACTORY"),
        ("no_such_module_xyz:make", 2, r"no module named 'no_such_module_xyz' \(looked in "),
        ("missing/file.py:make", 2, r"file not found: missing/file\.py"),
        ("{mod}:nope", 2, r"{mod} has no attribute 'nope' \(it has: .*make_judge"),
        ("{mod}:make-judge", 2, r"'make-judge' is not a Python name"),
        ("{mod}:NOT_CALLABLE", 2, r"NOT_CALLABLE is a int, not a callable factory"),
        ("{mod}:raising_factory", 1, r"the factory raised RuntimeError: no API key configured"),
        ("{mod}:not_a_judge", 1, r"returned a dict object, which is not a judge: return an"),
    ],
)
def test_bad_factory_spec_is_one_line_error(env: Env, spec: str, code: int, message: str) -> None:
    import re

    spec = spec.format(mod=env.module)
    result = env.eval("--judge", spec)
    assert result.exit_code == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ragmeter: error: ")
    assert re.search(message.format(mod=env.module), lines[0]), lines[0]
    assert result.stdout == ""


def test_module_that_fails_to_import_is_bad_data_not_a_missing_module(env: Env) -> None:
    (env.root / "needs_dep.py").write_text("import not_installed_dependency_xyz\n")
    result = env.eval("--judge", "needs_dep:make")
    assert result.exit_code == 1
    assert "importing needs_dep failed: ModuleNotFoundError: No module named" in result.stderr
    assert "not_installed_dependency_xyz" in result.stderr
    (env.root / "broken_syntax.py").write_text("def make(:\n")
    result = env.eval("--judge", "broken_syntax:make")
    assert result.exit_code == 1
    assert "importing broken_syntax failed: SyntaxError" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dry-run"], "--dry-run only applies to LLM judges: add --judge MODULE:FACTORY"),
        (["--max-calls", "3"], "--max-calls only applies to LLM judges"),
        (["--judge-metrics", "faithfulness"], "--judge-metrics only applies to LLM judges"),
        (["--judge", "{spec}", "--judge-metrics", "fluency"], "unknown judge metric 'fluency'"),
        (["--judge", "{spec}", "--rpm", "0"], "--rpm must be > 0 requests per minute, got 0"),
        (["--judge", "{spec}", "--timeout", "-1"], "--timeout must be > 0 seconds, got -1"),
        (["--judge", "{spec}", "--concurrency", "0"], "--concurrency"),
        (["--judge", "{spec}", "--repeats", "0"], "--repeats"),
        (
            ["--judge", "{spec}", "--judge-cache", "x.sqlite", "--no-judge-cache"],
            "--judge-cache and --no-judge-cache contradict each other",
        ),
    ],
)
def test_bad_judge_options_exit_2(env: Env, args: list[str], message: str) -> None:
    result = env.eval(*[a.format(spec=env.spec()) for a in args])
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert env.module not in sys.modules or env.calls == []


def test_named_judge_metric_no_sample_can_satisfy_exits_1(env: Env) -> None:
    env.data.write_text(json.dumps({"id": "x", "user_input": "q?", "response": "a"}) + "\n")
    result = env.eval("--judge", env.spec(), "--judge-metrics", "faithfulness")
    assert result.exit_code == 1
    assert "--judge-metrics faithfulness: judge_faithfulness needs response, " in result.stderr
    assert "retrieved_contexts on a sample; none of the 1 samples has all of them" in result.stderr
    assert env.calls == []


def test_no_sample_can_be_judged_exits_1(env: Env) -> None:
    env.data.write_text(json.dumps({"id": "x", "user_input": "q?"}) + "\n")
    result = env.eval("--judge", env.spec(), "--dry-run")
    assert result.exit_code == 1
    assert "ragmeter: error: no sample can be judged: judge_faithfulness needs" in result.stderr


def test_a_file_that_is_not_a_judge_cache_exits_1(env: Env) -> None:
    bogus = env.root / "bogus.sqlite"
    bogus.write_bytes(b"this is not an sqlite database, just some bytes" * 40)
    result = env.eval("--judge", env.spec(), "--judge-cache", str(bogus))
    assert result.exit_code == 1
    assert f"--judge-cache {bogus}: not a usable judge cache" in result.stderr
    assert env.calls == []
