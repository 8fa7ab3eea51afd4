"""The :class:`Registry`: runs saved in a SQLite file, found by reference, read back whole,
pinned as baselines, and judged comparable or not."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

from ragmeter._version import __version__
from ragmeter.errors import InvalidInputError
from ragmeter.registry._artifact import read_scores, write_scores
from ragmeter.registry._errors import RegistryError, RunNotFoundError
from ragmeter.registry._records import Comparability, RunRecord
from ragmeter.registry._refs import resolve
from ragmeter.registry._rows import (
    COLUMNS,
    git_state,
    judge_facts,
    metric_rows,
    pack,
    record_of,
    tags_of,
    unpack,
)
from ragmeter.registry._schema import connect
from ragmeter.report import (
    METRIC_DEFINITIONS,
    DatasetFingerprint,
    RagEvalReport,
    RetrievalEvalReport,
)

__all__ = ["DEFAULT_PATH", "ENV", "Registry"]

ENV = "RAGMETER_REGISTRY"
"""The environment variable naming the default registry file."""
DEFAULT_PATH = Path(".ragmeter") / "runs.sqlite"
"""The default registry, relative to the working directory."""
_RESERVED = ("latest", "pinned")

Report = RetrievalEvalReport | RagEvalReport


class Registry:
    """Saved runs in one SQLite file (``path``; default ``$RAGMETER_REGISTRY``, else
    ``./.ragmeter/runs.sqlite``, created on the first save), their scores files in
    ``scores/`` beside it.

    Many processes may save at once (WAL, a busy timeout, one short transaction per save);
    a save writes the scores file whole first and inserts the run's row after, so a killed
    process leaves no half-written run. ``read_only=True`` (or a file that cannot be
    written) lists, shows, loads and compares, and refuses to save.

    A run is found by a reference (:meth:`get`): its id or a unique prefix of it, a name
    (its newest run), ``"NAME~1"`` (the one before), ``"latest"``, ``"pinned"`` (the most
    recently pinned run) or ``"pinned:NAME"``.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, read_only: bool = False
    ) -> None:
        if path is None:
            path = os.environ.get(ENV) or DEFAULT_PATH
        self.path = Path(path).absolute()
        self.read_only = bool(read_only)
        self._conn: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"Registry({str(self.path)!r}{', read_only=True' if self.read_only else ''})"

    def __enter__(self) -> Registry:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database connection (it reopens when next needed)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def _writable(self) -> bool:
        if self.read_only:
            return False
        if self.path.exists():
            return os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)
        return True

    def _db(self, *, create: bool = False) -> sqlite3.Connection | None:
        """The connection (``None`` when the file does not exist and ``create`` is false)."""
        if self._conn is None:
            if not self.path.exists() and not create:
                return None
            self._conn = connect(self.path, read_only=not self._writable)
        return self._conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn a database error into a :class:`RegistryError` naming the file."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise RegistryError(f"the run registry {self.path} failed: {exc}") from None

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``: no deadlock between
        two writers), committed, or rolled back on any error."""
        with self._errors():
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # -- saving ---------------------------------------------------------------------------

    def save(
        self,
        report: Report,
        *,
        name: str,
        tags: Mapping[str, str] | Sequence[str] | None = None,
        note: str | None = None,
    ) -> RunRecord:
        """Save ``report`` as a run called ``name`` and return its :class:`RunRecord`.

        ``tags``: ``{key: value}`` or ``["key=value", "label"]``. Records the git commit
        and dirty flag of the working directory, the report's fingerprints, each metric's
        mean, 95% interval and n, the judge and its cost, and writes every per-query (per
        sample) score to ``scores/<run id>.jsonl.gz``.
        """
        if not isinstance(report, (RetrievalEvalReport, RagEvalReport)):
            raise InvalidInputError(
                f"Registry.save takes a RetrievalEvalReport or RagEvalReport, got "
                f"{type(report).__name__}"
            )
        _check_name(name)
        if not self._writable:
            raise RegistryError(
                f"the run registry {self.path} is read-only "
                f"({'opened with read_only=True' if self.read_only else 'no write permission'})"
                ": list, show, load and compare work; save to a writable registry"
            )
        tag_map = tags_of(tags)
        kind = "rag" if isinstance(report, RagEvalReport) else "retrieval"
        dataset = report.dataset_fingerprint
        config = report.config_fingerprint
        commit, dirty = git_state()
        model, prompt, tokens, cost = judge_facts(report)
        rows = metric_rows(report)
        ids = list(report.per_sample if isinstance(report, RagEvalReport) else report.per_query)
        conn = self._db(create=True)
        assert conn is not None
        rid = uuid.uuid4().hex[:12]
        relative = Path("scores") / f"{rid}.jsonl.gz"
        target = self.path.parent / relative
        sha = write_scores(report, target)
        created = datetime.now(timezone.utc)
        values = (
            rid, name, created.isoformat(), kind, json.dumps(tag_map), commit,
            None if dirty is None else int(dirty),
            None if dataset is None else json.dumps(dataset.to_dict()),
            None if dataset is None or not dataset.per_item else pack(dataset.per_item),
            json.dumps(config.to_dict()), __version__, METRIC_DEFINITIONS, model, prompt,
            tokens, cost, json.dumps({k: r.to_dict() for k, r in rows.items()}), pack(ids),
            relative.as_posix(), sha, note,
        )  # fmt: skip
        try:
            with self._transaction(conn):
                cursor = conn.execute(
                    "INSERT INTO runs (id, name, created, kind, tags, git_commit, git_dirty, "
                    "dataset, dataset_items, config, ragmeter_version, metric_definitions, "
                    "judge_model, judge_prompt_hash, tokens, cost, metrics, ids, scores_path, "
                    "scores_sha256, note) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    values,
                )
                seq = cursor.lastrowid
                conn.executemany(
                    "INSERT INTO run_tags (run_seq, key, value) VALUES (?, ?, ?)",
                    [(seq, k, v) for k, v in tag_map.items()],
                )
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        return self.get(rid)

    # -- finding --------------------------------------------------------------------------

    def runs(
        self, *, name: str | None = None, tag: str | None = None, limit: int | None = None
    ) -> list[RunRecord]:
        """The runs, newest first; only those called ``name``, or tagged ``tag``
        (``"key"``: any value, ``"key=value"``: that value), at most ``limit``."""
        where: list[str] = []
        args: list[Any] = []
        if name is not None:
            where.append("name = ?")
            args.append(name)
        if tag is not None:
            key, eq, value = tag.partition("=")
            where.append(
                "seq IN (SELECT run_seq FROM run_tags WHERE key = ?"
                + (" AND value = ?)" if eq else ")")
            )
            args.extend([key, value] if eq else [key])
        sql = f"SELECT {COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._records(sql, args)

    def _records(self, sql: str, args: Sequence[Any] = ()) -> list[RunRecord]:
        conn = self._db()
        if conn is None:
            return []
        with self._errors():
            rows = conn.execute(sql, list(args)).fetchall()
            tags: dict[int, dict[str, str]] = {row[0]: {} for row in rows}
            if 0 < len(rows) <= 500:
                marks = ",".join("?" * len(tags))
                found = conn.execute(
                    f"SELECT run_seq, key, value FROM run_tags WHERE run_seq IN ({marks}) "
                    "ORDER BY rowid",
                    list(tags),
                )
            else:  # many runs: read every tag (no limit on bound parameters to meet)
                found = conn.execute("SELECT run_seq, key, value FROM run_tags ORDER BY rowid")
            for seq, key, value in found:
                if seq in tags:
                    tags[seq][key] = value
            return [record_of(row, self.path.parent, tags[row[0]]) for row in rows]

    def get(self, ref: str) -> RunRecord:
        """The run ``ref`` names (see the class docstring); :class:`RunNotFoundError`
        naming the reference and the runs there are."""
        conn = self._db()
        if conn is None:
            raise RunNotFoundError(
                f"no run {ref!r}: the run registry {self.path} does not exist yet (save a "
                "report with report.save(name=...) or --save NAME)"
            )
        with self._errors():
            seq = resolve(conn, ref, self.path)
        return self._records(f"SELECT {COLUMNS} FROM runs WHERE seq = ?", [seq])[0]

    def _record(self, ref: str | RunRecord) -> RunRecord:
        return ref if isinstance(ref, RunRecord) else self.get(ref)

    def load_report(self, ref: str | RunRecord) -> Report:
        """The report of run ``ref`` with its per-query (per-sample) scores read back from
        its scores file (its sha256 checked), and its dataset fingerprint with per-item
        digests."""
        record = self._record(ref)
        data = read_scores(record.scores_path, record.scores_sha256)
        report: Report
        if record.kind == "rag":
            report = RagEvalReport.from_dict(data)
        else:
            report = RetrievalEvalReport.from_dict(data)
        dataset = self._dataset(record)
        if dataset is not None:
            report.set_dataset_fingerprint(dataset)
        return report

    def _blob(self, record: RunRecord, column: str) -> Any:
        conn = self._db()
        assert conn is not None
        with self._errors():
            row = conn.execute(f"SELECT {column} FROM runs WHERE id = ?", [record.id]).fetchone()
        return None if row is None else unpack(row[0])

    def _dataset(self, record: RunRecord) -> DatasetFingerprint | None:
        """``record.dataset`` with its per-item digests from the database."""
        if record.dataset is None:
            return None
        items = self._blob(record, "dataset_items") or {}
        d = record.dataset
        per_item = {str(k): (int(v[0]), str(v[1])) for k, v in items.items()}
        return DatasetFingerprint(d.kind, d.digest, d.items, d.entries, per_item)

    def scored_ids(self, ref: str | RunRecord) -> list[str]:
        """The ids run ``ref`` scored (its per-query or per-sample rows), in order."""
        return [str(i) for i in self._blob(self._record(ref), "ids") or []]

    # -- pins and removal -----------------------------------------------------------------

    def _write(self) -> sqlite3.Connection:
        if not self._writable:
            raise RegistryError(
                f"the run registry {self.path} is read-only: pin, unpin and rm need write access"
            )
        conn = self._db()
        if conn is None:
            raise RunNotFoundError(f"the run registry {self.path} does not exist yet")
        return conn

    def pin(self, ref: str) -> RunRecord:
        """Pin run ``ref`` as its name's baseline (unpinning that name's other run)."""
        record = self.get(ref)
        conn = self._write()
        now = datetime.now(timezone.utc).isoformat()
        with self._transaction(conn):
            conn.execute("UPDATE runs SET pinned_at = NULL WHERE name = ?", [record.name])
            conn.execute("UPDATE runs SET pinned_at = ? WHERE id = ?", [now, record.id])
        return self.get(record.id)

    def unpin(self, ref: str | None = None) -> None:
        """Unpin run ``ref`` (a run, or a name: its pinned run), or every run when
        ``None``."""
        conn = self._write()
        with self._errors():
            if ref is None:
                conn.execute("UPDATE runs SET pinned_at = NULL")
                return
            record = self.get(ref)
            named = record.name == ref or ref.startswith("pinned")
            column, value = ("name", record.name) if named else ("id", record.id)
            conn.execute(f"UPDATE runs SET pinned_at = NULL WHERE {column} = ?", [value])

    def rm(self, ref: str) -> RunRecord:
        """Remove run ``ref`` (its row, tags and scores file); returns what it was."""
        record = self.get(ref)
        conn = self._write()
        with self._transaction(conn):
            seq = conn.execute("SELECT seq FROM runs WHERE id = ?", [record.id]).fetchone()
            if seq is not None:
                conn.execute("DELETE FROM run_tags WHERE run_seq = ?", [seq[0]])
                conn.execute("DELETE FROM runs WHERE seq = ?", [seq[0]])
        record.scores_path.unlink(missing_ok=True)
        self.clean()
        return record

    def clean(self, *, older_than: float = 3600.0) -> list[Path]:
        """Remove what killed saves left in ``scores/``: scores files no run lists and
        temporary files, older than ``older_than`` seconds (a save in progress elsewhere
        is younger); the paths removed. :meth:`rm` calls it."""
        folder = self.path.parent / "scores"
        conn = self._db()
        if conn is None or not folder.is_dir() or not self._writable:
            return []
        with self._errors():
            listed = {Path(row[0]).name for row in conn.execute("SELECT scores_path FROM runs")}
        cutoff = time.time() - older_than
        removed: list[Path] = []
        for path in folder.iterdir():
            stale = path.name.endswith(".tmp") or path.name.endswith(".jsonl.gz")
            if stale and path.name not in listed:
                try:
                    if path.stat().st_mtime < cutoff:
                        path.unlink()
                        removed.append(path)
                except OSError:  # gone already, or not ours to remove
                    continue
        return removed

    # -- comparing ------------------------------------------------------------------------

    def comparability(self, a: str | RunRecord, b: str | RunRecord) -> Comparability:
        """Whether runs ``a`` and ``b`` compare like for like, and if not why (every
        difference of kind, dataset and config, in words), with the ids both scored."""
        ra, rb = self._record(a), self._record(b)
        reasons: list[str] = []
        if ra.kind != rb.kind:
            reasons.append(f"kind {ra.kind} vs {rb.kind}")
        da, db = self._dataset(ra), self._dataset(rb)
        if da is None or db is None:
            if (da is None) != (db is None):
                which = "a" if da is None else "b"
                reasons.append(f"run {which} has no dataset fingerprint (a report made by hand)")
        else:
            reasons.extend(da.differences(db))
        reasons.extend(ra.config.differences(rb.config))
        ids_a, ids_b = self.scored_ids(ra), self.scored_ids(rb)
        set_a, set_b = set(ids_a), set(ids_b)
        return Comparability(
            comparable=not reasons,
            reasons=reasons,
            common=[i for i in ids_a if i in set_b],
            only_a=[i for i in ids_a if i not in set_b],
            only_b=[i for i in ids_b if i not in set_a],
        )


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError(f"a run name must be a non-empty string, got {name!r}")
    if "~" in name or name in _RESERVED or name.startswith("pinned:"):
        raise InvalidInputError(
            f"run name {name!r} cannot be used: '~' and the names 'latest', 'pinned' and "
            "'pinned:...' are references (see Registry.get)"
        )
