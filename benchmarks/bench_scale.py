"""Scale benchmark: memory and time of streamed evaluation, side by side with peers.

Every measurement runs in a fresh child process, so its peak memory (the growth of the
resident set, ``VmHWM`` minus the RSS before the call, including C allocations) is its own;
times are CPU seconds of that child (robust to other load on a shared machine).

* ``evaluate_rag`` streamed from a generator (no per-sample scores kept), with per-sample
  scores written to a JSONL file, and kept in memory, at 10k, 100k and 1M samples; the
  memory **slope** in bytes per sample between 10k and the largest size; ef's
  ``evaluate_rag`` on the same generator (its seed five metrics: ragmeter is timed on the
  same five for the ratio).
* TREC files of 100k queries x 100 docs (generated in a temporary directory, deleted
  after): ``read_trec_run`` time and peak against the file size; ``evaluate_run`` at 10k and
  100k queries (linear?) with pytrec_eval side by side; ``to_json`` to a file;
  ``summary("ndcg@10")``; ``evaluate_run_file`` (the run streamed, never held).
* ``--before REF``: the same measurements of ragmeter as of git ref ``REF`` (its
  ``src/ragmeter`` extracted to a temporary directory, with this build's compiled kernel
  when the C source is unchanged), printed next to the current code's.

    python benchmarks/bench_scale.py                       # current code and peers
    python benchmarks/bench_scale.py --before 82d1b86      # and the code of that commit
    python benchmarks/bench_scale.py --quick               # smaller sizes, a smoke run

Needs ``ef`` and ``pytrec-eval-terrier`` (``ragmeter[bench]``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


# --------------------------------------------------------------------------- child side


def _status(key: str) -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024.0
    return 0.0


def _samples(n: int, *, ids: bool = True, seed: int = 0) -> Any:
    """``n`` synthetic samples (bench_rag's shape, plus doc ids and graded relevance on 70%
    unless ``ids`` is false), generated on the fly from a pool of 2,000 built now."""
    import random

    sys.path.insert(0, str(HERE))
    from bench_rag import make_samples

    pool = make_samples(2000, seed)
    rng = random.Random(seed)
    for sample in pool:
        if ids and rng.random() < 0.7:
            docs = rng.sample(range(1000), 10)
            sample["retrieved_ids"] = [f"d{d}" for d in docs]
            judged = rng.sample(docs, 3) + rng.sample(range(1000), 2)
            sample["relevance"] = {f"d{d}": rng.randint(0, 2) for d in judged}

    def stream() -> Any:
        for i in range(n):
            sample = dict(pool[i % 2000])
            sample["id"] = f"s{i}"
            yield sample

    return stream()


def _child(task: str, args: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if task in ("rag", "ef"):
        from ef.evaluation import evaluate_rag as ef_evaluate_rag

        from ragmeter.evaluation.rag import SEED_METRICS, evaluate_rag

        seed_five = bool(args.get("seed_five"))
        samples = _samples(args["n"], ids=not seed_five)
        metrics = list(SEED_METRICS) if seed_five else None
        options: dict[str, Any] = {}
        if args.get("mode") == "file":
            options["per_sample"] = args["out"]
        elif args.get("mode") == "kept":
            options["per_sample"] = True
    base = _status("VmRSS")
    cpu = time.process_time()
    if task == "rag":
        try:
            report = evaluate_rag(samples, metrics=metrics, **options)  # cut-off 5: the default
        except TypeError:  # an older ragmeter without per_sample=: its only behaviour
            report = evaluate_rag(samples, metrics=metrics)
        out["metrics"] = report.metrics
    elif task == "ef":
        out["metrics"] = dict(ef_evaluate_rag(samples).metrics)
    elif task == "read_run":
        from ragmeter.io.trec import read_trec_run

        run = read_trec_run(args["run"])
        out["queries"] = len(run)
    elif task in ("evaluate_run", "to_json", "summary"):
        from ragmeter.evaluation.retrieval import evaluate_run
        from ragmeter.io.trec import read_trec_qrels, read_trec_run

        qrels = read_trec_qrels(args["qrels"])
        run = read_trec_run(args["run"])
        base = _status("VmRSS")
        cpu = time.process_time()
        report = evaluate_run(qrels, run)
        if task == "to_json":
            cpu = time.process_time()
            base = _status("VmRSS")
            try:
                report.to_json(args["out"])
            except TypeError:  # an older ragmeter: to_json() returns the string only
                Path(args["out"]).write_text(report.to_json(), encoding="utf-8")
        elif task == "summary":
            cpu = time.process_time()
            base = _status("VmRSS")
            out["median"] = report.summary("ndcg@10").median
        out["ndcg@10"] = report.metrics["ndcg@10"]
    elif task == "pytrec_eval":
        import pytrec_eval

        from ragmeter.io.trec import read_trec_qrels, read_trec_run

        qrels = {q: dict(j) for q, j in read_trec_qrels(args["qrels"]).items()}
        scores = read_trec_run(args["run"]).scores
        base = _status("VmRSS")
        cpu = time.process_time()
        measures = {"ndcg_cut", "recall", "P", "success", "recip_rank", "map_cut", "map"}
        per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(scores)
        values = [row["ndcg_cut_10"] for row in per_query.values()]
        out["ndcg@10"] = sum(values) / len(values)
    elif task == "run_file":
        from ragmeter.evaluation.retrieval import evaluate_run_file
        from ragmeter.io.trec import read_trec_qrels

        qrels = read_trec_qrels(args["qrels"])
        base = _status("VmRSS")
        cpu = time.process_time()
        report = evaluate_run_file(qrels, args["run"], per_query=False)
        out["ndcg@10"] = report.metrics["ndcg@10"]
    else:
        raise SystemExit(f"unknown task {task}")
    out["cpu"] = time.process_time() - cpu
    out["peak"] = max(0.0, _status("VmHWM") - base)
    return out


# --------------------------------------------------------------------------- parent side


def _run(task: str, args: dict[str, Any], *, pythonpath: str | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    result = subprocess.run(
        [sys.executable, __file__, "--child", task, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-1:] or ["?"]
        return {"error": tail[0]}
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def _extract(ref: str, target: Path) -> str:
    """``src/ragmeter`` of git ref ``ref`` under ``target``; returns the PYTHONPATH to use."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref, "src/ragmeter"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    old_c = target / "src/ragmeter/metrics/_ckernel.c"
    new_c = REPO / "src/ragmeter/metrics/_ckernel.c"
    if old_c.exists() and old_c.read_bytes() == new_c.read_bytes():
        for built in (REPO / "src/ragmeter/metrics").glob("_ckernel*.so"):
            shutil.copy(built, target / "src/ragmeter/metrics" / built.name)
    return str(target / "src")


def _mb(value: float) -> str:
    return f"{value / 2**20:8.0f} MB"


def _line(label: str, result: dict[str, Any], extra: str = "") -> None:
    if "error" in result:
        print(f"  {label:<44} failed: {result['error']}")
        return
    print(f"  {label:<44} {result['cpu']:7.2f} s  {_mb(result['peak'])}  {extra}")


def bench_rag(sizes: list[int], before: str | None, tmp: Path, ef_max: int) -> None:
    print(
        "== evaluate_rag streamed from a generator (default metrics: seed five, faithfulness, "
        "precision@5) =="
    )
    rows: dict[str, dict[int, dict[str, Any]]] = {}
    variants = [
        ("stream", "ragmeter, per-sample not kept"),
        ("file", "ragmeter, per-sample to JSONL"),
        ("kept", "ragmeter, per-sample kept in memory"),
    ]
    for n in sizes:
        print(f"-- {n:,} samples")
        for mode, label in variants:
            args = {"n": n, "mode": mode, "out": str(tmp / f"scores-{n}.jsonl")}
            rows.setdefault(mode, {})[n] = r = _run("rag", args)
            _line(label, r, f"{r.get('peak', 0) / n:8.0f} B/sample" if "peak" in r else "")
        if before is not None:
            rows.setdefault("before", {})[n] = r = _run(
                "rag", {"n": n, "mode": "stream"}, pythonpath=before
            )
            _line(
                "ragmeter before (same generator)",
                r,
                f"{r.get('peak', 0) / n:8.0f} B/sample" if "peak" in r else "",
            )
        if n <= ef_max:
            mine = _run("rag", {"n": n, "mode": "stream", "seed_five": True})
            peer = _run("ef", {"n": n, "seed_five": True})
            rows.setdefault("ef", {})[n] = peer
            same = (
                "identical numbers"
                if mine.get("metrics") == peer.get("metrics")
                else "NUMBERS DIFFER"
            )
            _line(
                "ef.evaluation.evaluate_rag (seed five)",
                peer,
                f"{peer.get('peak', 0) / n:8.0f} B/sample",
            )
            _line(
                "ragmeter streamed (seed five)",
                mine,
                f"{peer['cpu'] / mine['cpu']:.2f}x ef speed, {same}"
                if "cpu" in mine and "cpu" in peer
                else "",
            )
    lo, hi = min(sizes), max(sizes)
    print(f"-- memory slope {lo:,} -> {hi:,} samples (peak growth per added sample)")
    for name, by_n in rows.items():
        if lo in by_n and hi in by_n and "peak" in by_n[lo] and "peak" in by_n[hi]:
            slope = (by_n[hi]["peak"] - by_n[lo]["peak"]) / (hi - lo)
            print(f"  {name:<44} {slope:8.1f} bytes/sample")
    print()


def _generate(n: int, depth: int, tmp: Path) -> tuple[Path, Path]:
    sys.path.insert(0, str(HERE))
    from bench_retrieval import make_data

    from ragmeter.io.trec import write_trec_qrels, write_trec_run

    qrels, run, scored = make_data(n, depth)
    qrels_path, run_path = tmp / f"qrels.{n}", tmp / f"run.{n}x{depth}"
    write_trec_qrels(qrels, qrels_path)
    write_trec_run(run, run_path, scores=scored)
    return qrels_path, run_path


def bench_retrieval(sizes: list[int], before: str | None, tmp: Path) -> None:
    print("== TREC files, default metrics (6 metrics x 6 cut-offs = 38 keys) ==")
    files = {n: _generate(n, 100, tmp) for n in sizes}
    for n in sizes:
        qrels, run = files[n]
        size = run.stat().st_size
        print(
            f"-- {n:,} queries x 100 docs: run file {size / 2**20:.0f} MB, qrels "
            f"{qrels.stat().st_size / 2**20:.0f} MB"
        )
        base = {"qrels": str(qrels), "run": str(run), "out": str(tmp / "report.json")}
        for label, task in (
            ("read_trec_run", "read_run"),
            ("evaluate_run (dicts in memory)", "evaluate_run"),
            ("report.to_json(file)", "to_json"),
            ('report.summary("ndcg@10")', "summary"),
            ("evaluate_run_file (run streamed)", "run_file"),
        ):
            now = _run(task, base)
            extra = (
                f"{now['peak'] / size:.2f}x file size"
                if task == "read_run" and "peak" in now
                else ""
            )
            if task == "evaluate_run":
                peer = _run("pytrec_eval", base)
                _line("pytrec_eval (same 38 measures)", peer)
                if "cpu" in now and "cpu" in peer:
                    extra = f"{peer['cpu'] / now['cpu']:.2f}x pytrec_eval"
            _line(label, now, extra)
            if before is not None and task != "run_file":
                old = _run(task, base, pythonpath=before)
                ratio = (
                    f"{old['cpu'] / now['cpu']:.1f}x faster now"
                    if "cpu" in old and "cpu" in now
                    else ""
                )
                if task == "read_run" and "peak" in old:
                    ratio += f"; before {old['peak'] / size:.2f}x file size"
                _line(f"  before: {label}", old, ratio)
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="REF", help="also measure ragmeter at git ref REF")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--only", choices=["rag", "retrieval"], help="one half only")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child[0], json.loads(args.child[1]))))
        return
    rag_sizes = [2_000, 20_000] if args.quick else [10_000, 100_000, 1_000_000]
    trec_sizes = [2_000, 10_000] if args.quick else [10_000, 100_000]
    print(
        f"python {sys.version.split()[0]}; CPU seconds and peak RSS growth of one child "
        "process per line\n"
    )
    with tempfile.TemporaryDirectory(prefix="ragmeter-scale-") as name:
        tmp = Path(name)
        before = None
        if args.before:
            (tmp / "before").mkdir()
            before = _extract(args.before, tmp / "before")
            print(f"before = git ref {args.before}\n")
        if args.only in (None, "rag"):
            bench_rag(rag_sizes, before, tmp, ef_max=100_000 if not args.quick else 20_000)
        if args.only in (None, "retrieval"):
            bench_retrieval(trec_sizes, before, tmp)


if __name__ == "__main__":
    main()
