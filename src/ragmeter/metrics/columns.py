"""The built-in retrieval metrics of a whole run held as integer columns, one call for all queries.

The columnar twin of :mod:`ragmeter.metrics._kernel`: where that kernel scores one query from
Python lists of doc-id strings, :func:`score_columns` scores every query of a run given as
arrays, so a run read from Parquet or a DataFrame is scored without a Python object per doc.

The run is three columns, each a list of chunks (the chunks of an Arrow column):

* ``queries`` (int32): per row, the query's position in the qrels, or ``-1`` for a query
  nobody judged (its rows are ignored);
* ``docs`` (int32): per row, the doc's index in a dictionary of the run's distinct doc ids,
  given as Arrow ``large_string`` buffers (``offsets``, int64, and the UTF-8 ``data``);
* ``scores`` (float64, finite).

Each query's rows (they need not be contiguous) are ranked as trec_eval ranks a run file:
score descending, ties by doc id descending, bytewise (Python's ``str`` order). The qrels are
``jstart`` (int64: query ``q``'s judgements are ``jstart[q]:jstart[q + 1]``), ``jdoc`` (int32:
each judged doc's dictionary index, ``-1`` when the run never retrieves it) and ``jgrade``
(float64, finite, ``|grade| <= 2**53``). The values of a scored query are the floats
:func:`~ragmeter.metrics._kernel.py_score_query` returns for that ranking, bit for bit, in
:func:`~ragmeter.metrics._kernel.result_keys` order.

Two backends share this contract: :func:`py_score_columns` (numpy and the pure-Python
kernel; the reference) and the optional compiled ``ragmeter.metrics._ccolumns``
(``_ccolumns.c``, built when a C compiler is present at install time). :data:`score_columns`
is the compiled one when it is importable and ``RAGMETER_PURE_PYTHON`` is unset (or ``""``,
``"0"``); :data:`BACKEND` says which.

>>> import numpy as np
>>> offsets, data = np.array([0, 1, 2, 3], dtype=np.int64), b"abc"  # docs 'a', 'b', 'c'
>>> out = score_columns(
...     [np.array([0, 0, 0], dtype=np.int32)], [np.array([0, 1, 2], dtype=np.int32)],
...     [np.array([1.0, 3.0, 1.0])], offsets, data,
...     np.array([0, 1], dtype=np.int64), np.array([0], dtype=np.int32), np.array([1.0]),
...     [1, 3], kernel_codes(["recall", "mrr"]), None)
>>> out.values[0].tolist(), out.status.tolist(), out.lengths.tolist()  # ranked b, c, a
([0.0, 1.0, 0.0, 0.3333333333333333, 0.3333333333333333], [1], [3])
"""

from __future__ import annotations

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
    "c_score_columns",
    "kernel_codes",
    "py_score_columns",
    "result_keys",
    "score_columns",
]

NOT_RANKED, SCORED, NOT_SCORED, REPEATS = 0, 1, 2, 3
"""A query's status: no row in the run; scored; ranked but without a relevant judgement (not
scored); scored but its ranking repeats a doc id (refused by the drivers)."""

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


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


def _outputs(n_queries: int, n_values: int) -> ColumnScores:
    return ColumnScores(
        values=np.zeros((n_queries, n_values), dtype=np.float64),
        status=np.zeros(n_queries, dtype=np.int8),
        lengths=np.zeros(n_queries, dtype=np.int64),
        found=np.zeros(n_queries, dtype=np.int64),
        first_repeat=-1,
    )


def _n_values(ks: Sequence[int], codes: Sequence[int]) -> int:
    return len(result_keys([str(c) for c in codes], codes, ks))


def py_score_columns(
    queries: Sequence[I32],
    docs: Sequence[I32],
    scores: Sequence[F64],
    offsets: I64,
    data: Any,
    jstart: I64,
    jdoc: I32,
    jgrade: F64,
    ks: Sequence[int],
    codes: Sequence[int],
    level: float | None,
) -> ColumnScores:
    """Score every query of a columnar run (see the module docstring): the reference.

    Each query's rows are ranked with Python's ``sorted`` on ``(score, doc id)`` and scored
    by :func:`~ragmeter.metrics._kernel.py_score_query`, its docs named by their dictionary
    index (``str``) and the judged docs the run lacks by negative numbers, so no two meet.
    """
    n_queries = len(jstart) - 1
    out = _outputs(n_queries, _n_values(ks, codes))
    q = np.concatenate([*queries, np.empty(0, np.int32)]).astype(np.int64)
    d = np.concatenate([*docs, np.empty(0, np.int32)])
    s = np.concatenate([*scores, np.empty(0, np.float64)])
    order = np.argsort(q, kind="stable")
    order = order[q[order] >= 0]
    starts = np.flatnonzero(np.diff(q[order], prepend=-1))
    raw = bytes(memoryview(data))
    first_row: dict[int, int] = {}
    for seg in np.split(order, starts[1:]) if len(order) else []:
        pos = int(q[seg[0]])
        ids = {int(x): raw[offsets[x] : offsets[x + 1]] for x in d[seg]}
        keys = [ids[int(x)] for x in d[seg]]
        rows = sorted(zip(s[seg].tolist(), keys, d[seg].tolist(), strict=True))
        ranked = [str(x) for _, _, x in reversed(rows)]
        lo, hi = int(jstart[pos]), int(jstart[pos + 1])
        judgements = {
            str(int(jdoc[j])) if jdoc[j] >= 0 else str(-1 - j): float(jgrade[j])
            for j in range(lo, hi)
        }
        out.lengths[pos] = len(ranked)
        out.found[pos] = len(set(ranked).intersection(judgements))
        try:
            values = py_score_query(ranked, judgements, ks, codes, level)
        except RepeatedDocsError:
            out.status[pos] = REPEATS
            first_row[pos] = int(seg[0])
            continue
        if values is None:
            out.status[pos] = NOT_SCORED
        else:
            out.status[pos] = SCORED
            out.values[pos] = values
    if first_row:
        out.first_repeat = min(first_row, key=first_row.__getitem__)
    return out


def _load_c() -> ScoreColumns | None:
    """The compiled backend wrapped to :func:`py_score_columns`' signature, or ``None``."""
    try:
        from ragmeter.metrics import _ccolumns
    except ImportError:
        return None

    def c_columns(
        queries: Sequence[I32],
        docs: Sequence[I32],
        scores: Sequence[F64],
        offsets: I64,
        data: Any,
        jstart: I64,
        jdoc: I32,
        jgrade: F64,
        ks: Sequence[int],
        codes: Sequence[int],
        level: float | None,
    ) -> ColumnScores:
        out = _outputs(len(jstart) - 1, _n_values(ks, codes))
        out.first_repeat = _ccolumns.score_columns(
            [np.ascontiguousarray(x, dtype=np.int32) for x in queries],
            [np.ascontiguousarray(x, dtype=np.int32) for x in docs],
            [np.ascontiguousarray(x, dtype=np.float64) for x in scores],
            np.ascontiguousarray(offsets, dtype=np.int64),
            data,
            np.ascontiguousarray(jstart, dtype=np.int64),
            np.ascontiguousarray(jdoc, dtype=np.int32),
            np.ascontiguousarray(jgrade, dtype=np.float64),
            np.asarray(ks, dtype=np.int64),
            np.asarray(codes, dtype=np.int64),
            None if level is None else float(level),
            out.values,
            out.status,
            out.lengths,
            out.found,
        )
        return out

    c_columns.__doc__ = "The compiled :func:`py_score_columns` (``_ccolumns.c``)."
    return c_columns


c_score_columns: ScoreColumns | None = _load_c()
"""The compiled backend, or ``None`` when it is not built (loaded even when
``RAGMETER_PURE_PYTHON`` is set, so tests can compare the two)."""

_FORCE_PYTHON = os.environ.get("RAGMETER_PURE_PYTHON", "").strip() not in ("", "0")

score_columns: ScoreColumns = (
    c_score_columns if c_score_columns is not None and not _FORCE_PYTHON else py_score_columns
)
"""The backend the drivers use: compiled when importable, unless ``RAGMETER_PURE_PYTHON``."""

BACKEND: Literal["c", "python"] = "python" if score_columns is py_score_columns else "c"
"""Which backend :data:`score_columns` is."""
