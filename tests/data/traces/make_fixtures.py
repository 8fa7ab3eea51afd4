"""Regenerate the OpenInference trace fixtures in this folder from the real instrumentors.

Runs the small offline pipelines of ``tests/traces/_pipelines.py`` (LangChain, LlamaIndex,
Haystack; two variants each) under their OpenInference instrumentors and writes, per framework
folder:

* ``<variant>.jsonl``: OTLP/JSON as the OpenTelemetry Collector's file exporter writes it, one
  ``TracesData`` object per line and one line per trace (hex ids, integer enums, int64 as
  strings);
* ``qrels.tsv``: the judgements of the five queries (BEIR layout);
* ``native.json``: per variant and query, what ragmeter's own adapter records for the same
  pipeline (``retrieved_ids``, ``response`` and every stage's name, kind and ids);

plus two older/compressed forms of one set: ``llamaindex/basic.legacy.jsonl`` (base64 ids,
``instrumentationLibrarySpans``) and ``haystack/basic.jsonl.gz``.

    python tests/data/traces/make_fixtures.py
"""

from __future__ import annotations

import base64
import gzip
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(node: Any, *, legacy: bool = False) -> Any:
    """OTLP/JSON from ``MessageToDict``: base64 ids become hex (the spec's form) unless
    ``legacy``; with ``legacy`` the scope keys take their pre-1.0 names instead."""
    if isinstance(node, list):
        return [_hex_ids(item, legacy=legacy) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ID_KEYS and isinstance(value, str) and not legacy:
            value = base64.b64decode(value).hex()
        elif legacy and key == "scopeSpans":
            key = "instrumentationLibrarySpans"
        elif legacy and key == "scope":
            key = "instrumentationLibrary"
        out[key] = _hex_ids(value, legacy=legacy)
    return out


def otlp_lines(spans: Sequence[Any], *, legacy: bool = False) -> list[str]:
    """One OTLP/JSON ``TracesData`` line per trace of ``spans`` (traces in start order)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    traces: dict[int, list[Any]] = {}
    for span in sorted(spans, key=lambda s: s.start_time):
        traces.setdefault(span.context.trace_id, []).append(span)
    lines = []
    for members in traces.values():
        message = MessageToDict(encode_spans(members), use_integers_for_enums=True)
        lines.append(json.dumps(_hex_ids(message, legacy=legacy), separators=(",", ":")))
    return lines


def stage_record(stage: Any) -> dict[str, Any]:
    """The parts of a ragmeter ``Stage`` the trace tests compare."""
    record = {"name": stage.name, "kind": stage.kind, "ids": stage.ids}
    if stage.same_as is not None:
        record["same_as"] = stage.same_as
    if stage.inputs:
        record["inputs"] = stage.inputs
    return record


def native_record(samples: Iterable[Any]) -> dict[str, Any]:
    """``{query id: what the native adapter recorded}``."""
    return {
        s.id: {
            "user_input": s.user_input,
            "response": s.response,
            "retrieved_ids": s.retrieved_ids,
            "stages": [stage_record(st) for st in s.stages or []],
        }
        for s in samples
    }


def write_lines(path: Path, lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text, encoding="utf-8")
    print(f"{path.relative_to(HERE)}: {len(lines)} traces, {path.stat().st_size:,} bytes")


def main() -> None:
    """Write every fixture file."""
    sys.path.insert(0, str(HERE.parents[1] / "traces"))
    import _pipelines as p

    for framework in p.FRAMEWORKS:
        folder = HERE / framework
        folder.mkdir(exist_ok=True)
        native: dict[str, Any] = {}
        for variant in p.VARIANTS[framework]:
            spans = p.spans(framework, p.QUERIES, variant=variant)
            write_lines(folder / f"{variant}.jsonl", otlp_lines(spans))
            if (framework, variant) == ("llamaindex", "basic"):
                write_lines(folder / "basic.legacy.jsonl", otlp_lines(spans, legacy=True))
            if (framework, variant) == ("haystack", "basic"):
                write_lines(folder / "basic.jsonl.gz", otlp_lines(spans))
            native[variant] = native_record(p.native(framework, p.QUERIES, variant=variant))
        rows = [f"{q}\t{d}\t{g}" for q, row in p.QRELS.items() for d, g in row.items()]
        (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
        (folder / "native.json").write_text(json.dumps(native, indent=1) + "\n")


if __name__ == "__main__":
    main()
