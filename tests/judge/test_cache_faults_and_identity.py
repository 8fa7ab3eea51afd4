"""No silent wrong number from the judge cache or the runner.

1. A corrupted cache file, or an SQLite file with a foreign schema, is a clear
   :class:`~ragmeter.errors.JudgeCacheError` naming the path (one line from the CLI), never a
   raw ``sqlite3`` error or a traceback.
2. A cache the user cannot write is opened read-only: hits are served, new verdicts are not
   stored, and the report says how many were not.
3. Identical prompts in one run make one judge call; a verdict another process committed
   after the run started is used instead of a second call.
4. ``FunctionJudge``\\ s left at the default ``model="function"`` do not share verdicts.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragmeter.errors import InvalidInputError, JudgeCacheError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.judge import (
    Correctness,
    Faithfulness,
    FunctionJudge,
    JudgeCache,
    JudgeOptions,
    Message,
    estimate_judges,
    run_judges,
)
from ragmeter.schema import RagSample

SAMPLES = [
    {
        "id": f"q{i}",
        "user_input": f"question {i}?",
        "response": f"answer {i}",
        "reference": f"answer {i}",
        "retrieved_contexts": [f"context {i}"],
    }
    for i in range(3)
]
NOBODY = 65534  # the conventional uid/gid of "nobody"

FACTORY_SOURCE = """
from ragmeter.judge import FunctionJudge

CALLS = []


def verdict(messages):
    CALLS.append(messages)
    return '{"score": 0.5, "reason": "fake"}'


def make_judge():
    return FunctionJudge(verdict, model="fake-verdicts")
"""


def _samples(n: int) -> list[RagSample]:
    return [RagSample.model_validate(s) for s in SAMPLES[:n]]


class Counting:
    """A sync judge function that counts its calls (thread-safe) and answers ``reply``."""

    def __init__(self, reply: str = '{"score": 1}', delay: float = 0.0) -> None:
        self.calls = 0
        self.reply = reply
        self.delay = delay
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[Message]) -> str:
        with self._lock:
            self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        return self.reply


def _fill(path: Path, n: int) -> None:
    """A real cache holding the faithfulness verdicts of the first ``n`` samples."""
    judge = FunctionJudge(lambda m: '{"score": 0.5}', model="ro-test")
    cache = JudgeCache(path)
    run_judges(_samples(n), [Faithfulness(judge=judge)], cache=cache)
    cache.close()
    assert len(JudgeCache(path)) == n


# ------------------------------------------------------------ 1. corrupted / foreign caches


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not an sqlite database, just some bytes" * 40)


def _truncated(path: Path) -> None:
    # A real cache with many pages, cut in half: the header is fine, the pages are not.
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE judge_calls (key TEXT PRIMARY KEY, text TEXT NOT NULL,"
        " input_tokens INTEGER, output_tokens INTEGER)"
    )
    conn.executemany(
        "INSERT INTO judge_calls VALUES (?, ?, 1, 1)",
        [(f"{i:064d}", "x" * 500) for i in range(400)],
    )
    conn.commit()
    conn.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _foreign_same_name(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE judge_calls (id INTEGER PRIMARY KEY, payload BLOB)")
        conn.execute("INSERT INTO judge_calls (payload) VALUES (x'00')")
    conn.close()


def _other_app(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.close()


BAD_CACHES: list[tuple[Callable[[Path], None], str]] = [
    (_garbage, "not an SQLite database"),
    (_truncated, "corrupted"),
    (_foreign_same_name, "table judge_calls has columns (id, payload)"),
    (_other_app, "another application's SQLite database (tables: users)"),
]
BAD_CACHE_IDS = [make.__name__.strip("_") for make, _ in BAD_CACHES]


@pytest.mark.parametrize(("make", "problem"), BAD_CACHES, ids=BAD_CACHE_IDS)
def test_a_bad_cache_file_is_a_clear_error_naming_the_path(
    tmp_path: Path, make: Callable[[Path], None], problem: str
) -> None:
    path = tmp_path / "cache.sqlite"
    make(path)
    fn = Counting()
    # Opening may succeed for a file whose damage is past the first page; the run must then
    # fail with the same error, before any call is sent, never with a raw sqlite3 error.
    with pytest.raises(JudgeCacheError) as info:
        run_judges(_samples(3), [Faithfulness(judge=FunctionJudge(fn))], cache=JudgeCache(path))
    message = str(info.value)
    assert str(path) in message and problem in message
    assert info.value.path == path
    assert isinstance(info.value, InvalidInputError)
    assert fn.calls == 0


def test_advice_fits_the_problem(tmp_path: Path) -> None:
    broken, foreign = tmp_path / "broken.sqlite", tmp_path / "other.sqlite"
    _garbage(broken)
    _other_app(foreign)
    with pytest.raises(JudgeCacheError, match="delete it"):
        JudgeCache(broken)
    with pytest.raises(JudgeCacheError) as info:
        JudgeCache(foreign)
    assert "delete" not in str(info.value)  # never advise deleting another app's data
    assert "another path" in str(info.value)
    with sqlite3.connect(foreign) as conn:  # and it was not touched
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
    conn.close()
    assert tables == ["users"]


def test_an_empty_file_is_a_fresh_cache(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    fn = Counting()
    run = run_judges(_samples(2), [Faithfulness(judge=FunctionJudge(fn))], cache=JudgeCache(path))
    assert run.calls == 2 and len(JudgeCache(path)) == 2


def test_a_cache_path_in_a_file_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(JudgeCacheError, match=f"judge cache {blocker / 'c.sqlite'}: "):
        JudgeCache(blocker / "c.sqlite")


def _ragmeter_script() -> str:
    script = shutil.which("ragmeter", path=os.path.dirname(sys.executable))
    assert script is not None, "the ragmeter console script is not installed"
    return script


def _cli_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(RAGMETER_CACHE_DIR=str(root / "user-cache"), HAYSTACK_TELEMETRY_ENABLED="False")
    return env


@pytest.mark.parametrize(("make", "problem"), BAD_CACHES, ids=BAD_CACHE_IDS)
def test_cli_bad_cache_is_one_line_error_no_traceback(
    tmp_path: Path, make: Callable[[Path], None], problem: str
) -> None:
    (tmp_path / "cli_judges.py").write_text(FACTORY_SOURCE)
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    bad = tmp_path / "bad.sqlite"
    make(bad)
    result = subprocess.run(
        [
            *(_ragmeter_script(), "eval", "data.jsonl", "-m", "token_f1"),
            *("--judge", "cli_judges:make_judge", "--judge-cache", str(bad)),
        ],
        cwd=tmp_path,
        env=_cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"ragmeter: error: --judge-cache {bad}: not a usable judge cache")
    assert problem in lines[0] and "--no-judge-cache" in lines[0]


# ------------------------------------------------------------------- 2. read-only caches


def test_readonly_cache_serves_hits_and_skips_writes_with_a_warning(tmp_path: Path) -> None:
    # readonly=True opens the file with SQLite's mode=ro, which SQLite enforces for every
    # user, root included: this exercises the read-only code path for real.
    path = tmp_path / "c.sqlite"
    _fill(path, 2)
    before = path.read_bytes()
    calls: list[object] = []
    judge = FunctionJudge(lambda m: calls.append(m) or '{"score": 0.5}', model="ro-test")
    cache = JudgeCache(path, readonly=True)
    assert cache.readonly
    report = evaluate_rag(SAMPLES, metrics=[Faithfulness(judge=judge)], judge_cache=cache)
    assert report.judge_cache_hits == 2 and report.judge_calls == 1 and len(calls) == 1
    assert report.coverage["judge_faithfulness"] == 3  # the new verdict is used in this run
    assert report.extra["judge_cache_writes_skipped"] == 1
    assert [w for w in report.warnings if "read-only" in w] == [
        f"judge cache {path}: 1 new verdict(s) were not stored (the cache is read-only); a "
        "re-run will ask the judge for them again"
    ]
    cache.close()
    assert path.read_bytes() == before and len(JudgeCache(path)) == 2


def test_readonly_cache_that_does_not_exist_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(JudgeCacheError, match="does not exist"):
        JudgeCache(tmp_path / "missing.sqlite", readonly=True)
    assert not (tmp_path / "missing.sqlite").exists()


CHILD = """
import json, os, sys
from ragmeter import cli
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.judge import Faithfulness, FunctionJudge

mode, path = sys.argv[1], sys.argv[2]
samples = json.loads(sys.argv[3])
calls = []
def fn(m):
    calls.append(m)
    return '{"score": 0.5}'
judge = FunctionJudge(fn, model="ro-test")
argv = ["eval", "data.jsonl", "--judge", "cli_judges:make_judge", "--judge-metrics",
        "faithfulness"]
# Warm up while still privileged: every lazy import (metrics, rich, typer, the factory
# module) is loaded now, because the interpreter's own files may be unreadable afterwards.
evaluate_rag(samples, metrics=[Faithfulness(judge=judge)], judge_cache=None)
cli.run(argv + ["--no-judge-cache", "--json"])
cli.run(argv + ["--no-judge-cache"])  # the table and warnings: rich loads more modules lazily
calls.clear()
if os.geteuid() == 0:
    # Root ignores file modes, so a root test would never see the read-only case. Become
    # an ordinary user for real (real and effective ids) before touching the cache.
    os.setgid(NOBODY)
    os.setuid(NOBODY)
print("---", flush=True)
try:
    if mode == "library":
        report = evaluate_rag(samples, metrics=[Faithfulness(judge=judge)], judge_cache=path)
        print(json.dumps({"calls": len(calls), "hits": report.judge_cache_hits,
                          "coverage": report.coverage["judge_faithfulness"],
                          "warnings": report.warnings}))
    else:
        code = cli.run(argv + ["--judge-cache", path])
        print(json.dumps({"code": code}))
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
""".replace("NOBODY", str(NOBODY))


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory an unprivileged user can enter (pytest's ``tmp_path`` is root-only)."""
    root = Path(tempfile.mkdtemp(prefix="ragmeter-ro-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        for p in [root, *root.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(root)


def _run_child(mode: str, where: Path, cache: Path) -> tuple[dict[str, Any], str]:
    (where / "cli_judges.py").write_text(FACTORY_SOURCE)
    (where / "data.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    (where / "cli_judges.py").chmod(0o644)
    (where / "data.jsonl").chmod(0o644)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(cache), json.dumps(SAMPLES)],
        cwd=where,
        env=_cli_env(where),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout.split("---\n", 1)[1]
    data: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return data, result.stderr


# How the cache is made read-only for the child: (directory mode, file mode).
READONLY_LAYOUTS = {
    "read-only file": (0o777, 0o444),  # the directory is writable: SQLite can make -shm
    "read-only directory": (0o555, 0o666),  # no -wal/-shm can be made next to the file
}


def _readonly_cache(shared_dir: Path, layout: str) -> Path:
    folder = shared_dir / "cache"
    folder.mkdir()
    path = folder / "judge.sqlite"
    # The cache holds the faithfulness verdicts of the first two samples, under the
    # identity both the library judge (model "ro-test") and the CLI factory use.
    for model in ("ro-test", "fake-verdicts"):
        judge = FunctionJudge(lambda m: '{"score": 0.5}', model=model)
        cache = JudgeCache(path)
        run_judges(_samples(2), [Faithfulness(judge=judge)], cache=cache)
        cache.close()
    dir_mode, file_mode = READONLY_LAYOUTS[layout]
    path.chmod(file_mode)
    folder.chmod(dir_mode)
    return path


@pytest.mark.parametrize("layout", list(READONLY_LAYOUTS))
def test_a_cache_the_user_cannot_write_is_opened_read_only(shared_dir: Path, layout: str) -> None:
    if os.geteuid() == 0 and not hasattr(os, "setuid"):  # pragma: no cover
        pytest.skip("needs os.setuid to test as an ordinary user")
    path = _readonly_cache(shared_dir, layout)
    before = path.read_bytes()
    data, _ = _run_child("library", shared_dir, path)
    assert "error" not in data, data["error"]
    assert data["hits"] == 2 and data["calls"] == 1 and data["coverage"] == 3
    assert any("1 new verdict(s) were not stored" in w for w in data["warnings"])
    assert path.read_bytes() == before


@pytest.mark.parametrize("layout", list(READONLY_LAYOUTS))
def test_cli_with_a_read_only_cache_serves_hits_and_warns(shared_dir: Path, layout: str) -> None:
    if os.geteuid() == 0 and not hasattr(os, "setuid"):  # pragma: no cover
        pytest.skip("needs os.setuid to test as an ordinary user")
    path = _readonly_cache(shared_dir, layout)
    data, stderr = _run_child("cli", shared_dir, path)
    assert data == {"code": 0}, stderr
    assert (
        f"warning: judge cache {path}: 1 new verdict(s) were not stored (the cache is "
        "read-only)" in " ".join(stderr.split())
    )


def test_a_missing_cache_in_a_read_only_directory_is_a_clear_error(shared_dir: Path) -> None:
    folder = shared_dir / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    data, _ = _run_child("library", shared_dir, folder / "judge.sqlite")
    assert data["error"].startswith(f"JudgeCacheError: judge cache {folder / 'judge.sqlite'}: ")
    assert "not writable" in data["error"]


def test_a_failed_write_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    # The file is writable when opened, but something (another process, a full disk, a
    # remount) stops the write: the verdict is used, the run goes on, the report says so.
    path = tmp_path / "c.sqlite"
    cache = JudgeCache(path)
    other = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    other.execute("PRAGMA busy_timeout=0")
    other.execute("BEGIN EXCLUSIVE")  # holds the write lock for the whole run
    cache._conn().execute("PRAGMA busy_timeout=50")  # don't wait 30 s for it in a test
    try:
        report = evaluate_rag(
            SAMPLES[:1], metrics=[Faithfulness(judge=FunctionJudge(Counting()))], judge_cache=cache
        )
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert report.coverage["judge_faithfulness"] == 1
    assert report.extra["judge_cache_writes_skipped"] == 1
    assert any("1 new verdict(s) were not stored (writing failed: " in w for w in report.warnings)


# --------------------------------------------------------------- 3. one call per prompt


def test_identical_prompts_in_one_run_make_one_call() -> None:
    fn = Counting(delay=0.05)  # slow, so the two would be in flight at the same time
    same = [dict(SAMPLES[0], id="a"), dict(SAMPLES[0], id="b"), dict(SAMPLES[1], id="c")]
    report = evaluate_rag(
        same,
        metrics=[Faithfulness(judge=FunctionJudge(fn, model="m"))],
        judge_cache=None,
        judge_options=JudgeOptions(concurrency=8),
    )
    assert fn.calls == 2 and report.judge_calls == 2
    assert report.extra["judge_deduplicated"] == 1
    assert report.per_sample["a"]["judge_faithfulness"] == 1.0
    assert report.per_sample["b"]["judge_faithfulness"] == 1.0


def test_repeats_are_not_deduplicated_but_identical_samples_are() -> None:
    fn = Counting()
    samples = [SAMPLES[0], SAMPLES[0]]  # same id too: evaluate_rag renames it a#2
    report = evaluate_rag(
        samples,
        metrics=[Faithfulness(judge=FunctionJudge(fn, model="m"), repeats=3)],
        judge_cache=None,
    )
    assert fn.calls == 3 and report.judge_calls == 3  # one per repeat, not per sample
    assert report.extra["judge_deduplicated"] == 3


def test_a_failed_call_is_shared_not_retried_by_its_twin() -> None:
    calls: list[object] = []

    def refuse(messages: Sequence[Message]) -> str:
        calls.append(messages)
        raise ValueError("model refused")

    run = run_judges(
        [RagSample.model_validate(dict(SAMPLES[0], id=i)) for i in "ab"],
        [Faithfulness(judge=FunctionJudge(refuse, model="m"))],
    )
    assert len(calls) == 1
    assert run.reasons["a"] == run.reasons["b"]
    assert "model refused" in run.reasons["b"]["judge_faithfulness"]


def test_progress_counts_deduplicated_verdicts() -> None:
    seen: list[tuple[int, int]] = []
    run_judges(
        [RagSample.model_validate(dict(SAMPLES[0], id=i)) for i in "abc"],
        [Faithfulness(judge=FunctionJudge(Counting(), model="m"))],
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)


def test_dry_run_counts_identical_prompts_once() -> None:
    twins = [RagSample.model_validate(dict(SAMPLES[0], id=i)) for i in "ab"]
    judge = FunctionJudge(Counting(), model="m")
    estimate = estimate_judges([*twins, *_samples(2)], [Faithfulness(judge=judge)])
    assert estimate.calls == 2  # q0 (asked for by a, b and q0) and q1
    assert estimate.calls == run_judges([*twins, *_samples(2)], [Faithfulness(judge=judge)]).calls


def test_a_verdict_committed_by_another_process_meanwhile_is_reused(tmp_path: Path) -> None:
    # Sample 0's call starts a second process that scores sample 1 with the same judge
    # identity into the same cache file and commits. This run looked sample 1 up before
    # that; it must look again right before calling, and use the other process's verdict.
    path = tmp_path / "shared.sqlite"
    script = textwrap.dedent(
        f"""
        from ragmeter.judge import Faithfulness, FunctionJudge, JudgeCache, run_judges
        from ragmeter.schema import RagSample
        sample = RagSample.model_validate({SAMPLES[1]!r})
        judge = FunctionJudge(lambda m: '{{"score": 0.25}}', model="shared")
        run = run_judges([sample], [Faithfulness(judge=judge)], cache=JudgeCache({str(path)!r}))
        assert run.calls == 1, run
        """
    )
    asked: list[str] = []

    def fn(messages: Sequence[Message]) -> str:
        asked.append(messages[-1].content)
        if "answer 0" in messages[-1].content:
            subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
        return '{"score": 1}'

    run = run_judges(
        _samples(2),
        [Faithfulness(judge=FunctionJudge(fn, model="shared"))],
        cache=JudgeCache(path),
        options=JudgeOptions(concurrency=1),
    )
    assert len(asked) == 1 and run.calls == 1 and run.cache_hits == 1
    assert run.scores["q1"]["judge_faithfulness"] == 0.25  # the other process's verdict


# ----------------------------------------------------------- 4. FunctionJudge identity


def always_one(messages: Sequence[Message]) -> str:
    return '{"score": 1}'


def always_zero(messages: Sequence[Message]) -> str:
    return '{"score": 0}'


def _constant(score: float) -> Callable[[Sequence[Message]], str]:
    def fn(messages: Sequence[Message]) -> str:
        return json.dumps({"score": score})

    return fn


class Fixed:
    def __init__(self, score: float) -> None:
        self.score = score

    def __call__(self, messages: Sequence[Message]) -> str:
        return json.dumps({"score": self.score})


async def async_one(messages: Sequence[Message]) -> str:
    await asyncio.sleep(0)
    return '{"score": 1}'


async def async_zero(messages: Sequence[Message]) -> str:
    await asyncio.sleep(0)
    return '{"score": 0}'


PAIRS: dict[str, tuple[Any, Any]] = {
    "functions": (always_one, always_zero),
    "lambdas": (lambda m: '{"score": 1}', lambda m: '{"score": 0}'),
    "closures": (_constant(1.0), _constant(0.0)),
    "callable objects": (Fixed(1.0), Fixed(0.0)),
    "async functions": (async_one, async_zero),
}


@pytest.mark.parametrize("kind", list(PAIRS))
def test_different_functions_do_not_share_verdicts(tmp_path: Path, kind: str) -> None:
    one, zero = PAIRS[kind]
    cache = JudgeCache(tmp_path / "c.sqlite")
    metrics = [Faithfulness(judge=FunctionJudge(one)), Correctness(judge=FunctionJudge(one))]
    first = evaluate_rag(SAMPLES, metrics=metrics, judge_cache=cache)
    assert first.metrics["judge_faithfulness"] == 1.0 and first.judge_calls == 6
    metrics = [Faithfulness(judge=FunctionJudge(zero)), Correctness(judge=FunctionJudge(zero))]
    second = evaluate_rag(SAMPLES, metrics=metrics, judge_cache=cache)
    assert second.judge_cache_hits == 0 and second.judge_calls == 6
    assert second.metrics["judge_faithfulness"] == 0.0
    assert second.metrics["judge_correctness"] == 0.0
    # ... while the same function is served from the cache again.
    third = evaluate_rag(
        SAMPLES, metrics=[Faithfulness(judge=FunctionJudge(one))], judge_cache=cache
    )
    assert third.judge_calls == 0 and third.metrics["judge_faithfulness"] == 1.0


def test_function_identity_names_the_function_and_is_stable_across_processes(
    tmp_path: Path,
) -> None:
    (tmp_path / "idmod.py").write_text(
        textwrap.dedent(
            """
            THRESHOLD = 0.5

            def helper(x):
                return x > THRESHOLD

            def verdict(messages):
                return '{"score": %d}' % helper(0.7)
            """
        )
    )
    probe = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import idmod; "
        "from ragmeter.judge import FunctionJudge; "
        "print(json.dumps(dict(FunctionJudge(idmod.verdict).identity)))"
    )

    def identity() -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, "-c", probe, str(tmp_path)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        data: dict[str, Any] = json.loads(out)
        return data

    first = identity()
    assert first["model"] == "function" and first["function"] == "idmod.verdict"
    assert identity() == first  # nothing process-specific (addresses, hash seeds) in it
    source = (tmp_path / "idmod.py").read_text()
    (tmp_path / "idmod.py").write_text(source.replace("THRESHOLD = 0.5", "THRESHOLD = 0.9"))
    assert identity()["code"] != first["code"]  # a constant the function reads changed


def test_an_explicit_model_name_is_the_identity_as_before() -> None:
    judge = FunctionJudge(always_one, model="gpt-x", settings={"temperature": 0})
    assert dict(judge.identity) == {"model": "gpt-x", "temperature": 0}
    other = FunctionJudge(always_zero, model="gpt-x", settings={"temperature": 0})
    assert other.identity == judge.identity  # the name is the promise, as documented


def test_secrets_captured_by_a_function_are_not_part_of_its_identity() -> None:
    def make(api_key: str) -> Callable[[Sequence[Message]], str]:
        def fn(messages: Sequence[Message]) -> str:
            return api_key and '{"score": 1}'

        return fn

    assert FunctionJudge(make("sk-1")).identity == FunctionJudge(make("sk-2")).identity
