"""OpenTelemetry traces in: OTLP/JSON files, Phoenix exports and SDK spans as :class:`TraceSpan`.

OpenInference (the semantic conventions the ``openinference-instrumentation-*`` packages
write on OpenTelemetry spans) says what a span is in ``openinference.span.kind``
(``CHAIN``, ``RETRIEVER``, ``RERANKER``, ``LLM``, ``EMBEDDING``, ``TOOL``, ``AGENT``) and
what it did in flat attributes: ``input.value``, ``output.value``,
``retrieval.documents.{i}.document.{id,score,content,metadata}``,
``reranker.output_documents.{i}.document.*``, ``llm.token_count.{prompt,completion}``,
``llm.model_name``, ``llm.output_messages.{i}.message.content``, ``metadata`` (JSON),
``session.id``, ``tag.tags``. Whatever the source (an OTLP/JSON file, a Phoenix export, the
SDK's ``ReadableSpan``), a span becomes a :class:`TraceSpan` with those keys:

* :func:`iter_otlp_json`: OTLP/JSON lines as the OpenTelemetry Collector's file exporter
  writes them (one ``TracesData`` object per line; hex ids, and the older base64 ids and
  ``instrumentationLibrarySpans`` accepted; unknown fields ignored; ``.gz`` read), one
  line at a time, so a file larger than memory streams;
* :func:`spans_from_phoenix`: a Phoenix span export (``TraceDataset.save()``'s parquet, one
  row per span with ``attributes.*`` columns, or the same as a pandas DataFrame);
* :func:`spans_from_sdk`: the SDK's ``ReadableSpan`` objects (e.g. from
  ``InMemorySpanExporter.get_finished_spans()``).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ragmeter.errors import DataFormatError, InvalidInputError
from ragmeter.io._lines import raw_lines

__all__ = [
    "KIND",
    "TraceSpan",
    "iter_otlp_batches",
    "iter_otlp_json",
    "spans_from_phoenix",
    "spans_from_sdk",
]

KIND = "openinference.span.kind"


class TraceSpan:
    """A finished span: ``trace_id``/``span_id``/``parent_id`` as lowercase hex, ``name``,
    ``kind`` (OpenInference's span kind, upper case; ``""`` when the span has none),
    ``start``/``end`` in nanoseconds since the epoch, ``attributes`` as a flat mapping
    (``"retrieval.documents.0.document.id"`` ...), and ``error`` (the status message of a
    span whose status is ERROR, else ``None``), and ``scope``, the instrumentation scope's name
    (``openinference.instrumentation.langchain``; ``""`` when the source does not say), and
    ``dropped``, how many attributes the exporter dropped (its attribute limit)."""

    __slots__ = (
        "attributes",
        "dropped",
        "end",
        "error",
        "kind",
        "name",
        "parent_id",
        "scope",
        "span_id",
        "start",
        "trace_id",
    )

    def __init__(
        self,
        trace_id: str,
        span_id: str,
        parent_id: str | None,
        name: str,
        attributes: Mapping[str, Any],
        start: int = 0,
        end: int = 0,
        error: str | None = None,
        scope: str = "",
        dropped: int = 0,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id or None
        self.name = name
        self.attributes = attributes
        kind = attributes.get(KIND)
        self.kind = kind.upper() if isinstance(kind, str) else ""
        self.start = start
        self.end = end
        self.error = error
        self.scope = scope
        self.dropped = dropped

    def __repr__(self) -> str:
        return f"TraceSpan({self.name!r}, kind={self.kind!r}, span_id={self.span_id!r})"


# --------------------------------------------------------------------------- OTLP/JSON

_ERROR_CODES = frozenset({2, "2", "STATUS_CODE_ERROR", "ERROR"})
_REMOTE_PARENT = 0x300
"""OTLP span flags: bit 8 says whether the parent's remoteness is known, bit 9 that it is."""


def _hex_id(value: Any, size: int, what: str) -> str:
    """An id as lowercase hex: OTLP/JSON writes hex (``size`` bytes = ``2 * size`` digits);
    protobuf's JSON mapping, which older exporters used, writes base64."""
    if not isinstance(value, str):
        raise ValueError(f"{what} is {value!r}, not a string")
    if len(value) == 2 * size:
        try:
            bytes.fromhex(value)
        except ValueError:
            pass
        else:
            return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise ValueError(
            f"{what} {value!r} is neither {2 * size} hex digits nor {size} bytes in base64"
        )
    return raw.hex()


def _any_value(value: Mapping[str, Any]) -> Any:
    """An OTLP ``AnyValue`` as a Python value (arrays as tuples, kvlists as dicts)."""
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        number = value["doubleValue"]
        return float(number) if not isinstance(number, float) else number
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return tuple(_any_value(v) for v in (value["arrayValue"] or {}).get("values") or ())
    if "kvlistValue" in value:
        pairs = (value["kvlistValue"] or {}).get("values") or ()
        return {kv["key"]: _any_value(kv.get("value") or {}) for kv in pairs}
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"])
    return None


def _attributes(items: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
    if not items:
        return {}
    return {
        item["key"]: value["stringValue"] if "stringValue" in value else _any_value(value)
        for item in items
        if (value := item.get("value"))
    }


def _error_of(span: Mapping[str, Any]) -> str | None:
    status = span.get("status") or {}
    if status.get("code") not in _ERROR_CODES:
        return None
    message = status.get("message")
    if message:
        return str(message)
    for event in span.get("events") or ():
        if event.get("name") == "exception":
            attrs = _attributes(event.get("attributes"))
            kind = attrs.get("exception.type")
            text = attrs.get("exception.message")
            if kind or text:
                return f"{kind}: {text}" if kind and text else str(kind or text)
    return "error"


def _otlp_span(span: Mapping[str, Any], scope: str) -> TraceSpan:
    try:
        return _read_span(span, scope)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise ValueError(f"span {_name_of(span)}: {_what(exc, span)}") from None


def _name_of(span: Any) -> str:
    if not isinstance(span, Mapping):
        return f"{span!r:.40}"
    name = span.get("name")
    return "(no name)" if name is None else repr(name)


def _what(exc: Exception, span: Any) -> str:
    """The field a span failed on, in words (the message of a bad id says it already)."""
    if not isinstance(span, Mapping):
        return "a span must be a JSON object"
    attributes = span.get("attributes")
    if attributes is not None and (
        not isinstance(attributes, list)
        or not all(isinstance(a, Mapping) and isinstance(a.get("key"), str) for a in attributes)
    ):
        return '\'attributes\' must be a list of {"key": ..., "value": {...}} objects'
    for field in ("startTimeUnixNano", "endTimeUnixNano", "droppedAttributesCount", "flags"):
        value = span.get(field)
        if value is not None and not str(value).lstrip("-").isdigit():
            return f"{field} is {value!r}, not an integer"
    status = span.get("status")
    if status is not None and not isinstance(status, Mapping):
        return f"'status' must be an object, got {status!r:.40}"
    return str(exc)


def _read_span(span: Mapping[str, Any], scope: str) -> TraceSpan:
    parent = span.get("parentSpanId")
    if parent and int(span.get("flags") or 0) & _REMOTE_PARENT == _REMOTE_PARENT:
        parent = None  # the trace began in another service: this span is this one's root
    return TraceSpan(
        _hex_id(span.get("traceId"), 16, "traceId"),
        _hex_id(span.get("spanId"), 8, "spanId"),
        _hex_id(parent, 8, "parentSpanId") if parent else None,
        str(span.get("name") or ""),
        _attributes(span.get("attributes")),
        int(span.get("startTimeUnixNano") or 0),
        int(span.get("endTimeUnixNano") or 0),
        _error_of(span),
        scope,
        int(span.get("droppedAttributesCount") or 0),
    )


def _line_spans(data: Any) -> Iterator[tuple[Mapping[str, Any], str]]:
    if not isinstance(data, Mapping) or not isinstance(data.get("resourceSpans"), list):
        raise ValueError(
            "not an OTLP TracesData object: each line must be a JSON object with a "
            "'resourceSpans' list (the OpenTelemetry file exporter's format)"
        )
    for resource in data["resourceSpans"]:
        scopes = resource.get("scopeSpans")
        if scopes is None:
            scopes = resource.get("instrumentationLibrarySpans") or ()  # before OTLP 0.15
        for scope in scopes:
            about = scope.get("scope") or scope.get("instrumentationLibrary") or {}
            name = str(about.get("name") or "")
            for span in scope.get("spans") or ():
                yield span, name


def iter_otlp_json(path: str | os.PathLike[str]) -> Iterator[TraceSpan]:
    """Every span of an OTLP/JSON lines file, in file order, one line at a time.

    Each line is one ``TracesData`` JSON object (``resourceSpans`` -> ``scopeSpans`` (or the
    older ``instrumentationLibrarySpans``) -> ``spans``), as the OpenTelemetry Collector's
    file exporter writes it; a gzip file is read as such whatever its name, and blank lines
    are skipped. Ids may be hex (OTLP/JSON) or base64 (protobuf's JSON mapping); unknown
    fields are ignored.

    Raises :class:`~ragmeter.errors.DataFormatError` naming the file and line of a line that
    is not JSON, not a ``TracesData`` object, or holds a span without valid ids.

    >>> import json, tempfile, pathlib
    >>> span = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
    ...         "name": "retrieve", "attributes": [{"key": "openinference.span.kind",
    ...         "value": {"stringValue": "RETRIEVER"}}]}
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "traces.jsonl"
    >>> _ = path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    >>> [(s.name, s.kind, s.parent_id) for s in iter_otlp_json(path)]
    [('retrieve', 'RETRIEVER', None)]
    """
    for batch in iter_otlp_batches(path):
        yield from batch


def iter_otlp_batches(path: str | os.PathLike[str]) -> Iterator[list[TraceSpan]]:
    """The spans of an OTLP/JSON lines file, one list per line (one exported batch: the
    spans an exporter wrote together), for readers that group spans into traces."""
    where = str(path)
    loads = json.loads
    fast, unhandled = _fast_decoder() or (None, Exception)
    for lineno, raw in raw_lines(path):
        if not raw or (raw[0] in _BLANK and not raw.strip()):  # "{...": no strip, no copy
            continue
        if fast is not None:
            try:
                spans = fast(raw, TraceSpan, _hex_id, _ERROR_CODES, _REMOTE_PARENT)
            except unhandled:
                pass  # the json reader below reads the line (and words any error)
            else:
                yield spans
                continue
        try:
            data = loads(raw)
        except ValueError as exc:
            raise DataFormatError(f"not valid JSON ({exc})", path=where, line=lineno) from None
        try:
            yield [_otlp_span(span, scope) for span, scope in _line_spans(data)]
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            raise DataFormatError(str(exc), path=where, line=lineno) from None


_BLANK = frozenset(b" \t\n\r\x0b\x0c")
"""The bytes ``bytes.strip`` removes: a line that starts with another is not blank."""


def _fast_decoder() -> tuple[Any, type[Exception]] | None:
    """The ``msgspec`` line decoder (``ragmeter[otel]``) and the exception it raises for a
    line it leaves to the ``json`` reader, else ``None`` (``json`` only). With the
    environment variable ``RAGMETER_OTLP_JSON=1`` only the ``json`` reader reads (the
    reference, for comparisons)."""
    if os.environ.get("RAGMETER_OTLP_JSON"):
        return None
    try:
        from ragmeter.io._otlp_fast import Unhandled, decode_line
    except ImportError:  # msgspec is not installed
        return None
    return decode_line, Unhandled


# --------------------------------------------------------------------------- the SDK's spans


def spans_from_sdk(spans: Iterable[Any]) -> Iterator[TraceSpan]:
    """OpenTelemetry SDK ``ReadableSpan`` objects (finished spans) as :class:`TraceSpan`."""
    for span in spans:
        context = span.context
        parent = span.parent
        status = span.status
        error = None
        if status is not None and getattr(status.status_code, "name", "") == "ERROR":
            error = status.description or _sdk_exception(span) or "error"
        local = parent is not None and parent.is_valid and not parent.is_remote
        yield TraceSpan(
            format(context.trace_id, "032x"),
            format(context.span_id, "016x"),
            format(parent.span_id, "016x") if local else None,
            str(span.name),
            dict(span.attributes or {}),
            int(span.start_time or 0),
            int(span.end_time or 0),
            error,
            str(getattr(getattr(span, "instrumentation_scope", None), "name", "") or ""),
            int(getattr(span, "dropped_attributes", 0) or 0),
        )


def _sdk_exception(span: Any) -> str | None:
    for event in getattr(span, "events", None) or ():
        if event.name == "exception":
            attrs = event.attributes or {}
            kind, text = attrs.get("exception.type"), attrs.get("exception.message")
            if kind or text:
                return f"{kind}: {text}" if kind and text else str(kind or text)
    return None


# --------------------------------------------------------------------------- Phoenix exports

_PHOENIX_COLUMNS = ("context.trace_id", "context.span_id", "name")


def spans_from_phoenix(frame: Any) -> Iterator[TraceSpan]:
    """The spans of a Phoenix export: a pandas DataFrame with one row per span (as
    ``px.Client().get_spans_dataframe()`` or ``TraceDataset.dataframe`` give it) or the path
    of the parquet file ``TraceDataset.save()`` writes.

    Columns: ``context.trace_id``, ``context.span_id``, ``parent_id``, ``name``,
    ``span_kind``, ``start_time``, ``end_time``, ``status_code``, ``status_message`` and
    ``attributes.<key>`` (nested values, such as ``attributes.retrieval.documents`` holding
    a list of ``{"document.id": ...}`` dicts, are flattened to OpenInference's flat keys).
    """
    if isinstance(frame, (str, os.PathLike)):
        import pandas as pd

        frame = pd.read_parquet(frame)
    if frame.index.name in ("context.span_id", "span_id"):  # get_spans_dataframe()'s index
        frame = frame.reset_index().rename(columns={"span_id": "context.span_id"})
    columns = list(frame.columns)
    absent = [c for c in _PHOENIX_COLUMNS if c not in columns]
    if absent:
        raise InvalidInputError(
            f"not a Phoenix span export: the columns {absent} are missing (it has "
            f"{columns[:12]}{' ...' if len(columns) > 12 else ''})"
        )
    attribute_columns = [
        (c, c[len("attributes.") :]) for c in columns if c.startswith("attributes.")
    ]
    for row in frame.to_dict("records"):
        attributes: dict[str, Any] = {}
        for column, key in attribute_columns:
            _flatten(attributes, key, row[column])
        kind = row.get("span_kind")
        if isinstance(kind, str) and KIND not in attributes:
            attributes[KIND] = kind
        error = None
        if str(row.get("status_code") or "").upper() == "ERROR":
            error = str(row.get("status_message") or "error")
        yield TraceSpan(
            str(row["context.trace_id"]).replace("-", "").lower(),
            str(row["context.span_id"]).lower(),
            _present(row.get("parent_id")),
            str(row["name"]),
            attributes,
            _nanoseconds(row.get("start_time")),
            _nanoseconds(row.get("end_time")),
            error,
        )


def _present(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).lower()
    return text or None


def _nanoseconds(value: Any) -> int:
    if value is None:
        return 0
    if hasattr(value, "value") and isinstance(value.value, int):  # pandas Timestamp
        return int(value.value)
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1e9)
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _flatten(out: dict[str, Any], key: str, value: Any) -> None:
    """Phoenix keeps a list of documents or messages as a list of dicts (or a numpy array);
    OpenInference's flat form numbers them: ``retrieval.documents.0.document.id``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Mapping) for v in value):
        for i, item in enumerate(value):
            for inner, inner_value in item.items():
                _flatten(out, f"{key}.{i}.{inner}", inner_value)
        return
    if isinstance(value, Mapping) and not key.endswith("metadata"):
        for inner, inner_value in value.items():
            _flatten(out, f"{key}.{inner}", inner_value)
        return
    out[key] = value
