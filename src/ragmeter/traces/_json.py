"""Reading JSON that instrumentors write into span attributes: a question or answer under
one of several keys, a metadata object, a dotted path, a join key."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

_QUESTION_KEYS = ("query", "question", "query_str", "input", "user_input", "text")
"""Where a question usually is in a JSON ``input.value`` (the shallowest match wins)."""


def _text_of(value: Any, key: str | None) -> str | None:
    if not isinstance(value, str):
        return None if value is None else str(value)
    if not _looks_json(value):
        return value
    try:
        data = json.loads(value)
    except ValueError:
        return value
    if key is not None:
        found = _dotted(data, key)
        return found if isinstance(found, str) else None
    if isinstance(data, str):
        return data
    return _json_text(data, _QUESTION_KEYS)


def _json_text(value: Any, keys: Sequence[str]) -> str | None:
    """The first string under one of ``keys`` in ``value`` (JSON text or data), the shallowest
    first (breadth-first)."""
    if isinstance(value, str):
        if not _looks_json(value):
            return value
        try:
            value = json.loads(value)
        except ValueError:
            return str(value)
    stack = [value]
    while stack:
        item = stack.pop(0)
        if isinstance(item, Mapping):
            for key in keys:
                found = item.get(key)
                if isinstance(found, str):
                    return found
                if isinstance(found, list) and found and isinstance(found[-1], str):
                    return found[-1]
            stack.extend(v for v in item.values() if isinstance(v, (Mapping, list)))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, (Mapping, list)))
    return None


def _looks_json(text: str) -> bool:
    stripped = text.lstrip()
    return stripped[:1] in ("{", "[")


def _json_object(value: Any) -> dict[str, Any] | None:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str) and _looks_json(value):
        try:
            data = json.loads(value)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None
    return None


def _dotted(data: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def _join_id(attrs: Mapping[str, Any], key: str) -> str | None:
    """The sample id under ``key``: an attribute (``session.id``), or a dotted path into a
    JSON attribute (``metadata.query_id``: the longest attribute name that matches)."""
    value = attrs.get(key)
    if value is None:
        parts = key.split(".")
        for split in range(len(parts) - 1, 0, -1):
            name = ".".join(parts[:split])
            if name in attrs:
                value = _dotted(_json_object(attrs[name]), ".".join(parts[split:]))
                break
    if value is None or value == "":
        return None
    if isinstance(value, (list, tuple)):
        return str(value[0]) if value else None
    return str(value)
