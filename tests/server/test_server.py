"""The HTTP server: endpoints, validation (422 with the field path), limits (413), no 500s."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from ragmeter.io.beir import read_beir_qrels  # noqa: E402
from ragmeter.io.trec import read_trec_run  # noqa: E402
from ragmeter.server import create_app  # noqa: E402

DATA = Path(__file__).parents[1] / "data"
CRAN = DATA / "cranfield_beir"

# rag-eval's README example payload, verbatim.
RAG_EVAL_PAYLOAD: dict[str, Any] = {
    "samples": [
        {
            "question": "What is the capital of France?",
            "answer": "Paris is the capital of France.",
            "context": ["Paris is the capital and largest city of France."],
            "golden_documents": ["Paris is the capital and largest city of France."],
            "retrieved": ["Paris is the capital and largest city of France."],
            "id": "sample-1",
        }
    ],
    "k": 5,
}

SMALL_RETRIEVAL: dict[str, Any] = {
    "qrels": {"q1": {"d1": 2, "d2": 1, "d3": 0}, "q2": {"d4": 1}},
    "run": {"q1": ["d3", "d1", "d5", "d2"], "q2": ["d9", "d4"]},
    "k_values": [1, 3],
    "metrics": ["recall", "ndcg"],
}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


def trec_eval_all(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        measure, query, value = line.split()
        if query == "all":
            out[measure] = value
    return out


def test_health(client: TestClient) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_openapi_schema_documents_the_endpoints(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert {"/health", "/evaluate", "/evaluate/retrieval"} <= set(schema["paths"])
    components = schema["components"]["schemas"]
    assert {"EvaluateRequest", "RetrievalRequest", "Sample"} <= set(components)
    sample = components["Sample"]
    assert {"question", "answer", "context", "user_input", "retrieved_ids"} <= set(
        sample["properties"]
    )
    assert sample["additionalProperties"] is True
    assert "413" in schema["paths"]["/evaluate"]["post"]["responses"]


def test_retrieval_endpoint_matches_trec_eval_on_cranfield(client: TestClient) -> None:
    qrels = read_beir_qrels(CRAN / "qrels" / "test.tsv")
    run = {q: list(docs) for q, docs in read_trec_run(CRAN / "bm25.run").items()}
    response = client.post(
        "/evaluate/retrieval",
        json={"qrels": qrels, "run": run, "k_values": [1, 5, 10, 100]},
    )
    assert response.status_code == 200, response.text
    report = response.json()
    expected = trec_eval_all(CRAN / "bm25.trec_eval.txt")
    assert report["kind"] == "retrieval"
    assert report["n_queries"] == int(expected["num_q"])
    pairs = {
        "ndcg@10": "ndcg_cut_10",
        "ndcg@1": "ndcg_cut_1",
        "precision@5": "P_5",
        "recall@100": "recall_100",
        "hit_rate@10": "success_10",
        "map": "map",
        "mrr": "recip_rank",
    }
    for ours, theirs in pairs.items():
        assert f"{report['metrics'][ours]:.4f}" == expected[theirs], ours
    assert len(report["per_query"]) == 225


def test_retrieval_endpoint_relevance_level(client: TestClient) -> None:
    body = dict(SMALL_RETRIEVAL, metrics=["recall"], relevance_level=2)
    report = client.post("/evaluate/retrieval", json=body).json()
    # Only d1 (grade 2) is relevant for q1; q2 has nothing >= 2 and is not scored.
    assert report["n_queries"] == 1
    assert report["metrics"] == {"recall@1": 0.0, "recall@3": 1.0}


def test_rag_eval_readme_payload_works_unchanged(client: TestClient) -> None:
    from rag_eval.faithfulness import faithfulness
    from rag_eval.retrieval import precision_at_k

    response = client.post("/evaluate", json=RAG_EVAL_PAYLOAD)
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["kind"] == "rag"
    assert report["n_samples"] == 1
    sample = RAG_EVAL_PAYLOAD["samples"][0]
    expected, supported, unsupported = faithfulness(sample["answer"], sample["context"])
    assert report["metrics"]["faithfulness"] == pytest.approx(expected)
    assert report["details"]["sample-1"]["faithfulness"] == {
        "supported_claims": supported,
        "unsupported_claims": unsupported,
    }
    p_at_k = precision_at_k(sample["retrieved"], sample["golden_documents"], k=5)
    assert report["metrics"]["precision@5"] == pytest.approx(p_at_k)


def test_evaluate_agrees_with_rag_eval_sample_by_sample(client: TestClient) -> None:
    from rag_eval.faithfulness import faithfulness
    from rag_eval.retrieval import precision_at_k

    docs = [
        "The Eiffel Tower is in Paris.",
        "It was completed in 1889.",
        "Berlin is the capital of Germany.",
        "The tower is 330 metres tall.",
    ]
    samples = [
        {
            "id": f"s{i}",
            "question": "Tell me about the Eiffel Tower.",
            "answer": answer,
            "context": docs[: i + 1],
            "golden_documents": [docs[0], docs[3]],
            "retrieved": docs[i:] + docs[:i],
        }
        for i, answer in enumerate(
            [
                "The Eiffel Tower is in Paris. It was completed in 1889.",
                "The tower is in Berlin, but it is 330 metres tall.",
                "It was completed in 1889; the tower is made of cheese.",
                "Nothing.",
            ]
        )
    ]
    report = client.post("/evaluate", json={"samples": samples, "k": 2}).json()
    for sample in samples:
        row = report["per_sample"][sample["id"]]
        score, _, _ = faithfulness(sample["answer"], sample["context"])
        assert row["faithfulness"] == pytest.approx(score), sample["id"]
        expected = precision_at_k(sample["retrieved"], sample["golden_documents"], k=2)
        assert row["precision@2"] == pytest.approx(expected), sample["id"]


def test_evaluate_warns_when_retrieved_ids_never_match_the_judged_ids(
    client: TestClient,
) -> None:
    samples = [
        {"id": "a", "retrieved_ids": ["c-1", "c-2"], "reference_ids": ["doc-1"]},
        {"id": "b", "retrieved_ids": ["c-3"], "relevance": {"doc-2": 1}},
    ]
    response = client.post("/evaluate", json={"samples": samples, "metrics": ["ndcg"], "k": 3})
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["metrics"] == {"ndcg@3": 0.0}
    (warning,) = report["warnings"]
    assert "(doc_ids)" in warning and "of the 2 sample(s) scored on retrieved_ids" in warning
    assert "none of the 3 retrieved doc ids (e.g. 'c-1', 'c-2', 'c-3')" in warning
    samples[1]["retrieved_ids"] = ["doc-2"]
    response = client.post("/evaluate", json={"samples": samples, "metrics": ["ndcg"], "k": 3})
    assert response.json()["metrics"] == {"ndcg@3": 0.5} and response.json()["warnings"] == []


def test_prices_make_cost_usd_computable(client: TestClient) -> None:
    body = {
        "samples": [
            {"id": "a", "response": "x", "input_tokens": 1000, "output_tokens": 200},
            {"id": "b", "response": "y", "input_tokens": 3000, "output_tokens": 0},
        ],
        "metrics": ["cost_usd"],
        "prices": {"input": 3, "output": 15},
    }
    response = client.post("/evaluate", json=body)
    assert response.status_code == 200, response.text
    # a: (1000*3 + 200*15) / 1e6 = 0.006; b: 3000*3 / 1e6 = 0.009
    assert response.json()["metrics"]["cost_usd"] == pytest.approx(0.0075)


def test_claims_only_scores_faithfulness_only(client: TestClient) -> None:
    response = client.post("/evaluate", json=dict(RAG_EVAL_PAYLOAD, claims_only=True))
    assert response.status_code == 200, response.text
    assert list(response.json()["metrics"]) == ["faithfulness"]


def test_our_schema_is_accepted_too(client: TestClient) -> None:
    body = {
        "samples": [
            {
                "id": "s1",
                "user_input": "Who wrote Hamlet?",
                "response": "Shakespeare",
                "reference": "William Shakespeare",
                "retrieved_contexts": ["Hamlet is a tragedy by William Shakespeare."],
            },
            {
                "id": "s2",
                "user_input": "Capital of Italy?",
                "response": "Rome",
                "reference": "Rome",
                "retrieved_contexts": ["Rome is the capital of Italy."],
            },
        ],
        "metrics": ["exact_match", "token_f1"],
    }
    response = client.post("/evaluate", json=body)
    assert response.status_code == 200, response.text
    metrics = response.json()["metrics"]
    assert metrics["exact_match"] == pytest.approx(0.5)
    # SQuAD token F1 of "Shakespeare" vs "William Shakespeare" is 2/3; of "Rome" vs "Rome", 1.
    assert metrics["token_f1"] == pytest.approx((2 / 3 + 1) / 2)


# ------------------------------------------------------------------ bad input

MALFORMED_EVALUATE: list[tuple[Any, list[Any] | None]] = [
    ({}, ["body", "samples"]),
    ({"samples": []}, ["body", "samples"]),
    ({"samples": "not a list"}, ["body", "samples"]),
    ({"samples": [42]}, ["body", "samples", 0]),
    ({"samples": [None]}, ["body", "samples", 0]),
    ({"samples": [{"question": 3}]}, ["body", "samples", 0, "user_input"]),
    (
        {"samples": [{"answer": "a", "context": "not a list"}]},
        ["body", "samples", 0, "retrieved_contexts"],
    ),
    ({"samples": [{"answer": "a", "latency_ms": -1}]}, ["body", "samples", 0, "latency_ms"]),
    (
        {"samples": [{"answer": "a", "input_tokens": "many"}]},
        ["body", "samples", 0, "input_tokens"],
    ),
    (
        {"samples": [{"answer": "a", "relevance": {"d": "high"}}]},
        ["body", "samples", 0, "relevance", "d"],
    ),
    ({"samples": [{"answer": "a"}], "k": 0}, ["body", "k"]),
    ({"samples": [{"answer": "a"}], "k": "five"}, ["body", "k"]),
    ({"samples": [{"answer": "a"}], "k": 10**12}, ["body", "k"]),
    ({"samples": [{"answer": "a"}], "metrics": []}, ["body", "metrics"]),
    ({"samples": [{"answer": "a"}], "metrics": "faithfulness"}, ["body", "metrics"]),
    ({"samples": [{"answer": "a"}], "metrics": ["no_such_metric"]}, ["body", "metrics"]),
    ({"samples": [{"answer": "a"}], "unexpected": 1}, ["body", "unexpected"]),
    ({"samples": [{"answer": "a"}], "metrics": ["exact_match"]}, ["body"]),
    ({"samples": [{"answer": "a"}], "metrics": ["cost_usd"]}, ["body"]),
    (
        {"samples": [{"answer": "a"}], "prices": {"input": -1, "output": 2}},
        ["body", "prices", "input"],
    ),
    ({"samples": [{"answer": "a"}], "prices": {"input": 1}}, ["body", "prices", "output"]),
    (
        {"samples": [{"retrieved_ids": ["d", "d"], "reference_ids": ["d"]}], "metrics": ["ndcg"]},
        None,
    ),
    ([RAG_EVAL_PAYLOAD], ["body"]),
    ("just a string", ["body"]),
    (None, ["body"]),
]

MALFORMED_RETRIEVAL: list[tuple[Any, list[Any] | None]] = [
    ({}, ["body", "qrels"]),
    ({"qrels": {"q": {"d": 1}}}, ["body", "run"]),
    ({"qrels": [], "run": {}}, ["body", "qrels"]),
    ({"qrels": {"q": {"d": "high"}}, "run": {"q": ["d"]}}, ["body", "qrels", "q", "d"]),
    ({"qrels": {"q": {"d": 1}}, "run": {"q": "d"}}, ["body", "run", "q"]),
    ({"qrels": {"q": {"d": 1}}, "run": {"q": [1, 2]}}, ["body", "run", "q", 0]),
    ({"qrels": {"q": {"d": 1}}, "run": {"q": ["d", "d"]}}, ["body", "run", "q"]),
    ({"qrels": {"q": {"d": 0}}, "run": {"q": ["d"]}}, ["body", "qrels"]),
    ({"qrels": {}, "run": {}}, ["body", "qrels"]),
    ({"qrels": {"q": {"d": 1}}, "run": {"q": ["d"]}, "k_values": [0]}, ["body", "k_values", 0]),
    ({"qrels": {"q": {"d": 1}}, "run": {"q": ["d"]}, "k_values": []}, ["body", "k_values"]),
    ({"qrels": {"q": {"d": 1}}, "run": {"q": ["d"]}, "k_values": [1.5]}, ["body", "k_values", 0]),
    (
        {"qrels": {"q": {"d": 1}}, "run": {"q": ["d"]}, "k_values": list(range(1, 200))},
        ["body", "k_values"],
    ),
    (
        {"qrels": {"q": {"d": 1}}, "run": {"q": ["d"]}, "metrics": ["ndcg@10"]},
        ["body", "metrics", 0],
    ),
    ({"qrels": {"q": {"d": 1}}, "run": {"q": ["d"]}, "metrics": []}, ["body", "metrics"]),
    (
        {"qrels": {"q": {"d": 1}}, "run": {"q": ["d"]}, "relevance_level": "x"},
        ["body", "relevance_level"],
    ),
]


def check_422(response: Any, loc: list[Any] | None) -> None:
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail
    for error in detail:
        assert {"loc", "msg", "type"} <= set(error)
    if loc is not None:
        locs = [error["loc"] for error in detail]
        assert any(found[: len(loc)] == loc for found in locs), locs


def _post_json(client: TestClient, path: str, body: Any) -> Any:
    # json=None would send no body at all (a 415: no Content-Type); send JSON's null
    raw = json.dumps(body).encode()
    return client.post(path, content=raw, headers={"content-type": "application/json"})


@pytest.mark.parametrize(("body", "loc"), MALFORMED_EVALUATE)
def test_malformed_evaluate_payloads_are_422(
    client: TestClient, body: Any, loc: list[Any] | None
) -> None:
    check_422(_post_json(client, "/evaluate", body), loc)


@pytest.mark.parametrize(("body", "loc"), MALFORMED_RETRIEVAL)
def test_malformed_retrieval_payloads_are_422(
    client: TestClient, body: Any, loc: list[Any] | None
) -> None:
    check_422(client.post("/evaluate/retrieval", json=body), loc)


@pytest.mark.parametrize("path", ["/evaluate", "/evaluate/retrieval"])
@pytest.mark.parametrize("raw", [b"", b"{", b"not json", b'{"samples": [}', b"\xff\xfe"])
def test_unparseable_bodies_are_400(client: TestClient, path: str, raw: bytes) -> None:
    response = client.post(path, content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    (error,) = response.json()["detail"]
    assert error["type"] == "json_invalid" and error["loc"][0] == "body"


@pytest.mark.parametrize("path", ["/evaluate", "/evaluate/retrieval"])
@pytest.mark.parametrize("raw", [b"NaN", b'{"qrels": NaN}', b"[]", b"3"])
def test_json_that_is_not_an_object_is_422(client: TestClient, path: str, raw: bytes) -> None:
    response = client.post(path, content=raw, headers={"content-type": "application/json"})
    check_422(response, ["body"])


def test_non_finite_numbers_are_refused(client: TestClient) -> None:
    raw = b'{"qrels": {"q": {"d": Infinity}}, "run": {"q": ["d"]}}'
    response = client.post(
        "/evaluate/retrieval", content=raw, headers={"content-type": "application/json"}
    )
    check_422(response, ["body", "qrels", "q", "d"])


def test_lone_surrogates_echoed_back_are_not_500(client: TestClient) -> None:
    # JSON may escape a lone surrogate; the str holds it, UTF-8 cannot encode it
    headers = {"content-type": "application/json"}
    raw = b'{"samples": [{"id": "s\\ud800", "answer": "\\ud800 is big", "context": ["small"]}]}'
    response = client.post("/evaluate", content=raw, headers=headers)
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["details"]["s\ud800"]["faithfulness"]["unsupported_claims"] == ["\ud800 is big"]
    assert report["metrics"]["faithfulness"] == 0.0
    raw = b'{"samples": [{"answer": "a"}], "metrics": ["\\udc00"]}'
    check_422(client.post("/evaluate", content=raw, headers=headers), ["body", "metrics", 0])
    ok = client.post("/evaluate", json={"samples": [{"answer": "caf\u00e9", "context": ["x"]}]})
    assert "caf\u00e9" in ok.content.decode("utf-8")  # other text is still sent as UTF-8


def test_deeply_nested_json_is_refused_without_a_500(client: TestClient) -> None:
    raw = b'{"samples": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = client.post("/evaluate", content=raw, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500, response.text


def _floats(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for item in value.values() for f in _floats(item)]
    if isinstance(value, list):
        return [f for item in value for f in _floats(item)]
    return []


def test_huge_latencies_are_scored_not_500(client: TestClient) -> None:
    # 1e308 is a valid finite float; its mean and spread used to overflow (HTTP 500)
    samples = [{"id": "a", "latency_ms": 1e308}, {"id": "b", "latency_ms": 1e308}]
    response = client.post("/evaluate", json={"samples": samples, "metrics": ["latency_ms"]})
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["metrics"] == {"latency_ms": 1e308}
    assert report["summaries"]["latency_ms"]["max"] == 1e308
    assert all(math.isfinite(f) for f in _floats(report))
    mixed = [{"id": "a", "latency_ms": 1.7e308}, {"id": "b", "latency_ms": 1.0}]
    response = client.post("/evaluate", json={"samples": mixed, "metrics": ["latency_ms"]})
    assert response.status_code == 200, response.text
    assert response.json()["metrics"]["latency_ms"] == 0.85e308


def test_token_counts_beyond_the_float_range_are_422_not_500(client: TestClient) -> None:
    sample = {"id": "t", "input_tokens": 10**400, "output_tokens": 1}
    response = client.post("/evaluate", json={"samples": [sample], "metrics": ["total_tokens"]})
    check_422(response, ["body"])
    assert "largest float" in response.text
    body = {
        "samples": [{"id": "c", "input_tokens": 10**15, "output_tokens": 0}],
        "metrics": ["cost_usd"],
        "prices": {"input": 1e300, "output": 0},
    }
    response = client.post("/evaluate", json=body)
    check_422(response, ["body"])
    assert "cost_usd" in response.text and "largest float" in response.text


def test_bad_methods_and_paths_are_not_500(client: TestClient) -> None:
    assert client.get("/evaluate").status_code == 405
    assert client.post("/health").status_code == 405
    assert client.get("/nope").status_code == 404


# ------------------------------------------------------------------ limits


def test_body_larger_than_the_cap_is_413() -> None:
    small = TestClient(create_app(max_body_bytes=2_000))
    assert small.post("/evaluate/retrieval", json=SMALL_RETRIEVAL).status_code == 200
    big = dict(SMALL_RETRIEVAL, run={"q1": [f"doc-{i}" for i in range(500)]})
    response = small.post("/evaluate/retrieval", json=big)
    assert response.status_code == 413
    assert "2000 bytes" in response.json()["detail"]


def test_chunked_body_larger_than_the_cap_is_413() -> None:
    small = TestClient(create_app(max_body_bytes=2_000))
    payload = json.dumps(dict(SMALL_RETRIEVAL, run={"q1": [f"d{i}" for i in range(500)]}))

    def chunks() -> Iterator[bytes]:
        data = payload.encode()
        for i in range(0, len(data), 256):
            yield data[i : i + 256]

    response = small.post(
        "/evaluate/retrieval", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413


def test_too_many_samples_is_413() -> None:
    capped = TestClient(create_app(max_samples=3))
    sample = RAG_EVAL_PAYLOAD["samples"][0]
    ok = capped.post("/evaluate", json={"samples": [sample] * 3, "metrics": ["faithfulness"]})
    assert ok.status_code == 200, ok.text
    response = capped.post("/evaluate", json={"samples": [sample] * 4})
    assert response.status_code == 413
    assert "at most 3" in response.json()["detail"]
    queries = {f"q{i}": {"d": 1} for i in range(4)}
    response = capped.post("/evaluate/retrieval", json={"qrels": queries, "run": {}})
    assert response.status_code == 413


@pytest.mark.parametrize(
    "kwargs", [{"max_body_bytes": 0}, {"max_samples": -1}, {"max_samples": 1.5}]
)
def test_create_app_rejects_bad_limits(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be an int >= 1"):
        create_app(**kwargs)


# ------------------------------------------------------------------ a real server


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_real_uvicorn_process_serves_health_and_evaluate(tmp_path: Path) -> None:
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragmeter", "serve", "--host", "127.0.0.1", "--port", str(port)],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        health = None
        while health is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                health = httpx.get(f"{base}/health", timeout=2)
            except httpx.TransportError:
                time.sleep(0.2)
        assert health is not None, f"no answer on /health within 60 s: {log.read_text()}"
        assert health.status_code == 200
        assert health.json() == {"status": "ok"}
        response = httpx.post(f"{base}/evaluate", json=RAG_EVAL_PAYLOAD, timeout=30)
        assert response.status_code == 200, response.text
        assert response.json()["n_samples"] == 1
        bad = httpx.post(f"{base}/evaluate", json={"samples": [{"question": 1}]}, timeout=30)
        assert bad.status_code == 422
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
