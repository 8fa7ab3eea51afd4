"""Blocks of ids, string keys and the qrels read from grouped tables, against Python itself.

The oracles are Python's own: ``itertools.groupby`` for the blocks of equal ids, ``set`` for
whether a block holds a doc twice, and :func:`ragmeter.io.arrow.qrels_from_arrow` (a plain
loop over Python dicts) for the qrels a table stands for. Tables are made of several chunks
(and of ``large_string``, dictionary and int columns) so that blocks cross chunk ends.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation import _columns_qrels
from ragmeter.evaluation._columns_keys import block_starts, may_repeat, string_keys
from ragmeter.evaluation._columns_qrels import qrels_columns
from ragmeter.io.arrow import qrels_from_arrow

NAMES = {"query_id": "query_id", "doc_id": "doc_id", "relevance": "relevance"}
# ids of every length around a word (8 bytes), prefixes of each other, non-ASCII, empty
IDS = ["", "a", "b", "ab", "a\x00", "é", "doc1234", "doc12345", "doc123456", "doc12345x"]
IDS += ["d" * 15, "d" * 16, "d" * 17, "d" * 16 + "e", "e" + "d" * 16, "ü" * 9]


def chunked(values: list[Any], cuts: list[int], kind: Any = None) -> pa.ChunkedArray:
    """``values`` as a chunked array cut at ``cuts`` (sorted, within range)."""
    kind = kind or pa.string()
    bounds = [0, *sorted({min(c, len(values)) for c in cuts}), len(values)]
    return pa.chunked_array(
        [pa.array(values[a:b], kind) for a, b in itertools.pairwise(bounds)], kind
    )


cuts_st = st.lists(st.integers(0, 40), max_size=4)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.sampled_from(IDS), max_size=40), cuts=cuts_st, wide=st.booleans())
def test_blocks_are_groupbys(values: list[str], cuts: list[int], wide: bool) -> None:
    kind = pa.large_string() if wide else pa.string()
    rows, firsts = block_starts(chunked(values, cuts, kind))
    expected = list(itertools.accumulate([len(list(g)) for _, g in itertools.groupby(values)]))
    assert rows.tolist() == [0, *expected[:-1]][: len(expected)]
    assert firsts.to_pylist() == [v for v, _ in itertools.groupby(values)]


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(IDS)), max_size=40),
    cuts=cuts_st,
)
def test_may_repeat_is_false_only_without_a_repeat(
    pairs: list[tuple[int, str]], cuts: list[int]
) -> None:
    block = np.array([b for b, _ in pairs], dtype=np.int64)
    found = may_repeat(chunked([d for _, d in pairs], cuts), block)
    if len(set(pairs)) < len(pairs):
        assert found
    else:  # 64-bit keys of a few dozen distinct pairs: a collision would be a broken hash
        assert not found


def test_string_keys_read_a_sliced_array_as_its_strings() -> None:
    whole = pa.array(IDS * 3)
    keys = string_keys(whole)
    assert len(set(keys.tolist())) == len(IDS)  # distinct strings, distinct keys
    assert string_keys(whole.slice(len(IDS), len(IDS))).tolist() == keys[: len(IDS)].tolist()
    assert string_keys(pa.array([], pa.string())).tolist() == []


qrel_rows = st.lists(
    st.tuples(
        st.sampled_from(["q1", "q2", "q10", "é"]), st.sampled_from(IDS[:8]), st.integers(-1, 3)
    ),
    max_size=30,
)


def read(fn: Any) -> Any:
    try:
        qrels = fn()
    except InvalidInputError as exc:
        return ("raised", str(exc))
    as_dict = {q: [(d, repr(g)) for d, g in j.items()] for q, j in qrels.items()}
    return (as_dict, list(qrels.warnings))


@settings(max_examples=200, deadline=None)
@given(rows=qrel_rows, cuts=cuts_st, kind=st.sampled_from(["string", "large", "dict"]))
def test_grouped_qrels_are_read_as_qrels_from_arrow_reads_them(
    rows: list[tuple[str, str, int]], cuts: list[int], kind: str
) -> None:
    """Rows grouped by query (the blocks read as they are), repeats and all."""
    rows = sorted(rows, key=lambda r: r[0])  # stable: each query's docs in their drawn order
    types = {"string": pa.string(), "large": pa.large_string(), "dict": pa.string()}
    columns = [chunked([r[i] for r in rows], cuts, types[kind]) for i in (0, 1)]
    if kind == "dict":
        columns = [c.dictionary_encode() for c in columns]
    grades = chunked([r[2] for r in rows], cuts, pa.int64())
    table = pa.table([*columns, grades], names=list(NAMES.values()))
    assert read(lambda: qrels_columns(table, NAMES)) == read(lambda: qrels_from_arrow(table))


def test_a_collision_of_keys_takes_the_exact_path(monkeypatch: pytest.MonkeyPatch) -> None:
    table = pa.table(
        {
            "query_id": ["q1", "q1", "q2", "q2"],
            "doc_id": ["a", "b", "a", "c"],
            "relevance": [1, 0, 2, 1],
        }
    )
    expected = read(lambda: qrels_from_arrow(table))
    assert read(lambda: qrels_columns(table, NAMES)) == expected
    monkeypatch.setattr(_columns_qrels, "may_repeat", lambda column, block: True)
    assert read(lambda: qrels_columns(table, NAMES)) == expected


def test_int_ids_of_grouped_qrels_are_their_digits() -> None:
    table = pa.table({"query_id": [7, 7, -3], "doc_id": [10, 2, 10], "relevance": [1, 1, 2]})
    assert read(lambda: qrels_columns(table, NAMES)) == read(lambda: qrels_from_arrow(table))
