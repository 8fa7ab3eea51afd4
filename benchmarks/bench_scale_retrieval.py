"""Time per query of ``evaluate_run`` from dicts, 1k to 1M queries, beside pytrec_eval,
ir_measures and ranx; and ``evaluate_run_file`` on a 1M-query run file in bounded memory.

Every measurement runs in a fresh child process: it builds the data (``make_data`` of
``bench_retrieval.py``: 1-20 judgements a query, 100 docs a ranking, fresh id strings), calls
the library once to warm it, then times the call ``--repeats`` times and keeps the best CPU
time (``time.process_time``: robust to other load on a shared machine). Each timed call starts
with the data out of the CPU's caches (a 128 MB buffer is written before it; ``--warm`` skips
that), as one evaluation of a run read a while ago does: otherwise the small sizes' data stays
in the 32 MB L3 from one repeat to the next and they look faster per query than they are.
Peak memory is the
growth of the resident set during one call (``VmHWM`` reset through ``/proc/self/clear_refs``,
minus ``VmRSS`` before), so C/C++ allocations count too. Each library computes NDCG@10,
recall@100, P@10, MRR and MAP; ragmeter's means are checked against pytrec_eval's. ranx is
called from dicts (``Qrels(dict)``, ``Run(dict)``: its fastest input from memory, building its
numba typed dicts is timed as pytrec_eval's own structures are) with ``threads=1``; numba
compiles its kernels on the first call, so the warm-up call (50 queries) is reported apart as
``compile_s`` and not in the time per query.

The plot (``--plot``, or after any run) has two panels: the scoring from memory measured here,
and the scoring from Parquet files of ``bench_columnar.py`` (``results/columnar.json``: each
library by its fastest input path, read plus score; ragmeter's ``evaluate_run_columns`` to 1M
queries). A library is run up to the largest size that fits this machine (23 GB): its line
stops there, and the legend says so with its memory at that size.

``--file N`` writes a TREC run of ``N`` queries x 100 docs to a temporary directory (about
3.5 GB at 1M; deleted after) and scores it with ``evaluate_run_file(per_query=False)`` and
with the per-query scores streamed to a JSONL file: CPU time and the peak growth of the
resident set over the qrels already in memory.

    python benchmarks/bench_scale_retrieval.py                       # 1k, 10k, 100k
    python benchmarks/bench_scale_retrieval.py --sizes 1000,10000,100000,1000000 --libs ragmeter
    python benchmarks/bench_scale_retrieval.py --file 1000000        # item 4: the 1M file
    python benchmarks/bench_scale_retrieval.py --libs ragmeter --before /path/to/old/src
    python benchmarks/bench_scale_retrieval.py --sizes 1000,10000,100000 --libs ranx
    python benchmarks/bench_scale_retrieval.py --plot                 # redraw from the results
    python benchmarks/bench_scale_retrieval.py --libs ragmeter --nested 5 \
        --sizes 1000,10000,100000,1000000    # every size on one data set, interleaved

Results go to ``benchmarks/results/scale_retrieval.json`` (merged with earlier runs by
library and size) and the plot to ``benchmarks/results/scale_retrieval.png`` (needs
matplotlib, ``ragmeter[bench]``).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
LIBS = ("ragmeter", "pytrec_eval", "ir_measures", "ranx")
BEFORE = "ragmeter (before)"
"""ragmeter run from another source tree (``--before SRC``), e.g. the last release's."""
DEPTH = 100


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


EVICT_MB = 128
"""Written between timed calls so that each starts with the data out of the CPU's caches (see
:func:`_evict`; ``--warm`` turns it off)."""


def _evict() -> None:
    """Write a buffer of ``EVICT_MB`` (four times this machine's 32 MB L3) so that none of
    the data of the last call, nor what ``gc.collect`` just walked, is left in cache. Every
    timed call then starts cold, as one evaluation of a run read or produced a while ago
    does. Without it, the smaller sizes' rankings and qrels stay in L3 from one repeat to the
    next (best-of-N then favours them), and time per query looks to rise with size when it
    is only the cache."""
    if EVICT_MB:
        buffer = bytearray(EVICT_MB << 20)
        buffer[::64] = bytes(len(buffer) // 64)  # one write per cache line
        del buffer


def _measure(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Best CPU seconds of ``fn`` over ``repeats`` calls, each started with cold caches, and
    the peak growth of the resident set (MB) during the first of them."""
    best = math.inf
    peak = 0.0
    out: Any = None
    for i in range(repeats):
        out = None
        gc.collect()
        _evict()
        if i == 0:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset VmHWM to the current RSS
            before = _status_kb("VmRSS")
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
        if i == 0:
            peak = (_status_kb("VmHWM") - before) / 1024
    return best, peak, out


def _data_for(lib: str, n: int) -> tuple[Any, Any, Any, Callable[..., Any]]:
    """``n`` queries of ``make_data`` (qrels, rankings, scored rankings) as ``lib`` takes
    them (ragmeter rankings, the peers scored ones), and ``lib``'s scoring function."""
    sys.path.insert(0, str(HERE))
    import bench_retrieval as br

    mine = lib in ("ragmeter", BEFORE)
    qrels, run, scored = br.make_data(n, DEPTH, with_scores=not mine)
    if mine:
        return qrels, run, scored, br.run_ragmeter
    peers = {"pytrec_eval": br.run_pytrec_eval, "ranx": br.run_ranx}
    return qrels, {}, scored, peers.get(lib, br.run_ir_measures)


def _child_dicts(lib: str, n: int, repeats: int) -> dict[str, Any]:
    qrels, run, scored, fn = _data_for(lib, n)
    small = dict(list(qrels.items())[:50])
    start = time.process_time()  # the first call: imports, and numba's compilation (ranx)
    fn(small, {q: run[q] for q in small if q in run}, {q: scored[q] for q in small if q in scored})
    warm = time.process_time() - start
    cpu, peak, means = _measure(lambda: fn(qrels, run, scored), repeats)
    out = {"lib": lib, "n": n, "cpu_s": cpu, "peak_mb": peak, "means": means}
    if lib == "ranx":
        out["compile_s"] = warm
    return out


def _child_nested(lib: str, sizes: list[int], rounds: int) -> dict[str, Any]:
    """``lib`` on the first ``n`` queries of one data set of ``max(sizes)`` queries, for each
    ``n``, and on ``n`` queries taken one in every ``max(sizes) / n`` (``"<n> spread"``: as
    many queries, their dicts spread over the whole data set's memory), in ``rounds`` rounds
    whose order rotates: every size is timed on the same data, within seconds of the others.
    This machine's speed swings by up to +-40% from minute to minute, so sizes measured in
    separate processes minutes apart can differ by that much for no reason of their own; here
    each round puts every size under the same swing."""
    qrels, run, scored, fn = _data_for(lib, max(sizes))
    order = list(qrels)
    parts: dict[str, tuple[dict[str, Any], ...]] = {}
    for n in sizes:
        subsets = {str(n): order[:n]}
        if n < len(order):  # the same number of queries, one in every len/n of the data set
            subsets[f"{n} spread"] = order[:: len(order) // n][:n]
        for label, keep in subsets.items():
            parts[label] = (
                {q: qrels[q] for q in keep},
                {q: run[q] for q in keep if q in run},
                {q: scored[q] for q in keep if q in scored},
            )
    fn(*(dict(list(d.items())[:50]) for d in parts[str(min(sizes))]))  # imports, compilation
    labels = list(parts)
    times: dict[str, list[float]] = {label: [] for label in labels}
    for r in range(rounds):
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            gc.collect()
            _evict()
            start = time.process_time()
            fn(*parts[label])
            times[label].append(time.process_time() - start)
    return {"lib": lib, "sizes": sizes, "times": times}


def _print_nested(found: dict[str, Any]) -> None:
    import statistics

    medians = {int(n): statistics.median(t) for n, t in found["times"].items() if " " not in n}
    rounds = len(found["times"][str(found["sizes"][0])])
    print(f"{found['lib']}, every size on one data set, {rounds} rounds (median CPU s; µs per "
          "query; added µs per query from the size before):")  # fmt: skip
    last = None
    for n in sorted(medians):
        t = medians[n]
        added = "" if last is None else f"{1e6 * (t - last[1]) / (n - last[0]):8.2f}"
        spread = found["times"][str(n)]
        print(f"  {n:>9,} {t:9.4f} s {1e6 * t / n:8.2f} µs {added}   "
              f"(rounds {min(spread):.4f}-{max(spread):.4f} s)")  # fmt: skip
        last = (n, t)
    spread = {k: statistics.median(t) for k, t in found["times"].items() if " " in k}
    if spread:
        print("  the same numbers of queries taken one in every N of the whole data set (their")
        print("  dicts spread over all of its memory, as the largest size's are):")
        for label, t in spread.items():
            n = int(label.split()[0])
            print(f"  {n:>9,} {t:9.4f} s {1e6 * t / n:8.2f} µs")


def _write_run(n: int, path: Path) -> dict[str, dict[str, int]]:
    """Write a TREC run of ``n`` queries x DEPTH docs (grouped by query, score descending)
    and return its qrels (make_data's recipe, generated query by query)."""
    rng = random.Random(f"ragmeter-scale-file-{n}")
    qrels: dict[str, dict[str, int]] = {}
    n_docs = 1_000_000
    with path.open("w") as out:
        for qi in range(n):
            qid = f"q{qi}"
            judged = rng.sample(range(n_docs), rng.randint(1, 20))
            grades = [rng.randint(0, 3) for _ in judged]
            if max(grades) == 0:
                grades[0] = rng.randint(1, 3)
            qrels[qid] = {f"doc{d}": g for d, g in zip(judged, grades, strict=True)}
            ranked = rng.sample(range(n_docs), DEPTH)
            for d in judged[: len(judged) * 3 // 5]:
                if d not in ranked:
                    ranked[min(int(rng.expovariate(10.0 / DEPTH)), DEPTH - 1)] = d
            seen: set[int] = set()
            lines = []
            for rank, d in enumerate(ranked):
                if d in seen:
                    continue
                seen.add(d)
                lines.append(f"{qid} Q0 doc{d} {rank + 1} {DEPTH - rank} bench\n")
            out.write("".join(lines))
    return qrels


def _child_file(n: int, tmp: str) -> list[dict[str, Any]]:
    from ragmeter import evaluate_run_file

    warm = Path(tmp) / "warm.txt"
    evaluate_run_file(_write_run(50, warm), warm, per_query=False)  # imports (numpy ...)
    warm.unlink()
    path = Path(tmp) / "run.txt"
    qrels = _write_run(n, path)
    size = path.stat().st_size
    results = []
    kwargs = {"k_values": (10, 100), "metrics": ("ndcg", "recall", "precision", "mrr", "map")}
    for label, per_query in (("not kept", False), ("to jsonl", Path(tmp) / "scores.jsonl")):
        gc.collect()
        rss = _status_kb("VmRSS") / 1024
        cpu, peak, report = _measure(
            lambda p=per_query: evaluate_run_file(qrels, path, per_query=p, **kwargs), 1
        )
        results.append(
            {
                "lib": f"ragmeter evaluate_run_file (per_query {label})",
                "n": n,
                "file_mb": size / 2**20,
                "cpu_s": cpu,
                "peak_mb": peak,
                "rss_before_mb": rss,
                "means": {k: report.metrics[k] for k in ("ndcg@10", "map")},
            }
        )
        del report
        (Path(tmp) / "scores.jsonl").unlink(missing_ok=True)
    return results


def _spawn(args: list[str], pythonpath: str | None = None) -> Any:
    env = dict(os.environ, PYTHONHASHSEED="0")
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _save(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "scale_retrieval.json"
    old = json.loads(path.read_text()) if path.exists() else []
    fresh = {(r["lib"], r["n"]) for r in rows}
    merged = [r for r in old if (r["lib"], r["n"]) not in fresh] + rows
    merged.sort(key=lambda r: (r["lib"], r["n"]))
    path.write_text(json.dumps(merged, indent=1) + "\n")
    return merged


FULL = 1_000_000
"""The largest size: a library whose line stops before it did not fit."""


def _stops(label: str, pts: list[tuple[int, float, float]]) -> str:
    """A legend label; for a line that stops short of :data:`FULL`, where it stops."""
    last = max(pts)
    return label if last[0] >= FULL else f"{label} (run to {last[0] // 1000}k)"


COLORS = {"ragmeter": "C0", "ragmeter columns": "C0", "pytrec_eval": "C1", "ir_measures": "C2",
          "ranx": "C3", BEFORE: "C4", "ragmeter dicts": "C5"}  # fmt: skip
"""One color per library in both panels."""

NOT_RUN = (
    "A line stopping at 100k: that library at 1M queries does not fit this 23 GB machine "
    "(from memory, the peers' input dicts with scores take over 13 GB; from Parquet, ranx "
    "peaks at 5.3 GB and pytrec_eval at 2.5 GB at 100k, growing linearly). ranx's numba "
    "compilation (5-7 s a fresh process) is not counted."
)


def _plot(rows: list[dict[str, Any]]) -> None:
    """Time per query: from memory (``rows``) and from Parquet (``results/columnar.json``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 6.2), sharey=True)
    for lib in (*LIBS, BEFORE):
        pts = sorted(
            (r["n"], 1e6 * r["cpu_s"] / r["n"], r["peak_mb"]) for r in rows if r["lib"] == lib
        )
        if pts:
            label = lib if lib != "ranx" else "ranx (Qrels/Run from dicts; numba compile apart)"
            style = "--" if lib == BEFORE else "-"
            left.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o",
                      color=COLORS.get(lib), label=_stops(label, pts))  # fmt: skip
    left.set_title("from memory: evaluate_run on dicts (bench_scale_retrieval.py)")
    columnar = RESULTS / "columnar.json"
    files = json.loads(columnar.read_text())["rows"] if columnar.exists() else []
    names = {"ragmeter columns": "ragmeter evaluate_run_columns",
             "ragmeter dicts": "ragmeter run_from_arrow + evaluate_run",
             "ranx": "ranx (read_parquet + from_df; numba compile apart)"}  # fmt: skip
    for lib in dict.fromkeys(r["library"] for r in files):
        pts = sorted(
            (r["n_queries"], r["per_query_us"], r["peak_mb"])
            for r in files
            if r["library"] == lib and "per_query_us" in r
        )
        if pts:
            right.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                       color=COLORS.get(lib), label=_stops(names.get(lib, lib), pts))  # fmt: skip
        user = sorted(
            (r["n_queries"], 1e6 * r["user_s"] / r["n_queries"])
            for r in files
            if r["library"] == lib == "ragmeter columns" and "user_s" in r
        )
        if user:  # the system part is first touches of pages, noisy on a shared machine
            color = right.lines[-1].get_color()
            right.plot([p[0] for p in user], [p[1] for p in user], ":", marker=".",
                       color=color, label=f"{names[lib]}: user CPU only")  # fmt: skip
    right.set_title("from Parquet files: read + score (bench_columnar.py)")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("queries (100 docs each)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1)
    left.set_ylabel("CPU time per query (µs)")
    fig.suptitle("Retrieval evaluation, 1k to 1M queries: CPU time per query (lower is better)")
    fig.text(0.5, 0.01, NOT_RUN, ha="center", fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(RESULTS / "scale_retrieval.png", dpi=110)


def _print(rows: list[dict[str, Any]]) -> None:
    print(f"{'library':58} {'queries':>9} {'CPU s':>8} {'µs/query':>9} {'peak MB':>8}")
    for r in rows:
        per = 1e6 * r["cpu_s"] / r["n"]
        print(f"{r['lib']:58} {r['n']:>9,} {r['cpu_s']:8.3f} {per:9.2f} {r['peak_mb']:8.1f}")


def marginal(rows: list[dict[str, Any]]) -> dict[str, list[tuple[int, int, float]]]:
    """Per library, the CPU time each added query costs between consecutive sizes
    (``(n1, n2, µs)``: ``(T(n2) - T(n1)) / (n2 - n1)``). A cost linear in the work is
    ``T(n) = fixed + per_query * n``; time per query ``T(n) / n`` then falls with ``n`` while
    the fixed part (a call's set-up; at 1k, code and data coming back into the caches)
    weighs, whereas the added cost per query stays the same at every size.

    >>> marginal([{"lib": "x", "n": 1000, "cpu_s": 0.004}, {"lib": "x", "n": 10000,
    ...           "cpu_s": 0.022}])
    {'x': [(1000, 10000, 2.0)]}
    """
    out: dict[str, list[tuple[int, int, float]]] = {}
    for lib in dict.fromkeys(r["lib"] for r in rows):
        pts = sorted((r["n"], r["cpu_s"]) for r in rows if r["lib"] == lib)
        steps = [
            (n1, n2, round(1e6 * (t2 - t1) / (n2 - n1), 3))
            for (n1, t1), (n2, t2) in itertools.pairwise(pts)
            if n2 > n1
        ]
        if steps:
            out[lib] = steps
    return out


def _print_marginal(rows: list[dict[str, Any]]) -> None:
    for lib, steps in marginal(rows).items():
        parts = ", ".join(f"{n1 // 1000}k->{n2 // 1000}k {us:.2f}" for n1, n2, us in steps)
        print(f"added CPU per query (µs), {lib}: {parts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--libs", default=",".join(LIBS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--file", type=int, default=0, help="score a run file of N queries")
    parser.add_argument("--before", help="also time ragmeter from this src directory")
    parser.add_argument("--plot", action="store_true", help="only redraw the plot")
    parser.add_argument(
        "--nested",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="time every size on one data set (the largest), ROUNDS rounds, sizes interleaved",
    )
    parser.add_argument(
        "--warm", action="store_true", help="do not evict the caches between timed calls"
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm:
        global EVICT_MB
        EVICT_MB = 0
    if args.child:
        if args.child[0] == "nested":
            sizes = [int(x) for x in args.child[2].split(",")]
            print(json.dumps(_child_nested(args.child[1], sizes, int(args.child[3]))))
        elif args.child[0] == "file":
            print(json.dumps(_child_file(int(args.child[1]), args.child[2])))
        else:
            lib, n = args.child[0], int(args.child[1])
            print(json.dumps(_child_dicts(lib, n, args.repeats)))
        return
    if args.plot:
        _plot(json.loads((RESULTS / "scale_retrieval.json").read_text()))
        return
    if args.nested:
        for lib in [x for x in args.libs.split(",") if x]:
            warm = ["--warm"] if args.warm else []
            found = _spawn(["nested", lib, args.sizes, str(args.nested), *warm])
            _print_nested(found)
        return
    rows: list[dict[str, Any]] = []
    if args.file:
        with tempfile.TemporaryDirectory() as tmp:
            rows.extend(_spawn(["file", str(args.file), tmp]))
    else:
        warm = ["--warm"] if args.warm else []
        for n in [int(s) for s in args.sizes.split(",")]:
            for lib in [x for x in args.libs.split(",") if x]:
                rows.append(_spawn([lib, str(n), "--repeats", str(args.repeats), *warm]))
                _print(rows[-1:])
            if args.before:
                rows.append(
                    _spawn([BEFORE, str(n), "--repeats", str(args.repeats), *warm], args.before)
                )
                _print(rows[-1:])
            ref = next((r for r in rows if r["lib"] == "pytrec_eval" and r["n"] == n), None)
            mine = next((r for r in rows if r["lib"] == "ragmeter" and r["n"] == n), None)
            if ref and mine:
                bad = [k for k in ref["means"] if abs(ref["means"][k] - mine["means"][k]) > 1e-9]
                if bad:
                    raise SystemExit(f"ragmeter and pytrec_eval disagree at {n}: {bad}")
    merged = _save(rows)
    _print(rows)
    _print_marginal(rows)
    if not args.file:
        _plot(merged)


if __name__ == "__main__":
    main()
