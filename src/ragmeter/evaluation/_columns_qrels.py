"""Qrels read from a table as columns, checked at Arrow speed, each query's dict made on demand.

:func:`qrels_columns` reads a table ``query_id, doc_id, relevance`` as
:func:`ragmeter.io.arrow.qrels_from_arrow` does (the same checks, refusals and notes, the same
queries in the same order with the same judgements), without a Python object per row: the
result, :class:`ColumnQrels`, is a ``{query_id: {doc_id: grade}}`` mapping whose inner dicts
are built only when a query is looked up (a missing query, a message), while the columnar
kernel reads its flat arrays.

Qrels as usually written, each query's rows in one block and no doc judged twice for a query,
are read without an Arrow hash table over the rows: the blocks are found by comparing each
row with the one before it, and the absence of a repeated judgement is proven by 64-bit keys
(:mod:`ragmeter.evaluation._columns_keys`); the columns are then used as they are. Other qrels
(interleaved queries, a repeat, or a collision of keys) are read through Arrow dictionaries and
sorted, which finds and names every repeat.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ragmeter._types import MAX_GRADE
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation._columns_in import (
    as_strings,
    encoded,
    first_true,
    id_problem,
    strings_of,
    where,
)
from ragmeter.evaluation._columns_keys import STEP, block_starts, may_repeat
from ragmeter.io.scores import require_pyarrow
from ragmeter.metrics.columns import repeats_within

__all__ = ["ColumnQrels", "qrels_columns"]

_SCANS = 8
"""Queries looked up by scanning the ids before a dict of them all is made."""


class ColumnQrels(Mapping[str, Mapping[str, float]]):
    """Qrels as flat columns in qrels order; a mapping ``{query_id: {doc_id: grade}}``.

    Query ``i`` (``ids[i]``) judges ``docs[starts[i]:starts[i + 1]]`` with those ``grades``,
    in the order of their rows. ``warnings`` and ``source`` are those of a
    :class:`~ragmeter.io.Records` (read notes the report carries).
    """

    def __init__(self, ids: Any, starts: npt.NDArray[np.int64], docs: Any, grades: Any) -> None:
        self.id_array = ids
        """The query ids (a ``pyarrow.large_string`` array)."""
        self.ids: list[str] = [str(x) for x in ids.to_pylist()]
        self.starts = starts
        self.docs = docs
        """The judged doc ids (a ``pyarrow`` ``string`` or ``large_string`` array or chunked
        array)."""
        self.grades = grades
        """The grades (a numpy array, int64 or float64 as the column was)."""
        self._position: dict[str, int] | None = None
        self._lookups = 0
        self.source = "<arrow>"
        self.warnings: list[str] = []

    @property
    def position(self) -> dict[str, int]:
        """Each query's place in ``ids`` (made when it is first asked for)."""
        if self._position is None:
            self._position = dict(zip(self.ids, range(len(self.ids)), strict=True))
        return self._position

    def _find(self, qid: str) -> int:
        """A query's place: the first few looked up (a report's note reads the first
        queries) by scanning ``ids``, later ones through :attr:`position`."""
        self._lookups += 1
        if self._position is None and self._lookups <= _SCANS:
            try:
                return self.ids.index(qid)
            except ValueError:
                raise KeyError(qid) from None
        return self.position[qid]

    def __getitem__(self, qid: str) -> Mapping[str, float]:
        i = self._find(qid)
        lo, hi = int(self.starts[i]), int(self.starts[i + 1])
        docs = self.docs.slice(lo, hi - lo).to_pylist()
        return dict(zip(docs, self.grades[lo:hi].tolist(), strict=True))

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


def _grade_problem(table: Any, names: Mapping[str, str]) -> tuple[Any, tuple[int, str] | None]:
    """The grades as numpy (int64 or float64) and the first that is not a finite number."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    name = names["relevance"]
    column = table.column(name)
    kind = column.type
    if not (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
        raise InvalidInputError(
            f"the qrels column {name!r} holds {kind}; a grade must be a finite number with "
            "|grade| <= 2**53"
        )
    target = pa.float64() if pa.types.is_floating(kind) else pa.int64()
    values = pc.cast(column, target)
    nulls = first_true(pc.is_null(values)) if values.null_count else None
    if nulls is not None:
        values = values.fill_null(0)
    grades = values.to_numpy()  # (pa.scalar and its kin import pandas)
    limit = int(MAX_GRADE) if target == pa.int64() else MAX_GRADE
    first = None
    for lo in range(0, len(grades), STEP):  # a block at a time: small temporaries, reused
        part = grades[lo : lo + STEP]
        outside = np.flatnonzero(~((part >= -limit) & (part <= limit)))  # NaN: outside
        if len(outside):
            first = lo + int(outside[0])
            break
    rows = [r for r in (nulls, first) if r is not None]
    if not rows:
        return grades, None
    row = min(rows)
    message = (
        f"the qrels row {row}, column {name!r}: a grade must be a finite number with "
        f"|grade| <= 2**53, got {column[row].as_py()!r}{where(table, names, row)}"
    )
    return grades, (row, message)


def _first_seen(indices: npt.NDArray[np.int64], n: int) -> npt.NDArray[np.int64]:
    """Each dictionary entry's rank by its first row (entries never seen come last)."""
    first = np.full(n, len(indices), dtype=np.int64)
    np.minimum.at(first, indices, np.arange(len(indices), dtype=np.int64))
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(n)
    return rank


def qrels_columns(table: Any, names: Mapping[str, str]) -> ColumnQrels:
    """Read a qrels table (columns named by ``names``) as :func:`qrels_from_arrow` reads it.

    Raises :class:`InvalidInputError` naming the row for a null id, a grade that is not a
    finite number with ``|grade| <= 2**53``, and a doc judged twice with two grades; an
    identical repeat is kept once and counted in ``warnings``.
    """
    qcol, dcol = table.column(names["query_id"]), table.column(names["doc_id"])
    problems = [
        id_problem(qcol, names["query_id"], "the qrels"),
        id_problem(dcol, names["doc_id"], "the qrels"),
    ]
    grades, grade_problem = _grade_problem(table, names)
    found = [p for p in [*problems, grade_problem] if p is not None]
    if found:
        row, message = min(found, key=lambda p: p[0])
        if row:  # a doc judged twice with two grades before it is named first
            qrels_columns(table.slice(0, row), names)
        raise InvalidInputError(message)
    grouped = _grouped(qcol, dcol, grades)
    if grouped is not None:
        return grouped
    qchunks, qids = encoded(qcol)
    dchunks, dids = encoded(dcol)
    q = np.concatenate([*qchunks, np.empty(0, np.int32)]).astype(np.int64)
    d = np.concatenate([*dchunks, np.empty(0, np.int32)]).astype(np.int64)
    qrank = _first_seen(q, len(qids))[q]
    keep, notes = _drop_repeats(table, names, qrank, d, grades)
    kept = np.flatnonzero(keep)
    kept = kept[np.argsort(qrank[kept], kind="stable")]  # by query; docs in row order
    counts = np.bincount(qrank[kept], minlength=len(qids))
    present = counts > 0
    starts = np.concatenate([[0], np.cumsum(counts[present])]).astype(np.int64)
    by_rank = np.argsort(_first_seen(q, len(qids)))
    out = ColumnQrels(qids.take(by_rank[present]), starts, dids.take(d[kept]), grades[kept])
    out.warnings = notes
    return out


def _grouped(qcol: Any, dcol: Any, grades: Any) -> ColumnQrels | None:
    """The qrels read without hashing an id per row in an Arrow table, when each query's rows
    are one block and no query judges a doc twice (a qrels file as usually written); else
    ``None``, and the general reading (which finds and names the repeats) is needed."""
    import pyarrow as pa

    kind = qcol.type.value_type if pa.types.is_dictionary(qcol.type) else qcol.type
    if kind == qcol.type or not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        qcol = as_strings(qcol)  # a dictionary of strings is read by its indices
    heads, ids = block_starts(qcol)
    out = ColumnQrels(ids, np.append(heads, len(qcol)).astype(np.int64), None, grades)
    if len(set(out.ids)) < len(out.ids):  # a query in two blocks
        return None
    docs = as_strings(dcol)
    exact = repeats_within([strings_of(c) for c in getattr(docs, "chunks", [docs])], heads)
    if exact if exact is not None else may_repeat(docs, heads):
        return None
    out.docs = docs  # its chunks as they are (the kernel reads them in parts: no copy)
    return out


def _drop_repeats(
    table: Any, names: Mapping[str, str], qrank: Any, d: Any, grades: Any
) -> tuple[npt.NDArray[np.bool_], list[str]]:
    """Rows to keep (a repeated judgement with the same grade is dropped, and noted); a
    different grade for a doc judged before raises, naming the first such row."""
    n = len(d)
    keep = np.ones(n, dtype=bool)
    if n < 2:
        return keep, []
    order = np.lexsort((np.arange(n), d, qrank))  # repeats of a pair side by side
    sq, sd = qrank[order], d[order]
    start = np.r_[True, (sq[1:] != sq[:-1]) | (sd[1:] != sd[:-1])]
    if start.all():
        return keep, []
    first_of = order[np.maximum.accumulate(np.where(start, np.arange(n), 0))]
    rows = order[~start]
    firsts = first_of[~start]
    differ = grades[rows] != grades[firsts]
    if differ.any():
        bad = int(np.argmin(np.where(differ, rows, n)))
        _twice(table, names, int(rows[bad]), int(firsts[bad]), grades)
    keep[rows] = False
    note = (
        f"{len(rows)} qrels row(s) repeat an earlier judgement with the same grade; each was "
        "counted once"
    )
    return keep, [note]


def _twice(table: Any, names: Mapping[str, str], row: int, first: int, grades: Any) -> None:
    """Refuse a doc judged twice with two grades (the later row named, as qrels_from_arrow)."""
    q, d = (str(table.column(names[r])[row].as_py()) for r in ("query_id", "doc_id"))
    raise InvalidInputError(
        f"the qrels row {row}: doc {d!r} is judged twice for query {q!r}, with grades "
        f"{grades[first].item()} (row {first}) and {grades[row].item()}; keep one"
    )
