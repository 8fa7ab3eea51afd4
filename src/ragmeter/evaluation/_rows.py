"""The per-query scores a run keeps, in columns: no Python object per query beyond its row.

A run of a million queries keeps a million metric dicts for ``report.per_query``; everything
else about a query is kept in flat columns (:class:`KeptRows`): its qrels position, its id,
and the kernel's values laid end to end, ``width`` per query (one ``array('d')`` once the
report is made). Those hold no container per query, so CPython's cyclic collector has
nothing new to walk (a dict of floats is never tracked, and an array of doubles holds no
objects at all), and each key's mean
is the exact sum of a column of the flat values (``math.fsum``'s, the same float whatever
order the queries came in) over their number. The report lists the queries in qrels order.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from ragmeter.report import ColumnRows, RowsBuilder

__all__ = ["KeptRows", "ValueRows", "order_keys"]


def order_keys(keys: Sequence[str], names: Sequence[str], ks: Sequence[int]) -> list[str]:
    """``keys`` in the order of the metric ``names``, each at its cut-offs then uncut.

    >>> order_keys(["map", "ndcg@1", "judged@1", "map@1"], ["ndcg", "map", "judged"], [1])
    ['ndcg@1', 'map@1', 'map', 'judged@1']
    """
    present = set(keys)
    ordered: list[str] = []
    for name in dict.fromkeys(names):
        for k in ks:
            key = f"{name}@{k}"
            if key in present:
                ordered.append(key)
        if name in present:
            ordered.append(name)
    return ordered


@dataclass
class KeptRows:
    """Every scored query of a run, column by column: ``positions[i]`` (its place in the
    qrels), ``ids[i]``, ``rows[i]`` (its metrics, as ``report.per_query`` shows them) and the
    kernel's values ``values[i * width : (i + 1) * width]`` (metrics then ``judged@k``).

    >>> kept = KeptRows(width=2)
    >>> kept.add(1, "q2", {"p@1": 0.5}, [0.5, 1.0])
    >>> kept.add(0, "q1", {"p@1": 0.0}, [0.0, 0.5])
    >>> kept.sort()
    >>> kept.ids, list(kept.columns(1, 2))
    (['q1', 'q2'], [[0.5], [1.0]])
    """

    width: int
    keys: tuple[str, ...] | None = None
    """The metric keys when every row is just the first ``len(keys)`` values under them
    (built-in metrics only): then no row is kept, the report reads them from ``values``
    (:class:`~ragmeter.report.ColumnRows`), and ``add`` ignores its ``row``."""
    positions: list[int] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    rows: list[dict[str, float]] = field(default_factory=list)
    values: list[float] | array[float] = field(default_factory=list)
    """A flat list while queries are added (``list.extend``: a copy of pointers); packed
    into an ``array('d')`` when the report is made (then no collector walks it)."""
    order: list[int] | None = None
    """Where each query's values sit in ``values``, in qrels order (``None``: in order)."""

    def add(self, position: int, qid: str, row: dict[str, float], values: list[float]) -> None:
        """Keep one query (``values``: the kernel's, ``width`` of them)."""
        self.positions.append(position)
        self.ids.append(qid)
        if self.keys is None:
            self.rows.append(row)
        self.values.extend(values)

    def extend(self, other: KeptRows) -> None:
        """Keep ``other``'s queries too (another partition of the run, not yet sorted)."""
        self.positions.extend(other.positions)
        self.ids.extend(other.ids)
        self.rows.extend(other.rows)
        self.values.extend(other.values)

    def sort(self) -> None:
        """Put the queries in qrels order (a run given in qrels order is left as it is; the
        flat values stay where they are, reached through ``order``)."""
        positions = self.positions
        if sorted(positions) == positions:  # distinct positions: already in qrels order
            self.order = None
            return
        order = sorted(range(len(positions)), key=positions.__getitem__)
        self.positions = [positions[i] for i in order]
        self.ids = [self.ids[i] for i in order]
        if self.keys is None:
            self.rows = [self.rows[i] for i in order]
        self.order = order

    def column_rows(self, build: RowsBuilder | None = None) -> ColumnRows:
        """The kept rows read from the packed ``values`` (for ``keys``' rows: see ``keys``);
        ``build`` makes their dict when it is asked for (:class:`ColumnRows`)."""
        if self.keys is None or not isinstance(self.values, array):
            raise ValueError("KeptRows.column_rows: the rows are kept as dicts, or not packed")
        return ColumnRows(
            self.ids, self.values, self.width, self.keys, order=self.order, build=build
        )

    def columns(self, start: int, stop: int) -> ValueRows:
        """Each query's kernel values ``start:stop``, in qrels order (a view, rows made on
        demand)."""
        return ValueRows(self, start, stop)


class ValueRows(Sequence[list[float]]):
    """Query ``i``'s kernel values ``start:stop`` as ``self[i]``, in qrels order, made when
    asked for (what :meth:`ragmeter.report.JudgedShare.set_rows` keeps for ``judged@k``)."""

    def __init__(self, kept: KeptRows, start: int, stop: int) -> None:
        self._kept, self._start, self._stop = kept, start, stop

    def __len__(self) -> int:
        return len(self._kept.ids)

    @overload
    def __getitem__(self, i: int) -> list[float]: ...

    @overload
    def __getitem__(self, i: slice) -> list[list[float]]: ...

    def __getitem__(self, i: int | slice) -> list[float] | list[list[float]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        kept = self._kept
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        at = (i if kept.order is None else kept.order[i]) * kept.width
        return list(kept.values[at + self._start : at + self._stop])

    def __iter__(self) -> Iterator[list[float]]:
        kept, start, stop, width = self._kept, self._start, self._stop, self._kept.width
        places = range(len(kept.ids)) if kept.order is None else kept.order
        values = kept.values
        for place in places:
            at = place * width
            yield list(values[at + start : at + stop])
