"""The registry's SQLite file: opening it (WAL, busy timeout, read-only), telling a foreign,
corrupt or newer file apart, and migrating an older schema step by step.

A ragmeter registry is marked by ``PRAGMA application_id`` (:data:`APPLICATION_ID`) and
versioned by ``PRAGMA user_version``. :data:`MIGRATIONS` is the ordered list of steps, step
``i`` taking the schema from version ``i`` to ``i + 1``; opening an older file runs the
missing steps in one transaction, so a file is never left half-migrated.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from ragmeter.registry._errors import RegistryError

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "V1_SCRIPT", "connect"]

APPLICATION_ID = 0x52474D52
"""``PRAGMA application_id`` of a ragmeter registry ("RGMR")."""

BUSY_TIMEOUT_MS = 60_000
"""How long a connection waits for another process's write before giving up."""

V1_SCRIPT = """
CREATE TABLE runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    created TEXT NOT NULL,
    kind TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '{}',
    git_commit TEXT,
    git_dirty INTEGER,
    dataset TEXT,
    dataset_items BLOB,
    config TEXT NOT NULL,
    ragmeter_version TEXT NOT NULL,
    metric_definitions TEXT NOT NULL,
    judge_model TEXT,
    judge_prompt_hash TEXT,
    tokens INTEGER,
    cost REAL,
    metrics TEXT NOT NULL,
    ids BLOB,
    scores_path TEXT NOT NULL,
    scores_sha256 TEXT NOT NULL,
    pinned_at TEXT
);
CREATE INDEX runs_name ON runs (name, seq);
"""
"""Schema version 1: one row per run, its tags as a JSON object."""

V2_SCRIPT = """
ALTER TABLE runs ADD COLUMN note TEXT;
CREATE TABLE run_tags (
    run_seq INTEGER NOT NULL REFERENCES runs (seq),
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_seq, key)
);
CREATE INDEX run_tags_key ON run_tags (key, value);
"""
"""Schema version 2: a note per run, and tags in their own table (searchable)."""


def _v1(conn: sqlite3.Connection) -> None:
    for statement in _statements(V1_SCRIPT):
        conn.execute(statement)


def _v2(conn: sqlite3.Connection) -> None:
    for statement in _statements(V2_SCRIPT):
        conn.execute(statement)
    rows = conn.execute("SELECT seq, tags FROM runs").fetchall()
    for seq, tags in rows:
        for key, value in (json.loads(tags or "{}") or {}).items():
            conn.execute(
                "INSERT INTO run_tags (run_seq, key, value) VALUES (?, ?, ?)",
                (seq, str(key), str(value)),
            )


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2]
"""Step ``i`` takes the schema from version ``i`` to ``i + 1`` (0 is an empty file)."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this ragmeter writes."""


def connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """An open, checked connection to the registry at ``path``, migrated to
    :data:`SCHEMA_VERSION` (a writable one; the file is created when missing).

    Raises :class:`RegistryError` naming ``path`` for a file that is not SQLite or is
    corrupt, a SQLite file that is not a ragmeter registry, one from a newer ragmeter, or
    an older one opened read-only (it needs a migration first).
    """
    try:
        if read_only:
            conn = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None
            )
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise RegistryError(f"cannot open the run registry {path}: {exc}") from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _check(conn, path, read_only)
    except sqlite3.OperationalError as exc:
        conn.close()
        if not read_only or not _cannot_share(exc):
            raise RegistryError(f"cannot open the run registry {path}: {exc}") from None
        # mode=ro on a WAL file needs a -shm file beside it, which a directory we cannot
        # write cannot get; none exists, so no writer has the file open: read it immutable
        conn = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, isolation_level=None
        )
        try:
            _check(conn, path, read_only)
        except BaseException:
            conn.close()
            raise
    except BaseException:
        conn.close()
        raise
    return conn


def _check(conn: sqlite3.Connection, path: Path, read_only: bool) -> None:
    app, version, tables = _header(conn, path)
    _refuse_foreign(path, app, version, tables)
    if version == SCHEMA_VERSION:
        return
    if read_only:
        raise RegistryError(
            f"the run registry {path} has schema version {version}; this ragmeter reads "
            f"version {SCHEMA_VERSION}: open it once writable to migrate it"
        )
    _wal(conn, path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        app, version, tables = _header(conn, path)  # another process may have done it
        _refuse_foreign(path, app, version, tables)
        for step in MIGRATIONS[version:]:
            step(conn)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise RegistryError(f"cannot migrate the run registry {path}: {exc}") from None


def _header(conn: sqlite3.Connection, path: Path) -> tuple[int, int, int]:
    """``(application_id, user_version, number of tables)``, or :class:`RegistryError`
    naming ``path`` when it is not a readable SQLite database."""
    try:
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and _cannot_share(exc):
            raise  # a read-only WAL file without -shm: connect retries it immutable
        raise RegistryError(
            f"{path} is not a ragmeter run registry: it is not a SQLite database or it is "
            f"corrupt ({exc}); move it away or point RAGMETER_REGISTRY elsewhere"
        ) from None
    return int(app), int(version), int(tables)


def _cannot_share(exc: sqlite3.OperationalError) -> bool:
    return "readonly" in str(exc) or "unable to open" in str(exc)


def _refuse_foreign(path: Path, app: int, version: int, tables: int) -> None:
    if app != APPLICATION_ID and (app != 0 or tables or version):
        raise RegistryError(
            f"{path} is a SQLite database but not a ragmeter run registry (application_id "
            f"{app:#x}, {tables} schema object(s)); point RAGMETER_REGISTRY at another file"
        )
    if version > SCHEMA_VERSION:
        raise RegistryError(
            f"the run registry {path} has schema version {version}, written by a newer "
            f"ragmeter; this one reads up to version {SCHEMA_VERSION}: upgrade ragmeter"
        )


def _wal(conn: sqlite3.Connection, path: Path) -> None:
    """Switch to WAL (readers never block the writer); retried while another process
    holds the lock, as ``journal_mode`` ignores the busy timeout on some versions."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise RegistryError(f"cannot open the run registry {path}: {exc}") from None
            time.sleep(0.01 + (os.getpid() % 7) / 1000)
