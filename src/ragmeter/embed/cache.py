"""A persistent, content-addressed cache of embeddings (SQLite), shared across processes.

The key is the SHA-256 of the embedder's identity (model and settings, as JSON with sorted
keys) and the exact text, so a re-run embeds nothing, and any change of model or settings
misses. The file is ``embed-cache.sqlite`` in the user cache directory by default
(``$RAGMETER_CACHE_DIR``, else ``$XDG_CACHE_HOME/ragmeter``, else ``~/.cache/ragmeter``),
next to the judge cache, and follows the judge cache's rules
(:class:`~ragmeter.judge.cache.SQLiteCache`): WAL journaling and a 30 s busy timeout (safe
for many writers: threads, processes, Dask workers), a file that is not an embedding cache
refused with an :class:`~ragmeter.errors.EmbedCacheError` naming it, a cache this user
cannot write opened read-only (hits served, nothing stored, :attr:`write_problem` says so).

A vector is stored as little-endian float64 bytes, so it comes back exactly as the model
gave it (as Python floats).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ragmeter.errors import CacheFileError, EmbedCacheError
from ragmeter.judge.cache import SQLiteCache, default_cache_path

__all__ = ["EMBED_CACHE_FILE", "EmbedCache", "default_embed_cache_path", "embed_key"]

EMBED_CACHE_FILE = "embed-cache.sqlite"

_COLUMNS = ("key", "model", "dim", "vector")
_CREATE = (
    "CREATE TABLE IF NOT EXISTS embeddings ("
    " key TEXT PRIMARY KEY, model TEXT, dim INTEGER NOT NULL, vector BLOB NOT NULL)"
)
_CHUNK = 500  # keys per SELECT ... IN (...): far below SQLite's variable limit


def _pack(vector: Sequence[float] | Any) -> bytes:
    """``vector`` (a list of floats or a numpy row) as little-endian float64 bytes."""
    if hasattr(vector, "astype"):  # a numpy row: its bytes in one call
        return bytes(vector.astype("<f8").tobytes())
    values = array("d", vector)
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CI
        values.byteswap()
    return values.tobytes()


def _unpack(blob: bytes) -> list[float]:
    """The vector :func:`_pack` made."""
    values = array("d")
    values.frombytes(blob)
    if sys.byteorder == "big":  # pragma: no cover
        values.byteswap()
    return values.tolist()


def default_embed_cache_path() -> Path:
    """Where the embedding cache lives when no path is given."""
    return default_cache_path(EMBED_CACHE_FILE)


def embed_key(identity: Mapping[str, Any], text: str) -> str:
    """The content address of one text's vector under one model identity.

    >>> k = embed_key({"model": "m"}, "hi")
    >>> k == embed_key({"model": "m"}, "hi"), len(k), k == embed_key({"model": "n"}, "hi")
    (True, 64, False)
    """
    payload = json.dumps(
        {"identity": identity, "text": text}, sort_keys=True, default=str, ensure_ascii=False
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class EmbedCache(SQLiteCache):
    """SQLite-backed ``key -> vector`` store; one connection per thread.

    ``EmbedCache(path=None, readonly=None)`` opens ``path`` (default:
    :func:`default_embed_cache_path`) as :class:`~ragmeter.judge.JudgeCache` opens its
    file. :meth:`get_many` reads, :meth:`put_many` writes many vectors in one transaction.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     cache = EmbedCache(os.path.join(d, "e.sqlite"))
    ...     cache.put_many({"k": [0.5, -1.0]}), cache.get_many(["k", "x"]), len(cache)
    ...     cache.close()
    (True, {'k': [0.5, -1.0]}, 1)
    """

    table: ClassVar[str] = "embeddings"
    columns: ClassVar[tuple[str, ...]] = _COLUMNS
    create: ClassVar[str] = _CREATE
    what: ClassVar[str] = "embedding cache"
    contents: ClassVar[str] = "cached embeddings; they will be computed again"
    filename: ClassVar[str] = EMBED_CACHE_FILE
    error: ClassVar[type[CacheFileError]] = EmbedCacheError

    def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]:
        """The cached vectors of ``keys`` (the keys it holds; the others are left out)."""
        if not self._has_table or not keys:
            return {}
        found: dict[str, list[float]] = {}
        conn = self._conn()
        for start in range(0, len(keys), _CHUNK):
            chunk = list(keys[start : start + _CHUNK])
            marks = ", ".join("?" * len(chunk))
            try:
                rows = conn.execute(
                    f"SELECT key, vector FROM embeddings WHERE key IN ({marks})", chunk
                ).fetchall()
            except sqlite3.Error as exc:
                raise self._error(exc) from None
            for key, blob in rows:
                found[str(key)] = _unpack(blob)
        return found

    def put_many(self, vectors: Mapping[str, Sequence[float] | Any], *, model: str = "") -> bool:
        """Store ``vectors`` (key -> vector) in one transaction (last writer wins; vectors
        for one key are equal).

        Returns ``False`` when nothing was stored: the cache is read-only, or the write
        failed (a lock held too long, a full disk); :attr:`write_problem` says why. The
        vectors are still good for the run; a re-run embeds them again.
        """
        if self.readonly:
            return False
        if not vectors:
            return True
        rows = [(key, model, len(vector), _pack(vector)) for key, vector in vectors.items()]
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT OR REPLACE INTO embeddings (key, model, dim, vector) "
                    "VALUES (?, ?, ?, ?)",
                    rows,
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self.write_problem = f"writing failed: {exc}"
            return False
        return True
