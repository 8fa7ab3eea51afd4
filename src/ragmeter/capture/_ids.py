"""Sample ids, document ids and the assembly of a captured sample that never fails the run.

What is captured is made JSON-safe, the user's own run metadata sits under
``metadata["run_metadata"]``, and a field that does not validate is left out and noted in
``metadata["capture_errors"]`` instead of costing the whole sample. Every adapter builds its
samples with these.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ragmeter.schema import RagSample

__all__ = [
    "ID_KEY",
    "METADATA_FIELDS",
    "content_doc_id",
    "describe",
    "fields_from_metadata",
    "jsonable",
    "run_metadata",
    "validated_sample",
]
ID_KEY = "ragmeter_id"
METADATA_FIELDS: dict[str, str] = {
    "ragmeter_id": "id",
    "ragmeter_reference": "reference",
    "ragmeter_references": "references",
    "ragmeter_reference_ids": "reference_ids",
    "ragmeter_relevance": "relevance",
}
"""Run-metadata key -> RagSample field it fills."""


def content_doc_id(text: str) -> str:
    """A stable id for a document that has none: ``"sha256:"`` + 16 hex chars of its text.

    The same text always gets the same id (across processes and machines), so a run
    captured twice joins to the same qrels.

    >>> content_doc_id("Paris is the capital of France.")
    'sha256:557be7eca214f188'
    """
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def fields_from_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The RagSample fields a run's metadata sets (see the module table).

    >>> fields_from_metadata({"ragmeter_id": "q12", "ragmeter_reference_ids": ["d1"], "x": 1})
    {'id': 'q12', 'reference_ids': ['d1']}
    """
    out: dict[str, Any] = {}
    if not metadata:
        return out
    for key, field in METADATA_FIELDS.items():
        if key in metadata and metadata[key] is not None:
            value = metadata[key]
            out[field] = str(value) if field == "id" else value
    return out


def describe(exc: BaseException) -> str:
    """``"ValueError: message"``: how a captured exception is recorded."""
    return f"{type(exc).__name__}: {exc}"


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` made JSON-safe (``to_jsonl`` must not fail on captured metadata).

    Strings, ints, bools and ``None`` stay; a NaN or infinite float and any other object
    become their ``str``; mappings and lists are converted item by item (8 levels deep).

    >>> jsonable({"when": float("nan"), "ids": (1, "a"), 2: {3}})
    {'when': 'nan', 'ids': [1, 'a'], '2': '{3}'}
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth < 8:
        if isinstance(value, Mapping):
            return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [jsonable(v, depth + 1) for v in value]
    return str(value)


def run_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The user's run metadata minus the ``ragmeter_*`` keys that fill sample fields, JSON-safe.

    >>> run_metadata({"ragmeter_id": "q1", "team": "search"})
    {'team': 'search'}
    """
    if not metadata:
        return {}
    return {str(k): jsonable(v) for k, v in metadata.items() if k not in METADATA_FIELDS}


def validated_sample(fields: dict[str, Any], errors: list[str]) -> RagSample:
    """A ``RagSample`` from ``fields``; a field that does not validate is left out.

    What was left out, and why, is appended to ``errors``; a non-empty ``errors`` becomes
    ``metadata["capture_errors"]``. Only ``id`` and ``metadata`` are always kept.

    >>> errors: list[str] = []
    >>> s = validated_sample({"id": "q1", "latency_ms": -1.0, "response": "ok"}, errors)
    >>> s.id, s.response, s.latency_ms, s.metadata["capture_errors"] == errors
    ('q1', 'ok', None, True)
    >>> errors
    ['invalid latency_ms left out: Input should be greater than or equal to 0 (got -1.0)']
    """
    try:
        return RagSample.model_validate(_with_errors(fields, errors))
    except ValidationError as exc:
        problems = exc.errors()
    bad = sorted({str(p["loc"][0]) for p in problems if p.get("loc")} - {"id", "metadata"})
    msg, got = (problems[0]["msg"], problems[0].get("input")) if problems else ("?", None)
    errors.append(f"invalid {', '.join(bad) or 'sample'} left out: {msg} (got {got!r:.80})")
    kept = {k: v for k, v in fields.items() if k not in bad}
    try:
        return RagSample.model_validate(_with_errors(kept, errors))
    except ValidationError:
        core = {k: fields[k] for k in ("id",) if isinstance(fields.get(k), str)}
        return RagSample.model_validate(_with_errors(core, errors))


def _with_errors(fields: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    if not errors:
        return fields
    meta = dict(fields.get("metadata") or {})
    meta["capture_errors"] = list(errors)
    return {**fields, "metadata": meta}
