"""The server's guards through a real uvicorn process (``ragmeter serve`` /
``ragmeter.server.run``): slow clients time out, /health stays responsive while a 10 MiB
request is scored, requests over the cap get 429, and a client that hangs up stops the work.

Timing bounds here are generous (the machine is shared): they tell "stops / answers" from
"hangs for ever", never fast from slow. Measured speeds are in benchmarks/bench_server.py.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.slow  # live servers (about 20 s in all)

TESTS = Path(__file__).parent
SLOW_SECONDS = 0.02  # per sample, in the slow server's latency_ms


# ------------------------------------------------------------------ the server under test


def serve_slow() -> None:  # pragma: no cover - runs in the server process
    """Entry point of the slow test server: ``latency_ms`` takes 20 ms per sample and appends
    each scored sample id to the file named by ``RAGMETER_TEST_PROGRESS``; options (JSON) are
    ``sys.argv[1]``, passed to :func:`ragmeter.server.run`."""
    from ragmeter.metrics.operational import LatencyMs
    from ragmeter.schema import RagSample
    from ragmeter.server import run

    progress = Path(os.environ["RAGMETER_TEST_PROGRESS"])

    def score(self: LatencyMs, sample: RagSample) -> float | None:
        time.sleep(SLOW_SECONDS)
        with progress.open("a") as out:
            out.write(sample.id + "\n")
        return sample.latency_ms

    LatencyMs.score = score  # type: ignore[method-assign]
    run(**json.loads(sys.argv[1]))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A server process on a free port; ``log`` holds its output."""

    def __init__(self, tmp_path: Path, options: dict[str, Any], *, slow: bool = False) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / f"server-{self.port}.log"
        self.progress = tmp_path / f"progress-{self.port}.txt"
        env = dict(os.environ, RAGMETER_TEST_PROGRESS=str(self.progress))
        if slow:
            env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
            settings = {"host": "127.0.0.1", "port": self.port, **options}
            command = [
                sys.executable,
                "-c",
                "import test_server_live as t; t.serve_slow()",
                json.dumps(settings),
            ]
        else:
            command = [sys.executable, "-m", "ragmeter", "serve", "--port", str(self.port)]
            for name, value in options.items():
                command += [f"--{name.replace('_', '-')}", str(value)]
        with self.log.open("wb") as sink:
            self.proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                httpx.get(f"{self.base}/health", timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.2)
        self.stop()
        raise AssertionError(f"no answer on /health within 60 s: {self.log.read_text()}")

    def scored(self) -> int:
        return len(self.progress.read_text().split()) if self.progress.exists() else 0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    servers: list[Server] = []

    def start(slow: bool = False, **options: Any) -> Server:
        server = Server(tmp_path, options, slow=slow)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def _raw(port: int, data: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    if data:
        sock.sendall(data)
    return sock


def _closed_by_server(sock: socket.socket, within: float) -> tuple[bool, bytes]:
    """Whether the server closed ``sock`` within ``within`` s, and what it sent first."""
    sock.settimeout(within)
    received = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True, received
            received += chunk
    except TimeoutError:
        return False, received
    except ConnectionResetError:
        return True, received


def _slow_samples(n: int) -> dict[str, Any]:
    return {
        "samples": [{"id": f"s{i}", "latency_ms": float(i)} for i in range(n)],
        "metrics": ["latency_ms"],
    }


# ------------------------------------------------------------------ (a) slow clients


def test_half_open_connections_are_closed_after_the_header_timeout(start: Any) -> None:
    # before: uvicorn timed out idle keep-alive connections only, so these were held for ever
    server = start(header_timeout=1)
    silent = [_raw(server.port) for _ in range(500)]
    partial = [_raw(server.port, b"POST /evaluate HTTP/1.1\r\nHost: x\r\n") for _ in range(500)]
    began = time.monotonic()
    # the server still answers meanwhile
    assert httpx.get(f"{server.base}/health", timeout=10).status_code == 200
    for sock in silent + partial:
        closed, _ = _closed_by_server(sock, max(0.1, began + 30 - time.monotonic()))
        assert closed, "a connection that sent no complete request head was kept open"
        sock.close()
    # a keep-alive connection that starts a second request head and stalls is closed too
    sock = _raw(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    sock.sendall(b"GET /health HT")
    closed, received = _closed_by_server(sock, 20)
    assert closed and received.startswith(b"HTTP/1.1 200")
    sock.close()


def test_a_stalled_body_gets_408_and_the_connection_is_closed(start: Any) -> None:
    server = start(body_timeout=1)
    head = (
        b"POST /evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n"
    )
    sock = _raw(server.port, head + b'{"samples": [')
    closed, received = _closed_by_server(sock, 30)
    sock.close()
    assert received.startswith(b"HTTP/1.1 408"), received[:200]
    assert b"1 s" in received
    assert closed


def test_idle_keep_alive_connections_are_closed(start: Any) -> None:
    server = start(keep_alive_timeout=1)
    sock = _raw(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    closed, received = _closed_by_server(sock, 30)
    sock.close()
    assert received.startswith(b"HTTP/1.1 200") and closed


# ------------------------------------------------------------------ (b) /health under load


def _big_payload(target: int) -> bytes:
    rng = random.Random(0)
    words = ["paris", "france", "capital", "river", "tower", "museum", "art", "history"]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n)) + "."

    samples = []
    size = 0
    while size < target - 3000:
        contexts = [text(25) for _ in range(3)]
        sample = {
            "id": f"s{len(samples)}",
            "question": text(8),
            "answer": text(6) + " " + contexts[0][:60],
            "reference": text(4),
            "context": contexts,
            "golden_documents": contexts[:1],
            "retrieved": contexts[::-1],
        }
        samples.append(sample)
        size += len(json.dumps(sample)) + 2
    return json.dumps({"samples": samples}).encode()


def test_health_answers_while_a_10_mib_request_is_scored(start: Any) -> None:
    server = start()
    body = _big_payload(10 * 1024 * 1024 - 200)
    assert len(body) <= 10 * 1024 * 1024
    done = threading.Event()
    latencies: list[float] = []

    def poll() -> None:
        with httpx.Client(base_url=server.base, timeout=30) as client:
            client.get("/health")
            while not done.is_set():
                began = time.perf_counter()
                assert client.get("/health").status_code == 200
                latencies.append(time.perf_counter() - began)
                time.sleep(0.01)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        for _ in range(2):
            response = httpx.post(
                f"{server.base}/evaluate",
                content=body,
                headers={"content-type": "application/json"},
                timeout=300,
            )
            assert response.status_code == 200, response.text[:300]
    finally:
        done.set()
        poller.join()
    assert response.json()["n_samples"] > 5000
    # generous: /health is never stuck behind the big request (before: its parsing and
    # validation ran on the event loop); the measured p99 is in benchmarks/bench_server.py
    assert latencies and max(latencies) < 2.0, sorted(latencies)[-5:]


# ------------------------------------------------------------------ (c) the concurrency cap


def test_requests_over_the_cap_get_429_with_retry_after(start: Any) -> None:
    server = start(slow=True, max_concurrent=1, max_queued=0)
    results: list[httpx.Response] = []

    def slow_request() -> None:
        results.append(httpx.post(f"{server.base}/evaluate", json=_slow_samples(100), timeout=60))

    first = threading.Thread(target=slow_request)
    first.start()
    deadline = time.monotonic() + 30
    while server.scored() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.scored() > 0, server.log.read_text()
    refused = httpx.post(f"{server.base}/evaluate", json=_slow_samples(1), timeout=30)
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) >= 1
    assert "at most 1" in refused.json()["detail"]
    assert httpx.get(f"{server.base}/health", timeout=10).status_code == 200  # never gated
    first.join(timeout=60)
    assert [r.status_code for r in results] == [200]
    ok = httpx.post(f"{server.base}/evaluate", json=_slow_samples(1), timeout=30)
    assert ok.status_code == 200  # the slot was released


# ------------------------------------------------------------------ (d) disconnect stops work


def test_a_client_that_disconnects_stops_the_scoring(start: Any) -> None:
    server = start(slow=True)
    n = 1000  # 20 s of scoring
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.base}/evaluate", json=_slow_samples(n), timeout=1.5)
    # the scoring loop notices the hang-up between samples and stops
    deadline = time.monotonic() + 30
    previous = -1
    while time.monotonic() < deadline:
        time.sleep(1.0)
        current = server.scored()
        if current == previous:
            break
        previous = current
    assert 0 < previous < n / 2, previous
    time.sleep(1.0)
    assert server.scored() == previous
    assert "disconnected" in server.log.read_text()
    # and the server is fine afterwards
    ok = httpx.post(f"{server.base}/evaluate", json=_slow_samples(2), timeout=30)
    assert ok.status_code == 200


# ------------------------------------------------------------------ (e) refusals reach clients
# that send the whole body before reading (http.client, requests): the server used to close
# with the body unread, so the kernel reset the connection and the 413/429 never arrived.


def _json_body(size: int) -> bytes:
    """A JSON body of about ``size`` bytes."""
    sample = json.dumps({"answer": "paris " * 170, "context": ["paris is big"]}).encode()
    count = max(1, size // (len(sample) + 1))
    return b'{"samples": [' + b",".join([sample] * count) + b"]}"


def _post(port: int, body: bytes, *, chunked: bool) -> tuple[int, dict[str, str], bytes]:
    """POST ``body`` to /evaluate with plain ``http.client``, which sends all of it before it
    reads the answer; ``chunked`` sends it in 64 KiB chunks without a Content-Length."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)  # against a hang only
    headers = {"Content-Type": "application/json"}
    try:
        if chunked:
            pieces = (body[i : i + 65536] for i in range(0, len(body), 65536))
            conn.request("POST", "/evaluate", body=pieces, headers=headers, encode_chunked=True)
        else:
            conn.request("POST", "/evaluate", body=body, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def test_http_client_reads_the_413_of_a_body_over_the_limit(start: Any) -> None:
    server = start(max_body_bytes=1024 * 1024)
    body = _json_body(20 * 1024 * 1024)
    # before: ConnectionResetError or BrokenPipeError, every time
    for chunked in (False, True, False, True):
        status, headers, answer = _post(server.port, body, chunked=chunked)
        assert status == 413, (chunked, answer[:300])
        assert headers["connection"] == "close"
        detail = json.loads(answer)["detail"]
        assert detail == "request body is larger than this server's limit of 1048576 bytes"
    assert httpx.get(f"{server.base}/health", timeout=10).status_code == 200
    small = json.dumps(_slow_samples(2)).encode()
    for chunked in (False, True):  # and scoring still works, either way
        assert _post(server.port, small, chunked=chunked)[0] == 200


def test_http_client_reads_the_429_of_a_request_over_the_cap(start: Any) -> None:
    server = start(slow=True, max_concurrent=1, max_queued=0)
    # The only slot is held by a request of 20 s of scoring until its client hangs up.
    payload = json.dumps(_slow_samples(1000)).encode()
    head = (
        b"POST /evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(payload)
    )
    holder = _raw(server.port, head + payload)
    try:
        deadline = time.monotonic() + 30
        while server.scored() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.scored() > 0, server.log.read_text()
        body = _json_body(8 * 1024 * 1024)  # under the 10 MiB limit: refused for the cap only
        for chunked in (False, True):
            status, headers, answer = _post(server.port, body, chunked=chunked)
            assert status == 429, (chunked, answer[:300])
            assert int(headers["retry-after"]) >= 1
            assert headers["connection"] == "close"
            assert "at most 1" in json.loads(answer)["detail"]
    finally:
        holder.close()
    assert httpx.get(f"{server.base}/health", timeout=10).status_code == 200
