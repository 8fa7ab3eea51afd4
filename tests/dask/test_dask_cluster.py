"""ragmeter.dask on a distributed.LocalCluster: two worker processes, real scheduling.

The same numbers as one machine on Cranfield, Vaswani and 100k generated samples; a
worker killed while it scores a partition is replaced and its work redone, with nothing
lost or counted twice; judge metrics on both workers share one SQLite cache and one call
budget. The cluster listens on random local ports (no clash between pytest-xdist
workers) and every process it started is checked gone at the end.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import cloudpickle
import dask.bag as db
import psutil
import pytest
from distributed import Client, LocalCluster, get_task_stream

import ragmeter
import ragmeter.dask as rdask
from ragmeter.io import read_qrels
from ragmeter.io.trec import read_trec_run, write_trec_run
from ragmeter.judge import Faithfulness, FunctionJudge, JudgeOptions
from ragmeter.report import RetrievalEvalReport

pytestmark = pytest.mark.slow

# The workers cannot import this test module: its functions travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        scheduler_port=0,
        dashboard_address=None,  # no dashboard; its HTTP server on a random port:
        scheduler_kwargs={"dashboard_address": ":0"},  # never 8787, taken or not
        silence_logs=logging.CRITICAL,
    )
    client = Client(cluster, set_as_default=False)
    started: set[int] = set()
    try:
        client.wait_for_workers(2, timeout=60)
        yield client
    finally:
        started.update(client.run(os.getpid).values())
        client.close()
        cluster.close()
    deadline = time.monotonic() + 10
    while any(psutil.pid_exists(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in started if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not left, f"worker processes left running: {left}"


def _workers(client: Client) -> dict[str, int]:
    client.wait_for_workers(2, timeout=60)
    return dict(client.run(os.getpid))


# --------------------------------------------------------------------------- retrieval


def _same(got: RetrievalEvalReport, expected: RetrievalEvalReport) -> None:
    assert got.metrics == expected.metrics
    assert (got.n_queries, got.missing_queries, got.warnings, got.conventions) == (
        expected.n_queries,
        expected.missing_queries,
        expected.warnings,
        expected.conventions,
    )
    for key in expected.metrics:
        assert got.summary(key) == expected.summary(key)


def test_cranfield_and_vaswani_on_two_workers(client: Client, tmp_path: Path) -> None:
    _, _, cranfield = ragmeter.load_cranfield()
    collections = {
        "cranfield": (cranfield, ragmeter.load_cranfield_bm25_run()),
        "vaswani": (
            read_qrels(DATA / "vaswani/qrels.tsv"),
            read_trec_run(DATA / "vaswani/bm25.run"),
        ),
    }
    for name, (qrels, run) in collections.items():
        expected = ragmeter.evaluate_run(qrels, run)
        items = list(run.items())
        with get_task_stream(client) as stream:
            for parts in (1, 4, 9):
                bag = db.from_sequence(items, npartitions=parts)
                _same(
                    rdask.evaluate_run(qrels, bag, client=client, per_query=False),
                    ragmeter.evaluate_run(qrels, dict(run)),
                )
                kept = rdask.evaluate_run(qrels, bag, client=client, per_query=True)
                assert kept == ragmeter.evaluate_run(qrels, dict(run))
        scored = [t["worker"] for t in stream.data if "-part-" in str(t["key"])]
        assert len(set(scored)) == 2, f"{name}: the partitions ran on {set(scored)}"
        qids = list(run)
        paths = []
        for i in range(5):  # one TREC file per partition, read on the workers
            path = tmp_path / f"{name}-{i}.run"
            write_trec_run({q: run[q] for q in qids[i::5]}, path, scores=run.scores)
            paths.append(path)
        _same(rdask.evaluate_run(qrels, paths, client=client), expected)


# --------------------------------------------------------------------------- evaluate_rag

WORDS = ["paris", "france", "capital", "river", "city", "the", "a", "of", "big", "small"]
RAG_METRICS = ["exact_match", "token_f1", "faithfulness", "latency_ms", "ndcg", "precision", "map"]


def _generate(part: int, size: int = 5000) -> list[dict[str, Any]]:
    """Deterministic samples for partition ``part`` (about 1 % of the ids repeat)."""
    rng = random.Random(part)
    out: list[dict[str, Any]] = []
    for i in range(size):
        docs = rng.sample(range(40), rng.randint(1, 10))
        sample: dict[str, Any] = {
            "id": f"p{part}-{i}" if rng.random() > 0.01 else f"dup{rng.randrange(50)}",
            "user_input": "q",
            "response": " ".join(rng.choices(WORDS, k=rng.randint(1, 8))),
            "retrieved_contexts": [
                " ".join(rng.choices(WORDS, k=rng.randint(3, 12))) for _ in range(rng.randint(0, 3))
            ],
            "retrieved_ids": [f"d{d}" for d in docs],
            "relevance": {f"d{d}": rng.randint(0, 3) for d in rng.sample(range(40), 5)},
            "latency_ms": round(rng.random() * 2000, 3),
        }
        if rng.random() < 0.9:
            sample["reference"] = " ".join(rng.choices(WORDS, k=rng.randint(1, 5)))
        out.append(sample)
    return out


def _generated(parts: list[int]) -> list[dict[str, Any]]:
    return [s for part in parts for s in _generate(part)]


def test_100k_generated_samples_on_two_workers(client: Client) -> None:
    expected = ragmeter.evaluate_rag(
        itertools.chain.from_iterable(_generate(p) for p in range(20)), metrics=RAG_METRICS
    )
    assert expected.n_samples == 100_000
    assert expected.warnings[0].endswith(
        "repeat an earlier one; they are reported as '<id>#2', '<id>#3', ... in per_sample"
    )
    bag = db.from_sequence(range(20), npartitions=20).map_partitions(_generated)
    with get_task_stream(client) as stream:
        got = rdask.evaluate_rag(bag, metrics=RAG_METRICS, client=client)
    assert len({t["worker"] for t in stream.data if "-part-" in str(t["key"])}) == 2
    assert got.metrics == expected.metrics
    assert (got.coverage, got.n_samples, got.warnings, got.extra) == (
        expected.coverage,
        expected.n_samples,
        expected.warnings,
        expected.extra,
    )
    for key in expected.metrics:
        assert got.summary(key) == expected.summary(key)  # the same mergeable sketches
    assert not got.summary("latency_ms").exact and got.summary("ndcg@5").exact


# --------------------------------------------------------------------------- a killed worker


HANG = 120.0  # seconds: a wait this long means a hang; no pass or fail depends on speed


def _held(marks: str, make: Any, part: list[Any]) -> list[Any]:
    """Build one partition, leaving start and done marks named after this process; in
    between, wait for the test's ``go`` mark (the test kills a worker while it waits)."""
    token = f"{part[0]}-{os.getpid()}-{uuid.uuid4().hex}"
    Path(marks, f"start-{token}").touch()
    deadline = time.monotonic() + HANG
    while not Path(marks, "go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no go mark within {HANG:g} s")
        time.sleep(0.01)
    items = make(part)
    Path(marks, f"done-{token}").touch()
    return list(items)


def _kill_one_mid_task(marks: Path, pids: set[int]) -> tuple[int, str]:
    """SIGKILL a worker while it is inside a partition (held there: no ``go`` mark yet);
    returns (pid, partition)."""
    assert not (marks / "go").exists()
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        for mark in sorted(marks.glob("start-*")):
            part, pid, _ = mark.name.removeprefix("start-").split("-")
            if int(pid) in pids:
                assert not (marks / mark.name.replace("start-", "done-")).exists()
                os.kill(int(pid), signal.SIGKILL)
                return int(pid), part
        time.sleep(0.01)
    raise AssertionError("no partition was seen running")


def _runs_per_partition(marks: Path) -> dict[str, set[int]]:
    runs: dict[str, set[int]] = {}
    for mark in marks.glob("start-*"):
        part, pid, _ = mark.name.removeprefix("start-").split("-")
        runs.setdefault(part, set()).add(int(pid))
    return runs


@pytest.mark.parametrize("kind", ["rag", "run"])
def test_a_worker_killed_mid_run_is_replaced_and_nothing_is_lost_or_counted_twice(
    client: Client, tmp_path: Path, kind: str
) -> None:
    pids = set(_workers(client).values())
    marks = tmp_path / "marks"
    marks.mkdir()
    if kind == "rag":
        samples = [s for p in range(12) for s in _generate(p, 1500)]
        expected: Any = ragmeter.evaluate_rag(samples, metrics=RAG_METRICS)
        make = partial(_held, str(marks), lambda part: _generate(part[0], 1500))
        bag = db.from_sequence(range(12), npartitions=12).map_partitions(make)

        def evaluate() -> Any:
            return rdask.evaluate_rag(bag, metrics=RAG_METRICS, client=client, per_sample=True)

    else:
        qrels, run = (
            read_qrels(DATA / "vaswani/qrels.tsv"),
            read_trec_run(DATA / "vaswani/bm25.run"),
        )
        expected = ragmeter.evaluate_run(qrels, dict(run))
        items = list(run.items())
        chunks = [items[i::12] for i in range(12)]
        make = partial(_held, str(marks), lambda part: chunks[part[0]])
        bag = db.from_sequence(range(12), npartitions=12).map_partitions(make)

        def evaluate() -> Any:
            return rdask.evaluate_run(qrels, bag, client=client, per_query=True)

    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(evaluate)
        try:
            killed, part = _kill_one_mid_task(marks, pids)
        finally:
            (marks / "go").touch()  # the partitions go on; the killed one is redone elsewhere
        got = future.result(timeout=180)
    assert got == expected  # every number, per-item score and warning: nothing lost or doubled
    assert got.to_json() == expected.to_json()
    runs = _runs_per_partition(marks)
    assert len(runs) == 12
    assert killed in runs[part] and len(runs[part]) == 2  # redone by another process
    replacement = set(_workers(client).values())  # the nanny started a new worker
    assert killed not in replacement and len(replacement) == 2


# --------------------------------------------------------------------------- judges


def _logged_verdict(log: str | None, messages: Any) -> str:
    """A deterministic verdict; each call is logged with this process's id."""
    if log is not None:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    return '{"score": %s}' % (len(messages[-1].content) % 11 / 10)


def test_judges_on_two_workers_share_the_cache_and_one_budget(
    client: Client, tmp_path: Path
) -> None:
    samples = [s for s in _generate(99, 400) if s["retrieved_contexts"]][:60]
    assert len({s["response"] + str(s["retrieved_contexts"]) for s in samples}) == 60
    plain = Faithfulness(judge=FunctionJudge(partial(_logged_verdict, None), model="m"))
    expected = ragmeter.evaluate_rag(samples, metrics=["token_f1", plain], judge_cache=None)
    calls = tmp_path / "calls.log"
    judge = FunctionJudge(partial(_logged_verdict, str(calls)), model="m")
    metrics: list[Any] = ["token_f1", Faithfulness(judge=judge)]
    bag = db.from_sequence(samples, npartitions=6)
    cache = tmp_path / "shared" / "judge.sqlite"  # one file, written by both workers

    first = rdask.evaluate_rag(
        bag, metrics=metrics, judge_cache=cache, client=client, per_sample=True
    )
    assert (first.metrics, first.per_sample, first.details) == (
        expected.metrics,
        expected.per_sample,
        expected.details,
    )
    callers = calls.read_text().split()
    assert len(callers) == 60 == first.extra["judge_calls"] == first.extra["judge_budget"]["calls"]
    assert set(map(int, callers)) == set(_workers(client).values())  # both workers judged

    again = rdask.evaluate_rag(bag, metrics=metrics, judge_cache=cache, client=client)
    assert again.metrics == expected.metrics
    assert (again.extra["judge_calls"], again.extra["judge_cache_hits"]) == (0, 60)
    assert len(calls.read_text().split()) == 60  # served from the shared cache

    capped = rdask.evaluate_rag(
        bag,
        metrics=metrics,
        judge_cache=tmp_path / "fresh.sqlite",
        judge_options=JudgeOptions(max_calls=13, concurrency=4),
        client=client,
    )
    assert len(calls.read_text().split()) == 60 + 13  # 13 calls sent across both workers
    assert capped.extra["judge_calls"] == 13 == capped.coverage["judge_faithfulness"]
    assert capped.extra["judge_budget"] == {"calls": 13, "tokens": 0}
    assert capped.incomplete and capped.extra["stop_reason"] == "call budget of 13 reached"
