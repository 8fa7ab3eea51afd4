"""The optional compiled kernel (``_ckernel.c``) against the pure-Python reference kernel.

The Python kernel ``py_score_query`` is the reference: on any input the compiled kernel must
return the same list of floats (compared bit for bit through ``repr``) or raise the same
exception with the same message, and ``evaluate_run`` must give the same report with either.
pytrec_eval is the external oracle on real collections with the compiled kernel forced.
Every test that needs the extension is skipped (not failed) when it was not built.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import tracemalloc
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import DuplicateDocumentError, InvalidInputError
from ragmeter.evaluation import _query, scoring
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.beir import read_beir_qrels
from ragmeter.io.trec import read_trec_qrels, read_trec_run
from ragmeter.metrics import _kernel
from ragmeter.metrics._kernel import (
    BadGradeError,
    NonStrIdsError,
    RepeatedDocsError,
    ScoreQuery,
    kernel_codes,
    py_score_query,
)

DATA = Path(__file__).resolve().parents[1] / "data"
C_KERNEL = _kernel.c_score_query
needs_c = pytest.mark.skipif(C_KERNEL is None, reason="the compiled kernel is not built")


ALL_CODES = kernel_codes(["ndcg", "recall", "precision", "hit_rate", "mrr", "map"])
BACKENDS = [
    pytest.param("python", id="python"),
    pytest.param("c", id="c", marks=needs_c),
]


def c_kernel() -> Callable[..., Any]:
    """The compiled kernel, typed loosely: the tests call it with wrong types on purpose."""
    assert C_KERNEL is not None
    return C_KERNEL


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """What a call gives: its values (floats by repr, so bit-exact and NaN-safe) or its error."""
    try:
        values = fn(*args)
    except Exception as exc:
        return ("raised", type(exc), str(exc))
    if values is None:
        return ("none",)
    return ("values", [(type(v), repr(v)) for v in values])


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run ``evaluate_run`` with the given kernel, whatever RAGMETER_PURE_PYTHON says."""
    kernel = py_score_query if request.param == "python" else c_kernel()
    monkeypatch.setattr(scoring, "score_query", kernel)
    monkeypatch.setattr(_query, "score_query", kernel)
    yield request.param


# --------------------------------------------------------------------------- kernel level

DOCS = [f"d{i}" for i in range(8)]


class StrSub(str):
    """A str subclass: the compiled kernel leaves it to the Python kernel."""


# doc ids: mostly str (hits and repeats), sometimes ids Python hashes/compares its own way
odd_ids = st.sampled_from(
    [1, 2, 1.0, True, ("d1",), b"d1", None, StrSub("d1"), StrSub("d2"), frozenset({"d1"})]
)
unhashable = st.just(["d1"])
doc_ids = st.sampled_from(DOCS) | odd_ids
ranked_ids = st.one_of(
    st.lists(st.sampled_from(DOCS), max_size=10, unique=True),
    st.lists(st.sampled_from(DOCS), max_size=10),
    st.lists(st.sampled_from(DOCS) | odd_ids, max_size=8),
    st.lists(st.sampled_from(DOCS) | odd_ids | unhashable, max_size=6),
)
good_grades = st.one_of(
    st.integers(-3, 3),
    st.floats(-2, 4),
    st.booleans(),
    st.sampled_from([0.0, -0.0, 1e-320, 5e-324, 2.5, math.inf, -math.inf, math.nan, 1e308]),
    st.sampled_from([2**53, -(2**53), 2**53 + 1, 2**60, -(2**60), 10**400]),
)
odd_grades = st.sampled_from(
    [
        "1",
        None,
        [1],
        Fraction(1, 3),
        Fraction(7, 2),
        np.float64(1.5),
        np.int64(2),
        np.float32(0.5),
        complex(1, 0),
    ]
)
judgement_dicts = st.one_of(
    st.dictionaries(st.sampled_from(DOCS), good_grades, max_size=7),
    st.dictionaries(st.sampled_from(DOCS) | odd_ids, good_grades | odd_grades, max_size=6),
)
k_lists = st.one_of(
    st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True).map(sorted),
    st.sampled_from([[1], [1000], [3, 2**53], [2**53 + 1], [2, 2**70]]),
)
code_lists = st.one_of(
    st.lists(st.sampled_from(ALL_CODES), max_size=7),
    st.sampled_from([[], [0, 0], [4, 5, 4, 5]]),
)
levels = st.sampled_from(
    [None, -1, 0, 0.5, 1, 2, 3.0, -0.0, math.inf, -math.inf, 2**53, 2**60, math.nan, True]
)


MANY = [f"d{i}" for i in range(60)]
fast_ranked = st.one_of(
    st.lists(st.sampled_from(MANY), max_size=30, unique=True),
    st.lists(st.sampled_from(MANY), min_size=30, max_size=60, unique=True),
    st.lists(st.sampled_from(MANY[:12]), max_size=20),  # repeats
)
fast_judgements = st.one_of(
    st.dictionaries(
        st.sampled_from(MANY),
        st.integers(-3, 4) | st.floats(-2, 4) | st.booleans() | st.sampled_from([0.0, -0.0]),
        max_size=25,
    ),
    # more than 16 relevant / retrieved: the sorts' qsort path
    st.dictionaries(st.sampled_from(MANY), st.integers(1, 4) | st.floats(0.1, 4), min_size=17),
)
fast_ks = st.lists(st.integers(1, 40), min_size=1, max_size=5, unique=True).map(sorted)
fast_codes = st.lists(st.sampled_from(ALL_CODES), max_size=8)


@needs_c
@settings(max_examples=1500, deadline=None)
@given(
    ranked=fast_ranked,
    judgements=fast_judgements,
    ks=fast_ks,
    codes=fast_codes,
    level=st.sampled_from([None, None, -1, 0, 0.5, 1, 2, 3.0, -0.0]),
)
@pytest.mark.slow
def test_compiled_kernel_equals_python_kernel_on_recognised_input(
    ranked: list[str],
    judgements: dict[str, float],
    ks: list[int],
    codes: list[int],
    level: float | None,
) -> None:
    """The inputs the compiled kernel computes itself: the same floats, bit for bit."""
    want = outcome(py_score_query, ranked, judgements, ks, codes, level)
    assert outcome(c_kernel(), ranked, judgements, ks, codes, level) == want
    assert outcome(c_kernel(), tuple(ranked), judgements, tuple(ks), tuple(codes), level) == want


@needs_c
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # numpy grades, in Python
@settings(max_examples=1000, deadline=None)
@given(ranked=ranked_ids, judgements=judgement_dicts, ks=k_lists, codes=code_lists, level=levels)
@pytest.mark.slow
def test_compiled_kernel_equals_python_kernel_on_any_input(
    ranked: list[Any],
    judgements: dict[Any, Any],
    ks: list[int],
    codes: list[int],
    level: Any,
) -> None:
    """Same floats (bit for bit), same None, same exception and message, on any input."""
    want = outcome(py_score_query, ranked, judgements, ks, codes, level)
    assert outcome(c_kernel(), ranked, judgements, ks, codes, level) == want
    assert outcome(c_kernel(), tuple(ranked), judgements, tuple(ks), codes, level) == want


@needs_c
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # numpy grades, in Python
@settings(max_examples=300, deadline=None)
@given(ranked=ranked_ids, judgements=judgement_dicts, ks=k_lists, codes=code_lists, level=levels)
def test_compiled_kernel_hands_other_containers_to_python(
    ranked: list[Any], judgements: dict[Any, Any], ks: list[int], codes: list[int], level: Any
) -> None:
    """A non-dict mapping, a custom sequence, unsorted ks: whatever Python does, C does."""
    proxy = types.MappingProxyType(judgements)
    for args in (
        (ranked, proxy, ks, codes, level),
        (range(3), judgements, ks, codes, level),
        (ranked, list(judgements.items()), ks, codes, level),
        (ranked, judgements, [*ks[::-1], 0], codes, level),
        (ranked, judgements, ks, [*codes, 7], level),
        (ranked, judgements, [], codes, level),
    ):
        assert outcome(c_kernel(), *args) == outcome(py_score_query, *args)


@needs_c
def test_compiled_kernel_takes_any_call_form_python_does() -> None:
    args: tuple[Any, ...] = (["a", "b"], {"b": 1}, [1, 2], ALL_CODES, None)
    assert c_kernel()(*args[:4], relevance_level=None) == py_score_query(*args)
    assert outcome(c_kernel(), *args[:4]) == outcome(py_score_query, *args[:4])
    with pytest.raises(TypeError, match="positional argument"):
        c_kernel()(*args[:4])


@needs_c
def test_compiled_kernel_computes_what_it_recognises_and_hands_on_the_rest() -> None:
    """The fast path really runs on str ids and int/float/bool grades (no Python call)."""
    from ragmeter.metrics import _ckernel

    handed: list[tuple[Any, ...]] = []

    def counting(*args: Any, **kwargs: Any) -> list[float] | None:
        handed.append(args)
        return py_score_query(*args, **kwargs)

    _ckernel.configure(counting, RepeatedDocsError)
    try:
        recognised: list[tuple[Any, ...]] = [
            (["a", "b"], {"b": 1, "c": 2.5, "d": True, "e": -1}, [1, 2], ALL_CODES, None),
            (("a", "b"), {"b": 2**53}, (1, 2), tuple(ALL_CODES), 0.5),
            (["a", "b"], {"b": 1}, [1], ALL_CODES, 2),
            ([], {"b": 1}, [1], [], None),
        ]
        for args in recognised:
            assert c_kernel()(*args) == py_score_query(*args)
        assert handed == []
        odd: list[tuple[Any, ...]] = [
            (["a", StrSub("b")], {"b": 1}, [1], ALL_CODES, None),
            (["a", "b"], {"b": np.float64(1.0)}, [1], ALL_CODES, None),
            (["a", "b"], {"b": 1}, [1], ALL_CODES, 2**60),
        ]
        for args in odd:
            assert c_kernel()(*args) == py_score_query(*args)
        refused: list[tuple[Any, ...]] = [
            (["a", "b"], {"b": 2**53 + 1}, [1], ALL_CODES, None),
            (["a", "b"], {"b": 2.0**53 * 2}, [1], ALL_CODES, None),
            (["a", "b"], {"b": math.nan}, [1], ALL_CODES, None),
            (["a", "b"], {"b": -math.inf}, [1], ALL_CODES, None),
            (["a", "b"], {1: 1}, [1], ALL_CODES, None),
        ]
        for args in refused:
            with pytest.raises((BadGradeError, NonStrIdsError)) as from_c:
                c_kernel()(*args)
            with pytest.raises(from_c.type):
                py_score_query(*args)
        assert handed == odd + refused
    finally:
        _ckernel.configure(py_score_query, RepeatedDocsError)


@needs_c
def test_every_rank_has_the_python_discount() -> None:
    """One relevant doc at rank r: NDCG@r is 1 / log2(r + 1), the same float in C and Python."""
    ranked = [f"d{i}" for i in range(1, 3001)]
    ndcg = kernel_codes(["ndcg"])
    for r in range(1, 3001):
        judgements = {f"d{r}": 1}
        got = c_kernel()(ranked, judgements, [r], ndcg, None)
        assert got == py_score_query(ranked, judgements, [r], ndcg, None)
        assert got == [1 / math.log2(r + 1)]


@needs_c
def test_repeated_doc_raises_the_python_kernels_error() -> None:
    with pytest.raises(RepeatedDocsError):
        c_kernel()(["a", "b", "a"], {"b": 1}, [1], ALL_CODES, None)
    # an unscored query is not checked for repeats, as in Python
    assert c_kernel()(["a", "a"], {"b": 0}, [1], ALL_CODES, None) is None


@needs_c
def test_configure_refuses_bad_arguments() -> None:
    from ragmeter.metrics import _ckernel

    with pytest.raises(TypeError, match="fallback must be callable"):
        _ckernel.configure(1, RepeatedDocsError)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be an exception class"):
        _ckernel.configure(py_score_query, int)  # type: ignore[arg-type]


@needs_c
def test_no_reference_or_memory_leaks_on_any_path() -> None:
    """Inputs keep their reference counts and memory stays flat over many calls per path."""
    # fresh objects only, so every count is ours alone (a shared object such as the module's
    # ALL_CODES is also held by frames of earlier tests, which the collector may free meanwhile)
    doc = "shared-doc-" + "x" * 10
    ranked = [doc, "b", "c"]
    codes = list(ALL_CODES)
    cases: list[tuple[Any, ...]] = [
        (ranked, {doc: 2, "z": 1}, [1, 2], codes, None),  # values
        (ranked, {doc: 2, "z": 1}, [1, 2], codes, 1),  # values, with a level
        (ranked, {"z": 0}, [1], codes, None),  # unscored: None
        ([doc, doc], {doc: 1}, [1], codes, None),  # RepeatedDocsError
        (ranked, {doc: "bad"}, [1], codes, None),  # Python fallback raises TypeError
        ([doc, StrSub("b")], {doc: 1}, [1], codes, None),  # Python fallback, values
        ([doc, 1], {doc: 1}, [1], codes, None),  # Python fallback: NonStrIdsError
        (ranked, {doc: math.nan}, [1], codes, None),  # Python fallback: BadGradeError
    ]
    kernel = c_kernel()
    for args in cases:
        # None and small ints are shared by everyone
        objects = [a for a in (doc, *args) if a is not None and not isinstance(a, int)]
        before = [sys.getrefcount(a) for a in objects]

        def call(args: tuple[Any, ...] = args) -> None:
            with contextlib.suppress(RepeatedDocsError, TypeError, NonStrIdsError, BadGradeError):
                kernel(*args)

        for _ in range(200):
            call()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            for _ in range(5000):
                call()
            grown = tracemalloc.get_traced_memory()[0] - start
        finally:
            tracemalloc.stop()
        assert grown < 4096, (args, grown)
        assert [sys.getrefcount(a) for a in objects] == before, args


def test_backend_follows_the_environment() -> None:
    code = "from ragmeter.metrics import _kernel as k; print(k.BACKEND, k.c_score_query is None)"
    env = {k: v for k, v in os.environ.items() if k != "RAGMETER_PURE_PYTHON"}
    default = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    forced = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "RAGMETER_PURE_PYTHON": "1"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    built = C_KERNEL is not None
    assert default == ["c" if built else "python", str(not built)]
    assert forced == ["python", str(not built)]


def test_backend_names_the_kernel_in_use() -> None:
    assert _kernel.BACKEND in ("c", "python")
    assert (_kernel.score_query is py_score_query) == (_kernel.BACKEND == "python")
    if _kernel.BACKEND == "c":
        assert _kernel.score_query is C_KERNEL


# --------------------------------------------------------------------------- driver level

QIDS = ["q1", "q2", "q3", "q4"]
run_lists = st.one_of(
    st.lists(st.sampled_from(DOCS), max_size=10, unique=True),
    st.lists(st.sampled_from(DOCS), max_size=10),
    st.lists(st.sampled_from(DOCS) | st.sampled_from([1, 2.0, StrSub("d1")]), max_size=6),
)
driver_qrels = st.dictionaries(
    st.sampled_from(QIDS),
    st.dictionaries(
        st.sampled_from(DOCS), st.integers(-2, 3) | st.floats(-1, 3) | odd_grades, max_size=6
    ),
)


def report_or_error(
    kernel: ScoreQuery, monkeypatch: pytest.MonkeyPatch, *args: Any, **kwargs: Any
) -> tuple[Any, ...]:
    with monkeypatch.context() as m:
        m.setattr(scoring, "score_query", kernel)
        m.setattr(_query, "score_query", kernel)
        try:
            report = evaluate_run(*args, **kwargs)
        except Exception as exc:
            return ("raised", type(exc), str(exc))
    per_q = {q: {k: repr(v) for k, v in row.items()} for q, row in report.per_query.items()}
    return (
        {k: repr(v) for k, v in report.metrics.items()},
        per_q,
        report.n_queries,
        report.conventions,
    )


@needs_c
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # numpy grades, in Python
@settings(max_examples=400, deadline=None)
@given(
    qrels=driver_qrels,
    run=st.dictionaries(st.sampled_from([*QIDS, "q9"]), run_lists),
    ks=st.lists(st.integers(1, 12), min_size=1, max_size=3),
    level=st.sampled_from([None, 0, 1, 2, 0.5]),
)
def test_evaluate_run_gives_the_same_report_with_either_kernel(
    qrels: dict[str, dict[str, Any]],
    run: dict[str, list[Any]],
    ks: list[int],
    level: float | None,
) -> None:
    """Missing/unjudged queries, repeats, odd ids and grades: same report or same error."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        kwargs: dict[str, Any] = {"k_values": ks, "relevance_level": level}
        want = report_or_error(py_score_query, monkeypatch, qrels, run, **kwargs)
        assert report_or_error(c_kernel(), monkeypatch, qrels, run, **kwargs) == want


def test_bad_grade_is_an_invalid_input_error(backend: str) -> None:
    with pytest.raises(InvalidInputError, match=r"cannot score query 'q1': .*numeric grade"):
        evaluate_run({"q1": {"a": "2"}}, {"q1": ["a"]}, k_values=[1])  # type: ignore[dict-item]


def test_unhashable_doc_id_is_an_invalid_input_error(backend: str) -> None:
    with pytest.raises(InvalidInputError, match=r"run\['q1'\]: id \['b'\] is a list"):
        evaluate_run({"q1": {"a": 1}}, {"q1": ["a", ["b"]]}, k_values=[1])  # type: ignore[list-item]


def test_repeated_doc_is_a_duplicate_document_error(backend: str) -> None:
    with pytest.raises(DuplicateDocumentError, match="q1"):
        evaluate_run({"q1": {"a": 1}}, {"q1": ["a", "b", "a"]}, k_values=[1])


def test_int_ids_are_compared_as_strings(backend: str) -> None:
    """An int id is its digits: 1 and "1" are the same doc and the same query."""
    qrels: Any = {1: {1: 1, "x": 1}}
    report = evaluate_run(qrels, {"1": ["1", "y"]}, k_values=[1, 2], metrics=["recall"])
    assert report.metrics == {"recall@1": 0.5, "recall@2": 0.5}
    assert list(report.per_query) == ["1"]
    assert evaluate_run(qrels, {1: [1, "x"]}, k_values=[2], metrics=["recall"]).metrics == {
        "recall@2": 1.0
    }
    # 1 and "1" in one ranking are one doc listed twice
    with pytest.raises(DuplicateDocumentError, match="'1'"):
        evaluate_run(qrels, {"1": [1, "1"]}, k_values=[1])


def test_ids_that_are_the_same_string_or_not_ids_are_refused(backend: str) -> None:
    """Both 1 and "1" in qrels used to drop one query silently; a float id is ambiguous."""
    with pytest.raises(InvalidInputError, match=r"qrels has both 1 \(int\) and '1' \(str\)"):
        evaluate_run({1: {"a": 1}, "1": {"b": 1}}, {"1": ["a"]}, k_values=[1])  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match=r"qrels\['q'\] has both 7 \(int\) and '7'"):
        evaluate_run({"q": {7: 1, "7": 0}}, {"q": ["7"]}, k_values=[1])  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match=r"run\['q'\]: id 1.0 is a float"):
        evaluate_run({"q": {"1": 1}}, {"q": [1.0]}, k_values=[1])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match=r"id True is a bool"):
        evaluate_run({True: {"1": 1}}, {"q": ["1"]}, k_values=[1])  # type: ignore[dict-item]


# --------------------------------------------------------------------------- pytrec_eval

KS = (1, 3, 5, 10, 20, 100, 1000)
MEASURES = {
    "ndcg": "ndcg_cut_{k}",
    "precision": "P_{k}",
    "recall": "recall_{k}",
    "map": "map_cut_{k}",
    "hit_rate": "success_{k}",
}
CASES = {
    "trec_eval results.test": ("qrels.test", "results.test", None),
    "trec_eval rel_level -l2": ("qrels.rel_level", "results.test", 2),
    "trec_eval results.trunc": ("qrels.test", "results.trunc", None),
    "trec_eval topic 302": ("qrels-302.test", "results-302.test", None),
    "cranfield bm25": ("../cranfield_beir/qrels/test.tsv", "../cranfield_beir/bm25.run", None),
}


def oracle_inputs(
    qrels_name: str, run_name: str
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """qrels and run for pytrec_eval, parsed here with independent code."""
    qrels: dict[str, dict[str, int]] = {}
    lines = (DATA / "trec_eval" / qrels_name).read_text().splitlines()
    for line in lines[1:] if qrels_name.endswith(".tsv") else lines:
        f = line.split()
        if f and not line.startswith("#"):
            q, d, g = (f[0], f[1], f[2]) if len(f) == 3 else (f[0], f[2], f[3])
            qrels.setdefault(q, {})[d] = int(g)
    run: dict[str, dict[str, float]] = {}
    for line in (DATA / "trec_eval" / run_name).read_text().splitlines():
        f = line.split()
        if f and not line.startswith("#"):
            run.setdefault(f[0], {})[f[2]] = float(f[4])
    return qrels, run


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_pytrec_eval_on_real_collections(case: str, backend: str) -> None:
    qrels_name, run_name, level = CASES[case]
    oracle_qrels, oracle_run = oracle_inputs(qrels_name, run_name)
    measures = {"recip_rank", "map"} | {
        f"{m.split('_{k}')[0]}.{','.join(map(str, KS))}" for m in MEASURES.values()
    }
    oracle = pytrec_eval.RelevanceEvaluator(
        oracle_qrels, measures, relevance_level=1 if level is None else level
    ).evaluate(oracle_run)
    qrels_path = DATA / "trec_eval" / qrels_name
    qrels: Mapping[str, Mapping[str, float]] = (
        read_beir_qrels(qrels_path) if qrels_path.suffix == ".tsv" else read_trec_qrels(qrels_path)
    )
    run: Mapping[str, Sequence[str]] = read_trec_run(DATA / "trec_eval" / run_name)
    report = evaluate_run(
        qrels, run, k_values=KS, metrics=[*MEASURES, "mrr"], relevance_level=level
    )
    assert report.n_queries > 0
    for qid, row in report.per_query.items():
        want = oracle.get(qid)
        for key, value in row.items():
            name, _, k = key.partition("@")
            if want is None:  # judged, not in the run: 0 (trec_eval -c)
                expected = 0.0
            elif not k:
                expected = want["recip_rank" if name == "mrr" else "map"]
            elif name == "mrr":
                rr = want["recip_rank"]
                expected = rr if rr > 0 and round(1 / rr) <= int(k) else 0.0
            else:
                expected = want[MEASURES[name].format(k=k)]
            assert value == pytest.approx(expected, abs=1e-12), (qid, key)
    assert report.metrics["ndcg@10"] == pytest.approx(
        math.fsum(r["ndcg@10"] for r in report.per_query.values()) / report.n_queries
    )
