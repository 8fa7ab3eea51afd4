"""``iter_samples``' fast path (``msgspec`` decoding, documents read by their layout, samples
made without validating again what was checked) gives exactly the samples of the reference
path (the ``json`` reader, documents read position by position, each sample built and
validated by :meth:`RunRecord.fresh_sample`): equal, with the same fields set, the same
JSON, on every fixture file and on generated traces of many shapes."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragmeter.traces._convert as convert
import ragmeter.traces._documents as documents
from ragmeter.schema import RagSample
from ragmeter.traces import iter_samples, read
from ragmeter.traces._sample import quick_sample

FIXTURES = sorted((Path(__file__).parent.parent / "data" / "traces").glob("*/*.jsonl*"))
OPTIONS: list[dict[str, Any]] = [
    {},
    {"join_key": "session.id"},
    {"doc_id": "content"},
    {"doc_id": "metadata.source"},
    {"stage": "retriever"},
]


def _samples(
    path: Path, fast: bool, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> list[RagSample]:
    with monkeypatch.context() as m:
        if not fast:
            m.setenv("RAGMETER_OTLP_JSON", "1")
            m.setattr(convert, "quick_sample", lambda run: None)
            m.setattr(documents, "by_layout", lambda *args: None)  # documents read carefully
            m.setattr(documents, "_as_last_time", lambda *args: None)
        return list(iter_samples(path, **options))


def _same(fast: list[RagSample], reference: list[RagSample]) -> None:
    assert len(fast) == len(reference)
    for a, b in zip(fast, reference, strict=True):
        assert a == b
        assert a.model_fields_set == b.model_fields_set
        assert a.model_dump_json() == b.model_dump_json()  # the same values, in the same order
        assert repr(a) == repr(b)
        for x, y in zip(a.stages or (), b.stages or (), strict=True):
            assert x.model_fields_set == y.model_fields_set


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(map(str, o.items())) or "-")
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_streams_the_reference_samples(
    path: Path, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = _samples(path, False, monkeypatch, **options)
    assert reference, "the fixture holds runs"
    _same(_samples(path, True, monkeypatch, **options), reference)


def test_the_fast_path_is_taken_for_the_usual_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a test of a fallback only: the usual run (a retriever, a reranker that consumed
    it, an LLM) is made by :func:`quick_sample`, and its samples equal the stored ones."""
    path = tmp_path / "t.jsonl"
    path.write_text(_line(random.Random(1), spans=_USUAL) + "\n", encoding="utf-8")
    made: list[RagSample | None] = []
    with monkeypatch.context() as m:
        m.setattr(convert, "quick_sample", lambda run: made.append(quick_sample(run)) or made[-1])
        streamed = list(iter_samples(path))
    assert made and all(sample is not None for sample in made)
    assert streamed == read(path).samples


_USUAL = [("retriever", "RETRIEVER", 0, 10, 20), ("reranker", "RERANKER", 0, 15, 30)]


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def _documents(prefix: str, ids: list[str | None], rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, doc in enumerate(ids):
        if doc is not None:
            out[f"{prefix}.{i}.document.id"] = doc
        out[f"{prefix}.{i}.document.score"] = rng.random()
        out[f"{prefix}.{i}.document.content"] = f"text {doc or i}"
        out[f"{prefix}.{i}.document.metadata"] = json.dumps({"source": f"s{doc or i}"})
    return out


def _line(
    rng: random.Random,
    spans: list[tuple[str, str, int, int, int]],
    run: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> str:
    """One trace: a CHAIN run and ``spans`` (name, kind, parent index (0: the run), start,
    end) under it, each retriever or reranker with documents, then an LLM span."""
    trace = f"{rng.getrandbits(128):032x}"
    ids = [f"{i + 1:016x}" for i in range(len(spans) + 2)]
    out: list[dict[str, Any]] = []
    earlier: list[str | None] = []
    for n, (name, kind, parent, start, end) in enumerate(spans):
        attrs: dict[str, Any] = {"openinference.span.kind": kind, "input.value": "the question"}
        docs: list[str | None] = [
            None if rng.random() < 0.1 else f"d{rng.randrange(6)}" for _ in range(rng.randrange(7))
        ]
        if kind == "RERANKER":
            attrs["reranker.query"] = rng.choice(["the question", 7])
            attrs.update(_documents("reranker.input_documents", earlier, rng))
            attrs.update(_documents("reranker.output_documents", docs, rng))
        elif kind == "RETRIEVER":
            attrs.update(_documents("retrieval.documents", docs, rng))
        elif kind == "CHAIN" and rng.random() < 0.5:
            attrs["metadata"] = json.dumps({"ragmeter_stage": name})
            attrs["output.value"] = json.dumps(
                [{"id": d, "page_content": f"text {d}"} for d in docs]
            )
        earlier = docs
        out.append(
            {
                "traceId": trace,
                "spanId": ids[n + 1],
                "parentSpanId": ids[parent],
                "name": name,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(end),
                "attributes": [_attr(k, v) for k, v in attrs.items()],
            }
        )
    llm = {
        "openinference.span.kind": "LLM",
        "llm.token_count.prompt": rng.choice([3, -1, 2.5]),
        "llm.output_messages.0.message.content": "an answer",
    }
    out.append(
        {
            "traceId": trace,
            "spanId": ids[-1],
            "parentSpanId": ids[0],
            "name": "llm",
            "startTimeUnixNano": "90",
            "endTimeUnixNano": "95",
            "attributes": [_attr(k, v) for k, v in llm.items()],
        }
    )
    root = {"openinference.span.kind": "CHAIN", "input.value": "the question", **(run or {})}
    out.append(
        {
            "traceId": trace,
            "spanId": ids[0],
            "name": "rag",
            "startTimeUnixNano": "0",
            "endTimeUnixNano": str(rng.choice([100, 0, 50])),
            "attributes": [_attr(k, v) for k, v in root.items()],
            **({"status": status} if status else {}),
        }
    )
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": out}]}]})


_STAGE = st.tuples(
    st.sampled_from(["retriever", "reranker", "bm25", "fused", ""]),
    st.sampled_from(["RETRIEVER", "RERANKER", "CHAIN"]),
    st.integers(0, 3),
    st.integers(0, 60),
    st.integers(0, 60),
)
_RUN = st.fixed_dictionaries(
    {},
    optional={
        "session.id": st.sampled_from(["q1", "q2"]),
        "metadata": st.sampled_from(
            [
                json.dumps({"team": "search"}),
                json.dumps({"ragmeter_id": "q9"}),
                json.dumps({"ragmeter_reference_ids": ["d1"]}),
                json.dumps({"ragmeter_relevance": {"d1": float("nan")}}),
            ]
        ),
        "output.value": st.sampled_from(["the answer", json.dumps({"answer": "json"})]),
    },
)
_STATUS = st.sampled_from([None, {"code": 2, "message": "boom"}, {"code": 1}])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    traces=st.lists(
        st.tuples(st.lists(_STAGE, max_size=4), _RUN, _STATUS, st.integers(0, 99)),
        min_size=1,
        max_size=3,
    ),
    options=st.sampled_from(OPTIONS),
)
def test_generated_traces_stream_the_reference_samples(
    traces: list[tuple[list[tuple[str, str, int, int, int]], dict[str, Any], Any, int]],
    options: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = []
    for spans, run, status, seed in traces:
        rng = random.Random(seed)
        shaped = [
            (name, kind, min(parent, n), start, end)  # a parent before the span (0: the run)
            for n, (name, kind, parent, start, end) in enumerate(spans)
        ]
        lines.append(_line(rng, shaped, run, status))
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    reference = _samples(path, False, monkeypatch, **options)
    _same(_samples(path, True, monkeypatch, **options), reference)
