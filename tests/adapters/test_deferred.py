"""The core's deferred capture: a backlog that runs in batches and before any read, and a
clock that gives replayed records the times and threads their events happened at."""

from __future__ import annotations

import contextvars
import logging
import threading
import time

import pytest

from ragmeter.capture import (
    Backlog,
    CaptureConfig,
    ProblemLog,
    RunRecord,
    SampleStore,
    StageRecord,
    now,
    replaying,
    thread_now,
)


def test_work_waits_for_a_full_batch_and_runs_in_order() -> None:
    backlog = Backlog(size=3)
    done: list[int] = []
    backlog.add(lambda: done.append(1))
    backlog.add(lambda: done.append(2))
    assert done == [] and len(backlog) == 2
    backlog.add(lambda: done.append(3))
    assert done == [1, 2, 3] and len(backlog) == 0


def test_reading_a_store_settles_its_backlog_first() -> None:
    from ragmeter.schema import RagSample

    store = SampleStore()
    store.backlog = Backlog(size=100)
    store.backlog.add(lambda: store.add(RagSample(id="q1", retrieved_ids=["d1"])))
    assert len(store) == 1  # len is a read
    store.backlog.add(lambda: store.add(RagSample(id="q2", retrieved_ids=["d2"])))
    assert [s.id for s in store.samples] == ["q1", "q2"]
    store.backlog.add(lambda: store.add(RagSample(id="q3", retrieved_ids=["d3"])))
    assert [s.id for s in store.drain()] == ["q1", "q2", "q3"]
    store.backlog.add(lambda: store.add(RagSample(id="q4", retrieved_ids=["d4"])))
    assert store.to_run() == {"q4": ["d4"]}


def test_a_failing_work_is_logged_and_the_rest_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backlog = Backlog(size=10)
    done: list[str] = []

    def broken() -> None:
        raise KeyError("boom")

    backlog.add(broken)
    backlog.add(lambda: done.append("after"))
    with caplog.at_level(logging.ERROR, logger="ragmeter.capture"):
        backlog.settle()  # does not raise
    assert done == ["after"]
    assert "a deferred capture failed" in caplog.text and "boom" in caplog.text


def test_many_threads_adding_lose_nothing() -> None:
    backlog = Backlog(size=7)
    done: list[int] = []
    lock = threading.Lock()

    def add(base: int) -> None:
        for i in range(2000):

            def work(n: int = base + i) -> None:
                with lock:
                    done.append(n)

            backlog.add(work)

    threads = [threading.Thread(target=add, args=(t * 10_000,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    backlog.settle()
    assert sorted(done) == sorted(t * 10_000 + i for t in range(8) for i in range(2000))


def test_replayed_records_get_the_events_times_and_threads() -> None:
    config = CaptureConfig("test", ProblemLog(logging.getLogger("test"), "Test"))

    def replay() -> tuple[RunRecord, StageRecord]:
        replaying(10.0, 4242)
        run = RunRecord(config)
        stage = StageRecord("bm25", "q", 0)
        replaying(10.25, 4242)
        stage.done(["d1"], ["text"])
        replaying(10.5, 4242)
        run.finish()
        return run, stage

    run, stage = contextvars.copy_context().run(replay)
    assert (run.start, run.end) == (10.0, 10.5)
    assert (stage.start, stage.end, stage.thread) == (10.0, 10.25, 4242)
    # outside the replay's context the clock is the real one again
    before = time.perf_counter()
    assert before <= now() <= time.perf_counter()
    assert thread_now() == threading.get_ident()
