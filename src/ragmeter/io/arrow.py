"""Parquet and Arrow in and out: samples streamed by record batch, runs and qrels as tables.

Needs pyarrow (``pip install 'ragmeter[parquet]'``); without it every function raises
:class:`~ragmeter.errors.MissingDependencyError` with that command, and ``import ragmeter``
never imports pyarrow.

* :func:`read_parquet` streams the samples of a Parquet file one record batch at a time
  (constant memory, like :func:`ragmeter.io.jsonl.read_jsonl`), straight into
  :func:`ragmeter.evaluate_rag`. Column names are :class:`~ragmeter.schema.RagSample` field
  names; rag-eval's names (``question``, ``answer``, ``context``, ``golden_documents``,
  ``retrieved``) work too, and other columns land in ``metadata``, as in JSONL. A null
  cell is an absent field. ``relevance`` may be a map or struct column. A row that does
  not validate raises :class:`~ragmeter.errors.DataFormatError` naming the file, the row
  (0-based, counted over the whole file) and the column; with ``skip_errors=True`` it is
  skipped and listed in ``reader.skipped`` as ``(row, message)``.
  :func:`samples_from_arrow` does the same for a ``pyarrow.Table`` or record batches.
* Per-sample and per-query scores are written to Parquet by
  :func:`ragmeter.io.scores.write_scores` and by the streamed evaluations
  (``per_sample="scores.parquet"``, ``per_query="scores.parquet"``).
* :func:`run_to_arrow`/:func:`run_from_arrow` and :func:`qrels_to_arrow`/
  :func:`qrels_from_arrow` convert runs and qrels to and from tables with the columns
  ``query_id``, ``doc_id`` and ``score`` (run, ranked in trec_eval's order when read) or
  ``relevance`` (qrels), the names ir_datasets uses; ids are strings, a run's ``score``
  must be finite and a qrels ``relevance`` a finite number with ``|grade| <= 2**53``, each
  refusal naming the row.

>>> import tempfile, pathlib
>>> import pyarrow as pa, pyarrow.parquet as pq
>>> path = pathlib.Path(tempfile.mkdtemp()) / "samples.parquet"
>>> pq.write_table(pa.table({"id": ["s1"], "question": ["q?"], "answer": ["Paris"],
...                          "context": [["Paris is in France."]]}), path)
>>> [(s.id, s.response, s.retrieved_contexts) for s in read_parquet(path)]
[('s1', 'Paris', ['Paris is in France.'])]
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ragmeter._types import MAX_GRADE
from ragmeter.errors import DataFormatError, InvalidInputError
from ragmeter.io._lines import Records
from ragmeter.io.scores import require_pyarrow
from ragmeter.io.trec import TREC_ORDERING, Run, scores_to_write
from ragmeter.schema import RAG_EVAL_ALIASES, RagSample

__all__ = [
    "ParquetReader",
    "qrels_from_arrow",
    "qrels_to_arrow",
    "read_parquet",
    "run_from_arrow",
    "run_to_arrow",
    "samples_from_arrow",
]

logger = logging.getLogger("ragmeter.io")
logger.addHandler(logging.NullHandler())

PathLike = str | os.PathLike[str]

_validate = RagSample.__pydantic_validator__.validate_python
_ALIAS_OF = {field: alias for alias, field in RAG_EVAL_ALIASES.items()}


class _RowError(Exception):
    """One row's problem (internal; surfaces as DataFormatError or a skipped entry)."""


def _map_columns(schema: Any) -> list[str]:
    pa = require_pyarrow()
    return [f.name for f in schema if pa.types.is_map(f.type)]


def _describe(exc: Exception, record: Mapping[str, Any]) -> str:
    """``column 'answer': Input should be a valid string; ...`` from a pydantic error."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return f"cannot read this row: {type(exc).__name__}: {exc}"
    parts = []
    for err in errors():
        loc = [str(p) for p in err.get("loc", ())]
        head = loc[0] if loc else ""
        column = head
        alias = _ALIAS_OF.get(head)
        if head not in record and alias is not None and alias in record:
            column = alias
        where = f"column {column!r}" if column else "the row"
        if len(loc) > 1:
            where += " at " + ".".join(loc[1:])
        parts.append(f"{where}: {err.get('msg')}")
    return "; ".join(parts)


def _sample(record: dict[str, Any], maps: list[str]) -> RagSample:
    data = {k: v for k, v in record.items() if v is not None}
    for name in maps:
        value = data.get(name)
        if isinstance(value, list):
            data[name] = dict(value)
    try:
        return _validate(data)  # type: ignore[no-any-return]
    except Exception as exc:  # pydantic.ValidationError or worse
        raise _RowError(_describe(exc, data)) from None


def samples_from_arrow(
    data: Any, *, source: str = "<arrow>", skipped: list[tuple[int, str]] | None = None
) -> Iterator[RagSample]:
    """Samples from a ``pyarrow.Table``, a ``RecordBatch`` or an iterable of record batches.

    Rows are validated one batch at a time (see the module docstring). A row that does not
    validate raises :class:`~ragmeter.errors.DataFormatError` naming ``source``, the row and
    the column, unless ``skipped`` is a list: then it is appended there as ``(row,
    message)`` and left out.
    """
    pa = require_pyarrow()
    if isinstance(data, pa.Table):
        batches: Iterable[Any] = data.to_batches()
    elif isinstance(data, pa.RecordBatch):
        batches = [data]
    else:
        batches = data
    index = 0
    for batch in batches:
        maps = _map_columns(batch.schema)
        for record in batch.to_pylist():
            try:
                sample = _sample(record, maps)
            except _RowError as exc:
                message = f"row {index}: {exc}"
                if skipped is None:
                    raise DataFormatError(message, path=source) from None
                skipped.append((index, str(exc)))
                logger.warning("%s: skipped %s", source, message)
                index += 1
                continue
            index += 1
            yield sample


class ParquetReader(Iterable[RagSample]):
    """A lazy, re-iterable stream of the samples in a Parquet file (see :func:`read_parquet`).

    ``skipped`` holds ``(row, message)`` for each row skipped during the latest iteration
    (only with ``skip_errors=True``); ``num_rows`` is the file's row count (from its
    footer, without reading the rows).
    """

    def __init__(
        self,
        path: PathLike,
        *,
        batch_size: int = 4096,
        skip_errors: bool = False,
        columns: list[str] | None = None,
    ) -> None:
        require_pyarrow()
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"Parquet file not found: {self.path}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInputError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.batch_size = batch_size
        self.skip_errors = bool(skip_errors)
        self.columns = list(columns) if columns is not None else None
        self.skipped: list[tuple[int, str]] = []

    def _file(self) -> Any:
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(self.path)
        except Exception as exc:  # pyarrow.ArrowInvalid: not a Parquet file
            raise DataFormatError(
                f"not a readable Parquet file ({exc})", path=str(self.path)
            ) from None

    @property
    def num_rows(self) -> int:
        """How many rows the file holds."""
        return int(self._file().metadata.num_rows)

    def __iter__(self) -> Iterator[RagSample]:
        self.skipped = []
        handle = self._file()
        try:
            batches = handle.iter_batches(batch_size=self.batch_size, columns=self.columns)
            yield from samples_from_arrow(
                batches, source=str(self.path), skipped=self.skipped if self.skip_errors else None
            )
        finally:
            handle.close()

    def __repr__(self) -> str:
        return f"ParquetReader({str(self.path)!r}, skip_errors={self.skip_errors})"


def read_parquet(
    path: PathLike,
    *,
    batch_size: int = 4096,
    skip_errors: bool = False,
    columns: list[str] | None = None,
) -> ParquetReader:
    """Stream the samples of a Parquet file, one record batch at a time (lazy; constant
    memory; see the module docstring). ``columns`` reads only those columns.

    Raises :class:`FileNotFoundError` when ``path`` is not a file, and, while iterating,
    :class:`~ragmeter.errors.DataFormatError` (``path: row N: column 'x': problem``) for a
    row that does not validate unless ``skip_errors`` is true.
    """
    return ParquetReader(path, batch_size=batch_size, skip_errors=skip_errors, columns=columns)


def _columns(table: Any, wanted: Mapping[str, str], what: str) -> dict[str, list[Any]]:
    pa = require_pyarrow()
    if not isinstance(table, (pa.Table, pa.RecordBatch)):
        raise InvalidInputError(
            f"{what} must be a pyarrow Table or RecordBatch, got {type(table).__name__}"
        )
    names = set(table.schema.names)
    out: dict[str, list[Any]] = {}
    for role, name in wanted.items():
        if name not in names:
            raise InvalidInputError(
                f"{what} has no column {name!r} (its columns: {', '.join(table.schema.names)}); "
                f"name the {role} column with {role}="
            )
        out[role] = table.column(name).to_pylist()
    return out


def _id(value: Any, row: int, column: str, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InvalidInputError(
        f"{what} row {row}, column {column!r}: an id must be a string (or an int), got {value!r}"
    )


def run_from_arrow(
    table: Any, *, query_id: str = "query_id", doc_id: str = "doc_id", score: str = "score"
) -> Run:
    """A :class:`~ragmeter.io.trec.Run` from a table with one row per (query, doc, score),
    each query ranked as :func:`ragmeter.read_trec_run` ranks a file (score descending, ties
    by doc id descending). Raises :class:`InvalidInputError` naming the row for a missing or
    non-finite score, an id that is not a string, or a doc listed twice for one query.

    >>> import pyarrow as pa
    >>> run_from_arrow(pa.table({"query_id": ["q", "q"], "doc_id": ["a", "b"],
    ...                          "score": [1.0, 2.0]}))
    {'q': ['b', 'a']}
    """
    cols = _columns(table, {"query_id": query_id, "doc_id": doc_id, "score": score}, "the run")
    scored: dict[str, dict[str, float]] = {}
    for row, (qid, doc, value) in enumerate(
        zip(cols["query_id"], cols["doc_id"], cols["score"], strict=True)
    ):
        q = _id(qid, row, query_id, "the run")
        d = _id(doc, row, doc_id, "the run")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise InvalidInputError(
                f"the run row {row}, column {score!r}: a score must be a finite number, got "
                f"{value!r} (query {q!r}, doc {d!r})"
            )
        docs = scored.setdefault(q, {})
        if d in docs:
            raise InvalidInputError(
                f"the run row {row}: doc {d!r} is listed twice for query {q!r}; a ranking "
                "lists each doc once"
            )
        docs[d] = float(value)
    run = Run(ordering=TREC_ORDERING, scores=scored)
    for qid, docs in scored.items():
        run[qid] = sorted(docs, key=lambda d: (docs[d], d), reverse=True)
    return run


def run_to_arrow(run: Mapping[str, list[str]]) -> Any:
    """A table ``query_id, doc_id, rank, score`` from a run as it is now (each query's docs
    in list order, rank ``1..n``), with the scores :func:`ragmeter.write_trec_run` writes:
    a :class:`~ragmeter.io.trec.Run`'s remembered scores while they still give a query's
    list order, else ``n - rank`` (see :meth:`~ragmeter.io.trec.Run.scores_to_write`), so
    :func:`run_from_arrow` reads back exactly these lists."""
    pa = require_pyarrow()
    qids: list[str] = []
    docs: list[str] = []
    ranks: list[int] = []
    values: list[float] = []
    for qid, ranked in run.items():
        n = len(ranked)
        given = scores_to_write(run, qid) or range(n, 0, -1)
        for i, (doc, value) in enumerate(zip(ranked, given, strict=True)):
            qids.append(str(qid))
            docs.append(str(doc))
            ranks.append(i + 1)
            values.append(float(value))
    return pa.table({"query_id": qids, "doc_id": docs, "rank": ranks, "score": values})


def qrels_from_arrow(
    table: Any,
    *,
    query_id: str = "query_id",
    doc_id: str = "doc_id",
    relevance: str = "relevance",
) -> Records[dict[str, float]]:
    """Qrels ``{query_id: {doc_id: grade}}`` from a table with one row per judgement.

    Raises :class:`InvalidInputError` naming the row for a grade that is not a finite number
    with ``|grade| <= 2**53``, an id that is not a string, or a doc judged twice with two
    grades (an identical repeat is kept once and counted in ``warnings``).

    >>> import pyarrow as pa
    >>> qrels_from_arrow(pa.table({"query_id": ["q"], "doc_id": ["a"], "relevance": [2]}))
    {'q': {'a': 2}}
    """
    cols = _columns(
        table, {"query_id": query_id, "doc_id": doc_id, "relevance": relevance}, "the qrels"
    )
    qrels: dict[str, dict[str, float]] = {}
    first: dict[tuple[str, str], int] = {}
    repeats = 0
    rows = zip(cols["query_id"], cols["doc_id"], cols["relevance"], strict=True)
    for row, (qid, doc, grade) in enumerate(rows):
        q = _id(qid, row, query_id, "the qrels")
        d = _id(doc, row, doc_id, "the qrels")
        if (
            isinstance(grade, bool)
            or not isinstance(grade, (int, float))
            or not -MAX_GRADE <= grade <= MAX_GRADE
        ):
            raise InvalidInputError(
                f"the qrels row {row}, column {relevance!r}: a grade must be a finite number "
                f"with |grade| <= 2**53, got {grade!r} (query {q!r}, doc {d!r})"
            )
        judgements = qrels.setdefault(q, {})
        if d in judgements:
            if judgements[d] != grade:
                raise InvalidInputError(
                    f"the qrels row {row}: doc {d!r} is judged twice for query {q!r}, with "
                    f"grades {judgements[d]} (row {first[(q, d)]}) and {grade}; keep one"
                )
            repeats += 1
            continue
        judgements[d] = grade
        first[(q, d)] = row
    notes = (
        [
            f"{repeats} qrels row(s) repeat an earlier judgement with the same grade; each was "
            "counted once"
        ]
        if repeats
        else []
    )
    return Records(qrels, source="<arrow>", warnings=notes)


def qrels_to_arrow(qrels: Mapping[str, Mapping[str, float]]) -> Any:
    """A table ``query_id, doc_id, relevance`` from qrels."""
    pa = require_pyarrow()
    qids: list[str] = []
    docs: list[str] = []
    grades: list[float] = []
    for qid, judgements in qrels.items():
        for doc, grade in judgements.items():
            qids.append(str(qid))
            docs.append(str(doc))
            grades.append(grade)
    return pa.table({"query_id": qids, "doc_id": docs, "relevance": grades})
