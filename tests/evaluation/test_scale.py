"""evaluate_run's cost stays linear: per-query scores kept in flat columns, means from exact
column sums, no per-query object for CPython's collector to walk.

The oracles are pytrec_eval (per-query metrics), ir_measures (``Judged@k``) and
:func:`math.fsum` (the exact, correctly rounded sum the means are defined by). Both the
compiled column sums and their pure-Python fallback are exercised.
"""

from __future__ import annotations

import gc
import math
import random
import struct
from array import array
from collections.abc import Iterator

import ir_measures
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.metrics import _kernel

K = (1, 5, 10, 100)
METRICS = ("ndcg", "precision", "recall", "mrr", "map")
TREC = {  # ragmeter key -> pytrec_eval measure
    "ndcg@10": "ndcg_cut_10",
    "ndcg@100": "ndcg_cut_100",
    "precision@5": "P_5",
    "precision@10": "P_10",
    "recall@100": "recall_100",
    "mrr": "recip_rank",
    "map": "map",
}


@pytest.fixture(params=["c", "python"])
def sums(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Means from the compiled column sums, or from their math.fsum fallback."""
    if request.param == "c" and _kernel.c_column_sums is None:
        pytest.skip("the compiled kernel is not built")
    if request.param == "python":
        monkeypatch.setattr(_kernel, "c_column_sums", None)
        monkeypatch.setattr(_kernel, "c_pack_doubles", None)
    yield request.param


def _data(n: int, seed: int) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """Qrels of ``n`` queries and a run that ranks most of them, in a shuffled order, plus
    some queries nobody judged."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    for q in range(n):
        judged = rng.sample(range(300), rng.randint(1, 12))
        grades = [rng.randint(0, 3) for _ in judged]
        qrels[f"q{q}"] = {f"d{d}": g for d, g in zip(judged, grades, strict=True)}
        if rng.random() < 0.9:
            run[f"q{q}"] = [f"d{d}" for d in rng.sample(range(300), rng.randint(0, 120))]
    for q in range(n, n + 5):
        run[f"q{q}"] = ["d1", "d2"]
    items = list(run.items())
    rng.shuffle(items)
    return qrels, dict(items)


@pytest.mark.parametrize("mode", ["zero", "skip"])
def test_shuffled_run_agrees_with_pytrec_eval_and_ir_measures(sums: str, mode: str) -> None:
    """A run in another order than the qrels, with judged queries missing: per-query scores
    in qrels order are pytrec_eval's, judged@k is ir_measures', and every mean is the exact
    sum of the per-query values over the number of queries."""
    qrels, run = _data(400, seed=1)
    report = evaluate_run(qrels, run, k_values=K, metrics=METRICS, missing_queries=mode)
    scored_run = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.items() if r}
    oracle = pytrec_eval.RelevanceEvaluator(qrels, set(TREC.values())).evaluate(scored_run)
    scorable = [q for q, j in qrels.items() if any(g > 0 for g in j.values())]
    ranked = [q for q in scorable if q in run]
    missing = [q for q in scorable if q not in run]
    assert report.missing_queries == missing
    counted = ranked if mode == "skip" else scorable
    assert list(report.per_query) == counted  # qrels order
    for key, measure in TREC.items():
        got = [report.per_query[q][key] for q in counted]
        want = [oracle[q][measure] if q in oracle else 0.0 for q in counted]
        assert got == pytest.approx(want, abs=1e-12), key
        assert report.metrics[key] == math.fsum(got) / len(counted), key
    want_judged = {
        (m.query_id, str(m.measure)): m.value
        for m in ir_measures.iter_calc(
            [ir_measures.Judged @ k for k in K],
            qrels,
            scored_run,
        )
    }
    for q in counted:
        row = report.judged.per_query[q]
        for k in K:
            assert row[f"judged@{k}"] == pytest.approx(
                want_judged.get((q, f"Judged@{k}"), 0.0), abs=1e-12
            ), (q, k)
    for k in K:
        column = [report.judged.per_query[q][f"judged@{k}"] for q in counted]
        assert report.judged.means[f"judged@{k}"] == math.fsum(column) / len(counted)


def test_the_compiled_and_python_column_sums_give_the_same_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if _kernel.c_column_sums is None:
        pytest.skip("the compiled kernel is not built")
    qrels, run = _data(300, seed=2)
    compiled = evaluate_run(qrels, run).to_dict()
    monkeypatch.setattr(_kernel, "c_column_sums", None)
    monkeypatch.setattr(_kernel, "c_pack_doubles", None)
    assert evaluate_run(qrels, run).to_dict() == compiled


def _tracked_young(n: int) -> int:
    """Container objects that one evaluate_run of ``n`` queries leaves for the collector's
    youngest generation to walk (the report itself included)."""
    qrels, run = _data(n, seed=3)
    evaluate_run(qrels, run)  # warm: imports, caches
    gc.collect()
    was_on = gc.isenabled()
    gc.disable()
    try:
        report = evaluate_run(qrels, run)
        young = len(gc.get_objects(generation=0))
    finally:
        if was_on:
            gc.enable()
    assert report.n_queries > 0
    return young


def test_no_container_per_query_for_the_collector_to_walk() -> None:
    """What a run leaves behind for CPython's cyclic collector does not grow with the run:
    per-query metrics are dicts of floats (never tracked) and everything else is in flat
    columns, so no collection walks millions of objects (the superlinear cost at 100k+)."""
    small, large = _tracked_young(200), _tracked_young(2_000)
    assert large <= small + 5, (small, large)


finite = st.floats(allow_nan=False, allow_infinity=False)
weird = st.sampled_from([0.0, -0.0, 1.0, 5e-324, -5e-324, 2.0**900, 2.0**1000, 1.7e308])


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=1, max_value=6).flatmap(
        lambda w: st.tuples(
            st.just(w),
            st.lists(st.one_of(finite, weird, st.floats(0, 1)), max_size=60).map(
                lambda v: v[: len(v) - len(v) % w]
            ),
        )
    )
)
def test_column_sums_are_math_fsum(case: tuple[int, list[float]]) -> None:
    """The compiled exact column sums are math.fsum's floats, bit for bit (or None, when
    math.fsum must look at a value: -0.0, beyond 2**900)."""
    width, values = case
    try:
        want = [math.fsum(values[j::width]) for j in range(width)]
    except OverflowError:  # huge values: math.fsum's error, from math.fsum
        with pytest.raises(OverflowError):
            _kernel.column_sums(array("d", values), width)
        return
    assert _kernel.column_sums(array("d", values), width) == want
    if _kernel.c_column_sums is not None:
        got = _kernel.c_column_sums(array("d", values), width)
        if got is not None:
            assert [struct.pack("<d", x) for x in got] == [struct.pack("<d", x) for x in want]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=400), st.integers(0, 2**32))
def test_column_sums_of_shares_in_any_order(values: list[float], seed: int) -> None:
    """Values like the kernel's (in [0, 1]), many rows, any order: math.fsum's sums."""
    width = 4
    values = values * width
    random.Random(seed).shuffle(values)
    want = [math.fsum(values[j::width]) for j in range(width)]
    assert _kernel.column_sums(array("d", values), width) == want


def test_column_sums_refuse_a_ragged_buffer() -> None:
    if _kernel.c_column_sums is None:
        pytest.skip("the compiled kernel is not built")
    with pytest.raises(ValueError, match="whole number of rows"):
        _kernel.c_column_sums(array("d", [1.0, 2.0, 3.0]), 2)
    with pytest.raises(ValueError, match="doubles"):
        _kernel.c_column_sums(array("f", [1.0, 2.0]), 2)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(allow_nan=False) | weird, max_size=50))
def test_packed_doubles_are_the_floats(values: list[float]) -> None:
    """The compiled packing into an array('d') keeps every float's bits (array is the oracle)."""
    want = array("d", values).tobytes()
    assert _kernel.doubles(values).tobytes() == want
    if _kernel.c_pack_doubles is not None:
        assert _kernel.c_pack_doubles(values) == want
