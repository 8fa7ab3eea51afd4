"""The server's guards through a real uvicorn process (``ragmeter serve`` /
``ragmeter.server.run``): slow clients time out, /health stays responsive while a 10 MiB
request is scored, requests over the cap get 429, and a client that hangs up stops the work.

Timing bounds here are generous (the machine is shared): they tell "stops / answers" from
"hangs for ever", never fast from slow. Measured speeds are in benchmarks/bench_server.py.
Where a test needs the server to be in the middle of some work, the test server holds the
work there until the test lets it go (``Server.hold``, ``Server.release``), and the test
waits for the server's own signals (``Server.events``, its log), not for time to pass.
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
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.slow  # live servers (about 20 s in all)

TESTS = Path(__file__).parent
SLOW_SECONDS = 0.02  # per sample, in the slow server's latency_ms
HANG = 120.0  # seconds: a wait this long means a hang; no pass or fail depends on speed
PHASES = ("parse", "validate", "score")  # of an /evaluate request, held by the gated server


# ------------------------------------------------------------------ the server under test


def _note(event: str) -> None:  # pragma: no cover - runs in the server process
    """Append ``event`` to the file named by ``RAGMETER_TEST_EVENTS`` (``Server.events``)."""
    with Path(os.environ["RAGMETER_TEST_EVENTS"]).open("a") as out:
        out.write(event + "\n")


def _wait_for_file(path: Path, *, present: bool) -> None:  # pragma: no cover - in the server
    while path.exists() != present:
        time.sleep(0.01)


def serve_slow() -> None:  # pragma: no cover - runs in the server process
    """Entry point of the slow test server: ``latency_ms`` takes 20 ms per sample, notes
    ``scored <id>`` for each sample, then waits while the file named by
    ``RAGMETER_TEST_HOLD`` exists (``Server.hold``); a client hang-up seen by the server is
    noted ``disconnect noticed``. Options (JSON) are ``sys.argv[1]``, passed to
    :func:`ragmeter.server.run`."""
    from ragmeter import server
    from ragmeter.metrics.operational import LatencyMs
    from ragmeter.schema import RagSample
    from ragmeter.server import _work

    hold = Path(os.environ["RAGMETER_TEST_HOLD"])

    def score(self: LatencyMs, sample: RagSample) -> float | None:
        time.sleep(SLOW_SECONDS)
        _note(f"scored {sample.id}")
        _wait_for_file(hold, present=False)
        return sample.latency_ms

    watch = _work._watch_disconnect

    async def watch_and_note(receive: Any, stop: Any) -> None:
        await watch(receive, stop)  # returns when the client hung up (else it is cancelled)
        _note("disconnect noticed")

    LatencyMs.score = score  # type: ignore[method-assign]
    _work._watch_disconnect = watch_and_note
    server.run(**json.loads(sys.argv[1]))


def serve_gated() -> None:  # pragma: no cover - runs in the server process
    """Entry point of the gated test server: each phase of an ``/evaluate`` request's work
    (``PHASES``: parsing, validation, scoring) notes ``<phase> <k>`` (its k-th time, from 0)
    as it begins, does its work, and only returns once the test has released it
    (``Server.release``). Options (JSON) are ``sys.argv[1]``, passed to
    :func:`ragmeter.server.run`."""
    from ragmeter import server
    from ragmeter.server import _models, _work

    hold = Path(os.environ["RAGMETER_TEST_HOLD"])
    counts: Counter[str] = Counter()

    def gated(phase: str, work: Callable[..., Any]) -> Callable[..., Any]:
        def held(*args: Any, **kwargs: Any) -> Any:
            k = counts[phase]
            counts[phase] += 1
            _note(f"{phase} {k}")
            result = work(*args, **kwargs)
            _wait_for_file(Path(f"{hold}.{phase}-{k}.go"), present=True)
            return result

        return held

    validate = _models.EvaluateRequest.model_validate.__func__  # type: ignore[attr-defined]
    _work._parse = gated("parse", _work._parse)
    _models.EvaluateRequest.model_validate = classmethod(  # type: ignore[method-assign,assignment]
        gated("validate", validate)
    )
    _work.evaluate_rag = gated("score", _work.evaluate_rag)
    server.run(**json.loads(sys.argv[1]))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A server process on a free port; ``log`` holds its output. ``slow`` runs
    :func:`serve_slow`, ``gated`` :func:`serve_gated`, neither ``ragmeter serve``."""

    def __init__(
        self, tmp_path: Path, options: dict[str, Any], *, slow: bool = False, gated: bool = False
    ) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / f"server-{self.port}.log"
        self.events_file = tmp_path / f"events-{self.port}.txt"
        self.hold = tmp_path / f"hold-{self.port}"
        env = dict(
            os.environ,
            RAGMETER_TEST_EVENTS=str(self.events_file),
            RAGMETER_TEST_HOLD=str(self.hold),
        )
        if slow or gated:
            env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
            settings = {"host": "127.0.0.1", "port": self.port, **options}
            entry = "serve_slow" if slow else "serve_gated"
            command = [
                sys.executable,
                "-c",
                f"import test_server_live as t; t.{entry}()",
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

    def events(self) -> list[str]:
        """What the test server noted so far, in order."""
        return self.events_file.read_text().splitlines() if self.events_file.exists() else []

    def scored_ids(self) -> list[str]:
        """The ids of the samples the slow server has scored, in order."""
        return [e.removeprefix("scored ") for e in self.events() if e.startswith("scored ")]

    def scored(self) -> int:
        return len(self.scored_ids())

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        """Wait for ``condition``; only a hang (``HANG`` s) ends the wait, as a failure."""
        deadline = time.monotonic() + HANG
        while not condition():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{what}: not seen within {HANG:g} s\n{self.log.read_text()}")
            time.sleep(0.01)

    def wait_for_event(self, event: str) -> None:
        self.wait_until(lambda: event in self.events(), repr(event))

    def release(self, phase: str, k: int) -> None:
        """Let the gated server's ``phase`` of its ``k``-th request return."""
        Path(f"{self.hold}.{phase}-{k}.go").touch()

    def stop(self) -> None:
        self.hold.unlink(missing_ok=True)  # held work may end
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    servers: list[Server] = []

    def start(slow: bool = False, gated: bool = False, **options: Any) -> Server:
        server = Server(tmp_path, options, slow=slow, gated=gated)
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


def _raw_post(port: int, payload: dict[str, Any]) -> socket.socket:
    """A connection that has sent a whole POST /evaluate of ``payload`` (and reads nothing)."""
    body = json.dumps(payload).encode()
    head = (
        b"POST /evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    return _raw(port, head + body)


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
    # The gated server holds each phase of the big request's work (parsing, validation,
    # scoring) until the test lets it go, and the test lets it go only once a /health sent
    # after the phase began has been answered: /health is never stuck behind the big request
    # (before: its parsing and validation ran on the event loop, so /health would wait for
    # ever here). Limits out of the way: the held phases spend the request's time budget.
    server = start(gated=True, score_timeout=3600, body_timeout=3600)
    body = _big_payload(10 * 1024 * 1024 - 200)
    assert len(body) <= 10 * 1024 * 1024
    headers = {"content-type": "application/json"}
    with ThreadPoolExecutor(1) as pool:
        for k in range(2):
            big = pool.submit(
                httpx.post, f"{server.base}/evaluate", content=body, headers=headers, timeout=300
            )
            try:
                for phase in PHASES:
                    server.wait_for_event(f"{phase} {k}")
                    # sent while the big request is in this phase, which it cannot leave
                    # before the release below: a loop blocked by the work would never answer
                    health = httpx.get(f"{server.base}/health", timeout=HANG)
                    assert health.status_code == 200
                    assert not big.done(), "the big request ended while one of its phases was held"
                    server.release(phase, k)
            finally:
                for phase in PHASES:
                    server.release(phase, k)
            response = big.result()
            assert response.status_code == 200, response.text[:300]
    assert response.json()["n_samples"] > 5000
    assert server.events() == [f"{phase} {k}" for k in range(2) for phase in PHASES]


# ------------------------------------------------------------------ (c) the concurrency cap


def test_requests_over_the_cap_get_429_with_retry_after(start: Any) -> None:
    server = start(slow=True, max_concurrent=1, max_queued=0)
    results: list[httpx.Response] = []

    def slow_request() -> None:
        results.append(httpx.post(f"{server.base}/evaluate", json=_slow_samples(100), timeout=HANG))

    server.hold.touch()  # the first request scores one sample, then keeps its slot
    first = threading.Thread(target=slow_request)
    first.start()
    try:
        server.wait_until(lambda: server.scored() > 0, "the first request scoring")
        refused = httpx.post(f"{server.base}/evaluate", json=_slow_samples(1), timeout=HANG)
        assert refused.status_code == 429, refused.text
        assert int(refused.headers["retry-after"]) >= 1
        assert "at most 1" in refused.json()["detail"]
        assert httpx.get(f"{server.base}/health", timeout=HANG).status_code == 200  # never gated
        assert not results, "the first request ended while it was held"
    finally:
        server.hold.unlink()
        first.join()
    assert [r.status_code for r in results] == [200]
    assert server.scored() == 100  # the refused request scored nothing
    ok = httpx.post(f"{server.base}/evaluate", json=_slow_samples(1), timeout=30)
    assert ok.status_code == 200  # the slot was released


# ------------------------------------------------------------------ (d) disconnect stops work


def test_a_client_that_disconnects_stops_the_scoring(start: Any) -> None:
    server = start(slow=True)
    n = 1000  # 20 s of scoring
    server.hold.touch()  # scoring holds after each sample while the test holds it
    client = _raw_post(server.port, _slow_samples(n))
    try:
        server.wait_until(lambda: server.scored() > 0, "scoring")
        client.close()  # the client hangs up while its request is scored
        server.wait_for_event("disconnect noticed")
    finally:
        client.close()
        server.hold.unlink()
    # the scoring loop stops at the next sample; the log says where, once the work has ended
    stopped = "client disconnected: scoring stopped"
    server.wait_until(lambda: stopped in server.log.read_text(), "the scoring stopping")
    assert f"{stopped} after 1 of {n} samples" in server.log.read_text()
    assert server.scored_ids() == ["s0"]
    # and the server is fine afterwards (and still scored nothing more of that request)
    more = {"samples": [{"id": "after", "latency_ms": 1.0}], "metrics": ["latency_ms"]}
    ok = httpx.post(f"{server.base}/evaluate", json=more, timeout=HANG)
    assert ok.status_code == 200
    assert server.scored_ids() == ["s0", "after"]


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
    # The only slot is held by a request held in its scoring until its client hangs up.
    server.hold.touch()
    holder = _raw_post(server.port, _slow_samples(1000))
    try:
        server.wait_until(lambda: server.scored() > 0, "the holder scoring")
        body = _json_body(8 * 1024 * 1024)  # under the 10 MiB limit: refused for the cap only
        for chunked in (False, True):
            status, headers, answer = _post(server.port, body, chunked=chunked)
            assert status == 429, (chunked, answer[:300])
            assert int(headers["retry-after"]) >= 1
            assert headers["connection"] == "close"
            assert "at most 1" in json.loads(answer)["detail"]
    finally:
        holder.close()
        server.hold.unlink()
    assert httpx.get(f"{server.base}/health", timeout=10).status_code == 200
