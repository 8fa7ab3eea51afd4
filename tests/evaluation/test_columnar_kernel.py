"""The columnar kernel itself (``ragmeter.metrics.columns``): both backends, its inputs' checks.

The compiled backend (``_ccolumns.c``) reads Arrow buffers directly, so it must refuse
malformed ones (offsets past the data, wrong lengths, unsorted cut-offs) with an error, never
read out of bounds; and it must agree with the pure-Python reference on chunked, interleaved
runs (the reference itself is checked against ``evaluate_run`` in ``test_columnar.py``).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.metrics import columns
from ragmeter.metrics.columns import kernel_codes, py_score_columns

C = columns.c_score_columns
needs_c = pytest.mark.skipif(C is None, reason="the compiled columnar kernel is not built")
ALL = kernel_codes(["ndcg", "recall", "precision", "hit_rate", "mrr", "map", "judged"])


def strings(ids: list[str], *, large: bool = True) -> tuple[Any, Any]:
    array = pa.array(ids, pa.large_string() if large else pa.string())
    width = np.int64 if large else np.int32
    offsets = np.frombuffer(array.buffers()[1], dtype=width)[: len(ids) + 1]
    data = array.buffers()[2]
    return offsets, data if data is not None else b""


def test_backend_follows_the_environment() -> None:
    code = "from ragmeter.metrics import columns as c; print(c.BACKEND)"
    env = {k: v for k, v in os.environ.items() if k != "RAGMETER_PURE_PYTHON"}
    run = [sys.executable, "-c", code]
    default = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    forced = subprocess.run(
        run, env={**env, "RAGMETER_PURE_PYTHON": "1"}, capture_output=True, text=True, check=True
    )
    assert default.stdout.split() == ["c" if C is not None else "python"]
    assert forced.stdout.split() == ["python"]


def dictionary(ids: list[str], values: list[str]) -> tuple[Any, tuple[Any, Any]]:
    """Query ids as a dictionary: int32 indices into ``values`` (which may hold more)."""
    where = {v: i for i, v in enumerate(values)}
    return np.array([where[i] for i in ids], dtype=np.int32), strings(values, large=False)


def parts(ids: list[str], cuts: list[int]) -> Any:
    """Strings in one piece (no cuts) or in parts cut at ``cuts`` (some parts empty)."""
    if not cuts:
        return strings(ids)
    bounds = [0, *sorted(min(c, len(ids)) for c in cuts), len(ids)]
    return [strings(ids[a:b], large=a % 2 == 1) for a, b in itertools.pairwise(bounds)]


IDS = ["a", "b", "ab", "", "é", "q1", "q2"]


@st.composite
def inputs(draw: st.DrawFn) -> dict[str, Any]:
    """A run cut in chunks (32- or 64-bit offsets each), queries interleaved, repeats."""
    n = draw(st.integers(0, 30))
    scores = st.sampled_from([0.0, 1.0, 2.0])
    rows = [
        (draw(st.sampled_from(IDS)), draw(st.sampled_from(IDS)), draw(scores)) for _ in range(n)
    ]
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    chunks = []
    for lo, hi in zip([0, *cuts], [*cuts, n], strict=True):
        part = rows[lo:hi]
        large = draw(st.booleans())
        queries = [q for q, _, _ in part]
        chunks.append(
            (
                dictionary(queries, draw(st.permutations(IDS)))
                if draw(st.booleans())
                else strings(queries, large=large),
                strings([d for _, d, _ in part], large=large),
                np.array([s for _, _, s in part], dtype=np.float64),
            )
        )
    qids = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=4))
    judged = [draw(st.lists(st.sampled_from(IDS), unique=True, max_size=4)) for _ in qids]
    grades = [float(draw(st.integers(-1, 3))) for j in judged for _ in j]
    return {
        "chunks": chunks,
        "query_ids": strings(qids),
        "jstart": np.cumsum([0] + [len(j) for j in judged]).astype(np.int64),
        "jdocs": parts([d for j in judged for d in j], draw(st.lists(st.integers(0, 16)))),
        "jgrade": np.array(grades, dtype=np.float64),
        "ks": draw(st.sampled_from([[1, 2, 5], [3], [1, 100]])),
        "codes": ALL,
        "level": draw(st.sampled_from([None, 1, 2.5, -1])),
    }


@needs_c
@settings(max_examples=400, deadline=None)
@given(args=inputs())
def test_compiled_and_python_agree_bit_for_bit(args: dict[str, Any]) -> None:
    assert C is not None
    ours, ref = C(**args), py_score_columns(**args)
    scored = ref.status == columns.SCORED
    assert ours.status.tolist() == ref.status.tolist()
    assert ours.lengths.tolist() == ref.lengths.tolist()
    assert ours.found.tolist() == ref.found.tolist()
    assert ours.first_repeat == ref.first_repeat
    assert ours.values[scored].tobytes() == ref.values[scored].tobytes()


@needs_c
def test_malformed_buffers_are_refused() -> None:
    from ragmeter.metrics import _ccolumns

    qrels = {
        "query_ids": strings(["q"]),
        "jstart": np.array([0, 1], dtype=np.int64),
        "jdocs": strings(["a"]),
        "jgrade": np.array([1.0]),
    }
    good = {
        "chunks": [(strings(["q"]), strings(["a"]), np.array([1.0]))],
        "ks": np.array([1, 2], dtype=np.int64),
        "codes": np.array(ALL, dtype=np.int64),
        "level": None,
    }

    def prepare(**changes: Any) -> Any:
        return _ccolumns.prepare(*{**qrels, **changes}.values())

    def call(**changes: Any) -> int:
        args = {**good, **changes}
        n_values = 2 * len(ALL) + 2  # 2 cut-offs per code, and uncut mrr and map
        return _ccolumns.score_columns(
            args["chunks"], prepare(), args["ks"], args["codes"], args["level"],
            np.zeros(n_values), np.zeros(1, np.int8), np.zeros(1, np.int64), np.zeros(1, np.int64),
        )  # fmt: skip

    assert call() == -1
    past_end = (np.array([0, 5], dtype=np.int64), b"a")
    with pytest.raises(ValueError, match="offsets beyond the data"):
        prepare(jdocs=past_end)
    with pytest.raises(ValueError, match="offsets beyond the data"):
        call(chunks=[(strings(["q"]), past_end, np.array([1.0]))])
    with pytest.raises(ValueError, match="offsets decrease"):
        prepare(query_ids=(np.array([0, 1, 0], dtype=np.int64), b"ab"))
    with pytest.raises(ValueError, match="int32 or int64"):
        prepare(query_ids=(np.array([0, 1], dtype=np.int16), b"q"))
    with pytest.raises(ValueError, match="scores"):
        call(chunks=[(strings(["q"]), strings(["a"]), np.array([1.0, 2.0]))])
    with pytest.raises(ValueError, match="differ in length"):
        call(chunks=[(strings(["q"]), strings(["a", "b"]), np.array([1.0]))])
    with pytest.raises(ValueError, match="beyond the dictionary"):
        call(chunks=[((np.array([1], np.int32), strings(["q"])), strings(["a"]), np.ones(1))])
    with pytest.raises(ValueError, match="int32"):
        call(chunks=[((np.array([0], np.int64), strings(["q"])), strings(["a"]), np.ones(1))])
    with pytest.raises(ValueError, match="jstart"):
        prepare(jstart=np.array([0, 2], dtype=np.int64))
    with pytest.raises(ValueError, match="ascending"):
        call(ks=np.array([2, 1], dtype=np.int64))
    with pytest.raises(ValueError, match="unknown metric code"):
        call(codes=np.array([9], dtype=np.int64))
    with pytest.raises(ValueError, match="query ids repeat"):
        prepare(query_ids=strings(["q", "q"]), jstart=np.array([0, 1, 1], dtype=np.int64))
    with pytest.raises(TypeError):
        call(chunks="not a list")
    with pytest.raises(TypeError, match="prepare"):
        _ccolumns.score_columns(
            good["chunks"], bytearray(8), good["ks"], good["codes"], None,
            np.zeros(16), np.zeros(1, np.int8), np.zeros(1, np.int64), np.zeros(1, np.int64),
        )  # fmt: skip


@needs_c
def test_qrels_prepared_once_score_the_same() -> None:
    args = {
        "chunks": [(strings(["q", "r", "q"]), strings(["a", "a", "b"]), np.array([1.0, 2, 3]))],
        "query_ids": strings(["r", "q"]),
        "jstart": np.array([0, 1, 2], dtype=np.int64),
        "jdocs": strings(["a", "a"]),
        "jgrade": np.array([1.0, 2.0]),
        "ks": [1, 2],
        "codes": ALL,
        "level": None,
    }
    assert C is not None
    table = columns.query_table(*(args[k] for k in ("query_ids", "jstart", "jdocs", "jgrade")))
    plain, given = C(**args), C(**args, table=table)
    assert plain.values.tobytes() == given.values.tobytes()
    assert plain.status.tolist() == given.status.tolist() == [1, 1]


@needs_c
@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.sampled_from(IDS), max_size=30),
    cuts=st.lists(st.integers(0, 30), max_size=4),
    heads=st.sets(st.integers(1, 29), max_size=6),
)
def test_repeats_within_blocks_is_exact(rows: list[str], cuts: list[int], heads: set[int]) -> None:
    starts = np.array([0, *sorted(h for h in heads if h < len(rows))], dtype=np.int64)
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    parts = [strings(rows[a:b], large=a % 2 == 0) for a, b in itertools.pairwise(bounds)]
    blocks = [rows[a:b] for a, b in itertools.pairwise([*starts.tolist(), len(rows)])]
    expected = any(len(set(b)) < len(b) for b in blocks)
    assert columns.repeats_within(parts, starts if rows else starts[:0]) is expected
