"""Columnar runs side by side: ragmeter ``evaluate_run_columns`` vs ranx, pytrec_eval, ir_measures.

A run of ``n`` queries x 100 docs and its qrels are generated with numpy and written to Parquet
in a temporary directory (``query_id, doc_id, score`` and ``query_id, doc_id, relevance``),
then each library scores NDCG@10, recall@100, P@10, MRR and MAP **from those files**, each by
its fastest input path, in a fresh process (so its peak resident set size is its own):

* ``ragmeter columns``: ``evaluate_run_columns(qrels.parquet, run.parquet, per_query=False)``
  (the query ids read as Arrow dictionaries, the doc ids as Arrow strings, scored by the
  compiled columnar kernel a block of row groups at a time);
* ``ragmeter dicts``: ``run_from_arrow``/``qrels_from_arrow`` then ``evaluate_run`` (the dict
  path, for comparison);
* ``ranx``: ``Qrels.from_parquet``/``Run.from_parquet`` (pandas, then its numba typed dicts)
  and ``ranx.evaluate`` (its numba kernels). Numba compiles on the first call: a warm-up
  ``evaluate`` on a 2-query run is timed apart (``compile_s``; ranx caches compiled kernels on
  disk, so a second session compiles less);
* ``pytrec_eval``: the files read with pyarrow into ``{qid: {doc: score}}`` dicts (its only
  input), then ``RelevanceEvaluator.evaluate``;
* ``ir_measures``: ``calc_aggregate`` on pandas DataFrames (its DataFrame input path; it runs
  pytrec_eval underneath).

Times are CPU seconds of the child process (``time.process_time``, so other work on a shared
machine barely counts; every thread's time counts), best of ``--repeat`` runs, split into
``load_s`` (file to the library's structures) and ``score_s``, and into ``user_s`` and
``sys_s`` (``getrusage``, the same section: on a shared virtual machine the system time of
first touching fresh pages varies several-fold between runs, the user time little);
``wall_s`` is the same section's elapsed time (what the user waits for: ragmeter decodes the
next row group in a second thread while it scores one; it depends on the machine's other
work, so compare it only between runs side by side); ``peak_mb`` is the child's peak RSS
(``ru_maxrss``) minus its RSS after imports. The means of every library are checked against
ragmeter's before anything is written. Results go to ``benchmarks/results/columnar.json``.

Run::

    python benchmarks/bench_columnar.py                      # 1k, 10k, 100k, 1M queries
    python benchmarks/bench_columnar.py --sizes 1000 10000   # a quick look
    python benchmarks/bench_columnar.py --skip-slow 100000   # dict-based libraries up to 100k

Needs ``pip install 'ragmeter[bench]'`` (ranx, polars, pyarrow, ir-measures, pytrec-eval).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEPTH = 100
KEYS = ("ndcg@10", "recall@100", "P@10", "MRR", "MAP")
LIBRARIES = ("ragmeter columns", "ragmeter dicts", "ranx", "pytrec_eval", "ir_measures")
RESULTS = Path(__file__).resolve().parent / "results" / "columnar.json"


# --------------------------------------------------------------------------- data


def write_data(n_queries: int, folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``run.parquet`` (``n_queries`` x 100 distinct docs, strictly decreasing scores, rows
    grouped by query) and ``qrels.parquet`` (1-20 judgements per query, grades 0-3, at least
    one relevant, about 60% of them retrieved), written a million rows at a time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n_docs = 10_000_000
    run_path, qrels_path = folder / "run.parquet", folder / "qrels.parquet"
    scores = np.tile(np.arange(DEPTH, 0, -1, dtype=np.float64), 10_000)
    with (
        pq.ParquetWriter(run_path, _schema("score", pa.float64())) as run_out,
        pq.ParquetWriter(qrels_path, _schema("relevance", pa.int64())) as qrels_out,
    ):
        for start in range(0, n_queries, 10_000):
            n = min(10_000, n_queries - start)
            qids = np.arange(start, start + n)
            docs = rng.integers(0, n_docs, size=(n, DEPTH))
            docs += np.arange(DEPTH) * (n_docs // DEPTH) // 10  # distinct within a query
            docs %= n_docs
            docs = _distinct_rows(docs, n_docs)
            run_out.write_table(
                pa.table(
                    {
                        "query_id": _ids("q", np.repeat(qids, DEPTH)),
                        "doc_id": _ids("doc", docs.ravel()),
                        "score": scores[: n * DEPTH],
                    },
                    schema=_schema("score", pa.float64()),
                )
            )
            counts = rng.integers(1, 21, size=n)
            owner = np.repeat(np.arange(n), counts)
            retrieved = rng.random(len(owner)) < 0.6
            depth_at = np.minimum(rng.exponential(DEPTH / 10, len(owner)).astype(int), DEPTH - 1)
            judged = np.where(retrieved, docs[owner, depth_at], rng.integers(0, n_docs, len(owner)))
            pairs = np.unique(np.stack([owner, judged], axis=1), axis=0)
            grades = rng.integers(0, 4, len(pairs))
            first = np.flatnonzero(np.diff(pairs[:, 0], prepend=-1))
            grades[first] = np.maximum(grades[first], 1)  # one relevant per query
            qrels_out.write_table(
                pa.table(
                    {
                        "query_id": _ids("q", qids[pairs[:, 0]]),
                        "doc_id": _ids("doc", pairs[:, 1]),
                        "relevance": grades,
                    },
                    schema=_schema("relevance", pa.int64()),
                )
            )
    return run_path, qrels_path


def _schema(value: str, kind: Any) -> Any:
    import pyarrow as pa

    return pa.schema([("query_id", pa.string()), ("doc_id", pa.string()), (value, kind)])


def _ids(prefix: str, numbers: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    digits = pc.cast(pa.array(numbers), pa.string())
    return pc.binary_join_element_wise(prefix, digits, "")


def _distinct_rows(docs: Any, n_docs: int) -> Any:
    """Each row's docs made distinct (a repeat moves to the next free id)."""
    import numpy as np

    for row in np.flatnonzero([len(np.unique(r)) < len(r) for r in docs]):
        seen: set[int] = set()
        for j, d in enumerate(docs[row].tolist()):
            while d in seen:
                d = (d + 1) % n_docs
            seen.add(d)
            docs[row, j] = d
    return docs


# --------------------------------------------------------------------------- libraries


def _cpu() -> float:
    return time.process_time()


_MARK: list[Any] = []
"""``getrusage`` where the runner's timed section (load and score) began."""


def _mark() -> float:
    """Start the timed section: :func:`_cpu`, and the usage for ``user_s``/``sys_s`` and the
    clock for ``wall_s``."""
    _MARK[:] = [resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()]
    return _cpu()


def run_ragmeter_columns(run: Path, qrels: Path) -> dict[str, Any]:
    import pyarrow.compute  # noqa: F401  (imported before the clock starts, as for every library)

    from ragmeter import evaluate_run_columns
    from ragmeter.evaluation import _columns_out  # noqa: F401

    t0 = _mark()
    report = evaluate_run_columns(
        qrels, run, k_values=(10, 100), metrics=["ndcg", "recall", "precision", "mrr", "map"],
        per_query=False,
    )  # fmt: skip
    t1 = _cpu()
    m = report.metrics
    means = [m["ndcg@10"], m["recall@100"], m["precision@10"], m["mrr"], m["map"]]
    return {"load_s": 0.0, "score_s": t1 - t0, "means": means}


def run_ragmeter_dicts(run: Path, qrels: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    from ragmeter import evaluate_run
    from ragmeter.io.arrow import qrels_from_arrow, run_from_arrow

    t0 = _mark()
    q = qrels_from_arrow(pq.read_table(qrels))
    r = run_from_arrow(pq.read_table(run))
    t1 = _cpu()
    report = evaluate_run(
        q, r, k_values=(10, 100), metrics=["ndcg", "recall", "precision", "mrr", "map"],
        per_query=False,
    )  # fmt: skip
    t2 = _cpu()
    m = report.metrics
    means = [m["ndcg@10"], m["recall@100"], m["precision@10"], m["mrr"], m["map"]]
    return {"load_s": t1 - t0, "score_s": t2 - t1, "means": means}


def run_ranx(run: Path, qrels: Path) -> dict[str, Any]:
    import pandas as pd
    from ranx import Qrels, Run, evaluate

    metrics = ["ndcg@10", "recall@100", "precision@10", "mrr", "map"]
    t0 = _cpu()  # numba compiles on first use (from_df's typed dicts, then evaluate)
    tiny_q = pd.DataFrame({"query_id": ["q"], "doc_id": ["a"], "relevance": [1]}, dtype=object)
    tiny_r = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [1.0, 0.5]})
    tiny_r = tiny_r.astype({"query_id": object, "doc_id": object})
    evaluate(
        Qrels.from_df(tiny_q.astype({"relevance": "int64"}), q_id_col="query_id",
                      score_col="relevance"),
        Run.from_df(tiny_r, q_id_col="query_id"),
        metrics,
    )  # fmt: skip
    t1 = _mark()
    # ranx asserts object (Python str) id columns, and pandas 3 reads Parquet strings as
    # `str`: then from_parquet fails, and the frames are converted for from_df
    try:
        q = Qrels.from_parquet(str(qrels), q_id_col="query_id", score_col="relevance")
        r = Run.from_parquet(str(run), q_id_col="query_id")
        path = "from_parquet"
    except (AssertionError, TypeError):
        qdf = pd.read_parquet(qrels).astype({"query_id": object, "doc_id": object})
        rdf = pd.read_parquet(run).astype({"query_id": object, "doc_id": object})
        q = Qrels.from_df(qdf, q_id_col="query_id", score_col="relevance")
        r = Run.from_df(rdf, q_id_col="query_id")
        del qdf, rdf
        path = "read_parquet + from_df"
    t2 = _cpu()
    out = evaluate(q, r, metrics, save_results_in_run=False)
    t3 = _cpu()
    return {
        "load_s": t2 - t1,
        "score_s": t3 - t2,
        "compile_s": t1 - t0,
        "input_path": path,
        "means": [out[k] for k in metrics],
    }


def _dicts(run: Path, qrels: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    import pyarrow.parquet as pq

    qd: dict[str, dict[str, int]] = {}
    for qid, doc, grade in zip(*pq.read_table(qrels).to_pydict().values(), strict=True):
        qd.setdefault(qid, {})[doc] = grade
    rd: dict[str, dict[str, float]] = {}
    table = pq.read_table(run)
    for batch in table.to_batches(1_000_000):
        for qid, doc, score in zip(*batch.to_pydict().values(), strict=True):
            rd.setdefault(qid, {})[doc] = score
    return qd, rd


def run_pytrec_eval(run: Path, qrels: Path) -> dict[str, Any]:
    import pytrec_eval

    t0 = _mark()
    qd, rd = _dicts(run, qrels)
    t1 = _cpu()
    measures = {"ndcg_cut.10", "recall.100", "P.10", "recip_rank", "map"}
    res = pytrec_eval.RelevanceEvaluator(qd, measures).evaluate(rd)
    names = ["ndcg_cut_10", "recall_100", "P_10", "recip_rank", "map"]
    means = [sum(v[n] for v in res.values()) / len(res) for n in names]
    t2 = _cpu()
    return {"load_s": t1 - t0, "score_s": t2 - t1, "means": means}


def run_ir_measures(run: Path, qrels: Path) -> dict[str, Any]:
    import ir_measures
    import pandas as pd
    from ir_measures import MAP, RR, P, R, nDCG

    t0 = _mark()
    qdf = pd.read_parquet(qrels).astype({"query_id": object, "doc_id": object})
    rdf = pd.read_parquet(run).astype({"query_id": object, "doc_id": object})
    t1 = _cpu()
    measures = [nDCG @ 10, R @ 100, P @ 10, RR, MAP]
    agg = ir_measures.calc_aggregate(measures, qdf, rdf)
    t2 = _cpu()
    return {"load_s": t1 - t0, "score_s": t2 - t1, "means": [agg[m] for m in measures]}


RUNNERS = {
    "ragmeter columns": run_ragmeter_columns,
    "ragmeter dicts": run_ragmeter_dicts,
    "ranx": run_ranx,
    "pytrec_eval": run_pytrec_eval,
    "ir_measures": run_ir_measures,
}


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(library: str, run: str, qrels: str) -> None:
    """One measurement in this (fresh) process: JSON on stdout."""
    # imported before the baseline and the clock: every library here loads numpy, and
    # pyarrow imports pandas (when installed) the first time it converts a Python value
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    base = _rss_mb()
    out = RUNNERS[library](Path(run), Path(qrels))
    out["wall_s"] = time.perf_counter() - _MARK[1]
    after = resource.getrusage(resource.RUSAGE_SELF)
    out["peak_mb"] = after.ru_maxrss / 1024 - base
    # user and system CPU of the timed section: on a shared virtual machine the system part
    # (first touches of fresh pages) varies several-fold from run to run
    out["user_s"] = after.ru_utime - _MARK[0].ru_utime
    out["sys_s"] = after.ru_stime - _MARK[0].ru_stime
    print(json.dumps(out))


def measure(library: str, run: Path, qrels: Path, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", library, str(run), str(qrels)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["killed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- driver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="best of N (sizes under 1M)")
    parser.add_argument("--libraries", nargs="+", default=list(LIBRARIES))
    parser.add_argument("--skip-slow", type=int, default=100_000,
                        help="largest size for the dict-based libraries (pytrec_eval, "
                             "ir_measures, ragmeter dicts, ranx)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    results: dict[str, Any] = {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "depth": DEPTH,
        "keys": list(KEYS),
        "rows": [],
    }
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            run, qrels = write_data(n, Path(tmp))
            size_mb = run.stat().st_size / 2**20
            print(f"\n{n:,} queries x {DEPTH}: run.parquet {size_mb:.0f} MiB "
                  f"(generated in {time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
            reference: list[float] | None = None
            for library in args.libraries:
                if library != "ragmeter columns" and n > args.skip_slow:
                    continue
                repeat = args.repeat if n < 1_000_000 else 1
                best: dict[str, Any] | None = None
                for _ in range(repeat):
                    got = measure(library, run, qrels, args.timeout)
                    if "error" in got:
                        best = got
                        break
                    total = got["load_s"] + got["score_s"]
                    if best is None or total < best["load_s"] + best["score_s"]:
                        best = got
                assert best is not None
                row = {"library": library, "n_queries": n, "run_mib": round(size_mb, 1), **best}
                if "error" not in best:
                    reference = reference or best["means"]
                    agree = all(abs(a - b) < 1e-9 for a, b in zip(best["means"], reference,
                                                                   strict=True))  # fmt: skip
                    row["agrees"] = agree
                    row["per_query_us"] = round(1e6 * (best["load_s"] + best["score_s"]) / n, 2)
                    compile_s = (
                        f"  compile {best['compile_s']:.2f} s" if "compile_s" in best else ""
                    )
                    print(f"  {library:17} load {best['load_s']:8.2f} s  score "
                          f"{best['score_s']:8.2f} s  wall {best['wall_s']:8.2f} s  "
                          f"peak {best['peak_mb']:7.0f} MB  "
                          f"{row['per_query_us']:7.1f} us/query{compile_s}"
                          f"{'' if agree else '  MEANS DIFFER'}", flush=True)  # fmt: skip
                else:
                    print(f"  {library:17} failed: {best['error']}", flush=True)
                results["rows"].append(row)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    if RESULTS.exists():  # rows of other sizes and libraries, from earlier runs, are kept
        fresh = results["rows"]
        done = {(r["library"], r["n_queries"]) for r in fresh}
        earlier = json.loads(RESULTS.read_text())["rows"]
        kept = [r for r in earlier if (r["library"], r["n_queries"]) not in done]
        results["rows"] = sorted(
            kept + fresh, key=lambda r: (r["n_queries"], LIBRARIES.index(r["library"]))
        )
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
