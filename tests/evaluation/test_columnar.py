"""``evaluate_run_columns`` against ``evaluate_run`` (bit for bit) and pytrec_eval.

The reference report is ``evaluate_run(qrels, run_from_arrow(table))``: the run the table
stands for, ranked by ``run_from_arrow`` as ``read_trec_run`` ranks a file, scored by the dict
path (itself checked against trec_eval and pytrec_eval elsewhere). Reports are compared
through ``repr(report.to_dict())``, so every per-query value, mean, summary, warning and
convention must be the same float, bit for bit. Each test runs with both columnar backends
(compiled and pure Python).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmeter import evaluate_run
from ragmeter.errors import DuplicateDocumentError, InvalidInputError
from ragmeter.evaluation import _columns_out
from ragmeter.evaluation.columnar import evaluate_run_columns
from ragmeter.io.arrow import run_from_arrow
from ragmeter.io.trec import TREC_ORDERING, Run
from ragmeter.metrics import columns as columns_kernel
from ragmeter.report import WarningLog

BACKENDS = ["c", "python"]
FIXTURE = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
"""The backend fixture only patches a module attribute: the same for every example."""


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Score with the given columnar backend, whatever RAGMETER_PURE_PYTHON says."""
    if request.param == "c":
        if columns_kernel.c_score_columns is None:
            pytest.skip("ragmeter.metrics._ccolumns is not built")
        kernel = columns_kernel.c_score_columns
    else:
        kernel = columns_kernel.py_score_columns
    monkeypatch.setattr(_columns_out, "score_columns", kernel)
    yield request.param


def same(a: Any, b: Any) -> None:
    assert repr(a.to_dict()) == repr(b.to_dict())


def table(rows: list[tuple[str, str, float]]) -> pa.Table:
    q, d, s = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {
            "query_id": pa.array(q, pa.string()),
            "doc_id": pa.array(d, pa.string()),
            "score": pa.array(s, pa.float64()),
        }
    )


def reference(qrels: Any, run: pa.Table, **options: Any) -> Any:
    return evaluate_run(qrels, run_from_arrow(run), **options)


def outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return ("report", repr(fn(*args, **kwargs).to_dict()))
    except Exception as exc:
        return ("raised", type(exc), str(exc))


# ids: short, overlapping, with prefixes of each other and non-ASCII (bytewise tie order)
QIDS = ["q1", "q2", "q10", "é", "q3"]
DOCS = ["a", "b", "ab", "B", "d1", "d10", "d2", "é", "ü", "z"]
SCORES = st.sampled_from([0.0, -0.0, 1.0, 1.0, 2.5, -3.0, 0.1, 1e-300])

grades = st.one_of(st.integers(-2, 3), st.sampled_from([0.5, 2.0, -1.0, 0.0]))
qrels_st = st.dictionaries(
    st.sampled_from(QIDS), st.dictionaries(st.sampled_from(DOCS), grades, max_size=6), max_size=5
)


@st.composite
def runs(draw: st.DrawFn, scores: st.SearchStrategy[float] = SCORES) -> list[Any]:
    """Rows of distinct (query, doc), in any order (queries interleaved), many ties."""
    pairs = draw(
        st.lists(st.tuples(st.sampled_from(QIDS), st.sampled_from(DOCS)), unique=True, max_size=40)
    )
    return [(q, d, draw(scores)) for q, d in pairs]


TREC_SCORES = st.sampled_from([0.0, -0.0, 1.0, 1.0, 2.5, -3.0, 0.125])
"""pytrec_eval reads scores as C floats: 1e-300 would tie with 0.0 there."""


OPTIONS = st.fixed_dictionaries(
    {
        "k_values": st.sampled_from([(1, 3, 5, 10), (2,), (1, 100)]),
        "relevance_level": st.sampled_from([None, 1, 2, 0.5, -1]),
        "missing_queries": st.sampled_from(["zero", "skip"]),
        "per_query": st.booleans(),
    }
)


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE)
@given(qrels=qrels_st, rows=runs(), options=OPTIONS)
def test_the_report_is_evaluate_runs_bit_for_bit(
    backend: str, qrels: dict[str, dict[str, float]], rows: list[Any], options: dict[str, Any]
) -> None:
    run = table(rows)
    assert outcome(evaluate_run_columns, qrels, run, **options) == outcome(
        reference, qrels, run, **options
    )


@st.composite
def runs_with_repeats(draw: st.DrawFn) -> list[tuple[str, str, float]]:
    pairs = draw(
        st.lists(st.tuples(st.sampled_from(QIDS[:2]), st.sampled_from(DOCS[:4])), max_size=12)
    )
    return [(q, d, draw(SCORES)) for q, d in pairs]


@settings(max_examples=200, deadline=None, suppress_health_check=FIXTURE)
@given(qrels=qrels_st, rows=runs_with_repeats())
def test_a_repeated_doc_is_refused_as_evaluate_run_refuses_it(
    backend: str, qrels: dict[str, dict[str, float]], rows: list[Any]
) -> None:
    """Only for a scored query, naming the same query and docs (the first scored query with
    a repeat, in the order the run first lists its queries)."""
    run: dict[str, list[tuple[float, str]]] = {}
    for q, d, s in rows:
        run.setdefault(q, []).append((s, d))
    as_lists = {q: [d for _, d in sorted(v, reverse=True)] for q, v in run.items()}
    assert outcome(evaluate_run_columns, qrels, table(rows)) == outcome(
        evaluate_run, qrels, Run(as_lists, ordering=TREC_ORDERING)
    )


def test_a_repeat_names_the_query_and_docs(backend: str) -> None:
    run = table([("q1", "a", 1.0), ("q1", "b", 2.0), ("q1", "a", 0.5), ("q1", "b", 3.0)])
    with pytest.raises(DuplicateDocumentError) as err:
        evaluate_run_columns({"q1": {"a": 1}}, run)
    assert err.value.query_id == "q1" and err.value.duplicates == ["a", "b"]
    # an unjudged or unscored query may repeat a doc (evaluate_run ignores its ranking)
    report = evaluate_run_columns({"q2": {"a": 1}, "q1": {"a": 0}}, table([("q2", "a", 1.0)]))
    assert report.n_queries == 1


def _trec(metric: str, k: int | None) -> str:
    names = {"ndcg": "ndcg_cut", "precision": "P", "recall": "recall", "map": "map_cut"}
    return "recip_rank" if metric == "mrr" else f"{names[metric]}_{k}"


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURE)
@given(qrels=qrels_st, rows=runs(TREC_SCORES))
def test_per_query_values_are_pytrec_evals(
    backend: str, qrels: dict[str, dict[str, int]], rows: list[Any]
) -> None:
    """pytrec_eval (trec_eval) ranks ``{doc: score}`` itself: score, then doc id, descending.

    (trec_eval crashes on a grade below -1 and misreads a query whose judgements are all
    negative, see tests/trec/test_against_pytrec_eval.py: the oracle sees neither.)"""
    qrels = {
        q: {d: max(int(g), -1) for d, g in j.items()}
        for q, j in qrels.items()
        if any(g >= 0 for g in j.values())
    }
    run: dict[str, dict[str, float]] = {}
    for q, d, s in rows:
        run.setdefault(q, {})[d] = s
    measures = {"ndcg_cut.1,3,10", "P.1,3,10", "recall.1,3,10", "map_cut.1,3,10", "recip_rank"}
    try:
        report = evaluate_run_columns(
            qrels, table(rows), k_values=(1, 3, 10),
            metrics=["ndcg", "precision", "recall", "map", "mrr"], missing_queries="skip",
        )  # fmt: skip
    except InvalidInputError:
        return  # nothing to score (no relevant judgement, or no judged query ranked)
    expected = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    for qid, row in report.per_query.items():
        for key, value in row.items():
            metric, _, k = key.partition("@")
            if key == "map":
                continue
            name = _trec(metric, int(k) if k else None)
            if metric == "mrr" and k:
                continue
            assert math.isclose(value, expected[qid][name], abs_tol=1e-12), (qid, key)


RUN_ROWS = [
    ("q1", "d3", 0.9), ("q2", "d1", 0.3), ("q1", "d1", 0.8), ("q1", "d2", 0.8),
    ("q9", "d1", 1.0), ("q2", "d4", 0.7), ("q1", "d5", 0.1),
]  # fmt: skip
QRELS = {"q1": {"d1": 2, "d2": 1, "d9": 1}, "q2": {"d4": 1, "d1": 0}, "q3": {"d1": 1}}


def test_tables_frames_and_parquet_score_the_same(backend: str, tmp_path: Path) -> None:
    import pandas as pd
    import polars as pl

    run = table(RUN_ROWS)
    expected = outcome(reference, QRELS, run)
    path = tmp_path / "run.parquet"
    pq.write_table(run, path, row_group_size=3)  # several row groups, each its dictionary
    chunked = pa.concat_tables([run.slice(0, 2), run.slice(2, 4), run.slice(6)])
    qrels_table = pa.table(
        {
            "query_id": [q for q, j in QRELS.items() for _ in j],
            "doc_id": [d for j in QRELS.values() for d in j],
            "relevance": [g for j in QRELS.values() for g in j.values()],
        }
    )
    qrels_path = tmp_path / "qrels.parquet"
    pq.write_table(qrels_table, qrels_path)
    for qrels, given_run in [
        (QRELS, path),
        (QRELS, str(path)),
        (QRELS, chunked),
        (QRELS, run.to_batches()[0]),
        (QRELS, run.to_pandas()),
        (QRELS, pl.from_arrow(run)),
        (qrels_table, run),
        (qrels_path, path),
        (qrels_table.to_pandas(), pd.DataFrame(run.to_pydict())),
        (pl.from_arrow(qrels_table), pl.from_arrow(run)),
        (QRELS, run.cast(pa.schema([("query_id", pa.large_string()),
                                    ("doc_id", pa.large_string()), ("score", pa.float32())]))),
        (QRELS, pa.table({"query_id": pa.array(run["query_id"]).dictionary_encode(),
                          "doc_id": run["doc_id"], "score": run["score"]})),
    ]:  # fmt: skip
        assert outcome(evaluate_run_columns, qrels, given_run) == expected, type(given_run)


def test_int_ids_are_their_digits(backend: str) -> None:
    run = pa.table({"query_id": [1, 1, 2], "doc_id": [10, 2, 10], "score": [1, 2, 3]})
    qrels = {"1": {"10": 1}, 2: {10: 2}}
    assert outcome(evaluate_run_columns, qrels, run) == outcome(
        evaluate_run, qrels, Run({"1": ["2", "10"], "2": ["10"]}, ordering=TREC_ORDERING)
    )


def test_column_names_are_keywords(backend: str) -> None:
    """ranx's DataFrames name the query column ``q_id``."""
    run = table(RUN_ROWS).rename_columns(["q_id", "doc", "s"])
    report = evaluate_run_columns(QRELS, run, query_id="q_id", doc_id="doc", score="s")
    same(report, reference(QRELS, table(RUN_ROWS)))
    with pytest.raises(InvalidInputError, match=r"no column 'query_id'.*query_id="):
        evaluate_run_columns(QRELS, run)


@pytest.mark.parametrize(
    ("column", "values", "message"),
    [
        ("score", [1.0, None, 2.0], r"row 1, column 'score': a score must be a finite number, "
                                    r"got None \(query 'q1', doc 'b'\)"),
        ("score", [1.0, 2.0, math.nan], r"row 2, column 'score': .* got nan "
                                        r"\(query 'q2', doc 'a'\)"),
        ("score", [math.inf, 2.0, 1.0], r"row 0, column 'score': .* got inf"),
        ("doc_id", ["a", None, "a"], r"row 1, column 'doc_id': an id must be a string"),
        ("query_id", [None, "q1", "q2"], r"row 0, column 'query_id': an id must be a string"),
    ],
)  # fmt: skip
def test_bad_rows_are_named_as_run_from_arrow_names_them(
    backend: str, column: str, values: list[Any], message: str
) -> None:
    base = {"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "a"], "score": [1.0, 2.0, 3.0]}
    run = pa.table({**base, column: values})
    with pytest.raises(InvalidInputError, match=message) as ours:
        evaluate_run_columns({"q1": {"a": 1}}, run)
    with pytest.raises(InvalidInputError) as theirs:
        run_from_arrow(run)
    assert str(ours.value) == str(theirs.value)


def test_bad_columns_and_inputs_are_refused(backend: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="'score' holds bool"):
        evaluate_run_columns({"q": {"a": 1}}, pa.table({"query_id": ["q"], "doc_id": ["a"],
                                                         "score": [True]}))  # fmt: skip
    with pytest.raises(InvalidInputError, match="'doc_id' holds double"):
        evaluate_run_columns({"q": {"a": 1}}, pa.table({"query_id": ["q"], "doc_id": [1.0],
                                                         "score": [1.0]}))  # fmt: skip
    with pytest.raises(InvalidInputError, match="pandas or polars DataFrame"):
        evaluate_run_columns({"q": {"a": 1}}, {"q": ["a"]})
    with pytest.raises(FileNotFoundError):
        evaluate_run_columns({"q": {"a": 1}}, tmp_path / "nope.parquet")
    with pytest.raises(InvalidInputError, match=r"qrels\['q'\]\['a'\] is nan"):
        evaluate_run_columns({"q": {"a": math.nan}}, table([("q", "a", 1.0)]))


def test_no_judged_doc_and_no_ranked_query_warn_and_raise_as_evaluate_run(backend: str) -> None:
    rows = [("q1", "x", 1.0), ("q1", "y", 0.5), ("q2", "w", 1.0), ("q2", "v", 2.0)]
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    log, ref_log = WarningLog(), WarningLog()
    ours = outcome(evaluate_run_columns, qrels, table(rows), warnings=log)
    assert ours == outcome(reference, qrels, table(rows), warnings=ref_log)
    assert log.entries == ref_log.entries and log.entries
    other = [("z1", "a", 1.0), ("z2", "a", 1.0)]
    assert outcome(evaluate_run_columns, qrels, table(other)) == outcome(
        reference, qrels, table(other)
    )
    assert outcome(evaluate_run_columns, qrels, table([])) == outcome(reference, qrels, table([]))


def test_options_beyond_the_kernel_score_through_dicts(backend: str) -> None:
    run = table(RUN_ROWS)
    for options in [
        {"judged_only": True},
        {"measures": ["P.1", "bpref"]},
        {"metrics": ["ndcg", "mrr"], "k_values": [1, 2]},
    ]:
        same(evaluate_run_columns(QRELS, run, **options), reference(QRELS, run, **options))


def test_per_query_file(backend: str, tmp_path: Path) -> None:
    from ragmeter.io.scores import read_scores

    run = table(RUN_ROWS)
    for suffix in (".jsonl", ".parquet"):
        ours = evaluate_run_columns(QRELS, run, per_query=tmp_path / f"ours{suffix}")
        theirs = reference(QRELS, run, per_query=tmp_path / f"theirs{suffix}")
        assert ours.metrics == theirs.metrics
        assert read_scores(ours.extra["per_query_file"]) == read_scores(
            theirs.extra["per_query_file"]
        )


def test_large_generated_run_is_bit_for_bit(backend: str) -> None:
    """1000 queries x 50 docs with many ties, rows shuffled: both backends, both keep modes."""
    rng = np.random.default_rng(7)
    n_q, depth = 1000 if backend == "c" else 200, 50
    q = np.repeat(np.arange(n_q), depth)
    d = rng.integers(0, 5000, size=n_q * depth)
    keep = np.unique(np.stack([q, d], axis=1), axis=0, return_index=True)[1]
    q, d = q[keep], d[keep]
    order = rng.permutation(len(q))
    run = pa.table({"query_id": [f"q{i}" for i in q[order]], "doc_id": [f"d{i}" for i in d[order]],
                    "score": rng.integers(0, 20, size=len(q)).astype(float) / 4})  # fmt: skip
    qrels = {
        f"q{i}": {f"d{j}": int(g) for j, g in zip(rng.integers(0, 5000, 12),
                                                   rng.integers(-1, 4, 12), strict=True)}
        for i in range(0, n_q + 50, 1)
    }  # fmt: skip
    for per_query in (True, False):
        assert outcome(evaluate_run_columns, qrels, run, per_query=per_query) == outcome(
            reference, qrels, run, per_query=per_query
        )


# --------------------------------------------------------------------------- qrels tables

qrel_grades = st.one_of(
    st.integers(-2, 3).map(lambda g: ("int", g)),
    st.sampled_from([0.5, 2.0, -1.0, 0.0, math.nan, math.inf, None]).map(lambda g: ("float", g)),
    st.sampled_from([2**53, 2**53 + 1, -(2**53) - 1]).map(lambda g: ("int", g)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from([*QIDS[:3], None]), st.sampled_from(DOCS[:4]), qrel_grades),
        max_size=14,
    ),
    floats=st.booleans(),
)
def test_qrels_tables_are_read_as_qrels_from_arrow_reads_them(
    backend: str, rows: list[Any], floats: bool
) -> None:
    """The same queries, docs, grades (and their types), order, notes and refusals."""
    from ragmeter.evaluation._columns_qrels import qrels_columns
    from ragmeter.io.arrow import qrels_from_arrow

    kind = pa.float64() if floats or any(k == "float" for _, _, (k, _) in rows) else pa.int64()
    grades = [g for _, _, (_, g) in rows]
    if kind == pa.float64():
        grades = [None if g is None else float(g) for g in grades]
    given_table = pa.table(
        {
            "query_id": pa.array([q for q, _, _ in rows], pa.string()),
            "doc_id": pa.array([d for _, d, _ in rows], pa.string()),
            "relevance": pa.array(grades, kind),
        }
    )
    names = {"query_id": "query_id", "doc_id": "doc_id", "relevance": "relevance"}

    def read(fn: Any) -> Any:
        try:
            qrels = fn()
        except InvalidInputError as exc:
            return ("raised", str(exc))
        as_dict = {q: [(d, repr(g)) for d, g in j.items()] for q, j in qrels.items()}
        return (as_dict, list(qrels.warnings))

    assert read(lambda: qrels_columns(given_table, names)) == read(
        lambda: qrels_from_arrow(given_table)
    )
    run = table([("q1", "a", 1.0), ("q2", "b", 2.0), ("q1", "c", 0.5)])
    assert outcome(evaluate_run_columns, given_table, run) == outcome(
        lambda: reference(qrels_from_arrow(given_table), run)
    )


# --------------------------------------------------------------------------- Parquet, streamed


@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURE)
@given(
    qrels=qrels_st,
    rows=runs(),
    grouped=st.booleans(),
    batch=st.integers(1, 7),
    dictionary=st.booleans(),
    readers=st.integers(1, 3),
)
def test_a_parquet_run_read_a_batch_at_a_time_scores_the_same(
    backend: str,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    qrels: dict[str, dict[str, float]],
    rows: list[Any],
    grouped: bool,
    batch: int,
    dictionary: bool,
    readers: int,
) -> None:
    """Queries cut across batches, or not grouped at all (then the file is read whole); query
    ids read as Arrow dictionaries (one per row group) or strings; row groups decoded by one
    or more threads, or (bigger than 4 x READ_ROWS) in parts by the caller."""
    from ragmeter.evaluation import _columns_in, _columns_stream

    monkeypatch.setattr(_columns_stream, "BATCH_ROWS", batch)
    monkeypatch.setattr(_columns_in, "READ_ROWS", max(1, batch // 2))  # row groups of 5 in parts
    monkeypatch.setattr(_columns_in, "READERS", readers)
    monkeypatch.setattr(_columns_in, "_dictionary_pages", lambda meta, column: dictionary)
    if grouped:
        rows = sorted(rows, key=lambda r: r[0])
    path = tmp_path_factory.mktemp("runs") / "run.parquet"
    pq.write_table(table(rows), path, row_group_size=5)
    assert outcome(evaluate_run_columns, qrels, path, per_query=False) == outcome(
        reference, qrels, table(rows), per_query=False
    )


def test_a_streamed_run_names_bad_rows_by_their_place_in_the_file(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragmeter.evaluation import _columns_stream

    monkeypatch.setattr(_columns_stream, "BATCH_ROWS", 2)
    run = pa.table(
        {
            "query_id": ["q1", "q1", "q2", "q2", "q3", "q3"],
            "doc_id": ["a", "b", "a", "b", "a", "b"],
            "score": [1.0, 2.0, 3.0, 4.0, math.nan, 1.0],
        }
    )
    path = tmp_path / "run.parquet"
    pq.write_table(run, path)
    with pytest.raises(InvalidInputError) as ours:
        evaluate_run_columns({"q1": {"a": 1}}, path)
    with pytest.raises(InvalidInputError) as theirs:
        run_from_arrow(run)
    assert str(ours.value) == str(theirs.value)
    empty = tmp_path / "empty.parquet"
    pq.write_table(table([]), empty)
    assert outcome(evaluate_run_columns, {"q1": {"a": 1}}, empty) == outcome(
        reference, {"q1": {"a": 1}}, table([])
    )


def test_row_groups_decoded_ahead_come_in_order_and_a_failure_stops_the_rest() -> None:
    from ragmeter.evaluation._columns_in import in_order

    started: list[int] = []

    def task(i: int) -> Any:
        def run() -> int:
            started.append(i)
            if i == 3:
                raise ValueError("task 3 failed")
            time.sleep(0.002 * (i % 3))  # later tasks may finish first
            return i

        return run

    got = []
    with pytest.raises(ValueError, match="task 3 failed"):
        for value in in_order([task(i) for i in range(10)], 2):
            got.append(value)
    assert got == [0, 1, 2]
    assert max(started) <= 4  # never more than two tasks ahead of the caller
