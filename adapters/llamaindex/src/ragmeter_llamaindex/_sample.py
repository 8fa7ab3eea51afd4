"""Assembling a captured :class:`~ragmeter.schema.RagSample` without ever failing the run.

The same three helpers live, word for word, in each ragmeter adapter (``_sample.py``) until
:mod:`ragmeter.capture` provides them: what is captured is JSON-safe, the user's own run
metadata sits under ``metadata["run_metadata"]``, and a field that does not validate is left
out and noted in ``metadata["capture_errors"]`` instead of costing the whole sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ragmeter.capture import METADATA_FIELDS
from ragmeter.schema import RagSample

__all__ = ["describe", "jsonable", "run_metadata", "validated_sample"]


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
