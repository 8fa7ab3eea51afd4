"""The ``msgspec`` OTLP/JSON reader makes exactly the spans (and errors) the ``json`` reader
makes, whether its spans are made in Python or by the compiled ``ragmeter.io._cotlp``: on
every fixture file, and on generated lines in every form OTLP/JSON allows."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmeter.errors import DataFormatError
from ragmeter.io import _otlp_fast, otel
from ragmeter.io.otel import KIND, TraceSpan, iter_otlp_batches

FIXTURES = sorted((Path(__file__).parent.parent / "data" / "traces").glob("*/*.jsonl*"))
WAYS = ("json", "python", "c") if _otlp_fast.BUILT else ("json", "python")
"""How a line is read: the ``json`` reader; ``msgspec`` with the spans made in Python; made
in C (when ``ragmeter.io._cotlp`` is built)."""
# the reason names "the compiled kernel is not built": conftest allows that skip without a compiler
needs_c = pytest.mark.skipif(
    not _otlp_fast.BUILT, reason="the compiled kernel is not built (ragmeter.io._cotlp)"
)


def _fields(span: TraceSpan) -> tuple[Any, ...]:
    return (
        span.trace_id,
        span.span_id,
        span.parent_id,
        span.name,
        span.kind,
        span.attributes,
        [type(v) for v in span.attributes.values()],  # 1 and 1.0 are equal: their types not
        span.start,
        span.end,
        span.error,
        span.scope,
        span.dropped,
    )


def _c_spans() -> Any:
    from ragmeter.io import _cotlp

    return _cotlp.spans


def _read(path: Path, way: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        if way == "json":
            m.setenv("RAGMETER_OTLP_JSON", "1")
        else:
            m.delenv("RAGMETER_OTLP_JSON", raising=False)
            m.setattr(_otlp_fast, "_C_SPANS", _c_spans() if way == "c" else None)
        try:
            # repr: NaN (a "NaN" doubleValue) equals itself there
            return repr([[_fields(s) for s in batch] for batch in iter_otlp_batches(path)])
        except DataFormatError as exc:
            return ("error", str(exc))


def test_the_fast_reader_is_the_one_in_use() -> None:
    assert otel._fast_decoder() is not None, "msgspec (ragmeter[otel]) is a test dependency"


@needs_c
def test_the_compiled_span_maker_is_the_one_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unless ``RAGMETER_PURE_PYTHON`` is set, the spans of a line are made in C: neither the
    Python span maker nor the ``json`` reader is called."""
    code = "from ragmeter.io import _otlp_fast as f, _cotlp; print(f._C_SPANS is _cotlp.spans)"
    env = {k: v for k, v in os.environ.items() if k != "RAGMETER_PURE_PYTHON"}
    for value, compiled in (("1", "False"), ("0", "True"), ("", "True"), (None, "True")):
        if value is not None:
            env["RAGMETER_PURE_PYTHON"] = value
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == compiled, value

    def not_called(*args: Any) -> Any:
        raise AssertionError("the Python span maker or the json reader was used")

    expected = _read(FIXTURES[0], "python", monkeypatch)
    monkeypatch.setattr(_otlp_fast, "_C_SPANS", _c_spans())
    monkeypatch.setattr(_otlp_fast, "_spans", not_called)
    monkeypatch.setattr(otel, "_otlp_span", not_called)
    monkeypatch.delenv("RAGMETER_OTLP_JSON", raising=False)
    assert repr([[_fields(s) for s in b] for b in iter_otlp_batches(FIXTURES[0])]) == expected


def test_without_the_extension_the_python_span_maker_reads() -> None:
    """An install without a C compiler has no _cotlp: the spans are made in Python."""
    code = (
        "import sys; sys.modules['ragmeter.io._cotlp'] = None\n"
        "from ragmeter.io import _otlp_fast\n"
        "from ragmeter.io.otel import iter_otlp_json\n"
        f"spans = list(iter_otlp_json({str(FIXTURES[0])!r}))\n"
        "print(_otlp_fast.BUILT, _otlp_fast._C_SPANS, len(spans) > 0)"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAGMETER_PURE_PYTHON"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False None True"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_reads_the_same_both_ways(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _read(path, "json", monkeypatch)
    assert "TraceSpan" not in expected and "'RETRIEVER'" in expected, "the fixture holds spans"
    for way in WAYS[1:]:
        assert _read(path, way, monkeypatch) == expected, way


_ODD_IDS = [
    "z" * 16,  # 16 characters, not hex: neither form
    "g" * 32,
    "a" * 32,  # a trace id's length for a span id
    "a" * 16,
    "ABCDEF0123456789",  # upper case: read as lower case
    "AbCdEf0123456789" * 2,
    "ab cdef0123456789",  # bytes.fromhex skips the space
    "\u00e9" * 16,  # not ASCII
    "q83vEjRWeJA=",  # base64 (8 bytes)
    "q83vEjRWeJCrze8SNFZ4kA==",  # base64 (16 bytes)
    "",
    None,
    12,
]


@pytest.mark.parametrize("field", ["traceId", "spanId", "parentSpanId"])
@pytest.mark.parametrize("value", _ODD_IDS, ids=repr)
def test_odd_ids_read_the_same_every_way(
    field: str, value: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id the compiled path keeps as it is must be exactly one ``hex_id`` keeps; any other
    is ``hex_id``'s to read or refuse (read twice in a line: its cached reading)."""
    spans = [
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": f"{i:016x}", "name": "s"}
        for i in (1, 2)
    ]
    for span in spans:
        span[field] = value
    spans[1]["parentSpanId"] = value if field == "parentSpanId" else spans[0]["spanId"]
    line = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    expected = _read(path, "json", monkeypatch)
    for way in WAYS[1:]:
        assert _read(path, way, monkeypatch) == expected, way


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
    st.builds(  # more than one field set: the first of OTLP's order wins
        lambda i, f: {"doubleValue": f, "intValue": i}, st.integers(-9, 9), st.floats(-9, 9)
    ),
    st.builds(lambda s, f: {"doubleValue": f, "stringValue": s}, _TEXT, st.floats(-9, 9)),
    st.builds(lambda b, f: {"boolValue": b, "doubleValue": f}, st.booleans(), st.floats(-9, 9)),
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
    if style == "base64":
        return base64.b64encode(raw).decode()
    return raw.hex() if style == "hex" else raw.hex().upper()


@st.composite
def _span(draw: st.DrawFn, trace: bytes) -> dict[str, Any]:
    style = draw(st.sampled_from(["hex", "HEX", "base64"]))
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
        number = draw(
            st.none() | st.integers(0, 2**62) | st.sampled_from([0x300, 0x100, -1, 2**70 | 0x300])
        )
        if number is not None:
            span[field] = draw(st.sampled_from([number, str(number)]))
    attributes = draw(st.lists(st.tuples(_KEYS, _VALUE), max_size=5))
    span["attributes"] = [{"key": k, "value": v} for k, v in attributes]
    if draw(st.booleans()):  # a kind as written, upper-cased by the readers (ß: to SS)
        kind = draw(st.sampled_from(["retriever", "Reranker", "LLM", "straße", ""]))
        span["attributes"].append({"key": KIND, "value": {"stringValue": kind}})
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
            st.sampled_from([None, 7, "zz", [1], "z" * 16, "g" * 32])
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


def _outcome(make: Any, *args: Any) -> Any:
    """What ``make(*args)`` gives: the attributes or the spans' fields, or the exception."""
    try:
        got = make(*args)
    except Exception as exc:  # the same exception both ways is what is compared
        return ("raised", type(exc))
    if isinstance(got, dict):
        return repr((got, [type(v) for v in got.values()]))
    return repr([_fields(s) for s in got])


def _compare_c_parts(line: dict[str, Any]) -> None:
    """On one decoded line: ``_cotlp.attributes`` against ``_attributes`` on every span, and
    ``_cotlp.spans`` making ``TraceSpan`` itself against calling a function that makes it."""
    from ragmeter.io import _cotlp

    try:
        data = _otlp_fast._DECODE(json.dumps(line).encode())
    except msgspec.DecodeError:
        return
    for resource in data.resourceSpans:
        for scope in resource.scopeSpans or resource.instrumentationLibrarySpans or ():
            for span in scope.spans or ():
                assert _outcome(_cotlp.attributes, span.attributes, _otlp_fast._other) == (
                    _outcome(_otlp_fast._attributes, span.attributes)
                )
    args = (otel._hex_id, otel._ERROR_CODES, otel._REMOTE_PARENT, _otlp_fast._other)
    made = _outcome(_cotlp.spans, data, lambda *a: TraceSpan(*a), *args)
    assert _outcome(_cotlp.spans, data, TraceSpan, *args) == made


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_line(), min_size=1, max_size=3))
def test_generated_lines_read_the_same_both_ways(
    lines: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    expected = _read(path, "json", monkeypatch)
    for way in WAYS[1:]:
        assert _read(path, way, monkeypatch) == expected, way
    if _otlp_fast.BUILT:
        for line in lines:
            _compare_c_parts(line)
