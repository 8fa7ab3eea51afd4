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
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmeter import evaluate_run
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation import _columns_qrels
from ragmeter.evaluation._columns_keys import block_starts, may_repeat, string_keys
from ragmeter.evaluation._columns_qrels import qrels_columns
from ragmeter.evaluation.columnar import evaluate_run_columns
from ragmeter.io.arrow import qrels_from_arrow
from ragmeter.io.trec import TREC_ORDERING, Run


def outcome(fn: Any) -> Any:
    try:
        return ("report", repr(fn().to_dict()))
    except Exception as exc:
        return ("raised", type(exc), str(exc))


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


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(IDS)), max_size=40),
    cuts=cuts_st,
    step=st.sampled_from([1, 3, 1 << 16]),
)
def test_may_repeat_is_false_only_without_a_repeat(
    monkeypatch: pytest.MonkeyPatch, pairs: list[tuple[int, str]], cuts: list[int], step: int
) -> None:
    from ragmeter.evaluation import _columns_keys

    monkeypatch.setattr(_columns_keys, "STEP", step)
    pairs = sorted(pairs, key=lambda p: p[0])  # blocks of rows, in any doc order
    blocks = [b for b, _ in pairs]
    heads = np.array([i for i, b in enumerate(blocks) if i == 0 or b != blocks[i - 1]])
    found = may_repeat(chunked([d for _, d in pairs], cuts), heads.astype(np.int64))
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


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32 - 1),
    group=st.sampled_from([97, 500, 4000]),
    batch=st.sampled_from([64, 1000, 1 << 20]),
    repeat=st.booleans(),
    shuffle=st.booleans(),
    twice=st.booleans(),
)
def test_parquet_files_with_long_query_blocks_score_as_evaluate_run(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    group: int,
    batch: int,
    repeat: bool,
    shuffle: bool,
    twice: bool,
) -> None:
    """Run and qrels files as retrieval writes them (each query's rows in one block, its ids
    stored as dictionary pages, read by their indices), cut in row groups, read in batches
    smaller and larger than a row group: the report of ``evaluate_run`` on the same data,
    bit for bit; a repeated judgement (``repeat``) is read as ``qrels_from_arrow`` reads it,
    rows in any order (``shuffle``: the file read whole) score the same, and a doc ranked
    twice (``twice``) is refused with the same message."""
    from ragmeter.evaluation import _columns_in, _columns_stream

    monkeypatch.setattr(_columns_stream, "BATCH_ROWS", batch)
    monkeypatch.setattr(_columns_in, "READ_ROWS", max(1, batch // 4))
    rng = np.random.default_rng(seed)
    n_q, depth = 60, 40
    docs = [f"doc{i}" for i in rng.permutation(5000)[: n_q * depth]]
    if twice:
        docs[depth * 7 + 3] = docs[depth * 7 + 30]
    run = pa.table(
        {
            "query_id": [f"query-{i}" for i in np.repeat(np.arange(n_q), depth)],
            "doc_id": docs,
            "score": rng.integers(0, 8, n_q * depth).astype(float) / 2,  # many ties
        }
    )
    if shuffle:
        run = run.take(rng.permutation(len(run)))
    owner = np.repeat(np.arange(n_q + 5), 8)  # 5 judged queries without rows
    judged = [docs[i] if i < len(docs) else f"other{i}" for i in rng.integers(0, 6000, len(owner))]
    if repeat:
        judged[9] = judged[8]
    qrels = pa.table(
        {
            "query_id": [f"query-{i}" for i in owner],
            "doc_id": judged,
            "relevance": rng.integers(-1, 4, len(owner)),
        }
    )
    folder = tmp_path_factory.mktemp("files")
    pq.write_table(run, folder / "run.parquet", row_group_size=group)
    pq.write_table(qrels, folder / "qrels.parquet", row_group_size=group)
    if not shuffle:  # the ids as retrieval writes them: read by their dictionary indices
        meta = pq.ParquetFile(folder / "run.parquet").metadata
        assert _columns_in._dictionary_pages(meta, "query_id")

    def ours() -> Any:
        return evaluate_run_columns(
            folder / "qrels.parquet", folder / "run.parquet", per_query=False
        )

    def theirs() -> Any:  # a doc ranked twice: the ranking as it stands (run_from_arrow refuses)
        ranked: dict[str, list[tuple[float, str]]] = {}
        for q, d, score in zip(*run.to_pydict().values(), strict=True):
            ranked.setdefault(q, []).append((score, d))
        lists = {q: [d for _, d in sorted(v, reverse=True)] for q, v in ranked.items()}
        as_run = Run(lists, ordering=TREC_ORDERING)
        return evaluate_run(qrels_from_arrow(qrels), as_run, per_query=False)

    assert outcome(ours) == outcome(theirs)
