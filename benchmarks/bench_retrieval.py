"""Side-by-side benchmark: ragmeter ``evaluate_run`` vs pytrec_eval, ranx and ir-measures.

Each library is timed on the whole call from Python dicts to mean metrics (NDCG@10,
recall@100, P@10, MRR, MAP) on synthetic qrels/runs, in one process, on one core. The
agreement of the means is checked before any time is printed. Peak memory is the growth of
the resident set size (``VmHWM``) during one call, measured in a forked child so that C/C++
allocations (pytrec_eval, numba) count too.

Run::

    python benchmarks/bench_retrieval.py            # 1k x 100, 10k x 100, 10k x 1,000
    python benchmarks/bench_retrieval.py --quick    # 1k x 100 only, one repeat

ragmeter is timed with each of its kernels, side by side: ``ragmeter [c]`` (the optional
compiled kernel, when it is built) and ``ragmeter [python]`` (the pure-Python reference),
whatever ``RAGMETER_PURE_PYTHON`` says.

Needs ``pip install ranx ir-measures pytrec-eval-terrier`` (``ragmeter[bench]``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import math
import os
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from ragmeter.evaluation import _query, scoring
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.metrics import _kernel

Qrels = dict[str, dict[str, int]]
ListRun = dict[str, list[str]]
ScoredRun = dict[str, dict[str, float]]
Means = dict[str, float]

KEYS = ("ndcg@10", "recall@100", "P@10", "MRR", "MAP")
SIZES: tuple[tuple[int, int], ...] = ((1_000, 100), (10_000, 100), (10_000, 1_000))


# --------------------------------------------------------------------------- data


def make_data(
    n_queries: int, depth: int, *, seed: int = 0, with_scores: bool = True
) -> tuple[Qrels, ListRun, ScoredRun]:
    """Synthetic qrels and a run of ``depth`` distinct docs per query (fixed seed).

    Each query has 1-20 judgements with grades 0-3, at least one of them relevant; about
    60% of the judged docs are retrieved, mostly near the top. Scores strictly decrease
    down each ranking, so every library sees the same order. Doc ids are fresh string
    objects per query, and the qrels hold their own copies, as when both are read from
    files or returned by a retriever; the list run and the scored run share them
    (``with_scores=False``: the scored run is left empty, for a million queries).
    """
    rng = random.Random(f"ragmeter-bench-{seed}-{n_queries}-{depth}")
    n_docs = max(1_000_000, 20 * depth)
    scores = [float(depth - i) for i in range(depth)]
    qrels: Qrels = {}
    run: ListRun = {}
    scored: ScoredRun = {}
    for qi in range(n_queries):
        qid = f"q{qi}"
        judged = rng.sample(range(n_docs), rng.randint(1, 20))
        grades = [rng.randint(0, 3) for _ in judged]
        if max(grades) == 0:
            grades[0] = rng.randint(1, 3)
        qrels[qid] = {f"doc{d}": g for d, g in zip(judged, grades, strict=True)}
        ranked = rng.sample(range(n_docs), depth)
        present = set(ranked)
        for d in judged:
            if d in present or rng.random() >= 0.6:
                continue
            pos = min(int(rng.expovariate(10.0 / depth)), depth - 1)
            present.discard(ranked[pos])
            ranked[pos] = d
            present.add(d)
        docs = [f"doc{d}" for d in ranked]
        run[qid] = docs
        if with_scores:
            scored[qid] = dict(zip(docs, scores, strict=True))
    return qrels, run, scored


# --------------------------------------------------------------------------- libraries


def run_ragmeter(qrels: Qrels, run: ListRun, scored: ScoredRun) -> Means:
    """ragmeter from its native input, a ranked list per query."""
    report = evaluate_run(
        qrels,
        run,
        k_values=(10, 100),
        metrics=("ndcg", "recall", "precision", "mrr", "map"),
    )
    m = report.metrics
    return {
        "ndcg@10": m["ndcg@10"],
        "recall@100": m["recall@100"],
        "P@10": m["precision@10"],
        "MRR": m["mrr"],
        "MAP": m["map"],
    }


def with_kernel(
    kernel: _kernel.ScoreQuery, fn: Callable[[Qrels, ListRun, ScoredRun], Means]
) -> Callable[[Qrels, ListRun, ScoredRun], Means]:
    """``fn`` with ``evaluate_run`` using ``kernel`` (restored afterwards)."""

    def run(qrels: Qrels, run: ListRun, scored: ScoredRun) -> Means:
        modules = (scoring, _query)  # the scoring loop and its per-query fallback
        saved = [getattr(m, "score_query") for m in modules]  # noqa: B009 (not re-exported)
        for module in modules:
            setattr(module, "score_query", kernel)  # noqa: B010
        try:
            return fn(qrels, run, scored)
        finally:
            for module, old in zip(modules, saved, strict=True):
                setattr(module, "score_query", old)  # noqa: B010

    return run


def run_ragmeter_from_scores(qrels: Qrels, run: ListRun, scored: ScoredRun) -> Means:
    """ragmeter from a ``{doc: score}`` dict, sorting each query in trec_eval's order first."""
    ranked = {q: _trec_order(docs) for q, docs in scored.items()}
    return run_ragmeter(qrels, ranked, scored)


def _trec_order(docs: Mapping[str, float]) -> list[str]:
    """Doc ids by score descending, ties by doc id descending (trec_eval's order)."""
    return sorted(docs, key=lambda d: (docs[d], d), reverse=True)


def run_pytrec_eval(qrels: Qrels, run: ListRun, scored: ScoredRun) -> Means:
    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "recall.100", "P.10", "recip_rank", "map"}
    )
    per_q = evaluator.evaluate(scored)
    n = len(per_q)
    names = {
        "ndcg@10": "ndcg_cut_10",
        "recall@100": "recall_100",
        "P@10": "P_10",
        "MRR": "recip_rank",
        "MAP": "map",
    }
    return {key: math.fsum(r[m] for r in per_q.values()) / n for key, m in names.items()}


def run_ranx(qrels: Qrels, run: ListRun, scored: ScoredRun) -> Means:
    import ranx

    result = ranx.evaluate(
        ranx.Qrels(qrels),
        ranx.Run(scored),
        ["ndcg@10", "recall@100", "precision@10", "mrr", "map"],
        threads=1,
        save_results_in_run=False,
    )
    return {
        "ndcg@10": float(result["ndcg@10"]),
        "recall@100": float(result["recall@100"]),
        "P@10": float(result["precision@10"]),
        "MRR": float(result["mrr"]),
        "MAP": float(result["map"]),
    }


def run_ir_measures(qrels: Qrels, run: ListRun, scored: ScoredRun) -> Means:
    import ir_measures
    from ir_measures import AP, RR, P, R, nDCG

    m = ir_measures.calc_aggregate([nDCG @ 10, R @ 100, P @ 10, RR, AP], qrels, scored)
    return {
        "ndcg@10": float(m[nDCG @ 10]),
        "recall@100": float(m[R @ 100]),
        "P@10": float(m[P @ 10]),
        "MRR": float(m[RR]),
        "MAP": float(m[AP]),
    }


LIBRARIES: dict[str, Callable[[Qrels, ListRun, ScoredRun], Means]] = {
    **(
        {"ragmeter [c]": with_kernel(_kernel.c_score_query, run_ragmeter)}
        if _kernel.c_score_query is not None
        else {}
    ),
    "ragmeter [python]": with_kernel(_kernel.py_score_query, run_ragmeter),
    f"ragmeter [{_kernel.BACKEND}] (scored dict, sorts)": run_ragmeter_from_scores,
    "pytrec_eval": run_pytrec_eval,
    "ranx": run_ranx,
    "ir-measures": run_ir_measures,
}
REFERENCE = "pytrec_eval"


# --------------------------------------------------------------------------- measuring


def time_all(
    libs: Sequence[str], data: tuple[Qrels, ListRun, ScoredRun], repeat: int
) -> tuple[dict[str, float], dict[str, Means]]:
    """Best-of-``repeat`` CPU seconds per library, the libraries interleaved in each round."""
    times = dict.fromkeys(libs, math.inf)
    results: dict[str, Means] = {}
    for _ in range(repeat):
        for lib in libs:
            gc.collect()
            start = time.process_time()
            results[lib] = LIBRARIES[lib](*data)
            times[lib] = min(times[lib], time.process_time() - start)
    return times, results


def _release_free_memory() -> None:
    """Give freed heap back to the OS, so the RSS growth measured next is new memory."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _rss_growth_kb(fn: Callable[[], Any]) -> int:
    _release_free_memory()
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")  # reset VmHWM (peak RSS) to the current RSS
    base = _status_kb("VmRSS")
    fn()
    return _status_kb("VmHWM") - base


def _python_peak_kb(fn: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak // 1024


def _in_child(measure: Callable[[Callable[[], Any]], int], fn: Callable[[], Any]) -> float | None:
    """Run ``measure(fn)`` in a forked child (a fresh copy of this process); MB or None."""
    if not hasattr(os, "fork") or not os.path.exists("/proc/self/clear_refs"):
        return None
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report through the pipe, never return into the parent's code
        code = 0
        try:
            os.close(read_fd)
            os.write(write_fd, str(measure(fn)).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        text = fh.read()
    os.waitpid(pid, 0)
    return int(text) / 1024 if text else None


def peak_memory_mb(fn: Callable[[], Any]) -> tuple[float | None, float | None]:
    """``(RSS growth, Python heap peak)`` of one call, each measured in its own child.

    Both are lower bounds of the memory a call needs: RSS growth misses allocations that
    fit in memory the process already holds, tracemalloc misses allocations made outside
    Python's allocator (pytrec_eval's C++, numba). The larger one is reported as the peak.
    """
    return _in_child(_rss_growth_kb, fn), _in_child(_python_peak_kb, fn)


def _agreement(results: Mapping[str, Means], reference: str) -> list[str]:
    lines = []
    ref = results[reference]
    for lib, means in results.items():
        if lib == reference:
            continue
        diffs = {k: abs(means[k] - ref[k]) for k in KEYS}
        worst = max(diffs, key=lambda k: diffs[k])
        status = "agree" if diffs[worst] <= 1e-9 else "DISAGREE"
        lines.append(f"  {lib:<34} {status} (max |diff| {diffs[worst]:.1e} on {worst})")
    return lines


def bench_size(
    n_queries: int, depth: int, *, repeat: int, memory: bool, libs: Sequence[str]
) -> None:
    t0 = time.perf_counter()
    qrels, run, scored = make_data(n_queries, depth)
    print(
        f"\n== {n_queries:,} queries x {depth:,} docs "
        f"({sum(map(len, qrels.values())):,} judgements; generated in "
        f"{time.perf_counter() - t0:.1f}s) =="
    )
    times, results = time_all(libs, (qrels, run, scored), repeat)
    mems: dict[str, tuple[float | None, float | None]] = {}
    if memory:
        for lib in libs:
            mems[lib] = peak_memory_mb(partial(LIBRARIES[lib], qrels, run, scored))
    print("means:", {k: round(v, 6) for k, v in results[REFERENCE].items()})
    print(f"agreement with {REFERENCE} (tolerance 1e-9):")
    print("\n".join(_agreement(results, REFERENCE)))
    peaks = {
        lib: max((m for m in mems.get(lib, ()) if m is not None), default=None) for lib in libs
    }
    ref_t, ref_m = times[REFERENCE], peaks[REFERENCE]
    print(
        f"  {'library':<34} {'CPU s':>7} {'speed vs pytrec_eval':>21}   "
        f"{'RSS+ MB':>8} {'py heap MB':>10} {'peak vs pytrec_eval':>20}"
    )
    for lib in libs:
        rss, heap = mems.get(lib, (None, None))
        peak = peaks[lib]
        ratio_m = "-" if peak is None or not ref_m else f"{peak / ref_m:.2f}x"
        print(
            f"  {lib:<34} {times[lib]:>7.3f} {ref_t / times[lib]:>20.2f}x   "
            f"{_mb(rss):>8} {_mb(heap):>10} {ratio_m:>20}"
        )


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _one_core() -> None:
    """Pin this process to one CPU and keep numba/OpenMP/BLAS to one thread."""
    for var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # before ranx imports numba (lazily, in run_ranx)
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[-1]})


def _warm_up(libs: Sequence[str]) -> None:
    """Import every library and JIT-compile ranx on a tiny input (not timed)."""
    qrels, run, scored = make_data(20, 20, seed=1)
    for lib in libs:
        LIBRARIES[lib](qrels, run, scored)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k x 100 only, one repeat")
    parser.add_argument("--repeat", type=int, default=None, help="best of N timings per size")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory pass")
    parser.add_argument(
        "--only", nargs="*", default=None, choices=sorted(LIBRARIES), help="libraries to run"
    )
    args = parser.parse_args(argv)
    libs = list(args.only or LIBRARIES)
    if REFERENCE not in libs:
        libs.append(REFERENCE)
    _one_core()
    _warm_up(libs)
    print(
        f"python {sys.version.split()[0]}, pinned to one core; times are CPU seconds "
        "(time.process_time, best of N), robust to other load on a shared machine; "
        f"compiled kernel {'built' if _kernel.c_score_query is not None else 'NOT built'}, "
        f"default backend {_kernel.BACKEND!r}"
    )
    sizes = SIZES[:1] if args.quick else SIZES
    for n_queries, depth in sizes:
        repeat = args.repeat or (1 if args.quick or n_queries * depth >= 10**7 else 3)
        bench_size(n_queries, depth, repeat=repeat, memory=not args.no_memory, libs=libs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
