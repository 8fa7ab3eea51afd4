"""A report's JSON written in pieces, one per-item row at a time, with the very text of
``json.dumps(report.to_dict(), indent=2, allow_nan=False)``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import IO, Any

from ragmeter.report._columns import ColumnRows

_ROWS_KEYS = frozenset({"per_query", "per_sample"})
"""Top-level keys whose rows :meth:`_ReportBase.to_json` writes one at a time."""


class _Rows:
    """Marks a ``{id: {key: value}}`` mapping that the JSON writer streams row by row."""

    __slots__ = ("rows",)

    def __init__(self, rows: Mapping[str, Mapping[str, Any]]) -> None:
        self.rows = rows

    def plain(self) -> Mapping[str, Mapping[str, Any]]:
        """The rows as ``to_dict`` returns them (a deferred :class:`ColumnRows` made a dict)."""
        rows = self.rows
        return rows.to_dict() if isinstance(rows, ColumnRows) else rows

    def pairs(self) -> Iterable[tuple[str, Mapping[str, Any]]]:
        """``(id, row)`` in order (a :class:`ColumnRows` read without a lookup per row)."""
        rows = self.rows
        return rows.iter_rows() if isinstance(rows, ColumnRows) else rows.items()


def _json_value(value: Any) -> str:
    """One row value as ``json.dumps(value, allow_nan=False)`` writes it, fast for floats."""
    if type(value) is float:
        if value - value == 0.0:  # finite
            return repr(value)
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return json.dumps(value, allow_nan=False)


def _write_json(items: Iterable[tuple[str, Any]], fh: IO[str]) -> None:
    """Write ``dict(items)`` as ``json.dumps(..., indent=2, allow_nan=False)`` would, but in
    pieces: a :class:`_Rows` value is written one row at a time, never as one string."""
    parts: list[str] = []
    size = 0

    def out(text: str) -> None:
        nonlocal size
        parts.append(text)
        size += len(text)
        if size >= 1 << 20:
            fh.write("".join(parts))
            parts.clear()
            size = 0

    out("{")
    first = True
    for key, value in items:
        out(("\n" if first else ",\n") + "  " + json.dumps(key) + ": ")
        first = False
        if not isinstance(value, _Rows):
            out(json.dumps(value, indent=2, allow_nan=False).replace("\n", "\n  "))
            continue
        if not value.rows:
            out("{}")
            continue
        out("{")
        sep = "\n"
        names: dict[str, str] = {}
        for rid, row in value.pairs():
            out(sep + "    " + json.dumps(rid) + ": ")
            sep = ",\n"
            if not row:
                out("{}")
                continue
            fields = []
            for name, cell in row.items():
                label = names.get(name)
                if label is None:
                    label = names[name] = "      " + json.dumps(name) + ": "
                fields.append(label + _json_value(cell))
            out("{\n" + ",\n".join(fields) + "\n    }")
        out("\n  }")
    out("\n}" if not first else "}")
    fh.write("".join(parts))
