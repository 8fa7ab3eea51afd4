"""Reading TREC files: the compiled parser against a bare Python ``line.split()`` loop.

A run of ``--queries`` x ``--depth`` docs and its qrels (``bench_retrieval.make_data``, written
with ``write_trec_run``/``write_trec_qrels``: 100k x 100 is a 349 MiB run) are generated in a
temporary directory (or ``--dir``, kept and reused), then each task is timed in a fresh child
process (CPU seconds of the task in that child, so other load on the machine barely counts;
the tasks interleaved, best of ``--repeat``) with its peak memory (growth of the resident set,
``VmHWM``, during the task):

* ``split loop``: ``for line in f: line.split()`` over the file opened as text (UTF-8), the
  floor a Python reader cannot go under, and over the file opened as bytes;
* ``read_trec_run`` and ``iter_trec_run`` (consumed) with the compiled parser, and
  ``read_trec_run`` followed by ``gc.collect()``: the cyclic collector's one pass over the
  100k new lists, which CPython makes soon after any reader that keeps them;
* ``read_trec_qrels`` (compiled) and the split loop over the qrels;
* with ``--gzip``: the same run gzip-compressed (read and split loop through ``gzip.open``);
* with ``--python``: the pure-Python readers (``RAGMETER_PURE_PYTHON=1``), once.

Before timing, the compiled and pure-Python readers are checked to give equal results on
the qrels (and on the run with ``--python``).

    python benchmarks/bench_trec_read.py                   # 100k x 100
    python benchmarks/bench_trec_read.py --queries 10000 --python --gzip
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _status(key: str) -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024.0
    return 0.0


def _task(task: str, path: str) -> None:
    """The child: time one task on one file, print ``{"cpu": s, "peak": bytes}``."""
    from ragmeter.io.trec import iter_trec_run, read_trec_qrels, read_trec_run
    from ragmeter.io.trec._compiled import BACKEND

    opener: Any = gzip.open if path.endswith(".gz") else open
    base = _status("VmRSS")
    cpu = time.process_time()
    if task == "split_text":
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                line.split()
    elif task == "split_bytes":
        with opener(path, "rb") as fh:
            for line in fh:
                line.split()
    elif task in ("read_run", "read_run_gc"):
        run = read_trec_run(path)
        if task == "read_run_gc":
            gc.collect()
    elif task == "iter_run":
        for _ in iter_trec_run(path):
            pass
    elif task == "read_qrels":
        qrels = read_trec_qrels(path)
    cpu = time.process_time() - cpu
    peak = _status("VmHWM") - base
    print(json.dumps({"cpu": cpu, "peak": peak, "backend": BACKEND}))
    os._exit(0)  # the time of freeing what was read is not the reader's
    del run, qrels  # pragma: no cover


def _child(task: str, path: Path, *, python: bool = False) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("RAGMETER_PURE_PYTHON", None)
    if python:
        env["RAGMETER_PURE_PYTHON"] = "1"
    done = subprocess.run(
        [sys.executable, __file__, "--child", task, str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{task} on {path}: {done.stderr.strip()[-2000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    expected = "python" if python else "c"
    if out["backend"] != expected:
        raise RuntimeError(f"{task}: the {expected} reader was asked for, {out['backend']} ran")
    return out


def _generate(n: int, depth: int, where: Path, *, gz: bool) -> tuple[Path, Path, Path | None]:
    sys.path.insert(0, str(HERE))
    from bench_retrieval import make_data

    from ragmeter.io.trec import write_trec_qrels, write_trec_run

    run_path, qrels_path = where / f"run.{n}x{depth}", where / f"qrels.{n}"
    if not run_path.exists() or not qrels_path.exists():
        qrels, run, scored = make_data(n, depth)
        write_trec_qrels(qrels, qrels_path)
        write_trec_run(run, run_path, scores=scored)
        del qrels, run, scored
    gz_path = None
    if gz:
        gz_path = where / f"run.{n}x{depth}.gz"
        if not gz_path.exists():
            with open(run_path, "rb") as src, gzip.open(gz_path, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    return run_path, qrels_path, gz_path


def _check(run: Path, qrels: Path, *, whole_run: bool) -> None:
    """The compiled and pure-Python readers agree (run only with ``whole_run``: slow)."""
    from ragmeter.io.trec import _compiled, _qrels, _read

    if not _compiled.COMPILED:
        raise SystemExit("the compiled TREC parser is not built (ragmeter.io._ctrec)")
    fast = _qrels.read_trec_qrels(qrels)
    _compiled.COMPILED = False
    try:
        slow = _qrels.read_trec_qrels(qrels)
        assert fast == slow and fast.warnings == slow.warnings, "qrels readers disagree"
        if whole_run:
            compiled = _read._compiled_run(run)
            assert compiled is not None, "the compiled parser found the run irregular"
            reference = _read._python_run(run)
            assert compiled == reference and list(compiled) == list(reference)
            assert compiled.scores == reference.scores, "run readers disagree"
    finally:
        _compiled.COMPILED = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where to generate (and keep) the files")
    parser.add_argument("--python", action="store_true", help="time the pure-Python readers")
    parser.add_argument("--gzip", action="store_true", help="time a gzip-compressed run too")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _task(*args.child)
        return
    tmp = None
    where = args.dir
    if where is None:
        tmp = tempfile.TemporaryDirectory()
        where = Path(tmp.name)
    where.mkdir(parents=True, exist_ok=True)
    try:
        _bench(args, where)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _bench(args: argparse.Namespace, where: Path) -> None:
    run, qrels, gz = _generate(args.queries, args.depth, where, gz=args.gzip)
    _check(run, qrels, whole_run=args.python)
    size = run.stat().st_size
    print(
        f"{args.queries:,} queries x {args.depth} docs: run {size / 2**20:.0f} MiB, qrels "
        f"{qrels.stat().st_size / 2**20:.0f} MiB; CPU seconds, best of {args.repeat} "
        "(fresh process each, interleaved); peak = growth of the resident set"
    )
    tasks: list[tuple[str, str, Path]] = [
        ("split loop, text (for line in f: line.split())", "split_text", run),
        ("split loop, bytes", "split_bytes", run),
        ("read_trec_run [c]", "read_run", run),
        ("read_trec_run [c] + gc.collect()", "read_run_gc", run),
        ("iter_trec_run [c] (consumed)", "iter_run", run),
        ("qrels: split loop, text", "split_text", qrels),
        ("qrels: read_trec_qrels [c]", "read_qrels", qrels),
    ]
    if gz is not None:
        tasks += [
            (".gz: split loop, text", "split_text", gz),
            (".gz: read_trec_run [c]", "read_run", gz),
        ]
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):
        for label, task, path in tasks:
            out = _child(task, path)
            held = best.setdefault(label, {"cpu": math.inf, "peak": 0.0})
            held["cpu"] = min(held["cpu"], out["cpu"])
            held["peak"] = max(held["peak"], out["peak"])
    if args.python:
        for label, task, path in (
            ("read_trec_run [python]", "read_run", run),
            ("qrels: read_trec_qrels [python]", "read_qrels", qrels),
        ):
            best[label] = _child(task, path, python=True)
    floor = best[tasks[0][0]]["cpu"]
    for label, row in best.items():
        print(
            f"  {label:<50} {row['cpu']:7.2f} s  {row['peak'] / 2**20:7.0f} MiB  "
            f"{row['cpu'] / floor:5.2f}x the text split loop"
        )


if __name__ == "__main__":
    main()
