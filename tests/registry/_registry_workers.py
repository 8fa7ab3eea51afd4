"""Worker functions the concurrency tests start in other processes (multiprocessing spawn
imports this module by name, so it lives beside the tests and is put on ``sys.path``)."""

from __future__ import annotations

from pathlib import Path

import ragmeter
from ragmeter.registry import Registry

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


def report() -> ragmeter.RetrievalEvalReport:
    """trec_eval's own test run scored against its qrels."""
    qrels = ragmeter.read_trec_qrels(DATA / "qrels.test")
    run = ragmeter.read_trec_run(DATA / "results.test")
    return ragmeter.evaluate_run(qrels, run, k_values=(5, 10), metrics=["ndcg", "recall", "map"])


def save_many(path: str, worker: int, count: int) -> list[str]:
    """Save ``count`` runs named ``w<worker>`` (each its own connection, as separate CLI
    calls would); their ids."""
    made = report()
    ids = []
    for i in range(count):
        with Registry(path) as registry:
            tags = {"worker": str(worker), "i": str(i)}
            record = registry.save(made, name=f"w{worker}", tags=tags)
        ids.append(record.id)
    return ids


def save_forever(path: str) -> None:
    """Save runs until killed."""
    made = report()
    with Registry(path) as registry:
        while True:
            registry.save(made, name="looping")
