"""Turn a columnar run (Arrow, pandas, polars, Parquet) into integer columns, checked by row.

A run table has one row per ``(query_id, doc_id, score)``. Its id columns become Arrow
dictionaries (interned once, by Arrow's hash tables, or read as dictionaries from Parquet), so
no Python string is made per row: each row is a dictionary index, and the scores a float64
column. Every refusal names the row (0-based, over the whole table) and the column, with the
words of :func:`ragmeter.io.arrow.run_from_arrow`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragmeter.errors import InvalidInputError
from ragmeter.io.scores import require_pyarrow

__all__ = ["RunColumns", "as_table", "run_columns"]


def _is_path(value: object) -> bool:
    return isinstance(value, (str, os.PathLike))


def as_table(value: Any, columns: Mapping[str, str], what: str) -> Any:
    """``value`` as a ``pyarrow.Table`` with only the given columns (``role -> name``).

    Takes a ``pyarrow.Table`` or ``RecordBatch``, a pandas or polars ``DataFrame``, or the
    path of a Parquet file (its id columns read as dictionaries: no string per row).
    """
    pa = require_pyarrow()
    names = list(columns.values())
    if _is_path(value):
        import pyarrow.parquet as pq

        path = Path(value)
        if not path.is_file():
            raise FileNotFoundError(2, f"{what} file not found", str(path))
        schema = pq.read_schema(path)
        _check_names(schema.names, columns, what)
        ids = [n for n in names if pa.types.is_string(schema.field(n).type)
               or pa.types.is_large_string(schema.field(n).type)]  # fmt: skip
        return pq.read_table(path, columns=names, read_dictionary=ids)
    module = type(value).__module__.split(".", 1)[0]
    if isinstance(value, pa.RecordBatch):
        value = pa.Table.from_batches([value])
    elif module == "pandas" and hasattr(value, "columns"):
        _check_names([str(c) for c in value.columns], columns, what)
        value = pa.Table.from_pandas(value[names], preserve_index=False)
    elif module == "polars" and hasattr(value, "to_arrow"):
        _check_names(list(value.columns), columns, what)
        value = value.select(names).to_arrow()
    if not isinstance(value, pa.Table):
        raise InvalidInputError(
            f"{what} must be a pyarrow Table or RecordBatch, a pandas or polars DataFrame, or "
            f"the path of a Parquet file; got {type(value).__name__}"
        )
    _check_names(value.schema.names, columns, what)
    return value.select(names)


def _check_names(present: list[str], columns: Mapping[str, str], what: str) -> None:
    for role, name in columns.items():
        if name not in present:
            raise InvalidInputError(
                f"{what} has no column {name!r} (its columns: {', '.join(map(str, present))}); "
                f"name the {role} column with {role}="
            )


@dataclass
class RunColumns:
    """A run as integer columns: per chunk, each row's query and doc dictionary index."""

    queries: list[npt.NDArray[np.int32]]
    """Each row's index in :attr:`query_ids`, chunk by chunk."""
    query_ids: Any
    """The distinct query ids (a ``pyarrow.large_string`` array)."""
    docs: list[npt.NDArray[np.int32]]
    """Each row's index in :attr:`doc_ids`, chunk by chunk."""
    doc_ids: Any
    """The distinct doc ids (a ``pyarrow.large_string`` array)."""
    scores: list[npt.NDArray[np.float64]]

    def string_buffers(self) -> tuple[npt.NDArray[np.int64], Any]:
        """The doc dictionary's Arrow ``large_string`` offsets (int64) and UTF-8 bytes."""
        arr = self.doc_ids
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)
        offsets = offsets[arr.offset : arr.offset + len(arr) + 1]
        data = arr.buffers()[2]
        return offsets, (data if data is not None else b"")

    def first_query_ids(self, n: int) -> list[str]:
        """The first ``n`` distinct query ids in row order."""
        seen: dict[int, None] = {}
        for chunk in self.queries:
            if len(seen) >= n:
                break
            uniq, first = np.unique(chunk, return_index=True)
            for i in uniq[np.argsort(first)].tolist():
                seen.setdefault(i, None)
        picked = list(seen)[:n]
        return [str(s) for s in self.query_ids.take(picked).to_pylist()] if picked else []

    def ranking(self, query: int) -> list[str]:
        """One query's doc ids in trec_eval's order (a message's examples; Python speed)."""
        rows: list[tuple[float, str]] = []
        for q, d, s in zip(self.queries, self.docs, self.scores, strict=True):
            hit = np.flatnonzero(q == query)
            if len(hit):
                ids = self.doc_ids.take(d[hit]).to_pylist()
                rows.extend(zip(s[hit].tolist(), ids, strict=True))
        return [doc for _, doc in sorted(rows, reverse=True)]


def first_true(mask: Any) -> int | None:
    """The first row where a boolean (chunked) array is true, or ``None``."""
    import pyarrow.compute as pc

    found = pc.index(mask, True).as_py()
    return None if found is None or found < 0 else int(found)


def id_problem(column: Any, name: str, what: str = "the run") -> tuple[int, str] | None:
    """``(row, message)`` of the first null id, else ``None``; a bad id type raises."""
    pa = require_pyarrow()
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if not (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_string_view(kind)
        or pa.types.is_integer(kind)
    ):
        raise InvalidInputError(
            f"{what} column {name!r} holds {kind}; ids must be strings (or ints, read as "
            "their digits)"
        )
    if column.null_count:
        import pyarrow.compute as pc

        row = first_true(pc.is_null(column))
        if row is not None:
            return row, (
                f"{what} row {row}, column {name!r}: an id must be a string (or an int), got None"
            )
    return None


def _score_problem(column: Any, name: str) -> tuple[Any, tuple[int, str] | None]:
    """The scores as float64, and the first null or non-finite one."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    kind = column.type
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
        raise InvalidInputError(
            f"the run column {name!r} holds {kind}; a score must be a finite number"
        )
    floats = pc.cast(column, pa.float64(), safe=False)
    bad = pc.invert(pc.fill_null(pc.is_finite(floats), False))
    row = first_true(bad)
    if row is None:
        return floats, None
    value = column[row].as_py()
    return floats, (row, f"the run row {row}, column {name!r}: a score must be a finite "
                         f"number, got {value!r}")  # fmt: skip


def where(table: Any, names: Mapping[str, str], row: int) -> str:
    """`` (query 'q', doc 'd')``: the ids of a row, as a message names them."""
    q, d = (table.column(names[role])[row].as_py() for role in ("query_id", "doc_id"))
    return f" (query {str(q)!r}, doc {str(d)!r})"


def _address(array: Any) -> tuple[int, ...]:
    """Where an array's buffers are (chunks decoded together share their dictionary)."""
    return (array.offset, len(array), *(b.address if b is not None else 0 for b in array.buffers()))


def encoded(column: Any) -> tuple[list[npt.NDArray[np.int32]], Any]:
    """A column's rows as int32 indices per chunk, and its distinct values (large_string)."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    if not pa.types.is_dictionary(column.type):
        if pa.types.is_integer(column.type):
            column = pc.cast(column, pa.string())
        column = pc.dictionary_encode(column)
    elif not pa.types.is_string(column.type.value_type) and not pa.types.is_large_string(
        column.type.value_type
    ):
        return encoded(pc.cast(column, column.type.value_type))
    chunks = [c for c in column.chunks if len(c)]
    if len({_address(c.dictionary) for c in chunks}) > 1:  # else one dictionary, shared
        chunks = [c for c in column.unify_dictionaries().chunks if len(c)]
    if not chunks:
        return [], pa.array([], pa.large_string())
    values = chunks[0].dictionary.cast(pa.large_string())
    indices = [
        np.ascontiguousarray(c.indices.to_numpy(zero_copy_only=False), dtype=np.int32)
        for c in chunks
    ]
    return indices, values


def run_columns(table: Any, names: Mapping[str, str]) -> RunColumns:
    """The integer columns of a run table (see :func:`as_table`), checked row by row.

    Raises :class:`InvalidInputError` for the first row (and, within it, the first of the
    query id, doc id and score columns) holding a null id or a missing, NaN or infinite score.
    """
    qcol, dcol, scol = (table.column(names[role]) for role in ("query_id", "doc_id", "score"))
    problems = [
        id_problem(qcol, names["query_id"]),
        id_problem(dcol, names["doc_id"]),
    ]
    floats, score_problem = _score_problem(scol, names["score"])
    if score_problem is not None:
        score_problem = (
            score_problem[0],
            score_problem[1] + where(table, names, score_problem[0]),
        )
    found = [p for p in [*problems, score_problem] if p is not None]
    if found:
        raise InvalidInputError(min(found, key=lambda p: p[0])[1])  # ties: query, doc, score
    queries, query_ids = encoded(qcol)
    docs, doc_ids = encoded(dcol)
    scores = [c.to_numpy(zero_copy_only=False) for c in floats.chunks if len(c)]
    return RunColumns(
        queries, query_ids, _rechunk(docs, queries), doc_ids, _rechunk(scores, queries)
    )


def _rechunk(arrays: list[Any], like: list[npt.NDArray[np.int32]]) -> list[Any]:
    """``arrays`` split at the chunk boundaries of ``like`` (columns may be chunked apart)."""
    if [len(a) for a in arrays] == [len(a) for a in like]:
        return arrays
    whole = np.concatenate(arrays) if arrays else np.empty(0)
    return np.split(whole, np.cumsum([len(a) for a in like])[:-1]) if like else []
