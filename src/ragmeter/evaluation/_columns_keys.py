"""Blocks of equal ids and 64-bit string keys over Arrow string columns, at numpy speed.

Two questions the qrels reader asks of millions of rows without a Python object (or an Arrow
hash table) per row: where each block of equal query ids starts (:func:`block_starts`, by
comparing each row with the row before it), and whether a block holds a doc id twice
(:func:`may_repeat`, by sorting one 64-bit key per row). A key is a hash, so equal strings
always have equal keys and ``may_repeat`` returning ``False`` is a proof; ``True`` may be a
collision (about one chance in 10**6 for ten million rows), and the caller then takes its
exact path.

>>> import pyarrow as pa
>>> ids = pa.chunked_array([["q1", "q1", "q2"], ["q2", "q1"]])
>>> rows, values = block_starts(ids)
>>> rows.tolist(), values.to_pylist()
([0, 2, 4], ['q1', 'q2', 'q1'])
>>> docs = pa.chunked_array([["a", "b", "a"], ["b", "a"]])
>>> may_repeat(docs, rows), may_repeat(docs, np.array([0, 3, 4]))  # blocks ab|ab|a, aba|b|a
(False, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ragmeter.evaluation._columns_in import strings_of

__all__ = ["STEP", "block_starts", "may_repeat", "string_keys"]

_MIX = np.uint64(0x9E3779B97F4A7C15)
_FMIX = (np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53))
_LOW_BYTES = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [2**64 - 1], dtype=np.uint64)
"""``_LOW_BYTES[n]`` keeps the first ``n`` bytes (little-endian) of a 64-bit word."""


def block_starts(column: Any) -> tuple[npt.NDArray[np.int64], Any]:
    """The rows (ascending, row 0 first) where a string column's value differs from the row
    before it, the starts of its blocks of equal values, and those values (``large_string``).

    ``column`` is a ``string``, ``large_string`` or dictionary-of-strings array or chunked
    array without nulls. Dictionary indices are compared, not strings: a dictionary holding a
    value twice may cut a block in two (two starts with one value), never join two.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    rows: list[npt.NDArray[np.int64]] = []
    values: list[Any] = []
    offset = 0
    last: object = None
    for chunk in getattr(column, "chunks", [column]):
        n = len(chunk)
        if n == 0:
            continue
        if pa.types.is_dictionary(chunk.type):
            codes = chunk.indices.to_numpy(zero_copy_only=False)
            local = np.flatnonzero(codes[1:] != codes[:-1]) + 1
        else:
            differ = pc.not_equal(chunk.slice(1), chunk.slice(0, n - 1))
            local = np.flatnonzero(differ.to_numpy(zero_copy_only=False)) + 1
        if offset == 0 or chunk[0].as_py() != last:
            local = np.concatenate([np.zeros(1, dtype=local.dtype), local])
        rows.append(local.astype(np.int64) + offset)
        heads = chunk.take(local)
        if pa.types.is_dictionary(heads.type):
            heads = heads.dictionary_decode()
        values.append(heads.cast(pa.large_string()))
        last = chunk[n - 1].as_py()
        offset += n
    if not rows:
        return np.empty(0, dtype=np.int64), pa.array([], pa.large_string())
    return np.concatenate(rows), pa.concat_arrays(values)


def _fmix(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """MurmurHash3's 64-bit finalizer, in place: every input bit moves every output bit."""
    h ^= h >> np.uint64(33)
    h *= _FMIX[0]
    h ^= h >> np.uint64(33)
    h *= _FMIX[1]
    h ^= h >> np.uint64(33)
    return h


def string_keys(array: Any) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each string of a ``string``/``large_string`` array (no nulls): equal
    strings, equal keys. The bytes are read 8 at a time, straight from Arrow's buffer."""
    offsets, data = strings_of(array)
    raw = np.frombuffer(data, dtype=np.uint8)
    padded = np.zeros(len(raw) + 8, dtype=np.uint8)  # a word read at the last byte stays inside
    padded[: len(raw)] = raw
    words = np.ndarray((len(raw) + 1,), dtype=np.uint64, buffer=padded, strides=(1,))
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    keys = lengths.astype(np.uint64) * _MIX
    longest = int(lengths.max()) if len(lengths) else 0
    live: npt.NDArray[np.intp] | None = None  # rows with bytes left (None: all of them)
    for at in range(0, longest, 8):
        if live is None and int(lengths.min()) <= at:
            live = np.flatnonzero(lengths > at)
        elif live is not None:
            live = live[lengths[live] > at]
        rows = slice(None) if live is None else live
        word = words[starts[rows] + at] & _LOW_BYTES[np.minimum(lengths[rows] - at, 8)]
        mixed = (keys[rows] ^ word) * _MIX
        keys[rows] = mixed ^ (mixed >> np.uint64(29))
    return _fmix(keys)


STEP = 1 << 16
"""Rows hashed at a time: temporaries that fit in a cache and are reused, not fresh pages."""


def may_repeat(column: Any, heads: npt.NDArray[np.int64]) -> bool:
    """Whether a string column may hold one value twice within a block of rows (the blocks
    start at the rows ``heads``, ascending, ``heads[0] == 0``). ``False`` is certain; ``True``
    may be a collision of the keys."""
    n = len(column)
    if n < 2:
        return False
    keys = np.empty(n, dtype=np.uint64)
    at = 0
    for chunk in getattr(column, "chunks", [column]):
        for lo in range(0, len(chunk), STEP):
            part = chunk.slice(lo, STEP)
            hi = at + len(part)
            first = np.searchsorted(heads, at, side="right") - 1  # the block of row `at`
            inside = heads[np.searchsorted(heads, at + 1) : np.searchsorted(heads, hi)]
            marks = np.zeros(hi - at, dtype=np.uint64)
            marks[inside - at] = 1
            block = np.cumsum(marks, out=marks) + np.uint64(first)
            part_keys = string_keys(part)
            part_keys += _fmix(block * _MIX)
            keys[at:hi] = _fmix(part_keys)
            at = hi
    keys.sort()
    return bool(np.any(keys[1:] == keys[:-1]))
