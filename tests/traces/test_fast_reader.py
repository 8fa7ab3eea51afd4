"""The ``msgspec`` OTLP/JSON reader makes exactly the spans (and errors) the ``json`` reader
makes: on every fixture file, and on generated lines in every form OTLP/JSON allows."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmeter.errors import DataFormatError
from ragmeter.io import otel
from ragmeter.io.otel import TraceSpan, iter_otlp_batches

FIXTURES = sorted((Path(__file__).parent.parent / "data" / "traces").glob("*/*.jsonl*"))


def _fields(span: TraceSpan) -> tuple[Any, ...]:
    return (
        span.trace_id,
        span.span_id,
        span.parent_id,
        span.name,
        span.kind,
        span.attributes,
        span.start,
        span.end,
        span.error,
        span.scope,
        span.dropped,
    )


def _read(path: Path, fast: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        if not fast:
            m.setenv("RAGMETER_OTLP_JSON", "1")
        try:
            # repr: NaN (a "NaN" doubleValue) equals itself there
            return repr([[_fields(s) for s in batch] for batch in iter_otlp_batches(path)])
        except DataFormatError as exc:
            return ("error", str(exc))


def test_the_fast_reader_is_the_one_in_use() -> None:
    assert otel._fast_decoder() is not None, "msgspec (ragmeter[otel]) is a test dependency"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_reads_the_same_both_ways(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _read(path, True, monkeypatch)
    assert "TraceSpan" not in fast and "'RETRIEVER'" in fast, "the fixture holds spans"
    assert fast == _read(path, False, monkeypatch)


_HEX16 = st.binary(min_size=16, max_size=16)
_HEX8 = st.binary(min_size=8, max_size=8)
_TEXT = st.text(max_size=12)
_SCALAR = st.one_of(
    st.builds(lambda s: {"stringValue": s}, _TEXT),
    st.builds(lambda i: {"intValue": i}, st.integers(-(2**40), 2**40)),
    st.builds(lambda i: {"intValue": str(i)}, st.integers(-(2**40), 2**40)),
    st.builds(lambda f: {"doubleValue": f}, st.floats(allow_nan=False, allow_infinity=False)),
    st.builds(lambda i: {"doubleValue": i}, st.integers(-100, 100)),
    st.just({"doubleValue": "NaN"}),
    st.builds(lambda b: {"boolValue": b}, st.booleans()),
    st.builds(lambda b: {"bytesValue": base64.b64encode(b).decode()}, st.binary(max_size=6)),
    st.just({}),  # an empty AnyValue: the attribute is skipped
    st.just({"intValue": True}),  # not an integer: an error, worded by the json reader
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(inner, max_size=3)),
        st.builds(
            lambda kv: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kv]}},
            st.lists(st.tuples(_TEXT, inner), max_size=3),
        ),
    ),
    max_leaves=6,
)
_KEYS = st.sampled_from(
    [
        "openinference.span.kind",
        "input.value",
        "retrieval.documents.0.document.id",
        "retrieval.documents.0.document.score",
        "llm.token_count.prompt",
        "other",
    ]
)


def _id(raw: bytes, style: str) -> str:
    return raw.hex() if style == "hex" else base64.b64encode(raw).decode()


@st.composite
def _span(draw: st.DrawFn, trace: bytes) -> dict[str, Any]:
    style = draw(st.sampled_from(["hex", "base64"]))
    span: dict[str, Any] = {
        "traceId": _id(trace, style),
        "spanId": _id(draw(_HEX8), style),
        "name": draw(_TEXT),
        "kind": draw(st.integers(0, 5)),
        "unknownField": draw(st.none() | _TEXT),
    }
    if draw(st.booleans()):
        span["parentSpanId"] = draw(st.sampled_from(["", _id(draw(_HEX8), style)]))
    for field in ("startTimeUnixNano", "endTimeUnixNano", "droppedAttributesCount", "flags"):
        number = draw(st.none() | st.integers(0, 2**62) | st.sampled_from([0x300, 0x100]))
        if number is not None:
            span[field] = draw(st.sampled_from([number, str(number)]))
    attributes = draw(st.lists(st.tuples(_KEYS, _VALUE), max_size=5))
    span["attributes"] = [{"key": k, "value": v} for k, v in attributes]
    status = draw(
        st.none()
        | st.fixed_dictionaries(
            {"code": st.sampled_from([0, 1, 2, "STATUS_CODE_ERROR", "STATUS_CODE_OK"])},
            optional={"message": _TEXT},
        )
    )
    if status is not None:
        span["status"] = status
    if draw(st.booleans()):
        span["events"] = [
            {
                "name": "exception",
                "attributes": [
                    {"key": "exception.type", "value": {"stringValue": "ValueError"}},
                    {"key": "exception.message", "value": {"stringValue": draw(_TEXT)}},
                ],
            }
        ]
    if draw(st.integers(0, 20)) == 0:
        span[draw(st.sampled_from(["traceId", "spanId", "attributes"]))] = draw(
            st.sampled_from([None, 7, "zz", [1]])
        )  # broken: both readers must say the same thing
    return span


@st.composite
def _line(draw: st.DrawFn) -> dict[str, Any]:
    trace = draw(_HEX16)
    spans = draw(st.lists(_span(trace), min_size=1, max_size=4))
    legacy = draw(st.booleans())
    scope_key, spans_key = (
        ("instrumentationLibrary", "instrumentationLibrarySpans")
        if legacy
        else ("scope", "scopeSpans")
    )
    scope = {"spans": spans}
    if draw(st.booleans()):
        scope[scope_key] = {"name": draw(_TEXT), "version": "1"}
    return {"resourceSpans": [{"resource": {"attributes": []}, spans_key: [scope]}]}


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_line(), min_size=1, max_size=3))
def test_generated_lines_read_the_same_both_ways(
    lines: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    assert _read(path, True, monkeypatch) == _read(path, False, monkeypatch)
