"""OTLP/JSON lines decoded straight into typed records with ``msgspec`` (when installed).

``json.loads`` builds a dict for every attribute and every value; most of a trace's time
went there and into reading those dicts back. With ``msgspec`` (in ``ragmeter[otel]``) a
line decodes into the typed records below in one pass, unknown fields skipped, and spans
are built from them. The result is the same :class:`~ragmeter.io.otel.TraceSpan` list the
``json`` reader makes: any line this reader does not take on exactly (a decode or type
error, an empty attribute value, an error status without a message) raises
:class:`Unhandled`, and the caller reads that line with the ``json`` reader, which also
words every error. A test reads every fixture and generated line both ways.

The spans are made from the records by the compiled ``ragmeter.io._cotlp`` (``_cotlp.c``,
built at install time when a C compiler is there) by the rules of :func:`_spans`, whose
Python stays the reference and the fallback: it makes them when the module is not built or
the environment variable ``RAGMETER_PURE_PYTHON`` is set to anything but ``""``/``"0"`` when
this module is imported. The tests read every line three ways (``json``, ``msgspec`` with
Python, ``msgspec`` with C).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable
from typing import Any

import msgspec

__all__ = ["Unhandled", "decode_line"]


class Unhandled(Exception):
    """This line is the ``json`` reader's to read (or to word the error of)."""


class _ArrayValue(msgspec.Struct, gc=False):
    values: list[_AnyValue] | None = None


class _KeyValueList(msgspec.Struct, gc=False):
    values: list[_KeyValue] | None = None


class _AnyValue(msgspec.Struct, gc=False):
    stringValue: str | None = None
    intValue: int | str | None = None
    doubleValue: float | str | None = None
    boolValue: bool | None = None
    arrayValue: _ArrayValue | None = None
    kvlistValue: _KeyValueList | None = None
    bytesValue: str | None = None


class _KeyValue(msgspec.Struct, gc=False):
    key: str
    value: _AnyValue  # required: a line with an attribute without one is the json reader's


class _Status(msgspec.Struct, gc=False):
    code: int | str | None = None
    message: str | None = None


class _Span(msgspec.Struct, gc=False):
    traceId: str | None = None
    spanId: str | None = None
    parentSpanId: str | None = None
    name: str | None = None
    startTimeUnixNano: int | str | None = None
    endTimeUnixNano: int | str | None = None
    attributes: list[_KeyValue] | None = None
    status: _Status | None = None
    flags: int | str | None = None
    droppedAttributesCount: int | str | None = None


class _Scope(msgspec.Struct, gc=False):
    name: str | None = None


class _ScopeSpans(msgspec.Struct, gc=False):
    scope: _Scope | None = None
    instrumentationLibrary: _Scope | None = None
    spans: list[_Span] | None = None


class _ResourceSpans(msgspec.Struct, gc=False):
    scopeSpans: list[_ScopeSpans] | None = None
    instrumentationLibrarySpans: list[_ScopeSpans] | None = None


class _TracesData(msgspec.Struct, gc=False):
    resourceSpans: list[_ResourceSpans]


_DECODE = msgspec.json.Decoder(_TracesData).decode
_LOWER_HEX = re.compile("[0-9a-f]+").fullmatch
"""An id already in the form ``hex_id`` gives (lowercase hex digits): kept as it is."""
_EMPTY = _AnyValue()


def _value(value: _AnyValue) -> Any:
    """An ``AnyValue`` as :func:`ragmeter.io.otel` reads it (the first field set wins)."""
    if value.stringValue is not None:
        return value.stringValue
    if value.intValue is not None:
        return int(value.intValue)
    if value.doubleValue is not None:
        number = value.doubleValue
        return number if number.__class__ is float else float(number)
    if value.boolValue is not None:
        return value.boolValue
    if value.arrayValue is not None:
        return tuple(_value(v) for v in value.arrayValue.values or ())
    if value.kvlistValue is not None:
        return {kv.key: _value(kv.value) for kv in value.kvlistValue.values or ()}
    if value.bytesValue is not None:
        return base64.b64decode(value.bytesValue)
    return None


def _other(value: _AnyValue) -> Any:
    if value == _EMPTY:
        raise Unhandled  # ``{}``: the json reader skips the attribute; keep one rule, its
    return _value(value)


def _attributes(items: list[_KeyValue] | None) -> dict[str, Any]:
    if not items:
        return {}
    return {  # text first, then a float (a document's score), as :func:`_value` reads them
        kv.key: text
        if (text := (v := kv.value).stringValue) is not None
        else number
        if (number := v.doubleValue).__class__ is float and v.intValue is None
        else _other(v)
        for kv in items
    }


def _compiled() -> tuple[bool, Callable[..., list[Any]] | None]:
    try:
        from ragmeter.io._cotlp import spans
    except ImportError:  # not built (no C compiler at install time)
        return False, None
    if os.environ.get("RAGMETER_PURE_PYTHON", "").strip() not in ("", "0"):
        return True, None
    return True, spans


BUILT, _C_SPANS = _compiled()
"""Whether ``ragmeter.io._cotlp`` is built, and its ``spans`` (the spans of a decoded line,
made in C) unless ``RAGMETER_PURE_PYTHON`` is set: ``None`` means :func:`_spans` makes them."""


def decode_line(
    raw: bytes,
    make: Callable[..., Any],
    hex_id: Callable[[Any, int, str], str],
    error_codes: frozenset[Any],
    remote_parent: int,
) -> list[Any]:
    """The spans of one OTLP/JSON line, each made by ``make`` with
    :class:`~ragmeter.io.otel.TraceSpan`'s arguments; raises :class:`Unhandled` for a line
    the ``json`` reader must read. (The compiled path makes a class with ``TraceSpan``'s
    slots without calling its ``__init__``: it sets the slots as ``TraceSpan.__init__``
    does.)"""
    try:
        data = _DECODE(raw)
        if _C_SPANS is not None:
            return _C_SPANS(data, make, hex_id, error_codes, remote_parent, _other)
        out = []
        for resource in data.resourceSpans:
            scopes = resource.scopeSpans
            if scopes is None:
                scopes = resource.instrumentationLibrarySpans or []
            for scope in scopes:
                about = scope.scope or scope.instrumentationLibrary
                name = (about.name or "") if about is not None else ""
                if scope.spans:
                    out.extend(_spans(scope.spans, name, make, hex_id, error_codes, remote_parent))
        return out
    except (msgspec.DecodeError, ValueError, TypeError):
        raise Unhandled from None


def _spans(
    spans: list[_Span],
    scope: str,
    make: Callable[..., Any],
    hex_id: Callable[[Any, int, str], str],
    error_codes: frozenset[Any],
    remote_parent: int,
) -> list[Any]:
    """The spans of one scope; each id is checked once (a trace id repeats on every span,
    a parent's id is its span's): ``traces`` and ``seen`` map a checked trace id and span id
    to its hex."""
    traces: dict[str, str] = {}
    seen: dict[str, str] = {}
    out = []
    for span in spans:
        error = None
        status = span.status
        if status is not None and status.code in error_codes:
            if not status.message:
                raise Unhandled  # the exception event says what failed: the json reader's
            error = status.message
        parent = span.parentSpanId
        if parent and span.flags and int(span.flags) & remote_parent == remote_parent:
            parent = None
        trace = traces.get(span.traceId)  # type: ignore[arg-type]
        if trace is None:
            trace = traces[span.traceId] = hex_id(span.traceId, 16, "traceId")  # type: ignore[index]
        own = seen.get(span.spanId)  # type: ignore[arg-type]  # (None: hex_id words the error)
        if own is None:
            own = span.spanId
            if own.__class__ is not str or len(own) != 16 or not _LOWER_HEX(own):
                own = seen[span.spanId] = hex_id(span.spanId, 8, "spanId")  # type: ignore[index]
        above = None
        if parent:
            above = seen.get(parent)  # a parent's id repeats: its children's, its own
            if above is None:
                if parent.__class__ is str and len(parent) == 16 and _LOWER_HEX(parent):
                    above = seen[parent] = parent
                else:
                    above = seen[parent] = hex_id(parent, 8, "parentSpanId")
        out.append(
            make(
                trace,
                own,
                above,
                span.name or "",
                _attributes(span.attributes),
                int(span.startTimeUnixNano or 0),
                int(span.endTimeUnixNano or 0),
                error,
                scope,
                int(span.droppedAttributesCount) if span.droppedAttributesCount else 0,
            )
        )
    return out
