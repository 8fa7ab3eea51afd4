"""A Parquet run scored block by block: memory bounded by a few blocks, not by the file.

:func:`stream_scores` reads a run file a row group at a time
(:func:`~ragmeter.evaluation._columns_in.parquet_batches`), gathers about :data:`BATCH_ROWS`
rows, cuts them after their last complete query (the rows of the query still being read wait
for the next block) and scores them with the columnar kernel, merging the per-query values. A
run whose queries are not each in one block of rows (an unsorted file) cannot be scored this
way: then the whole file is read and scored at once, with the same result. :class:`ParquetRun`
answers the few questions a message asks of the whole run (its first query ids, one query's
ranking) by reading it again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ragmeter.evaluation._columns_in import RunColumns, as_table, parquet_batches, run_columns
from ragmeter.evaluation._columns_out import column_scores, prepare_qrels
from ragmeter.evaluation.scoring import RunPlan
from ragmeter.metrics.columns import ColumnScores, SplitQueryError, outputs

__all__ = ["BATCH_ROWS", "ParquetRun", "stream_scores"]

BATCH_ROWS = 1 << 20
"""Rows scored at a time, at least (whole queries: the rows of a query cut at the end of a
block wait for the next)."""

_EXAMPLES = 4
"""Query ids a message shows (as :mod:`ragmeter.evaluation.scoring`)."""


class ParquetRun:
    """The run of a Parquet file, for the messages: read again when asked."""

    def __init__(self, path: str | os.PathLike[str], names: Mapping[str, str]) -> None:
        self.path, self.names = path, names
        self.first_ids: list[str] = []
        """The first distinct query ids, noted while the file was scored."""

    def _batches(self) -> Iterator[RunColumns]:
        import pyarrow as pa

        for batch in parquet_batches(self.path, list(self.names.values())):
            yield run_columns(pa.Table.from_batches([batch]), self.names)

    def first_query_ids(self, n: int) -> list[str]:
        if len(self.first_ids) >= n:
            return self.first_ids[:n]
        seen: dict[str, None] = {}
        for part in self._batches():
            seen.update(dict.fromkeys(part.first_query_ids(n)))
            if len(seen) >= n:
                break
        return list(seen)[:n]

    def ranking(self, qid: str) -> list[str]:
        rows: list[tuple[float, str]] = []
        import pyarrow.compute as pc

        for part in self._batches():
            table = part.table
            hit = table.filter(pc.equal(table.column(0), qid))
            rows += zip(hit.column(2).to_pylist(), hit.column(1).to_pylist(), strict=True)
        return [doc for _, doc in sorted(rows, reverse=True)]


def _blocks(path: str | os.PathLike[str], names: Mapping[str, str]) -> Iterator[tuple[Any, int]]:
    """``(table, offset)``: the file's rows in blocks of about :data:`BATCH_ROWS` rows or
    more, each ending with a complete query (the rows of the last query wait for the next).
    Query ids read as a dictionary stay one (the last query's rows are found by its index)."""
    import pyarrow as pa

    qname = names["query_id"]
    carry: list[Any] = []  # batches read and not scored yet
    held = offset = 0
    for batch in parquet_batches(path, list(names.values()), qname):
        carry.append(batch)
        held += batch.num_rows
        if held < BATCH_ROWS:
            continue
        table = pa.Table.from_batches(carry)
        cut = len(table) - _last_query_rows(table.column(qname))
        carry, held = table.slice(cut).to_batches(), len(table) - cut
        if cut:
            yield table.slice(0, cut), offset
            offset += cut
    if held:
        yield pa.Table.from_batches(carry), offset


def _last_query_rows(ids: Any) -> int:
    """How many rows at the end of an id column (chunked, not empty) hold its last id: by
    dictionary index in a dictionary chunk (a dictionary holding a value twice may count too
    few, and the kernel then finds the query split: the file is scored whole)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    last = ids[len(ids) - 1].as_py()
    count = 0
    for chunk in reversed(ids.chunks):
        if not len(chunk):
            continue
        if pa.types.is_dictionary(chunk.type):
            code = pc.index(chunk.dictionary, last).as_py()
            same = chunk.indices.to_numpy(zero_copy_only=False) == code
        else:
            same = pc.equal(chunk, pa.scalar(last, chunk.type)).to_numpy(zero_copy_only=False)
        if not same.all():
            return count + int(np.argmin(same[::-1]))
        count += len(chunk)
    return count


def stream_scores(
    path: str | os.PathLike[str], names: Mapping[str, str], plan: RunPlan
) -> tuple[ColumnScores, RunColumns | ParquetRun]:
    """The kernel's values for a Parquet run, read a batch at a time (see the module)."""
    prepared = prepare_qrels(plan)
    merged = outputs(len(plan.qrels), len(plan.keys))
    rows = ParquetRun(path, names)
    try:
        for table, offset in _blocks(path, names):
            columns = run_columns(table, names, offset)
            column_scores(columns, plan, prepared, merged)
            if len(rows.first_ids) < _EXAMPLES:
                ids = dict.fromkeys([*rows.first_ids, *columns.first_query_ids(_EXAMPLES)])
                rows.first_ids = list(ids)
    except SplitQueryError:  # a query in two places: read the file whole
        whole = run_columns(as_table(path, names, "the run"), names)
        return column_scores(whole, plan, prepared), whole
    return merged, rows
