"""Run references: how ``"latest"``, ``"pinned"``, ``"pinned:NAME"``, ``"NAME"``,
``"NAME~2"`` and id prefixes find a run."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from ragmeter.registry._errors import RunNotFoundError

__all__ = ["resolve"]

_BACK = re.compile(r"^(?P<base>.+)~(?P<n>\d+)$")
_MIN_PREFIX = 4
"""The shortest id prefix taken for an id."""


def resolve(conn: sqlite3.Connection, ref: str, path: Path) -> int:
    """The ``seq`` of the run ``ref`` names; :class:`RunNotFoundError` otherwise.

    In order: ``"latest"`` (the newest run), ``"pinned"`` (the most recently pinned),
    ``"pinned:NAME"`` (NAME's pinned run), ``"BASE~N"`` (N runs before BASE's newest: BASE
    is a name or ``"latest"``), a full run id, a name (its newest run), a unique id prefix
    of at least 4 characters.
    """
    if not isinstance(ref, str) or not ref:
        raise RunNotFoundError(f"a run reference must be a non-empty string, got {ref!r}")
    back = _BACK.match(ref)
    base, steps = (back.group("base"), int(back.group("n"))) if back else (ref, 0)
    if base == "latest":
        rows = conn.execute(
            "SELECT seq FROM runs ORDER BY seq DESC LIMIT 1 OFFSET ?", [steps]
        ).fetchall()
        if rows:
            return int(rows[0][0])
        raise _missing(conn, ref, path, "the registry has fewer runs")
    if ref == "pinned" or ref.startswith("pinned:"):
        name = ref.partition(":")[2]
        sql = "SELECT seq FROM runs WHERE pinned_at IS NOT NULL"
        args = []
        if name:
            sql += " AND name = ?"
            args.append(name)
        row = conn.execute(sql + " ORDER BY pinned_at DESC, seq DESC LIMIT 1", args).fetchone()
        if row:
            return int(row[0])
        why = f"no run named {name!r} is pinned" if name else "no run is pinned"
        raise _missing(conn, ref, path, why + " (pin one with Registry.pin / runs pin)")
    if not back:
        row = conn.execute("SELECT seq FROM runs WHERE id = ?", [ref]).fetchone()
        if row:
            return int(row[0])
    rows = conn.execute(
        "SELECT seq FROM runs WHERE name = ? ORDER BY seq DESC LIMIT 1 OFFSET ?", [base, steps]
    ).fetchall()
    if rows:
        return int(rows[0][0])
    if back:
        count = conn.execute("SELECT count(*) FROM runs WHERE name = ?", [base]).fetchone()[0]
        if count:
            raise _missing(conn, ref, path, f"{base!r} has only {count} run(s)")
        raise _missing(conn, ref, path, f"no run is named {base!r}")
    if len(ref) >= _MIN_PREFIX:
        found = conn.execute(
            "SELECT seq, id FROM runs WHERE substr(id, 1, ?) = ? LIMIT 6", [len(ref), ref]
        ).fetchall()
        if len(found) == 1:
            return int(found[0][0])
        if found:
            ids = ", ".join(r[1] for r in found[:5])
            raise RunNotFoundError(
                f"run reference {ref!r} is ambiguous in {path}: it starts the ids {ids}"
                f"{', ...' if len(found) > 5 else ''}; give more of the id"
            )
    raise _missing(conn, ref, path, "no run has that id or name")


def _missing(conn: sqlite3.Connection, ref: str, path: Path, why: str) -> RunNotFoundError:
    """The error for ``ref``, naming the registry and the run names it holds."""
    names = conn.execute(
        "SELECT name, count(*) FROM runs GROUP BY name ORDER BY max(seq) DESC LIMIT 11"
    ).fetchall()
    if not names:
        held = "it holds no runs"
    else:
        listed = ", ".join(f"{n} ({c})" for n, c in names[:10])
        held = f"its run names (runs): {listed}{', ...' if len(names) > 10 else ''}"
    return RunNotFoundError(f"no run {ref!r} in {path}: {why}; {held}")
