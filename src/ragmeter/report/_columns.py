"""Per-query scores kept as one flat array of doubles, each query's row made when asked for.

A run of a million queries scored by the compiled kernel has its values laid end to end
already (``width`` per query, the first ``len(keys)`` of them its metrics). Building a
``{key: score}`` dict per query while scoring cost about as much as the scoring itself and
most of the memory (a dict and a float object per value: about 1.5 kB a query, against
8 bytes a value here). :class:`ColumnRows` keeps the array and reads it as the mapping
``{query_id: {key: score}}``: a row is made when it is looked up or iterated over, a
column (one key over every query) straight from the array, and
:attr:`ragmeter.report.RetrievalEvalReport.per_query` turns it into the plain dict it has
always been the first time it is read.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence

from ragmeter._gc import paused_gc

__all__ = ["ColumnRows", "RowsBuilder"]

RowsBuilder = Callable[
    [list[str], "array[float]", int, tuple[str, ...], "list[int] | None"],
    dict[str, dict[str, float]],
]
"""What :meth:`ColumnRows.to_dict` hands its fields to when given one (the compiled
kernel's ``rows_dict``: the same dict, made in C): ``(ids, values, width, keys, order)``."""


class ColumnRows(Mapping[str, dict[str, float]]):
    """``{query_id: {key: score}}`` over a flat array: query ``ids[i]``'s values are
    ``values[p * width : p * width + len(keys)]`` with ``p = order[i]`` (``p = i`` when
    ``order`` is ``None``), one per key, in ``keys``' order; queries in ``ids``' order.
    ``build``, when given, makes :meth:`to_dict`'s dict from those (in C).

    >>> rows = ColumnRows(["q1", "q2"], array("d", [0.5, 1.0, 9.0, 0.25, 0.0, 9.0]), 3,
    ...                   ("p@1", "ndcg@1"))
    >>> dict(rows)
    {'q1': {'p@1': 0.5, 'ndcg@1': 1.0}, 'q2': {'p@1': 0.25, 'ndcg@1': 0.0}}
    >>> rows["q2"], rows.column("ndcg@1")
    ({'p@1': 0.25, 'ndcg@1': 0.0}, [1.0, 0.0])
    >>> ColumnRows(["q1", "q2"], array("d", [0.5, 1.0, 9.0, 0.25, 0.0, 9.0]), 3,
    ...            ("p@1",), order=[1, 0]).column("p@1")
    [0.25, 0.5]
    """

    __slots__ = ("_at", "_build", "_ids", "_keys", "_made", "_order", "_values", "_width")

    def __init__(
        self,
        ids: Sequence[str],
        values: array[float],
        width: int,
        keys: Sequence[str],
        *,
        order: Sequence[int] | None = None,
        build: RowsBuilder | None = None,
    ) -> None:
        if len(keys) > width or len(values) != width * len(ids):
            raise ValueError(
                f"ColumnRows: {len(values)} values do not hold {len(ids)} rows of width "
                f"{width} with {len(keys)} keys"
            )
        if order is not None and len(order) != len(ids):
            raise ValueError(f"ColumnRows: {len(order)} places for {len(ids)} ids")
        self._ids, self._values, self._width = ids, values, width
        self._keys = tuple(keys)
        self._order = order
        self._build = build
        self._at: dict[str, int] | None = None
        self._made: dict[str, dict[str, float]] | None = None

    @property
    def keys_in_order(self) -> tuple[str, ...]:
        """The keys of every row, in order."""
        return self._keys

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __contains__(self, qid: object) -> bool:
        return qid in self._index()

    def __getitem__(self, qid: str) -> dict[str, float]:
        return self._row(self._index()[qid])

    def _index(self) -> dict[str, int]:
        if self._at is None:
            self._at = {q: i for i, q in enumerate(self._ids)}
        return self._at

    def _place(self, i: int) -> int:
        return i if self._order is None else self._order[i]

    def _row(self, i: int) -> dict[str, float]:
        at = self._place(i) * self._width
        return dict(zip(self._keys, self._values[at : at + len(self._keys)], strict=True))

    def iter_rows(self) -> Iterator[tuple[str, dict[str, float]]]:
        """``(query_id, row)`` in order, each row made as it is reached (``items()`` without
        a lookup per query)."""
        keys, width, n = self._keys, self._width, len(self._keys)
        places = range(len(self._ids)) if self._order is None else self._order
        with memoryview(self._values) as values:  # a slice of it is a view, not a new array
            for qid, place in zip(self._ids, places, strict=True):
                at = place * width
                yield qid, dict(zip(keys, values[at : at + n], strict=True))

    def column(self, key: str) -> list[float]:
        """``key``'s score of every query, in order (read from the array, no row made)."""
        j = self._keys.index(key)
        column = self._values[j :: self._width].tolist()
        if self._order is None:
            return column
        return [column[p] for p in self._order]

    def to_dict(self) -> dict[str, dict[str, float]]:
        """Every row, as a plain dict, made once (the collector paused: a million new dicts
        would have it walk the whole heap again and again): every later call returns that
        same dict, so a report's ``to_dict()`` and its ``per_query`` share it."""
        if self._made is not None:
            return self._made
        build, ids, order = self._build, self._ids, self._order
        with paused_gc():
            if build is not None and type(ids) is list and (order is None or type(order) is list):
                self._made = build(ids, self._values, self._width, self._keys, order)
            else:
                self._made = dict(self.iter_rows())
        return self._made
