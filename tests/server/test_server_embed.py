"""The server's embedding metrics: the offline default model by name, cached, bounded.

``POST /evaluate`` takes ``semantic_similarity``, ``semantic_context_recall`` and
``semantic_context_precision`` when ``ragmeter[semantic]`` is installed (the oracles are
:func:`ragmeter.evaluate_rag` on the same samples and scipy's cosine over the default
model's vectors), answers them with the network off, caches their vectors in the app's
embedding cache, and keeps to the server's limits; without the extra the answer is a 422
naming ``pip install 'ragmeter[semantic]'``.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from scipy.spatial.distance import cosine as cosine_distance

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

import ragmeter
from ragmeter.embed import EmbedOptions, FunctionEmbedder, runner
from ragmeter.embed import default as default_module
from ragmeter.embed.default import default_embedder
from ragmeter.server import _limits, create_app

NAMES = ["semantic_similarity", "semantic_context_recall", "semantic_context_precision"]
SAMPLES: list[dict[str, Any]] = [
    {
        "id": "paris",
        "response": "The capital is Paris",
        "reference": "Paris is France's capital",
        "retrieved_contexts": ["Paris is the capital of France. The Seine runs through it."],
    },
    {
        "id": "sum",
        "response": "four",
        "reference": "Two plus two is four.",
        "retrieved_contexts": ["Arithmetic: two plus two is four.", "Lyon is a city."],
    },
    {"id": "blank", "response": "", "reference": "Rome", "retrieved_contexts": ["Rome."]},
    {"id": "no-ref", "response": "Berlin", "retrieved_contexts": ["Berlin is in Germany."]},
    # rag-eval's names work too
    {"id": "rag-eval", "answer": "It is Paris", "context": ["Paris, France's capital."]},
]


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / "cache-dir"))
    return tmp_path / "cache-dir"


def _post(client: TestClient, metrics: Sequence[str], samples: Any = SAMPLES) -> Any:
    return client.post("/evaluate", json={"samples": samples, "metrics": list(metrics)})


def test_the_three_names_score_as_evaluate_rag_and_scipy_cosine() -> None:
    client = TestClient(create_app(embed_cache=None))
    response = _post(client, ["token_f1", *NAMES])
    assert response.status_code == 200, response.text
    got = response.json()
    expected = ragmeter.evaluate_rag(SAMPLES, metrics=["token_f1", *NAMES], embed_cache=None)
    assert got["metrics"] == expected.metrics
    assert got["per_sample"] == expected.per_sample
    assert got["coverage"] == expected.coverage
    assert got["warnings"] == expected.warnings
    assert got["extra"]["embed_models"] == [dict(default_embedder().identity)]
    assert got["per_sample"]["no-ref"]["semantic_similarity"] is None
    assert got["per_sample"]["blank"]["semantic_similarity"] == 0.0  # noted, not embedded
    model = default_embedder()
    for sample in SAMPLES[:2]:
        answer, reference = model.embed_sync([sample["response"], sample["reference"]])
        oracle = 1.0 - cosine_distance(answer, reference)
        score = got["per_sample"][sample["id"]]["semantic_similarity"]
        assert score == pytest.approx(oracle, abs=1e-12)


def test_vectors_are_cached_in_the_apps_cache_and_a_repeat_embeds_nothing(
    tmp_path: Path, _cache_dir: Path
) -> None:
    cache = tmp_path / "server-embed.sqlite"
    client = TestClient(create_app(embed_cache=cache))
    first = _post(client, NAMES).json()["extra"]
    assert first["embed_calls"] >= 1 and first["embed_embedded"] > 0
    assert "embed_cache" not in first  # the server's paths are not the client's business
    again = _post(client, NAMES).json()["extra"]
    assert (again["embed_calls"], again["embed_embedded"]) == (0, 0)
    assert again["embed_cache_hits"] == first["embed_embedded"]
    assert cache.is_file() and not _cache_dir.exists()
    # the default: embed-cache.sqlite in $RAGMETER_CACHE_DIR, shared by every app
    for _ in range(2):
        extra = _post(TestClient(create_app()), ["semantic_similarity"]).json()["extra"]
    assert extra["embed_calls"] == 0 and (_cache_dir / "embed-cache.sqlite").is_file()


def test_it_scores_with_the_network_off(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(repr(args[:2]))
        raise OSError("network is off in this test")

    monkeypatch.setattr(default_module, "_LOADED", {})  # load the model again, offline
    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    response = _post(TestClient(create_app(embed_cache=None)), NAMES)
    assert response.status_code == 200, response.text
    assert set(response.json()["metrics"]) == set(NAMES) and attempts == []


def test_without_the_extra_the_answer_is_422_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)  # import wordllama fails
    monkeypatch.setattr(default_module, "_LOADED", {})
    client = TestClient(create_app(embed_cache=None), raise_server_exceptions=False)
    for metrics in (["semantic_similarity"], ["token_f1", "semantic_context_recall"]):
        response = _post(client, metrics)
        assert response.status_code == 422, response.text
        (error,) = response.json()["detail"]
        assert error["loc"] == ["body", "metrics"]
        assert "pip install 'ragmeter[semantic]'" in error["msg"]
        assert error["type"] == "MissingDependencyError"
    assert _post(client, ["token_f1"]).status_code == 200  # the rest still works


def test_an_unknown_name_lists_the_embedding_metrics_too() -> None:
    response = _post(TestClient(create_app()), ["semantic_similarty"])
    assert response.status_code == 422
    msg = response.json()["detail"][0]["msg"]
    assert "no metric named 'semantic_similarty'" in msg
    assert all(name in msg for name in NAMES)


def test_the_sample_cap_holds_for_embedding_metrics() -> None:
    client = TestClient(create_app(max_samples=3, embed_cache=None))
    response = _post(client, NAMES, SAMPLES[:4])
    assert response.status_code == 413
    assert "at most 3" in response.json()["detail"]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_the_time_budget_stops_between_batches_of_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    batches: list[int] = []

    async def slow(texts: Sequence[str]) -> list[list[float]]:
        clock.now += 0.1  # a batch takes 100 ms of the server's clock
        batches.append(len(texts))
        return [[float(len(t)), 1.0] for t in texts]

    monkeypatch.setattr(_limits, "time", clock)
    monkeypatch.setattr(runner, "load_default_embedder", lambda: FunctionEmbedder(slow, "slow"))
    samples = [{"id": f"s{i}", "response": f"answer {i}", "reference": "r"} for i in range(640)]
    client = TestClient(create_app(embed_cache=None, score_timeout=0.35))
    response = _post(client, ["semantic_similarity"], samples)
    assert response.status_code == 503, response.text
    detail = response.json()["detail"]
    assert "texts to embed" in detail and "0.35 s" in detail
    # stopped between batches: the ones in flight (and those started meanwhile) finish,
    # no more; the 641 texts would take 11 batches
    assert len(batches) <= 2 * EmbedOptions().concurrency < 641 // 64


def test_ragmeter_serve_passes_the_embedding_cache_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragmeter import cli, server

    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(server, "run", lambda **kwargs: seen.append(kwargs))
    cache = tmp_path / "e.sqlite"
    assert cli.run(["serve", "--embed-cache", str(cache)]) == 0
    assert cli.run(["serve", "--embed-cache", str(tmp_path)]) == 0  # a directory: the file in it
    assert cli.run(["serve", "--no-embed-cache"]) == 0
    assert cli.run(["serve"]) == 0
    assert [s["embed_cache"] for s in seen] == [
        cache,
        tmp_path / "embed-cache.sqlite",
        None,
        "default",
    ]
    cache.write_text("not a cache")
    assert cli.run(["serve", "--embed-cache", str(cache)]) == 1
    assert "not a usable embedding cache" in capsys.readouterr().err
    # and the app takes what the command passes
    app = create_app(embed_cache=cache.with_name("fresh.sqlite"))
    assert app.state.embed_cache == str(tmp_path / "fresh.sqlite")
    with pytest.raises(ragmeter.errors.InvalidInputError, match="embed_cache must be"):
        create_app(embed_cache=3)  # type: ignore[arg-type]
