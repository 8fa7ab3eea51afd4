"""Several processes opening one new judge cache at the same moment (Dask workers do): none
fails, nothing is lost. SQLite answers the process that loses the race to switch the new
file to WAL mode "database is locked" without waiting; the cache waits and tries again."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from ragmeter.judge.cache import JudgeCache
from ragmeter.judge.protocol import JudgeReply


def _open_and_write(path: str, worker: int, start: object) -> None:
    start.wait()  # type: ignore[attr-defined]  # a Barrier: every process opens at once
    cache = JudgeCache(path)
    for i in range(20):
        cache.put(f"w{worker}-{i}", JudgeReply(text=f"verdict {worker} {i}"))
    cache.close()


def test_processes_opening_a_new_cache_at_once_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "new.sqlite")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(6)
    procs = [ctx.Process(target=_open_and_write, args=(path, w, start)) for w in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 6
    cache = JudgeCache(path)
    assert len(cache) == 120
    reply = cache.get("w5-19")
    assert reply is not None and reply.text == "verdict 5 19"
