"""A persistent, content-addressed cache of judge calls (SQLite).

The key is the SHA-256 of the metric's name and version, the exact prompt messages, the
judge's identity (model and sampling settings) and the repeat index, so re-running an
evaluation costs nothing and gives the same numbers, while any change to prompt, model or
settings misses. The file lives in the user cache directory by default
(``$RAGMETER_CACHE_DIR``, else ``$XDG_CACHE_HOME/ragmeter``, else ``~/.cache/ragmeter``),
uses WAL journaling and a busy timeout, and is safe for concurrent writers (threads and
processes).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragmeter.judge.protocol import JudgeReply, Message

__all__ = ["JudgeCache", "cache_key", "default_cache_path"]


def default_cache_path() -> Path:
    """Where the judge cache lives when no path is given."""
    root = os.environ.get("RAGMETER_CACHE_DIR")
    if root:
        return Path(root) / "judge-cache.sqlite"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "ragmeter" / "judge-cache.sqlite"


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


class JudgeCache:
    """SQLite-backed ``key -> JudgeReply`` store; one connection per thread."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS judge_calls ("
                " key TEXT PRIMARY KEY, text TEXT NOT NULL,"
                " input_tokens INTEGER, output_tokens INTEGER)"
            )

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> JudgeReply | None:
        """The cached reply for ``key``, or ``None``."""
        row = (
            self._conn()
            .execute(
                "SELECT text, input_tokens, output_tokens FROM judge_calls WHERE key = ?", (key,)
            )
            .fetchone()
        )
        if row is None:
            return None
        return JudgeReply(text=row[0], input_tokens=row[1], output_tokens=row[2])

    def put(self, key: str, reply: JudgeReply) -> None:
        """Store ``reply`` under ``key`` (last writer wins; replies for a key are equivalent)."""
        self._conn().execute(
            "INSERT OR REPLACE INTO judge_calls (key, text, input_tokens, output_tokens) "
            "VALUES (?, ?, ?, ?)",
            (key, reply.text, reply.input_tokens, reply.output_tokens),
        )

    def __len__(self) -> int:
        row = self._conn().execute("SELECT COUNT(*) FROM judge_calls").fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
