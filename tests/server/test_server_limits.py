"""The server's guards, in process: content type (415), JSON syntax (400), the time budget
(503), admission control (429), body and send timeouts (408), and where the work runs (never
on the event loop). The same guards through a real uvicorn process: test_server_live.py."""

from __future__ import annotations

import json
import threading
import time
import types
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pytest

pytest.importorskip("fastapi")
anyio = pytest.importorskip("anyio")

from fastapi.testclient import TestClient  # noqa: E402

from ragmeter.metrics.operational import LatencyMs  # noqa: E402
from ragmeter.schema import RagSample  # noqa: E402
from ragmeter.server import (  # noqa: E402
    _limits,
    _models,
    _responses,
    _work,
    create_app,
)

Message = MutableMapping[str, Any]
JSON_HEADERS = {"content-type": "application/json"}
PAYLOAD: dict[str, Any] = {
    "samples": [{"id": "s1", "answer": "Paris is big.", "context": ["Paris is big"]}]
}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


# ------------------------------------------------------------------ (e) content type, JSON


@pytest.mark.parametrize("path", ["/evaluate", "/evaluate/retrieval"])
@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "application/xml"]
)
def test_a_body_without_a_json_content_type_is_415(
    client: TestClient, path: str, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = client.post(path, content=json.dumps(PAYLOAD).encode(), headers=headers)
    assert response.status_code == 415, response.text
    detail = response.json()["detail"]
    assert "Content-Type: application/json" in detail
    assert "valid dictionary" not in response.text


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/x+json",
    ],
)
def test_json_content_types_are_accepted(client: TestClient, content_type: str) -> None:
    response = client.post(
        "/evaluate", content=json.dumps(PAYLOAD).encode(), headers={"content-type": content_type}
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("path", ["/evaluate", "/evaluate/retrieval"])
@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"", "body is empty"),
        (b"{", "body is not valid JSON"),
        (b"not json", "body is not valid JSON"),
        (b'{"samples": [}', "body is not valid JSON"),
        (b"\xff\xfe", "body is not valid JSON"),
        (b'{"samples": [1]} trailing', "body is not valid JSON"),
        (b'{"samples": [{"input_tokens": ' + b"1" * 5000 + b"}]}", "body is not valid JSON"),
        (b'{"samples": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ],
)
def test_a_body_that_is_not_json_is_400_saying_so(
    client: TestClient, path: str, raw: bytes, says: str
) -> None:
    response = client.post(path, content=raw, headers=JSON_HEADERS)
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and len(detail) == 1
    assert detail[0]["type"] == "json_invalid"
    assert detail[0]["loc"][0] == "body"
    assert says in detail[0]["msg"]
    assert "valid dictionary" not in response.text


# ------------------------------------------------------------------ where the work runs


def test_parsing_validation_scoring_and_rendering_run_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threads: dict[str, set[int]] = {}

    def spy(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            threads.setdefault(name, set()).add(threading.get_ident())
            return fn(*args, **kwargs)

        return wrapped

    # the server's own json: patching json.loads itself would also catch whatever else in
    # the process parses JSON on that thread (an exporter left by another test module)
    our_json = types.SimpleNamespace(
        loads=spy("parse", json.loads), JSONDecodeError=json.JSONDecodeError
    )
    monkeypatch.setattr(_work, "json", our_json)
    monkeypatch.setattr(_work, "evaluate_rag", spy("score", _work.evaluate_rag))
    monkeypatch.setattr(_work, "evaluate_run", spy("score", _work.evaluate_run))
    render = _responses._JSON.render

    def render_spy(self: Any, content: Any) -> bytes:
        if isinstance(content, dict) and ("kind" in content or "detail" in content):
            threads.setdefault("render", set()).add(threading.get_ident())  # not /health's
        return render(self, content)

    monkeypatch.setattr(_responses._JSON, "render", render_spy)
    validate = _models.EvaluateRequest.model_validate.__func__  # type: ignore[attr-defined]

    app = create_app()

    @app.get("/loop-thread")
    async def loop_thread() -> dict[str, int]:
        return {"ident": threading.get_ident()}

    with TestClient(app) as client:
        loop = client.get("/loop-thread").json()["ident"]
        monkeypatch.setattr(
            _models.EvaluateRequest,
            "model_validate",
            classmethod(spy("validate", validate)),
        )
        assert client.post("/evaluate", json=PAYLOAD).status_code == 200
        body = {"qrels": {"q": {"d": 1}}, "run": {"q": ["d"]}}
        assert client.post("/evaluate/retrieval", json=body).status_code == 200
        assert client.post("/evaluate", json={"samples": [{"question": 3}]}).status_code == 422
    assert {"parse", "validate", "score", "render"} <= set(threads)
    for name, idents in threads.items():
        assert loop not in idents, f"{name} ran on the event loop thread"


# ------------------------------------------------------------------ (d) the time budget


class Clock:
    """Stands for the ``time`` module in ragmeter.server: ``monotonic()`` is a clock that
    moves only when the test moves it, so the time budget is spent by the samples alone."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


SAMPLE_SECONDS = 0.04  # by the clock, per sample in the slow latency_ms


@pytest.fixture
def slow_latency(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``latency_ms`` takes 40 ms per sample of the server's clock and records the ids it
    scored."""
    clock = Clock()
    scored: list[str] = []

    def score(self: LatencyMs, sample: RagSample) -> float | None:
        clock.now += SAMPLE_SECONDS
        scored.append(sample.id)
        return sample.latency_ms

    monkeypatch.setattr(_limits, "time", clock)
    monkeypatch.setattr(LatencyMs, "score", score)
    return scored


def test_a_request_over_the_time_budget_is_503_and_scoring_stops(
    slow_latency: list[str],
) -> None:
    client = TestClient(create_app(score_timeout=0.3))
    samples = [{"id": f"s{i}", "latency_ms": i} for i in range(300)]  # 12 s of work
    response = client.post("/evaluate", json={"samples": samples, "metrics": ["latency_ms"]})
    assert response.status_code == 503, response.text
    assert "0.3 s" in response.json()["detail"]
    assert "fewer samples" in response.json()["detail"]
    # stopped between samples, at the first check past the budget: after 8 samples (320 ms;
    # 7 took 280 ms), long before the end
    assert slow_latency == [f"s{i}" for i in range(8)]
    assert "scoring stopped after 8 of 300 samples" in response.json()["detail"]
    slow_latency.clear()
    ok = client.post("/evaluate", json={"samples": samples[:3], "metrics": ["latency_ms"]})
    assert ok.status_code == 200 and len(slow_latency) == 3


# ------------------------------------------------------------------ ASGI-level: the guard

Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def _scope(method: str = "POST", headers: list[tuple[bytes, bytes]] | None = None) -> Message:
    return {
        "type": "http",
        "method": method,
        "path": "/evaluate",
        "headers": headers or [(b"content-type", b"application/json")],
    }


class Recorder:
    """An ASGI ``send`` that keeps the messages."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int | None:
        for message in self.messages:
            if message["type"] == "http.response.start":
                return int(message["status"])
        return None

    def header(self, name: bytes) -> bytes | None:
        for message in self.messages:
            if message["type"] == "http.response.start":
                return dict(message.get("headers", [])).get(name)
        return None

    @property
    def body(self) -> bytes:
        return b"".join(
            m.get("body", b"") for m in self.messages if m["type"] == "http.response.body"
        )


def _body_receive(*chunks: bytes, then_block: bool = False) -> Receive:
    pending = list(chunks)

    async def receive() -> Message:
        if pending:
            chunk = pending.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending) or then_block}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return receive


async def _ok_app(scope: Message, receive: Receive, send: Send) -> None:
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _guard(app: Any = _ok_app, **options: Any) -> Any:
    settings: dict[str, Any] = {
        "max_body_bytes": 1000,
        "body_timeout": 5.0,
        "gate": _limits._Gate(max_concurrent=1, max_queued=0, queue_timeout=1.0),
    }
    settings.update(options)
    return _limits._BodyLimit(app, **settings)


def test_a_body_that_stalls_is_408_within_the_body_timeout() -> None:
    async def main() -> Recorder:
        send = Recorder()
        guard = _guard(body_timeout=0.3)
        with anyio.fail_after(10):  # before: waited for the body for ever
            await guard(_scope(), _body_receive(b'{"sam', then_block=True), send)
        return send

    send = anyio.run(main)
    assert send.status == 408
    assert b"0.3 s" in send.body
    assert send.header(b"connection") == b"close"


def test_a_client_that_does_not_read_the_answer_is_dropped() -> None:
    async def blocked_send(message: Message) -> None:
        if message["type"] == "http.response.body":
            await anyio.sleep_forever()

    async def main() -> None:
        guard = _guard(body_timeout=0.3)
        with anyio.fail_after(10):  # returns (uvicorn then closes the connection), no raise
            await guard(_scope(), _body_receive(b"{}"), blocked_send)

    anyio.run(main)


def test_concurrent_requests_over_the_cap_get_429_with_retry_after() -> None:
    async def main() -> list[Recorder]:
        gate_open = anyio.Event()
        started = 0

        async def slow_app(scope: Message, receive: Receive, send: Send) -> None:
            nonlocal started
            started += 1
            await gate_open.wait()
            await _ok_app(scope, receive, send)

        guard = _guard(
            slow_app,
            gate=_limits._Gate(max_concurrent=2, max_queued=1, queue_timeout=5.0),
        )
        sends = [Recorder() for _ in range(5)]
        async with anyio.create_task_group() as tg:
            for send in sends:
                tg.start_soon(guard, _scope(), _body_receive(b"{}"), send)
                await anyio.sleep(0.05)
            # 2 running, 1 queued, 2 refused at once (without reading their bodies)
            assert started == 2
            assert [s.status for s in sends] == [None, None, None, 429, 429]
            gate_open.set()
        return sends

    sends = anyio.run(main)
    assert [s.status for s in sends] == [200, 200, 200, 429, 429]
    refused = sends[3]
    assert refused.header(b"retry-after") is not None
    assert refused.header(b"connection") == b"close"
    assert b"at most 2" in refused.body


def test_a_queued_request_waits_at_most_the_queue_timeout() -> None:
    async def main() -> list[Recorder]:
        never = anyio.Event()

        async def stuck_app(scope: Message, receive: Receive, send: Send) -> None:
            await never.wait()

        guard = _guard(
            stuck_app,
            gate=_limits._Gate(max_concurrent=1, max_queued=4, queue_timeout=0.3),
        )
        sends = [Recorder(), Recorder()]
        with anyio.move_on_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(guard, _scope(), _body_receive(b"{}"), sends[0])
                await anyio.sleep(0.05)
                with anyio.fail_after(5):
                    await guard(_scope(), _body_receive(b"{}"), sends[1])
                tg.cancel_scope.cancel()
        return sends

    first, second = anyio.run(main)
    assert first.status is None  # still running when cancelled
    assert second.status == 429
    assert b"waited 0.3 s" in second.body


def test_the_gate_releases_its_slots() -> None:
    async def main() -> list[int | None]:
        guard = _guard(gate=_limits._Gate(max_concurrent=1, max_queued=0, queue_timeout=1))
        statuses = []
        for _ in range(5):
            send = Recorder()
            await guard(_scope(), _body_receive(b"{}"), send)
            statuses.append(send.status)
        send = Recorder()  # a 413 and a 408 release theirs too
        await guard(_scope(), _body_receive(b"x" * 2000), send)
        statuses.append(send.status)
        return statuses

    assert anyio.run(main) == [200] * 5 + [413]


def test_requests_without_a_body_are_never_gated() -> None:
    async def main() -> int | None:
        guard = _guard(gate=_limits._Gate(max_concurrent=1, max_queued=0, queue_timeout=1))
        send = Recorder()
        await guard(_scope("GET", []), _body_receive(b""), send)
        return send.status

    assert anyio.run(main) == 200


# ------------------------------------------------------------------ refusals drain the body


class Log:
    """A receive of endless 1000-byte chunks and a send, logging both in order."""

    def __init__(self, chunks: int | None = None) -> None:
        self.events: list[str] = []
        self.left = chunks  # None: never ends
        self.sent = Recorder()

    async def receive(self) -> Message:
        self.events.append("receive")
        if self.left is not None:
            self.left -= 1
        await anyio.sleep(0)
        return {"type": "http.request", "body": b"x" * 1000, "more_body": self.left != 0}

    async def send(self, message: Message) -> None:
        more = message.get("more_body", False)
        self.events.append(f"{message['type']}{' (more)' if more else ''}")
        await self.sent(message)


def _length(n: int) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json"), (b"content-length", str(n).encode())]


@pytest.mark.parametrize("refusal", [413, 429])
def test_a_refusal_is_sent_first_and_ended_after_the_body_is_read(refusal: int) -> None:
    gate = _limits._Gate(max_concurrent=1, max_queued=0, queue_timeout=1.0)
    if refusal == 429:
        gate.active = 1  # the only slot is taken
    guard = _guard(gate=gate)
    log = Log(chunks=5)
    declared = _length(5000 if refusal == 413 else 900)
    anyio.run(guard, _scope(headers=declared), log.receive, log.send)
    assert log.events == [
        "http.response.start",
        "http.response.body (more)",  # the whole answer, before any of the body is read
        *["receive"] * 5,  # the body, to its end
        "http.response.body",  # then the answer ends (and Connection: close closes)
    ]
    assert log.sent.status == refusal
    assert log.sent.header(b"connection") == b"close"
    assert json.loads(log.sent.body)["detail"]


def test_a_chunked_body_over_the_limit_is_drained_after_the_413() -> None:
    log = Log(chunks=5)
    anyio.run(_guard(max_body_bytes=1500), _scope(), log.receive, log.send)
    # two chunks read (2000 > 1500 bytes), then the 413, then the other three chunks
    assert log.events == [
        "receive",
        "receive",
        "http.response.start",
        "http.response.body (more)",
        "receive",
        "receive",
        "receive",
        "http.response.body",
    ]
    assert log.sent.status == 413


def test_draining_stops_after_drain_bytes() -> None:
    guard = _guard(body_timeout=600)
    guard.drain_bytes = 10_000
    log = Log()  # a chunked body that never ends

    async def main() -> None:
        with anyio.fail_after(60):  # against a hang only: the bound is bytes, not time
            await guard(_scope(), log.receive, log.send)

    anyio.run(main)
    # 2 chunks to pass the 1000-byte limit, then 11 (11 000 bytes drained: past the bound)
    assert log.events.count("receive") == 2 + 11
    assert log.events[-1] == "http.response.body" and log.sent.status == 413


def test_a_body_declared_larger_than_drain_bytes_is_not_read() -> None:
    guard = _guard()
    log = Log()
    anyio.run(guard, _scope(headers=_length(guard.drain_bytes + 1)), log.receive, log.send)
    assert log.events == ["http.response.start", "http.response.body"]
    assert log.sent.status == 413


def test_a_request_that_got_its_413_drains_without_holding_a_slot() -> None:
    async def main() -> tuple[Recorder, Recorder]:
        gate = _limits._Gate(max_concurrent=1, max_queued=0, queue_timeout=1.0)
        guard = _guard(gate=gate, max_body_bytes=1500)
        big, small = Recorder(), Recorder()
        answered, drained, more = anyio.Event(), anyio.Event(), anyio.Event()

        async def big_send(message: Message) -> None:
            await big(message)
            answered.set()

        async def big_receive() -> Message:
            if len(received) == 2:
                await more.wait()  # the rest of the body is slow to come
            received.append(1)
            last = len(received) == 3
            if last:
                drained.set()
            return {"type": "http.request", "body": b"x" * 1000, "more_body": not last}

        received: list[int] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(guard, _scope(), big_receive, big_send)
            with anyio.fail_after(10):  # against a hang only
                await answered.wait()
                # the 413 was sent and the body is still being drained: the slot is free
                await guard(_scope(), _body_receive(b"{}"), small)
            more.set()
            with anyio.fail_after(10):  # against a hang only
                await drained.wait()
        return big, small

    big, small = anyio.run(main)
    assert big.status == 413 and small.status == 200


# ------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_concurrent": 0},
        {"max_queued": -1},
        {"max_concurrent": 1.5},
        {"body_timeout": 0},
        {"score_timeout": -1.0},
        {"queue_timeout": float("nan")},
        {"body_timeout": float("inf")},
        {"score_timeout": "60"},
    ],
)
def test_create_app_rejects_bad_guard_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        create_app(**kwargs)


def test_limits_are_kept_on_the_app_state() -> None:
    app = create_app(max_concurrent=3, max_queued=5, body_timeout=7.5, score_timeout=9)
    assert app.state.max_concurrent == 3
    assert app.state.max_queued == 5
    assert app.state.body_timeout == 7.5
    assert app.state.score_timeout == 9.0


def test_openapi_documents_the_bodies_and_every_status(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    components = schema["components"]["schemas"]
    assert {"EvaluateRequest", "RetrievalRequest", "Sample", "Prices"} <= set(components)
    for path, model in (
        ("/evaluate", "EvaluateRequest"),
        ("/evaluate/retrieval", "RetrievalRequest"),
    ):
        operation = schema["paths"][path]["post"]
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{model}"}
        assert operation["requestBody"]["required"] is True
        assert {"200", "400", "408", "413", "415", "422", "429", "503"} <= set(
            operation["responses"]
        )
    samples = components["EvaluateRequest"]["properties"]["samples"]
    assert samples["items"] == {"$ref": "#/components/schemas/Sample"}
    refs = json.dumps(schema)
    assert "#/$defs/" not in refs
