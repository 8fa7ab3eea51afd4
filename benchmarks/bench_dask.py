"""Benchmark: ragmeter.dask on a LocalCluster of 1 and of 2 workers, next to one process.

Three workloads, each timed in one run, side by side, the contenders interleaved in every
round (best of ``--rounds``):

* ``evaluate_rag``: synthetic samples (a response of 1-8 words, a reference, 0-3 contexts
  of 3-12 words, a ranking of 1-10 graded docs, a latency) scored on exact_match,
  token_f1, faithfulness, latency_ms, ndcg@5, precision@5 and map@5, per-sample scores not
  kept;
* ``evaluate_run``: a synthetic run of 100 docs per query with 1-20 graded judgements per
  query, every metric at k = 1, 3, 5, 10, 20, 100;
* ``evaluate_run`` on Cranfield (225 queries): what the scheduling costs on a small job.

Contenders: ``ragmeter`` in this process (``evaluate_rag`` streaming a generator,
``evaluate_run`` on a dict), and ``ragmeter.dask`` on a ``distributed.LocalCluster`` of 1
and of 2 worker processes (one thread each). The cluster's data is generated on its workers
and persisted before timing (partition ``i`` is the same data on every contender), so the
times are scoring, merging and scheduling, not the transfer of the input; the qrels travel
with each call. Times are wall-clock seconds (parallel speed-up is a wall-clock matter), so
run it on a quiet machine. Each contender runs every workload once untimed first (imports
and caches in the worker processes). Before any time is printed, every contender's metrics
are asserted equal, bit for bit, to the single process's.

    python benchmarks/bench_dask.py              # 200k samples, 50k queries, best of 3
    python benchmarks/bench_dask.py --quick      # 20k samples, 5k queries, 1 round

Results (this project's machine: 2 shared cores, 24 GiB, Python 3.11.7, dask and
distributed 2026.8.0, ``--rounds 5``, other jobs keeping the load average at 1-2; wall-clock,
best of 5; speed-up = the 1-worker time / the 2-worker time):

=====================================  =========  =============  ==============  ========
workload                               1 process  Dask 1 worker  Dask 2 workers  speed-up
=====================================  =========  =============  ==============  ========
evaluate_rag, 200,000 samples          3.08 s     3.03 s         1.70 s          1.78x
evaluate_run, 50,000 queries x 100     0.55 s     1.34 s         1.45 s          0.92x
evaluate_run, Cranfield (225 queries)  3 ms       29 ms          51 ms           0.58x
=====================================  =========  =============  ==============  ========

Answer metrics scale (CPU-bound Python, 1 worker = 1 process). ``evaluate_run`` does not on
this machine: most of its Dask time is pickling the qrels once and unpickling them in each
worker, and the client, the scheduler and two workers share two cores.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import logging
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

WORDS = ["paris", "france", "capital", "river", "city", "the", "a", "of", "big", "small"]
RAG_METRICS = ["exact_match", "token_f1", "faithfulness", "latency_ms", "ndcg", "precision", "map"]


def samples_of(part: int, size: int) -> list[dict[str, Any]]:
    """Partition ``part`` of the synthetic samples (deterministic)."""
    rng = random.Random(part)
    out: list[dict[str, Any]] = []
    for i in range(size):
        docs = rng.sample(range(40), rng.randint(1, 10))
        out.append(
            {
                "id": f"p{part}-{i}",
                "user_input": "q",
                "response": " ".join(rng.choices(WORDS, k=rng.randint(1, 8))),
                "reference": " ".join(rng.choices(WORDS, k=rng.randint(1, 5))),
                "retrieved_contexts": [
                    " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
                    for _ in range(rng.randint(0, 3))
                ],
                "retrieved_ids": [f"d{d}" for d in docs],
                "relevance": {f"d{d}": rng.randint(0, 3) for d in rng.sample(range(40), 5)},
                "latency_ms": round(rng.random() * 2000, 3),
            }
        )
    return out


def run_of(part: int, size: int, parts: int) -> list[tuple[str, list[str]]]:
    """Partition ``part`` of the synthetic run: queries ``part, part + parts, ...``."""
    out = []
    for q in range(part, size, parts):
        rng = random.Random(q)
        out.append((f"q{q}", [f"d{rng.randrange(10**6)}-{j}" for j in range(100)]))
    return out


def qrels_of(size: int, parts: int) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for part in range(parts):
        for qid, ranking in run_of(part, size, parts):
            rng = random.Random(qid)
            judged = rng.sample(ranking, rng.randint(1, 20))
            qrels[qid] = {d: rng.randint(0, 3) for d in judged}
            qrels[qid][judged[0]] = max(1, qrels[qid][judged[0]])
    return qrels


def best(timings: list[float]) -> str:
    value = min(timings)
    return f"{value:.2f} s" if value >= 0.1 else f"{value * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k samples, 5k queries, 1 round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=16)
    args = parser.parse_args()
    if args.quick:
        args.samples, args.queries, args.rounds = 20_000, 5_000, 1

    import dask
    import dask.bag as db
    import distributed
    from distributed import Client, LocalCluster, futures_of, wait

    import ragmeter
    import ragmeter.dask as rdask

    logging.getLogger("distributed").setLevel(logging.ERROR)
    parts = args.partitions
    per_part = args.samples // parts
    clients: dict[int, Client] = {}
    clusters = []
    for workers in (1, 2):
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": ":0"},
            silence_logs=logging.ERROR,
        )
        clusters.append(cluster)
        clients[workers] = Client(cluster, set_as_default=False)

    print(f"generating {args.samples:,} samples and a run of {args.queries:,} queries ...")
    local_samples = [s for p in range(parts) for s in samples_of(p, per_part)]
    local_run = dict(
        itertools.chain.from_iterable(run_of(p, args.queries, parts) for p in range(parts))
    )
    qrels = qrels_of(args.queries, parts)
    _, _, cran_qrels = ragmeter.load_cranfield()
    cran_run = dict(ragmeter.load_cranfield_bm25_run())

    bags: dict[str, dict[int, Any]] = {"rag": {}, "run": {}, "cran": {}}
    for workers, client in clients.items():
        seeds = db.from_sequence(range(parts), npartitions=parts)
        bags["rag"][workers] = client.persist(
            seeds.map_partitions(lambda p: [s for i in p for s in samples_of(i, per_part)])
        )
        bags["run"][workers] = client.persist(
            seeds.map_partitions(lambda p: [x for i in p for x in run_of(i, args.queries, parts)])
        )
        bags["cran"][workers] = client.persist(
            db.from_sequence(list(cran_run.items()), npartitions=4)
        )
        with client.as_current():
            wait(futures_of([bags[name][workers] for name in bags]))

    workloads: dict[str, tuple[str, Callable[[], Any], Callable[[int], Any]]] = {
        "rag": (
            f"evaluate_rag, {args.samples:,} samples",
            lambda: ragmeter.evaluate_rag(iter(local_samples), metrics=RAG_METRICS),
            lambda w: rdask.evaluate_rag(bags["rag"][w], metrics=RAG_METRICS, client=clients[w]),
        ),
        "run": (
            f"evaluate_run, {args.queries:,} queries x 100",
            lambda: ragmeter.evaluate_run(qrels, local_run),
            lambda w: rdask.evaluate_run(qrels, bags["run"][w], client=clients[w]),
        ),
        "cran": (
            "evaluate_run, Cranfield (225 queries)",
            lambda: ragmeter.evaluate_run(cran_qrels, cran_run),
            lambda w: rdask.evaluate_run(cran_qrels, bags["cran"][w], client=clients[w]),
        ),
    }
    for _, single, on_dask in workloads.values():  # warm up: imports, caches, connections
        single()
        on_dask(1)
        on_dask(2)
    rows = []
    for label, single, on_dask in workloads.values():
        times: dict[str, list[float]] = {"1p": [], "1w": [], "2w": []}
        reference = None
        for _ in range(args.rounds):
            for contender in ("1p", "1w", "2w"):
                gc.collect()
                start = time.perf_counter()
                report = single() if contender == "1p" else on_dask(int(contender[0]))
                times[contender].append(time.perf_counter() - start)
                if reference is None:
                    reference = report.metrics
                assert report.metrics == reference, f"{label}: {contender} differs"
        speedup = min(times["1w"]) / min(times["2w"])
        rows.append((label, *(best(times[c]) for c in ("1p", "1w", "2w")), f"{speedup:.2f}x"))
        print(f"  {label}: done ({statistics.mean(times['2w']):.2f} s mean on 2 workers)")

    for client in clients.values():
        client.close()
    for cluster in clusters:
        cluster.close()

    header = ("workload", "1 process", "Dask 1 worker", "Dask 2 workers", "speed-up 2 vs 1")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print()
    print(
        f"dask {dask.__version__}, distributed {distributed.__version__}; wall-clock, best of "
        f"{args.rounds}; {parts} partitions; every contender's metrics equal to 1 process's"
    )
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


if __name__ == "__main__":
    main()
