"""Many processes saving at once lose nothing; a process killed in the middle of a save
leaves a database that opens, passes SQLite's integrity check and loads every listed run."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ragmeter.registry import Registry

sys.path.insert(0, str(Path(__file__).parent))
import _registry_workers as workers

WORKERS = 8
SAVES = 50


@pytest.mark.slow
def test_8_processes_x_50_saves_lose_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # outside any git repository
    path = str(tmp_path / "reg" / "runs.sqlite")
    context = multiprocessing.get_context("spawn")
    with context.Pool(WORKERS) as pool:
        saved = pool.starmap(workers.save_many, [(path, w, SAVES) for w in range(WORKERS)])
    registry = Registry(path)
    runs = registry.runs()
    assert len(runs) == WORKERS * SAVES
    assert {r.id for r in runs} == {i for ids in saved for i in ids}
    assert Counter(r.name for r in runs) == {f"w{w}": SAVES for w in range(WORKERS)}
    for w in range(WORKERS):  # each worker's runs, newest first, in the order it saved them
        assert [r.id for r in registry.runs(name=f"w{w}")] == saved[w][::-1]
        assert [r.tags["i"] for r in registry.runs(tag=f"worker={w}")][::-1] == [
            str(i) for i in range(SAVES)
        ]
    for record in runs:
        blob = record.scores_path.read_bytes()
        assert hashlib.sha256(blob).hexdigest() == record.scores_sha256
    expected = workers.report()
    loaded = registry.load_report(runs[-1])
    assert loaded.per_query == expected.per_query and loaded.metrics == expected.metrics
    assert len(list((tmp_path / "reg" / "scores").iterdir())) == WORKERS * SAVES


@pytest.mark.slow
def test_a_process_killed_while_saving_leaves_no_half_written_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "runs.sqlite"
    context = multiprocessing.get_context("spawn")
    n_queries = workers.report().n_queries
    for delay in (0.0, 0.003, 0.011, 0.017):
        before = len(Registry(path).runs())
        child = context.Process(target=workers.save_forever, args=(str(path),))
        child.start()
        deadline = time.monotonic() + 120
        while len(Registry(path).runs()) < before + 3:  # saving for real by now
            assert time.monotonic() < deadline and child.is_alive()
            time.sleep(0.01)
        time.sleep(delay)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        assert child.exitcode == -signal.SIGKILL
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.close()
        registry = Registry(path)
        runs = registry.runs()
        assert len(runs) > before
        for record in runs:
            assert registry.load_report(record).n_queries == n_queries
        registry.close()
    # what a killed save may leave: a scores file without a row (harmless), or a temp file
    listed = {r.scores_path.name for r in Registry(path).runs()}
    extra = [p.name for p in (tmp_path / "scores").iterdir() if p.name not in listed]
    assert len(extra) <= 4
