"""The built-in retrieval metrics of a whole run held as columns, one call for all queries.

The columnar twin of :mod:`ragmeter.metrics._kernel`: where that kernel scores one query from
Python lists of doc-id strings, :func:`score_columns` scores every query of a run given as
Arrow buffers, so a run read from Parquet or a DataFrame is scored without a Python object
per row and without interning its ids.

A *strings* value is an Arrow ``string``/``large_string`` array's buffers: ``(offsets, data)``,
the offsets an int32 or int64 array one longer than the strings, ``data`` their UTF-8 bytes.
The run is a list of chunks ``(query_ids, doc_ids, scores)`` of one length: the doc ids a
strings value, the scores a float64 array (finite), and the query ids a strings value or a
dictionary ``(indices, strings)``, int32 indices into a strings value (an Arrow dictionary
array's buffers, as Parquet query ids are read). ``query_ids`` (strings) are the qrels'
queries in qrels order; query ``q`` judges ``jdocs[jstart[q]:jstart[q + 1]]`` (a strings
value, or a list of them: the chunks of one column) with the grades ``jgrade`` (float64,
finite, ``|grade| <= 2**53``). Rows of a query that is not in the qrels are ignored.

Given ``out`` (from :func:`outputs`), a call fills it in place, so a run can be scored in
parts, provided each query's rows are all in one part (else :class:`SplitQueryError`);
``table`` (from :func:`query_table`) spares each part checking the qrels and hashing their
query ids again.

Each query's rows (they need not be contiguous) are ranked as trec_eval ranks a run file:
score descending, ties by doc id descending, bytewise (Python's ``str`` order). The values of
a scored query are the floats :func:`~ragmeter.metrics._kernel.py_score_query` returns for
that ranking, bit for bit, in :func:`~ragmeter.metrics._kernel.result_keys` order.

Two backends share this contract: :func:`py_score_columns` (the pure-Python kernel over the
decoded rows; the reference) and the optional compiled ``ragmeter.metrics._ccolumns``
(``_ccolumns.c``, built when a C compiler is present at install time). :data:`score_columns`
is the compiled one when it is importable and ``RAGMETER_PURE_PYTHON`` is unset (or ``""``,
``"0"``); :data:`BACKEND` says which.

>>> import numpy as np
>>> def strings(*ids):
...     ends = np.cumsum([0] + [len(i) for i in ids])
...     return ends.astype(np.int64), "".join(ids).encode()
>>> run = [(strings("q", "q", "q"), strings("a", "b", "c"), np.array([1.0, 3.0, 1.0]))]
>>> out = score_columns(run, strings("q"), np.array([0, 1]), strings("a"), np.array([1.0]),
...                     [1, 3], kernel_codes(["recall", "mrr"]), None)
>>> out.values[0].tolist(), out.status.tolist(), out.lengths.tolist()  # ranked b, c, a
([0.0, 1.0, 0.0, 0.3333333333333333, 0.3333333333333333], [1], [3])
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ragmeter.metrics._kernel import RepeatedDocsError, kernel_codes, py_score_query, result_keys

__all__ = [
    "BACKEND",
    "NOT_RANKED",
    "NOT_SCORED",
    "REPEATS",
    "SCORED",
    "ColumnScores",
    "SplitQueryError",
    "c_score_columns",
    "kernel_codes",
    "outputs",
    "py_score_columns",
    "query_table",
    "repeats_within",
    "result_keys",
    "score_columns",
]

NOT_RANKED, SCORED, NOT_SCORED, REPEATS = 0, 1, 2, 3
"""A query's status: no row in the run; scored; ranked but without a relevant judgement (not
scored); scored but its ranking repeats a doc id (refused by the drivers)."""

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Strings = tuple[npt.NDArray[Any], Any]
"""An Arrow string array's buffers: offsets (int32 or int64) and UTF-8 bytes."""


@dataclass
class ColumnScores:
    """What :func:`score_columns` returns, one entry per qrels position."""

    values: F64
    """``(queries, keys)``: each scored query's values (zeros for the others)."""
    status: npt.NDArray[np.int8]
    """:data:`NOT_RANKED`, :data:`SCORED`, :data:`NOT_SCORED` or :data:`REPEATS`."""
    lengths: I64
    """Rows (docs) in each query's ranking."""
    found: I64
    """Judged docs (any grade) in each query's ranking."""
    first_repeat: int
    """The qrels position of the query whose ranking repeats a doc and is scored, the first
    by its first row in the run, or ``-1``."""


ScoreColumns = Callable[..., ColumnScores]


class SplitQueryError(Exception):
    """Raised by :func:`score_columns` given ``out`` that already holds a query the run's
    rows rank again (nothing is written): a run scored in parts must give each query's rows
    in one part."""


def outputs(n_queries: int, n_values: int) -> ColumnScores:
    """Empty outputs (no query ranked) to fill over several calls of :func:`score_columns`."""
    return ColumnScores(
        values=np.zeros((n_queries, n_values), dtype=np.float64),
        status=np.zeros(n_queries, dtype=np.int8),
        lengths=np.zeros(n_queries, dtype=np.int64),
        found=np.zeros(n_queries, dtype=np.int64),
        first_repeat=-1,
    )


def _n_values(ks: Sequence[int], codes: Sequence[int]) -> int:
    return len(result_keys([str(c) for c in codes], codes, ks))


def _decoded(strings: Strings) -> list[str]:
    """Each string of a strings value, as ``str`` (bytes read as latin-1: one char a byte,
    so equal ids stay equal and their order is the bytewise order)."""
    offsets, data = strings
    raw = bytes(memoryview(data))
    bounds = offsets.tolist()
    return [raw[a:b].decode("latin-1") for a, b in itertools.pairwise(bounds)]


def _query_ids(queries: Any) -> list[str]:
    """A chunk's query ids, decoded: a strings value, or a dictionary ``(indices, strings)``."""
    if isinstance(queries[1], tuple):
        values = _decoded(queries[1])
        return [values[i] for i in np.asarray(queries[0]).tolist()]
    return _decoded(queries)


def py_score_columns(
    chunks: Sequence[tuple[Strings, Strings, F64]],
    query_ids: Strings,
    jstart: I64,
    jdocs: Strings | list[Strings],
    jgrade: F64,
    ks: Sequence[int],
    codes: Sequence[int],
    level: float | None,
    out: ColumnScores | None = None,
    table: Any = None,
) -> ColumnScores:
    """Score every query of a columnar run (see the module docstring): the reference
    (``table``, the compiled backend's hash table of the query ids, is not used).

    The rows are decoded, grouped by query, ranked with Python's ``sorted`` on ``(score,
    doc id)`` and scored by :func:`~ragmeter.metrics._kernel.py_score_query`.
    """
    ids = _decoded(query_ids)
    position = {qid: i for i, qid in enumerate(ids)}
    judged = [d for part in (jdocs if isinstance(jdocs, list) else [jdocs]) for d in _decoded(part)]
    out = out if out is not None else outputs(len(ids), _n_values(ks, codes))
    rows: dict[int, list[tuple[float, str]]] = {}
    first_row: dict[int, int] = {}
    row = 0
    for queries, docs, scores in chunks:
        ids = _query_ids(queries)
        for qid, doc, score in zip(ids, _decoded(docs), scores.tolist(), strict=True):
            pos = position.get(qid)
            if pos is not None:
                rows.setdefault(pos, []).append((score, doc))
                first_row.setdefault(pos, row)
            row += 1
    if np.any(out.status[list(rows)] != NOT_RANKED):
        raise SplitQueryError
    repeats: list[int] = []
    for pos, ranked_rows in rows.items():
        ranked = [doc for _, doc in sorted(ranked_rows, reverse=True)]
        lo, hi = int(jstart[pos]), int(jstart[pos + 1])
        judgements = dict(zip(judged[lo:hi], jgrade[lo:hi].tolist(), strict=True))
        out.lengths[pos] = len(ranked)
        out.found[pos] = len(set(ranked).intersection(judgements))
        try:
            values = py_score_query(ranked, judgements, ks, codes, level)
        except RepeatedDocsError:
            out.status[pos] = REPEATS
            repeats.append(pos)
            continue
        if values is None:
            out.status[pos] = NOT_SCORED
        else:
            out.status[pos] = SCORED
            out.values[pos] = values
    if repeats and out.first_repeat < 0:
        out.first_repeat = min(repeats, key=first_row.__getitem__)
    return out


def _load_c() -> ScoreColumns | None:
    """The compiled backend wrapped to :func:`py_score_columns`' signature, or ``None``."""
    try:
        from ragmeter.metrics import _ccolumns
    except ImportError:
        return None

    def c_columns(
        chunks: Sequence[tuple[Strings, Strings, F64]],
        query_ids: Strings,
        jstart: I64,
        jdocs: Strings | list[Strings],
        jgrade: F64,
        ks: Sequence[int],
        codes: Sequence[int],
        level: float | None,
        out: ColumnScores | None = None,
        table: Any = None,
    ) -> ColumnScores:
        out = out if out is not None else outputs(len(query_ids[0]) - 1, _n_values(ks, codes))
        first = _ccolumns.score_columns(
            [(q, d, np.ascontiguousarray(s, dtype=np.float64)) for q, d, s in chunks],
            table if table is not None else _prepare(query_ids, jstart, jdocs, jgrade),
            np.asarray(ks, dtype=np.int64),
            np.asarray(codes, dtype=np.int64),
            None if level is None else float(level),
            out.values,
            out.status,
            out.lengths,
            out.found,
        )
        if first == -2:
            raise SplitQueryError
        if out.first_repeat < 0:
            out.first_repeat = first
        return out

    c_columns.__doc__ = "The compiled :func:`py_score_columns` (``_ccolumns.c``)."
    return c_columns


c_score_columns: ScoreColumns | None = _load_c()
"""The compiled backend, or ``None`` when it is not built (loaded even when
``RAGMETER_PURE_PYTHON`` is set, so tests can compare the two)."""


def _prepare(query_ids: Strings, jstart: I64, jdocs: Strings | list[Strings], jgrade: F64) -> Any:
    from ragmeter.metrics import _ccolumns

    return _ccolumns.prepare(
        query_ids,
        np.ascontiguousarray(jstart, dtype=np.int64),
        jdocs,
        np.ascontiguousarray(jgrade, dtype=np.float64),
    )


def query_table(
    query_ids: Strings, jstart: I64, jdocs: Strings | list[Strings], jgrade: F64
) -> Any:
    """The qrels as the compiled backend reads them (``None`` without it): checked, their
    query ids in a hash table; pass it as ``table`` to every call that scores a part of one
    run with these qrels, so they are prepared once, not per part."""
    if c_score_columns is None:
        return None
    return _prepare(query_ids, jstart, jdocs, jgrade)


def repeats_within(parts: Sequence[Strings], heads: I64) -> bool | None:
    """Whether a string column (the buffers of its chunks, in order) holds one value twice
    within a block of rows, the blocks starting at the rows ``heads`` (ascending from 0):
    exact, in C; ``None`` when the compiled backend is not built.

    >>> heads = np.array([0, 2], dtype=np.int64)
    >>> def strings(*ids):
    ...     ends = np.cumsum([0] + [len(i) for i in ids])
    ...     return ends.astype(np.int64), "".join(ids).encode()
    >>> [repeats_within([strings("a", "b", "a")], heads) in (False, None),
    ...  repeats_within([strings("a", "a", "b")], heads) in (True, None)]
    [True, True]
    """
    if c_score_columns is None:
        return None
    from ragmeter.metrics import _ccolumns

    return bool(_ccolumns.repeats_within(list(parts), np.ascontiguousarray(heads, np.int64)))


_FORCE_PYTHON = os.environ.get("RAGMETER_PURE_PYTHON", "").strip() not in ("", "0")

score_columns: ScoreColumns = (
    c_score_columns if c_score_columns is not None and not _FORCE_PYTHON else py_score_columns
)
"""The backend the drivers use: compiled when importable, unless ``RAGMETER_PURE_PYTHON``."""

BACKEND: Literal["c", "python"] = "python" if score_columns is py_score_columns else "c"
"""Which backend :data:`score_columns` is."""
