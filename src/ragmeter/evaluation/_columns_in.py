"""Turn a columnar run (Arrow, pandas, polars, Parquet) into integer columns, checked by row.

A run table has one row per ``(query_id, doc_id, score)``. Its id columns become Arrow
dictionaries (interned once, by Arrow's hash tables, or read as dictionaries from Parquet), so
no Python string is made per row: each row is a dictionary index, and the scores a float64
column. Every refusal names the row (0-based, over the whole table) and the column, with the
words of :func:`ragmeter.io.arrow.run_from_arrow`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ragmeter.errors import InvalidInputError
from ragmeter.io.scores import require_pyarrow

T = TypeVar("T")

__all__ = [
    "RunColumns",
    "RunRows",
    "as_strings",
    "as_table",
    "check_parquet",
    "in_order",
    "is_path",
    "parquet_batches",
    "query_strings",
    "run_columns",
]


def is_path(value: object) -> bool:
    """Whether a run or qrels argument names a file (a ``str`` or path)."""
    return isinstance(value, (str, os.PathLike))


def check_parquet(path: Any, columns: Mapping[str, str], what: str) -> None:
    """Refuse a Parquet file that does not exist or lacks a column (before reading it)."""
    import pyarrow.parquet as pq

    where = Path(path)
    if not where.is_file():
        raise FileNotFoundError(2, f"{what} file not found", str(where))
    _check_names(pq.read_schema(where).names, columns, what)


READ_ROWS = 1 << 20
"""Rows of a Parquet file decoded at a time (a row group at a time when it is no bigger)."""


def parquet_batches(
    path: str | os.PathLike[str], columns: list[str], ids: str | None = None
) -> Iterator[Any]:
    """The record batches of some columns of a Parquet file, in row order, each at most
    :data:`READ_ROWS` rows or one row group; the ``ids`` column read as an Arrow dictionary
    when its pages are dictionary-encoded (a query id repeated on many rows: its indices are
    decoded, not a string per row).

    Arrow decodes a whole row group (``read_row_group``) at less CPU than record batches cut
    across row groups (a sixth, for row groups of 100k rows); row groups much bigger than
    ``READ_ROWS`` are read in batches, in this thread, so memory stays bounded. The others are
    decoded by :data:`READERS` worker threads, each with its own ``ParquetFile``, a row group
    each, while the caller uses the ones before (:func:`in_order`): Arrow decodes without the
    GIL, so on two cores decoding and scoring overlap, and memory holds a few row groups more.
    One thread per row group: Arrow's threaded decoding of a row group's string pages costs
    more CPU. Not memory-mapped: the pages read would count in the resident set until the file
    is closed. ``ParquetFile``, not ``read_table`` (which imports ``pyarrow.dataset``, and
    pandas with it).
    """
    import threading
    from functools import partial

    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as probe:
        meta = probe.metadata
        dictionary = [ids] if ids is not None and _dictionary_pages(meta, ids) else None
    files: list[Any] = []  # every ParquetFile opened, closed at the end
    local = threading.local()

    def opened() -> Any:
        parquet = getattr(local, "parquet", None)
        if parquet is None:
            parquet = local.parquet = pq.ParquetFile(path, read_dictionary=dictionary)
            files.append(parquet)
        return parquet

    def read_group(group: int) -> Any:
        return opened().read_row_group(group, columns=columns, use_threads=False)

    def big(group: int) -> bool:
        return bool(meta.row_group(group).num_rows > 4 * READ_ROWS)

    reader: Any = None
    try:
        for large, run in itertools.groupby(range(meta.num_row_groups), key=big):
            if large:
                for group in run:
                    yield from opened().iter_batches(
                        batch_size=READ_ROWS, row_groups=[group], columns=columns,
                        use_threads=False,
                    )  # fmt: skip
                continue
            reader = in_order([partial(read_group, g) for g in run], READERS)
            for table in reader:
                yield from table.to_batches()
    finally:
        if reader is not None:
            reader.close()  # waits for the workers
        for parquet in files:
            parquet.close()


READERS = 2
"""Row groups decoded at once, ahead of the caller (worker threads)."""


def in_order(tasks: list[Callable[[], T]], workers: int) -> Iterator[T]:
    """The results of ``tasks`` in their order, up to ``workers`` of them computed at once in
    worker threads, ahead of the caller. A task's exception is raised here, at its result;
    closing this generator early waits for the tasks under way and drops the rest.

    >>> list(in_order([lambda: 1, lambda: 2, lambda: 3], 2))
    [1, 2, 3]
    """
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    todo = iter(tasks)
    with ThreadPoolExecutor(workers, thread_name_prefix="ragmeter-read") as pool:
        running: deque[Future[T]] = deque(pool.submit(t) for t in itertools.islice(todo, workers))
        try:
            while running:
                result = running.popleft().result()
                running.extend(pool.submit(t) for t in itertools.islice(todo, 1))
                yield result
        finally:
            for future in running:
                future.cancel()


def _dictionary_pages(meta: Any, column: str) -> bool:
    """Whether a string column is dictionary-encoded in every row group of a file: under 4
    bytes a value before compression (a plain string takes its 4-byte length and its bytes)."""
    if meta.num_row_groups == 0:
        return False
    first = meta.row_group(0)
    where = [i for i in range(first.num_columns) if first.column(i).path_in_schema == column]
    if len(where) != 1:
        return False
    for group in range(meta.num_row_groups):
        chunk = meta.row_group(group).column(where[0])
        if (
            chunk.physical_type != "BYTE_ARRAY"
            or not chunk.has_dictionary_page
            or chunk.total_uncompressed_size >= 4 * chunk.num_values
        ):
            return False
    return True


class RunRows(Protocol):
    """What a message asks of a whole run: :class:`RunColumns`, or a file read again."""

    def first_query_ids(self, n: int) -> list[str]: ...

    def ranking(self, qid: str) -> list[str]: ...


def as_table(value: Any, columns: Mapping[str, str], what: str) -> Any:
    """``value`` as a ``pyarrow.Table`` with only the given columns (``role -> name``).

    Takes a ``pyarrow.Table`` or ``RecordBatch``, a pandas or polars ``DataFrame``, or the
    path of a Parquet file (its query id column read as a dictionary when the file stores
    it so: see :func:`parquet_batches`).
    """
    pa = require_pyarrow()
    names = list(columns.values())
    if is_path(value):
        path = Path(value)
        check_parquet(path, columns, what)
        batches = list(parquet_batches(path, names, columns.get("query_id")))
        if batches:
            return pa.Table.from_batches(batches)
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        return pa.table([pa.array([], schema.field(n).type) for n in names], names=names)
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


Strings = tuple[npt.NDArray[Any], Any]
"""An Arrow string array's offsets (int32 or int64, one more than its strings) and bytes."""


def strings_of(array: Any) -> Strings:
    """The buffers of a ``pyarrow`` ``string``/``large_string`` array (no copy)."""
    pa = require_pyarrow()
    wide = pa.types.is_large_string(array.type)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64 if wide else np.int32)
    data = array.buffers()[2]
    return offsets[array.offset : array.offset + len(array) + 1], (
        data if data is not None else b""
    )


def _queries_of(array: Any) -> Any:
    """A query id array's buffers: strings, or ``(int32 indices, strings)`` of a dictionary."""
    pa = require_pyarrow()
    if not pa.types.is_dictionary(array.type):
        return strings_of(array)
    indices = array.indices.to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(indices, dtype=np.int32), strings_of(array.dictionary)


def query_strings(column: Any) -> Any:
    """A query id column as :func:`as_strings` makes it, but a dictionary of strings kept as
    it is (its indices are what the kernel reads: no string per row)."""
    pa = require_pyarrow()
    kind = column.type
    if (
        pa.types.is_dictionary(kind)
        and (pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type))
        and all(
            c.dictionary.null_count == 0 and len(c.dictionary) < 2**31
            for c in getattr(column, "chunks", [column])
        )
    ):
        return column
    return as_strings(column)


@dataclass
class RunColumns:
    """A run as Arrow columns, chunk by chunk: query ids, doc ids (strings) and scores."""

    table: Any
    """The run: ``query_id`` (``string``, ``large_string`` or a dictionary of either),
    ``doc_id`` (``string`` or ``large_string``), ``score`` (``float64``), no nulls, in that
    order."""

    def chunks(self) -> list[tuple[Any, Strings, npt.NDArray[np.float64]]]:
        """Each record batch's buffers: what the columnar kernel reads (query ids as strings,
        or a dictionary's int32 indices and strings)."""
        return [
            (
                _queries_of(b.column(0)),
                strings_of(b.column(1)),
                b.column(2).to_numpy(zero_copy_only=True),
            )
            for b in self.table.to_batches()
            if b.num_rows
        ]

    def first_query_ids(self, n: int) -> list[str]:
        """The first ``n`` distinct query ids in row order."""
        import pyarrow.compute as pc

        seen: dict[str, None] = {}
        for batch in self.table.to_batches(max_chunksize=4096):
            for qid in pc.unique(as_strings(batch.column(0))).to_pylist():
                seen.setdefault(qid, None)
            if len(seen) >= n:
                break
        return list(seen)[:n]

    def ranking(self, qid: str) -> list[str]:
        """One query's doc ids in trec_eval's order (a message's examples; Python speed)."""
        import pyarrow.compute as pc

        rows = self.table.filter(pc.equal(as_strings(self.table.column(0)), qid))
        pairs = zip(rows.column(2).to_pylist(), rows.column(1).to_pylist(), strict=True)
        return [doc for _, doc in sorted(pairs, reverse=True)]


def first_true(mask: Any) -> int | None:
    """The first row where a boolean (chunked) array is true, or ``None``."""
    import pyarrow.compute as pc

    found = pc.index(mask, True).as_py()
    return None if found is None or found < 0 else int(found)


def id_problem(
    column: Any, name: str, what: str = "the run", offset: int = 0
) -> tuple[int, str] | None:
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
                f"{what} row {row + offset}, column {name!r}: an id must be a string (or an "
                "int), got None"
            )
    return None


def _score_problem(column: Any, name: str, offset: int = 0) -> tuple[Any, tuple[int, str] | None]:
    """The scores as float64, and the first null or non-finite one."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    kind = column.type
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
        raise InvalidInputError(
            f"the run column {name!r} holds {kind}; a score must be a finite number"
        )
    if kind == pa.float64() and column.null_count == 0:  # the usual column: one numpy pass
        chunks = getattr(column, "chunks", [column])
        if all(np.isfinite(c.to_numpy(zero_copy_only=True)).all() for c in chunks):
            return column, None
    floats = pc.cast(column, pa.float64(), safe=False)
    bad = pc.invert(pc.fill_null(pc.is_finite(floats), False))
    row = first_true(bad)
    if row is None:
        return floats, None
    value = column[row].as_py()
    return floats, (row, f"the run row {row + offset}, column {name!r}: a score must be a finite "
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


def as_strings(column: Any) -> Any:
    """An id column as ``string``/``large_string`` (ints as their digits, dictionaries and
    views decoded)."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = pc.cast(column, column.type.value_type)
    if pa.types.is_integer(column.type):
        return pc.cast(column, pa.string())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return column
    return pc.cast(column, pa.large_string())


def run_columns(table: Any, names: Mapping[str, str], offset: int = 0) -> RunColumns:
    """The columns of a run table (see :func:`as_table`), checked row by row (a message
    counts rows from ``offset``: where the table starts in the whole run).

    Raises :class:`InvalidInputError` for the first row (and, within it, the first of the
    query id, doc id and score columns) holding a null id or a missing, NaN or infinite score.
    """
    pa = require_pyarrow()
    qcol, dcol, scol = (table.column(names[role]) for role in ("query_id", "doc_id", "score"))
    problems = [
        id_problem(qcol, names["query_id"], offset=offset),
        id_problem(dcol, names["doc_id"], offset=offset),
    ]
    floats, score_problem = _score_problem(scol, names["score"], offset)
    if score_problem is not None:
        score_problem = (
            score_problem[0],
            score_problem[1] + where(table, names, score_problem[0]),
        )
    found = [p for p in [*problems, score_problem] if p is not None]
    if found:
        raise InvalidInputError(min(found, key=lambda p: p[0])[1])  # ties: query, doc, score
    columns = [query_strings(qcol), as_strings(dcol), floats]
    return RunColumns(pa.table(columns, names=["query_id", "doc_id", "score"]))
