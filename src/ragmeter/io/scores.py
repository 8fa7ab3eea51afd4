"""Per-sample and per-query scores written to a file as they are computed (JSONL or Parquet).

A streamed evaluation writes one row per sample (:func:`ragmeter.evaluate_rag` with
``per_sample="scores.jsonl"``) or per query (:func:`ragmeter.evaluate_run_file` with
``per_query="scores.parquet"``) instead of holding them. The format follows the suffix:

* ``.jsonl`` (``.jsonl.gz`` compressed): one JSON object per line, ``{"id": ..., "<key>":
  score or null, ..., "details": {...}}`` (``details`` only where a metric gave any, e.g.
  faithfulness' claims);
* ``.parquet`` (``.pq``; needs ``pip install 'ragmeter[parquet]'``): a column ``id``
  (string), one ``float64`` column per metric key (null where a metric did not apply) and,
  for samples, ``details`` (a JSON string or null), written a record batch at a time.

The file is written under a temporary name next to the target and renamed when the
evaluation finishes, so an interrupted or failed run leaves no half-written file behind.
:func:`write_scores` writes the per-item scores of a report already in memory;
:func:`read_scores` reads either format back as ``{id: {key: score}}``.

>>> import tempfile, pathlib
>>> from ragmeter.report import RagEvalReport
>>> path = pathlib.Path(tempfile.mkdtemp()) / "scores.jsonl"
>>> report = RagEvalReport(metrics={"token_f1": 0.5}, coverage={"token_f1": 1}, n_samples=2,
...                        per_sample={"a": {"token_f1": 0.5}, "b": {"token_f1": None}})
>>> write_scores(report, path)
2
>>> read_scores(path)
{'a': {'token_f1': 0.5}, 'b': {'token_f1': None}}
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, cast

from ragmeter.errors import DataFormatError, InvalidInputError, MissingDependencyError

__all__ = [
    "ScoreWriter",
    "open_score_writer",
    "read_scores",
    "removed_on_error",
    "score_format",
    "write_scores",
]

PathLike = str | os.PathLike[str]

Row = tuple[str, Mapping[str, float | None], Mapping[str, Any] | None]
"""One item's ``(id, {key: score or None}, details or None)``."""

_BATCH = 65536

_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
"""One encoder for every row (``json.dumps`` with options builds a new one per call)."""


def score_format(path: PathLike) -> str:
    """``"parquet"`` or ``"jsonl"`` from the file name; :class:`InvalidInputError` otherwise.

    >>> score_format("out/scores.parquet"), score_format("s.jsonl.gz")
    ('parquet', 'jsonl')
    """
    name = Path(path).name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        return "jsonl"
    raise InvalidInputError(
        f"cannot tell the format of score file {str(path)!r} from its name: end it with "
        ".jsonl, .jsonl.gz or .parquet"
    )


def require_pyarrow() -> Any:
    """Import pyarrow, or raise :class:`MissingDependencyError` with the pip command."""
    try:
        import pyarrow
    except ImportError:
        raise MissingDependencyError("pyarrow", "parquet") from None
    return pyarrow


class ScoreWriter:
    """Writes score rows to a temporary file and puts it in place on :meth:`finish`.

    ``keys`` are the metric keys (the columns, in order). :meth:`write` takes a block of
    rows; :meth:`drop` removes keys that turned out not to be reported (a metric that
    failed, or that measured nothing) before :meth:`finish` renames the file into place;
    :meth:`abort` deletes it. Use :func:`open_score_writer`.
    """

    def __init__(self, path: PathLike, keys: Sequence[str], *, details: bool = True) -> None:
        self.path = Path(path)
        self.format = score_format(path)
        self.keys = list(keys)
        self.details = details
        self.rows = 0
        self._dropped: set[str] = set()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.name}.partial")
        self._fh: IO[bytes] | None = None
        self._pq: Any = None
        self._schema: Any = None
        if self.format == "parquet":
            pa = require_pyarrow()
            import pyarrow.parquet as pq

            fields = [pa.field("id", pa.string(), nullable=False)]
            fields += [pa.field(k, pa.float64()) for k in self.keys]
            if details:
                fields.append(pa.field("details", pa.string()))
            self._schema = pa.schema(fields)
            self._pq = pq.ParquetWriter(self._tmp, self._schema)
        elif self.path.name.lower().endswith(".gz"):
            self._fh = cast("IO[bytes]", gzip.open(self._tmp, "wb"))  # noqa: SIM115
        else:
            self._fh = open(self._tmp, "wb")  # noqa: SIM115 - closed in finish/abort

    def write(self, rows: Iterable[Row]) -> None:
        """Write a block of ``(id, scores, details)`` rows."""
        if self._pq is not None:
            self._write_parquet(list(rows))
            return
        fh = self._fh
        if fh is None:
            raise InvalidInputError(f"score file {self.path} is closed")
        lines: list[str] = []
        for rid, scores, details in rows:
            record: dict[str, Any] = {"id": rid}
            record.update(scores)
            if details and self.details:
                record["details"] = details
            lines.append(_encode(record))
            self.rows += 1
        if lines:
            lines.append("")
            fh.write("\n".join(lines).encode("utf-8", "surrogatepass"))

    def _write_parquet(self, rows: list[Row]) -> None:
        if not rows:
            return
        pa = require_pyarrow()
        for begin in range(0, len(rows), _BATCH):
            part = rows[begin : begin + _BATCH]
            columns: dict[str, list[Any]] = {"id": [r[0] for r in part]}
            for key in self.keys:
                columns[key] = [r[1].get(key) for r in part]
            if self.details:
                columns["details"] = [_encode(r[2]) if r[2] else None for r in part]
            self._pq.write_batch(pa.RecordBatch.from_pydict(columns, schema=self._schema))
            self.rows += len(part)

    def drop(self, keys: Iterable[str]) -> None:
        """Leave ``keys`` out of the finished file."""
        self._dropped.update(k for k in keys if k in self.keys)

    def finish(self) -> Path:
        """Close the file, remove dropped keys, and rename it to :attr:`path`."""
        self._close()
        if self._dropped:
            _rewrite_without(self._tmp, self.format, self._dropped)
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        """Close and delete the temporary file (an evaluation that failed)."""
        try:
            self._close()
        finally:
            self._tmp.unlink(missing_ok=True)

    def _close(self) -> None:
        if self._pq is not None:
            self._pq.close()
            self._pq = None
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def open_score_writer(path: PathLike, keys: Sequence[str], *, details: bool = True) -> ScoreWriter:
    """A :class:`ScoreWriter` for ``path`` (format from its suffix, see :func:`score_format`).

    Raises :class:`InvalidInputError` for an unknown suffix and
    :class:`~ragmeter.errors.MissingDependencyError` for Parquet without pyarrow.
    """
    return ScoreWriter(path, keys, details=details)


def _rewrite_without(tmp: Path, fmt: str, dropped: set[str]) -> None:
    """Remove the ``dropped`` keys from a finished temporary score file, in place."""
    again = tmp.with_name(tmp.name + "2")
    if fmt == "parquet":
        require_pyarrow()
        import pyarrow.parquet as pq

        source = pq.ParquetFile(tmp)
        try:
            keep = [n for n in source.schema_arrow.names if n not in dropped]
            with pq.ParquetWriter(again, _select(source.schema_arrow, keep)) as writer:
                for batch in source.iter_batches(columns=keep):
                    writer.write_batch(batch)
        finally:
            source.close()
    else:
        opener: Any = gzip.open if tmp.name.endswith(".gz.partial") else open
        with opener(tmp, "rb") as src, opener(again, "wb") as dst:
            for line in src:
                record = json.loads(line)
                for key in dropped:
                    record.pop(key, None)
                dst.write(json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogatepass"))
                dst.write(b"\n")
    os.replace(again, tmp)


def _select(schema: Any, names: list[str]) -> Any:
    pa = require_pyarrow()
    return pa.schema([schema.field(n) for n in names])


def _report_rows(report: Any) -> tuple[list[str], Iterator[Row], bool]:
    rows = getattr(report, "per_sample", None)
    if rows is not None:
        details: Mapping[str, Any] = getattr(report, "details", {}) or {}
        items: Iterator[Row] = ((k, r, details.get(k)) for k, r in rows.items())
        return list(report.metrics), items, True
    per_query = getattr(report, "per_query", None)
    if per_query is None:
        raise InvalidInputError(
            "write_scores needs a RagEvalReport or a RetrievalEvalReport, got "
            f"{type(report).__name__}"
        )
    keys = list(dict.fromkeys(k for row in per_query.values() for k in row)) or list(report.metrics)
    return keys, ((k, r, None) for k, r in per_query.items()), False


@contextmanager
def removed_on_error(writer: ScoreWriter | None) -> Iterator[None]:
    """Run a block that writes to ``writer``; if it raises, the unfinished file is removed
    (:meth:`ScoreWriter.abort`) and the error goes on, so a score file is whole or absent.
    ``None`` (no file was asked for) leaves nothing to remove. Finishing is the caller's."""
    try:
        yield
    except BaseException:
        if writer is not None:
            writer.abort()
        raise


def write_scores(report: Any, path: PathLike) -> int:
    """Write a report's per-sample (or per-query) scores to ``path``; return the row count.

    The format follows the suffix (``.jsonl``, ``.jsonl.gz``, ``.parquet``), as the rows a
    streamed evaluation writes. A report that kept no per-item scores writes no rows.
    """
    keys, rows, details = _report_rows(report)
    writer = open_score_writer(path, keys, details=details)
    with removed_on_error(writer):
        block: list[Row] = []
        for row in rows:
            block.append(row)
            if len(block) >= _BATCH:
                writer.write(block)
                block = []
        writer.write(block)
    writer.finish()
    return writer.rows


def read_scores(path: PathLike) -> dict[str, dict[str, float | None]]:
    """Read a score file (either format) back as ``{id: {key: score or None}}``.

    ``details`` are left out. Raises :class:`~ragmeter.errors.DataFormatError` naming the
    file and line (or row) of a record without an ``id``.
    """
    where = str(path)
    out: dict[str, dict[str, float | None]] = {}
    if score_format(path) == "parquet":
        require_pyarrow()
        import pyarrow.parquet as pq

        index = 0
        for batch in pq.ParquetFile(path).iter_batches():
            for record in batch.to_pylist():
                rid = record.pop("id", None)
                if rid is None:
                    raise DataFormatError(f"row {index}: no 'id'", path=where)
                record.pop("details", None)
                out[str(rid)] = record
                index += 1
        return out
    opener: Any = gzip.open if where.endswith(".gz") else open
    with opener(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            rid = record.pop("id", None)
            if rid is None:
                raise DataFormatError("no 'id' in this score record", path=where, line=lineno)
            record.pop("details", None)
            out[str(rid)] = record
    return out
