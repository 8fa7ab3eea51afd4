"""Benchmark: is ``ragmeter serve`` responsive while it scores a large request, and what does
an in-flight request cost in memory?

A real ``ragmeter serve`` process (uvicorn) is started on a free port. Then:

1. **/health latency under load.** One client posts a ~10 MiB ``/evaluate`` body (rag-eval
   field names, ``--samples`` samples, default metrics) while another polls ``GET /health``
   every 10 ms on a keep-alive connection. The poll latencies seen while the big request is
   in flight (from the first byte sent to the answer) are summarised: p50, p99, max.
2. **Memory per in-flight request.** ``--concurrent`` clients post an ~8 MiB body each at
   the same moment; the server's resident set (``/proc/PID/status`` ``VmRSS``) is sampled
   every 5 ms. Peak growth over the idle RSS, divided by the requests admitted at once,
   is the cost of one in-flight request. Requests the server turns away (429) are counted.

``--src DIR`` runs another checkout's ``src`` (e.g. the previous commit, extracted with
``git archive HEAD~1 | tar -x -C /tmp/old``) to measure "before"; options the old server does
not know are then not passed (``--old``).

    python benchmarks/bench_server.py                        # about a minute
    python benchmarks/bench_server.py --src /tmp/old/src --old

Four ~10 MiB bodies (``--payload``): ``rag`` (6,977 samples of ~1.5 KiB, every default
metric), ``rag-invalid`` (the same with a bad field in every sample: a 422 listing 6,977
errors), ``big-sample`` (one sample, a 5 MiB answer against 5 MiB of contexts, faithfulness)
and ``retrieval`` (6,546 queries x 100 docs).

Results (2 shared cores, Python 3.11, uvicorn 0.54 with h11, one worker, ``--repeat 5``;
"before" is the commit before issue 12's server changes, d8c00d9):

======================================  ===========================  ======================
/health while the request is scored     before: p50 / p99            after: p50 / p99
======================================  ===========================  ======================
idle server (no load)                   0.9 / 1.2 ms                 0.9 / 1.3 ms
``rag`` 9.9 MiB                         28 / 117 ms                  13 / 41 ms
``rag-invalid`` 9.5 MiB (422)           174 / 246 ms (6 polls: the   16 / 29 ms
                                        loop was blocked)
``retrieval`` 9.9 MiB                   38 / 156 ms                  17 / 77 ms
``big-sample`` 9.9 MiB                  -- (4.5 MiB took 8.9 s to    14 / 38 ms (0.42 s per
                                        score: quadratic kernel)     request)
======================================  ===========================  ======================

Other runs gave 113-130 ms (``rag``), 180-320 ms (``rag-invalid``) and 105-310 ms
(``retrieval``) before; the p99 after stays under 100 ms (worst seen: 78 ms, ``retrieval``,
whose 50 ms ``json.loads`` of 6,500 x 100 doc ids is one call).

Where the stall came from: FastAPI parsed (``json.loads``) and validated the body on the
event loop, and a 422's ``jsonable_encoder`` of thousands of errors ran there too; with those
moved to a worker thread, the rest was full garbage collections (35-70 ms each, several per
10 MiB request), one 80 ms ``re.split`` of a 5 MiB answer and 70 ms of number-joining regex
over a 5 MiB context, all holding the interpreter. ``ragmeter serve`` now raises the GC
thresholds, freezes start-up objects and switches threads every 2 ms; faithfulness splits and
tokenises in short calls.

Memory (peak RSS over an idle 54 MiB): one in-flight 8 MiB ``/evaluate`` request (5,600
samples) costs +59 MiB (before: +63 MiB). Four sent at once: +109 MiB after (2 scored at a
time, ``--max-concurrent 2``, 2 queued with unread bodies) against +159-172 MiB before (all 4
at once; 10 would have been ~+600 MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

MIB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent
_WORDS_TEXT = (
    "paris france capital city river seine tower museum louvre art history king queen war "
    "battle army empire republic president election vote law court judge trial science "
    "physics energy atom electron particle light speed wave theory model data network "
    "computer software program language python code test result number value million year"
)
WORDS = _WORDS_TEXT.split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + "."


def make_payload(target_bytes: int, seed: int = 0) -> bytes:
    """A rag-eval ``/evaluate`` body of about ``target_bytes`` (never more).

    Samples of about 1 KiB (rag-eval's field names plus a ``reference``), so a 10 MiB body
    holds ~9,000 of them and every default metric applies: parsing and validating that many
    objects is what a large request costs before scoring starts.
    """
    rng = random.Random(seed)
    samples: list[dict[str, Any]] = []
    size = 40
    while True:
        contexts = [_text(rng, 25) for _ in range(3)]
        sample = {
            "id": f"s{len(samples)}",
            "question": _text(rng, 8),
            "answer": _text(rng, 6) + " " + contexts[0][:60],
            "reference": _text(rng, 4),
            "context": contexts,
            "golden_documents": contexts[:1],
            "retrieved": contexts[::-1],
        }
        sample_size = len(json.dumps(sample)) + 2
        if size + sample_size > target_bytes:
            break
        samples.append(sample)
        size += sample_size
    return json.dumps({"samples": samples, "k": 5}).encode()


def make_invalid_payload(target_bytes: int) -> bytes:
    """Like :func:`make_payload`, but every sample has a non-string question (a 422)."""
    data = json.loads(make_payload(target_bytes))
    for sample in data["samples"]:
        sample["question"] = 3
    return json.dumps(data).encode()


def make_big_sample_payload(target_bytes: int) -> bytes:
    """One sample whose answer and contexts are each half of the body (faithfulness)."""
    rng = random.Random(2)
    half = target_bytes // 2 - 100
    sentences: list[str] = []
    size = 0
    while size < half:
        sentences.append(_text(rng, 12))
        size += len(sentences[-1]) + 1
    contexts = [" ".join(sentences[i : i + 8]) for i in range(0, len(sentences), 8)]
    # quoted sentences, a third with a word the contexts lack (so not all are supported)
    parts: list[str] = []
    size = 0
    while size < half:
        sentence = rng.choice(sentences)[:-1]
        if rng.random() < 0.3:
            sentence += f" term{rng.randrange(10**6)}"
        parts.append(sentence + ".")
        size += len(parts[-1]) + 1
    answer = " ".join(parts)
    body = {"samples": [{"answer": answer, "context": contexts}], "metrics": ["faithfulness"]}
    return json.dumps(body).encode()


def make_retrieval_payload(target_bytes: int) -> bytes:
    """``/evaluate/retrieval``: 5,000 queries, 100-doc rankings, 10 judgements each."""
    rng = random.Random(3)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    size = 100
    while size < target_bytes - 3000 and len(qrels) < 9_000:
        q = f"query-{len(qrels)}"
        docs = [f"doc-{rng.randrange(10**6)}" for _ in range(100)]
        run[q] = list(dict.fromkeys(docs))
        qrels[q] = {d: rng.randint(0, 3) for d in rng.sample(docs, 10)}
        size += len(json.dumps(run[q])) + len(json.dumps(qrels[q])) + 2 * len(q) + 8
    return json.dumps({"qrels": qrels, "run": run, "k_values": [10, 100]}).encode()


PAYLOADS = {
    "rag": ("/evaluate", make_payload, 200),
    "rag-invalid": ("/evaluate", make_invalid_payload, 422),
    "big-sample": ("/evaluate", make_big_sample_payload, 200),
    "retrieval": ("/evaluate/retrieval", make_retrieval_payload, 200),
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss(pid: int) -> int:
    """Resident set size of ``pid`` in bytes (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class Server:
    def __init__(self, src: Path, extra: list[str]) -> None:
        self.port = _free_port()
        env = dict(os.environ, PYTHONPATH=str(src))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ragmeter", "serve", "--port", str(self.port), *extra],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.base}/health", timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def health_under_load(
    server: Server, path: str, body: bytes, status: int, repeat: int
) -> dict[str, float]:
    """/health latencies (ms) while ``body`` is posted to ``path``, ``repeat`` times."""
    latencies: list[float] = []
    seconds: list[float] = []
    for _ in range(repeat):
        done = threading.Event()
        window: list[float] = []

        def poll(window: list[float] = window, done: threading.Event = done) -> None:
            with httpx.Client(base_url=server.base, timeout=60) as client:
                client.get("/health")  # open the connection first
                while not done.is_set():
                    start = time.perf_counter()
                    response = client.get("/health")
                    window.append((time.perf_counter() - start) * 1000)
                    assert response.status_code == 200
                    time.sleep(0.01)

        poller = threading.Thread(target=poll)
        start = time.perf_counter()
        poller.start()
        response = httpx.post(
            f"{server.base}{path}",
            content=body,
            headers={"content-type": "application/json"},
            timeout=600,
        )
        seconds.append(time.perf_counter() - start)
        done.set()
        poller.join()
        assert response.status_code == status, response.text[:300]
        latencies += window
    return {
        "request_s": statistics.median(seconds),
        "polls": len(latencies),
        "p50_ms": _percentile(latencies, 0.5),
        "p99_ms": _percentile(latencies, 0.99),
        "max_ms": max(latencies),
    }


def memory_per_request(server: Server, body: bytes, concurrent: int) -> dict[str, float]:
    """Peak RSS growth while ``concurrent`` clients post ``body`` at once."""
    idle = _rss(server.proc.pid)
    peak = idle
    statuses: list[int] = []
    barrier = threading.Barrier(concurrent)

    def post() -> None:
        barrier.wait()
        response = httpx.post(
            f"{server.base}/evaluate",
            content=body,
            headers={"content-type": "application/json"},
            timeout=600,
        )
        statuses.append(response.status_code)

    threads = [threading.Thread(target=post) for _ in range(concurrent)]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, _rss(server.proc.pid))
        time.sleep(0.005)
    return {
        "idle_mib": idle / MIB,
        "peak_mib": peak / MIB,
        "admitted": statuses.count(200),
        "refused_429": statuses.count(429),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    parser.add_argument("--old", action="store_true", help="the server has no new options")
    parser.add_argument("--mib", type=float, default=9.9, help="body size for /health test")
    parser.add_argument("--payload", choices=sorted(PAYLOADS), nargs="+", default=sorted(PAYLOADS))
    parser.add_argument("--big-sample-mib", type=float, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--max-concurrent", type=int, default=None)
    args = parser.parse_args()

    extra: list[str] = []
    if not args.old and args.max_concurrent is not None:
        extra += ["--max-concurrent", str(args.max_concurrent)]
    print(f"server from {args.src}")
    server = Server(args.src, extra)
    try:
        with httpx.Client(base_url=server.base, timeout=30) as client:
            idle = []
            for _ in range(200):
                began = time.perf_counter()
                client.get("/health")
                idle.append((time.perf_counter() - began) * 1000)
                time.sleep(0.005)
        print(
            f"idle server: /health p50 {_percentile(idle, 0.5):.1f} ms, "
            f"p99 {_percentile(idle, 0.99):.1f} ms"
        )
        for kind in args.payload:
            path, make, status = PAYLOADS[kind]
            mib = args.mib
            if kind == "big-sample" and args.big_sample_mib is not None:
                mib = args.big_sample_mib
            body = make(int(mib * MIB))
            health = health_under_load(server, path, body, status, args.repeat)
            print(
                f"{kind:12} {len(body) / MIB:4.1f} MiB -> {status}: /health while it is "
                f"scored ({health['request_s']:.2f} s per request, {health['polls']} polls): "
                f"p50 {health['p50_ms']:.1f} ms, p99 {health['p99_ms']:.1f} ms, "
                f"max {health['max_ms']:.1f} ms"
            )
    finally:
        server.stop()
    eight = make_payload(8 * MIB, seed=1)
    for concurrent in (1, args.concurrent):
        server = Server(args.src, extra)  # a fresh process: RSS not inflated by the above
        try:
            memory = memory_per_request(server, eight, concurrent)
        finally:
            server.stop()
        print(
            f"{concurrent} concurrent {len(eight) / MIB:.1f} MiB request(s): idle RSS "
            f"{memory['idle_mib']:.0f} MiB, peak {memory['peak_mib']:.0f} MiB "
            f"(+{memory['peak_mib'] - memory['idle_mib']:.0f} MiB); "
            f"{memory['admitted']} answered 200, {memory['refused_429']} refused (429)"
        )


if __name__ == "__main__":
    main()
