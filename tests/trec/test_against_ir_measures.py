"""ir_measures names against ir_measures itself, per query, on generated graded runs.

ir_measures picks a provider per measure: pytrec_eval for the trec_eval ones, its own
``Judged``, gdeval (a Perl script; ERR to 5 decimals) for ``ERR@k``, cwl_eval for
``RBP(rel=..., p=...)`` and pyndeval (TREC's ndeval) for ``alpha_nDCG@k``. Scores are
distinct, because the providers break ties differently (trec_eval by doc id descending,
ir_measures' own code and ndeval ascending); ``test_against_pytrec_eval`` covers ties.
"""

from __future__ import annotations

import math
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.metrics.ranking import judged_at_k
from ragmeter.metrics.trec import alpha_ndcg, evaluate

ir_measures = pytest.importorskip("ir_measures")

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
DOCS = [f"d{i}" for i in range(10)]

PYTREC = [
    "nDCG@5", "nDCG@10", "nDCG", "P@3", "P(rel=2)@5", "R@5", "AP", "AP@5", "RR", "RR@3",
    "RR(rel=2)", "Bpref", "infAP", "Rprec", "NumRet", "NumRel", "NumRelRet", "SetP", "SetR",
    "SetF", "Success@3", "IPrec@0.2", "Judged@3", "Judged@10",
]  # fmt: skip


@st.composite
def collections(draw: st.DrawFn, numeric_ids: bool = False) -> tuple[Qrels, Run]:
    qrels: Qrels = {}
    run: Run = {}
    for qi in range(draw(st.integers(1, 4))):
        qid = str(qi + 1) if numeric_ids else f"q{qi}"
        qrels[qid] = draw(st.dictionaries(st.sampled_from(DOCS), st.integers(0, 4), min_size=1))
        docs = draw(st.lists(st.sampled_from([*DOCS, "u1", "u2"]), unique=True, min_size=1))
        run[qid] = {d: float(len(docs) - i) for i, d in enumerate(docs)}
    return qrels, run


def _ir_values(measure: str, qrels: Qrels, run: Run) -> dict[str, float]:
    parsed = ir_measures.parse_measure(measure)
    return {m.query_id: float(m.value) for m in ir_measures.iter_calc([parsed], qrels, run)}


def _close(got: float | str, want: float, tol: float = 1e-12) -> bool:
    assert not isinstance(got, str)
    return (math.isnan(got) and math.isnan(want)) or abs(got - want) <= tol


@settings(max_examples=120, deadline=None)
@given(collections())
def test_trec_eval_backed_names_and_judged(data: tuple[Qrels, Run]) -> None:
    qrels, run = data
    got = evaluate(qrels, run, PYTREC)
    for measure in PYTREC:
        want = _ir_values(measure, qrels, run)
        for qid, value in want.items():
            assert _close(got.per_query[qid][measure], value), (measure, qid)


@settings(max_examples=60, deadline=None)
@given(collections())
def test_judged_at_k_is_rankings_judged_at_k(data: tuple[Qrels, Run]) -> None:
    qrels, run = data
    got = evaluate(qrels, run, ["Judged@1", "Judged@4"])
    for qid, scores in run.items():
        ranked = sorted(scores, key=scores.__getitem__, reverse=True)
        for k in (1, 4):
            assert got.per_query[qid][f"Judged@{k}"] == judged_at_k(ranked, qrels[qid], k)


@pytest.mark.skipif(shutil.which("perl") is None, reason="gdeval (ERR) is a Perl script")
@settings(max_examples=25, deadline=None)
@given(collections(numeric_ids=True))
def test_err_matches_gdeval(data: tuple[Qrels, Run]) -> None:
    qrels, run = data
    got = evaluate(qrels, run, ["ERR@3", "ERR@10"])
    for measure in ("ERR@3", "ERR@10"):
        for qid, value in _ir_values(measure, qrels, run).items():
            ours = got.per_query[qid][measure]
            assert float(f"{ours:.5f}") == value, (measure, qid)  # gdeval prints %.5f


@settings(max_examples=40, deadline=None)
@given(collections(), st.sampled_from([0.5, 0.8, 0.95]), st.sampled_from([1, 2]))
def test_rbp_matches_cwl_eval(data: tuple[Qrels, Run], p: float, rel: int) -> None:
    pytest.importorskip("cwl")
    qrels, run = data
    measure = f"RBP(rel={rel},p={p})"
    got = evaluate(qrels, run, [measure])
    for qid, value in _ir_values(measure, qrels, run).items():
        assert _close(got.per_query[qid][measure], value, 1e-9), qid


def test_rbp_residual_bounds_what_rbp_could_still_gain() -> None:
    """Every unjudged doc relevant, and the tail past the ranking too: RBP + residual."""
    qrels = {"1": {"a": 1, "b": 0}}
    run = {"1": {"a": 3.0, "u": 2.0, "b": 1.0}}
    filled = {"1": {"a": 1, "b": 0, "u": 1, **{f"t{i}": 1 for i in range(400)}}}
    full = {"1": {**run["1"], **{f"t{i}": -float(i) for i in range(400)}}}
    got = evaluate(qrels, run, ["RBP(p=0.8)", "RBP_resid(p=0.8)"]).per_query["1"]
    upper = _ir_values("RBP(rel=1,p=0.8)", filled, full)["1"]
    assert _close(float(got["RBP(p=0.8)"]) + float(got["RBP_resid(p=0.8)"]), upper, 1e-12)


SUBTOPICS = ["s1", "s2", "s3"]


@st.composite
def subtopic_collections(draw: st.DrawFn) -> tuple[dict[str, dict[str, dict[str, int]]], Run]:
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    run: Run = {}
    for qi in range(draw(st.integers(1, 3))):
        qid = f"q{qi}"
        qrels[qid] = {
            s: draw(st.dictionaries(st.sampled_from(DOCS), st.integers(0, 2), min_size=1))
            for s in draw(st.lists(st.sampled_from(SUBTOPICS), unique=True, min_size=1))
        }
        docs = draw(st.lists(st.sampled_from([*DOCS, "u1"]), unique=True, min_size=1))
        run[qid] = {d: float(len(docs) - i) for i, d in enumerate(docs)}
    return qrels, run


@settings(max_examples=80, deadline=None)
@given(subtopic_collections(), st.sampled_from([3, 5, 20]), st.sampled_from([0.5, 0.2]))
def test_alpha_ndcg_matches_ndeval(
    data: tuple[dict[str, dict[str, dict[str, int]]], Run], k: int, alpha: float
) -> None:
    pytest.importorskip("pyndeval")
    qrels, run = data
    flat = [
        ir_measures.Qrel(q, d, g, s)
        for q, subs in qrels.items()
        for s, docs in subs.items()
        for d, g in docs.items()
    ]
    measure = ir_measures.parse_measure(f"alpha_nDCG(alpha={alpha})@{k}")
    want = {m.query_id: float(m.value) for m in ir_measures.iter_calc([measure], flat, run)}
    got = alpha_ndcg(qrels, run, k, alpha=alpha)
    for qid, value in want.items():
        assert _close(got[qid], value, 1e-12), qid
