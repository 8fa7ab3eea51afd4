"""A persistent, content-addressed cache of judge calls (SQLite).

The key is the SHA-256 of the metric's name and version, the exact prompt messages, the
judge's identity (model and sampling settings) and the repeat index, so re-running an
evaluation costs nothing and gives the same numbers, while any change to prompt, model or
settings misses. The file lives in the user cache directory by default
(``$RAGMETER_CACHE_DIR``, else ``$XDG_CACHE_HOME/ragmeter``, else ``~/.cache/ragmeter``),
uses WAL journaling and a busy timeout, and is safe for concurrent writers (threads and
processes).

A file that is not a judge cache (not SQLite, corrupted, another application's database, a
table ``judge_calls`` with other columns) is refused with a
:class:`~ragmeter.errors.JudgeCacheError` naming the path and the problem, never a raw
``sqlite3`` error, and nothing is written into it. A cache the user cannot write (the file
or its directory is not writable) is opened read-only: hits are served, new verdicts are
not stored and :meth:`JudgeCache.put` says so (the runner counts them for the report).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ragmeter.errors import CacheFileError, JudgeCacheError
from ragmeter.judge.protocol import JudgeReply, Message

__all__ = ["JudgeCache", "SQLiteCache", "cache_key", "default_cache_path"]


def default_cache_path(filename: str = "judge-cache.sqlite") -> Path:
    """Where the judge cache (or another ragmeter cache file, ``filename``) lives when no
    path is given."""
    root = os.environ.get("RAGMETER_CACHE_DIR")
    if root:
        return Path(root) / filename
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "ragmeter" / filename


def cache_key(
    metric: str,
    version: str,
    messages: Sequence[Message],
    identity: Mapping[str, Any],
    repeat: int = 0,
) -> str:
    """The content address of one judge call.

    >>> k = cache_key("m", "1", [Message("user", "hi")], {"model": "x"})
    >>> k == cache_key("m", "1", [Message("user", "hi")], {"model": "x"}), len(k)
    (True, 64)
    >>> k == cache_key("m", "2", [Message("user", "hi")], {"model": "x"})
    False
    """
    payload = json.dumps(
        {
            "metric": metric,
            "version": version,
            "messages": [[m.role, m.content] for m in messages],
            "identity": identity,
            "repeat": repeat,
        },
        sort_keys=True,
        default=str,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


_COLUMNS = ("key", "text", "input_tokens", "output_tokens")
_CREATE = (
    "CREATE TABLE IF NOT EXISTS judge_calls ("
    " key TEXT PRIMARY KEY, text TEXT NOT NULL,"
    " input_tokens INTEGER, output_tokens INTEGER)"
)
_WRITABLE_HINT = "pass a path in a directory you can write to"
_READ_ONLY = "the cache is read-only"  # JudgeCache.write_problem of a read-only cache


def _writable(path: Path) -> bool:
    effective = os.access in os.supports_effective_ids
    return os.access(path, os.W_OK, effective_ids=effective)


def _problem(exc: sqlite3.Error, delete_hint: str) -> tuple[str, str]:
    """What an SQLite error says about the file, and what to do about it."""
    message = str(exc)
    if "file is not a database" in message:
        return "is not an SQLite database (another kind of file, or a corrupted one)", delete_hint
    if "malformed" in message or "corrupt" in message:
        return f"is corrupted ({message})", delete_hint
    if "locked" in message or "busy" in message:
        return (
            f"stayed locked by another process for longer than the 30 s busy timeout ({message})",
            "try again when the other run has finished, or use another cache path",
        )
    return f"cannot be used ({message})", "check the file and its permissions, or use another path"


class SQLiteCache:
    """What every ragmeter cache file shares: an SQLite file of one table, opened safely.

    A subclass names its ``table``, ``columns`` and ``create`` statement, what the file is
    called in messages (``what``, ``contents``), its default ``filename`` and its ``error``
    class, and adds its own reads and writes; this class opens, checks and shares the file
    (see :class:`JudgeCache` for the rules, which every cache file follows).
    """

    table: ClassVar[str] = ""
    columns: ClassVar[tuple[str, ...]] = ()
    create: ClassVar[str] = ""
    what: ClassVar[str] = "cache"
    contents: ClassVar[str] = "cached results; they will be computed again"
    filename: ClassVar[str] = "cache.sqlite"
    error: ClassVar[type[CacheFileError]] = CacheFileError

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, readonly: bool | None = None
    ) -> None:
        self.path = Path(path) if path is not None else default_cache_path(self.filename)
        self._local = threading.local()
        self._immutable = False
        self._has_table = True
        self.readonly: bool = bool(readonly)
        self.write_problem: str | None = None
        """Why the last :meth:`put` stored nothing (``None`` while every write worked)."""
        try:
            self._prepare(readonly)
        except OSError as exc:  # e.g. a directory on the way that this user cannot enter
            raise self.error(
                self.path,
                f"cannot be opened ({exc.strerror or exc})",
                hint="check the path and its permissions, or use another cache path",
            ) from None
        self._open()

    def _prepare(self, readonly: bool | None) -> None:
        if self.path.is_dir():
            raise self.error(
                self.path,
                "is a directory",
                hint=f"name a file in it, e.g. {self.path / self.filename}",
            )
        self.readonly = self._detect_readonly() if readonly is None else readonly
        if self.readonly:
            self.write_problem = _READ_ONLY
            if not self.path.exists():
                raise self.error(
                    self.path,
                    "does not exist (it is opened read-only, so it is not created)",
                    hint="pass the path of an existing cache",
                )
        else:
            self._make_parent()

    def _detect_readonly(self) -> bool:
        if self.path.exists():
            return not (_writable(self.path) and _writable(self.path.parent))
        parent = self.path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if parent.is_dir() and not _writable(parent):
            raise self.error(
                self.path,
                f"does not exist and cannot be created: the directory {parent} is not writable",
                hint=_WRITABLE_HINT,
            )
        return False

    def _make_parent(self) -> None:
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self.error(
                self.path,
                f"cannot be created: its directory {parent} cannot be made ({exc.strerror or exc})",
                hint=_WRITABLE_HINT,
            ) from None

    def _open(self) -> None:
        """Connect and check that the file is this kind of cache (or empty: then make it one)."""
        try:
            try:
                self._check_schema(self._conn())
            except sqlite3.OperationalError as exc:
                cannot_share = "readonly" in str(exc) or "unable to open" in str(exc)
                if not self.readonly or self._immutable or not cannot_share:
                    raise
                # mode=ro on a WAL file needs a -shm file next to it, which cannot be made
                # in a directory we cannot write; none exists, so no writer has the file
                # open. Read it as immutable (without the shared-memory index).
                self.close()
                self._immutable = True
                self._check_schema(self._conn())
        except sqlite3.Error as exc:
            self.close()
            raise self._error(exc) from None

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        tables = [
            str(row[0])
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
            )
        ]
        foreign = f"pass another path (this file is not a ragmeter {self.what}; leave it alone)"
        if self.table in tables:
            info = conn.execute(f"PRAGMA table_info({self.table})")
            columns = [str(row[1]) for row in info]
            if sorted(columns) != sorted(self.columns):
                raise self.error(
                    self.path,
                    f"is not a ragmeter {self.what}: its table {self.table} has columns "
                    f"({', '.join(columns)}), a {self.what}'s are ({', '.join(self.columns)})",
                    hint=foreign,
                )
        elif tables:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise self.error(
                self.path,
                f"is another application's SQLite database (tables: {shown}), not a ragmeter "
                f"{self.what}",
                hint=foreign,
            )
        elif self.readonly:
            self._has_table = False  # an empty database: every lookup misses
        else:
            conn.execute(self.create)

    def _error(self, exc: sqlite3.Error) -> CacheFileError:
        delete = f"delete it (it holds only {self.contents}) or use another cache path"
        problem, hint = _problem(exc, delete)
        return self.error(self.path, problem, hint=hint)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self.readonly:
                flags = "mode=ro&immutable=1" if self._immutable else "mode=ro"
                uri = f"file:{urllib.parse.quote(str(self.path.absolute()))}?{flags}"
                conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
            else:
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
                try:
                    _wal(conn)
                except sqlite3.Error:
                    conn.close()
                    raise
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        try:
            return self._conn().execute(sql, params).fetchone()
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def __len__(self) -> int:
        if not self._has_table:
            return 0
        row = self._read(f"SELECT COUNT(*) FROM {self.table}")
        return int(row[0])

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class JudgeCache(SQLiteCache):
    """SQLite-backed ``key -> JudgeReply`` store; one connection per thread.

    ``readonly=None`` (the default) opens the file read-only when this user cannot write it
    or its directory (``os.access``), else read-write, creating the file and its directory
    if needed. ``readonly=True`` always opens it read-only (SQLite ``mode=ro``, enforced for
    every user, root included); the file must exist. In a read-only cache :meth:`get` serves
    hits and :meth:`put` stores nothing and returns ``False``. When the directory is not
    writable either, SQLite cannot make the ``-shm`` file a WAL database is read with, and
    the file is read as ``immutable``: SQLite then assumes that nobody changes it during the
    run (only someone who can write that directory could).

    Raises :class:`~ragmeter.errors.JudgeCacheError` (an ``InvalidInputError``) for a file
    that is not a judge cache, or a path where none can be opened or created; :meth:`get`
    and ``len()`` raise it too for damage found later, when a page is read.
    """

    table: ClassVar[str] = "judge_calls"
    columns: ClassVar[tuple[str, ...]] = _COLUMNS
    create: ClassVar[str] = _CREATE
    what: ClassVar[str] = "judge cache"
    contents: ClassVar[str] = "cached judge verdicts; they will be asked for again"
    filename: ClassVar[str] = "judge-cache.sqlite"
    error: ClassVar[type[CacheFileError]] = JudgeCacheError

    def get(self, key: str) -> JudgeReply | None:
        """The cached reply for ``key``, or ``None``."""
        if not self._has_table:
            return None
        row = self._read(
            "SELECT text, input_tokens, output_tokens FROM judge_calls WHERE key = ?", (key,)
        )
        if row is None:
            return None
        return JudgeReply(text=row[0], input_tokens=row[1], output_tokens=row[2])

    def put(self, key: str, reply: JudgeReply) -> bool:
        """Store ``reply`` under ``key`` (last writer wins; replies for a key are equivalent).

        Returns ``False`` when nothing was stored: the cache is read-only, or the write
        failed (a lock held too long, a full disk, a file made read-only meanwhile).
        :attr:`write_problem` says why. The verdict itself is still good for the run; it
        only is not cached, so a re-run asks for it again.
        """
        if self.readonly:
            return False
        try:
            self._conn().execute(
                "INSERT OR REPLACE INTO judge_calls (key, text, input_tokens, output_tokens) "
                "VALUES (?, ?, ?, ?)",
                (key, reply.text, reply.input_tokens, reply.output_tokens),
            )
        except sqlite3.Error as exc:
            self.write_problem = f"writing failed: {exc}"
            return False
        return True


def _wal(conn: sqlite3.Connection, wait: float = 30.0) -> None:
    """Switch ``conn``'s database to WAL mode. Two processes opening a new cache at once
    (two Dask workers) may both try; SQLite answers the loser "database is locked" at once,
    without its busy timeout, so wait and try again (up to ``wait`` seconds)."""
    deadline = time.monotonic() + wait
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.25)
