"""Unjudged documents made visible (issue 21): ``judged@k`` on every retrieval report, the
warning that counts the unjudged top docs, and ``judged_only`` (trec_eval ``-J``).

Oracles: ir_measures' ``Judged@k`` for the per-query shares, pytrec_eval with
``judged_docs_only_flag=True`` for every metric under ``judged_only``, and trec_eval's
test collection (``tests/data/trec_eval``) read with a few lines of independent code.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ir_measures
import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragmeter
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import (
    JUDGED_THRESHOLD,
    evaluate_retrieval,
    evaluate_run,
    evaluate_run_file,
)
from ragmeter.io.trec import read_trec_qrels, read_trec_run
from ragmeter.metrics import _kernel
from ragmeter.metrics._kernel import kernel_codes, py_score_query
from ragmeter.report import UNJUDGED_JUDGED_ONLY, RetrievalEvalReport, WarningLog

DATA = Path(__file__).resolve().parents[1] / "data"
TREC = DATA / "trec_eval"
TOL = 1e-9

# ragmeter key prefix -> trec_eval measure prefix (``_k`` appended); uncut keys by name
CUT = {"ndcg": "ndcg_cut", "precision": "P", "recall": "recall", "map": "map_cut"}
CUT["hit_rate"] = "success"
UNCUT = {"map": "map", "mrr": "recip_rank"}


# --------------------------------------------------------------------------- oracles


def judged_oracle(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Sequence[str]], ks: Sequence[int]
) -> dict[str, dict[str, float]]:
    """ir_measures' Judged@k per query (rankings given distinct, falling scores)."""
    scored = {q: {d: float(len(ds) - i) for i, d in enumerate(ds)} for q, ds in run.items()}
    measures = [ir_measures.parse_measure(f"Judged@{k}") for k in ks]
    out: dict[str, dict[str, float]] = {}
    for metric in ir_measures.iter_calc(measures, dict(qrels), scored):
        out.setdefault(metric.query_id, {})[f"judged@{metric.measure['cutoff']}"] = metric.value
    return out


def pytrec_judged_only(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Sequence[str]],
    ks: Sequence[int],
) -> dict[str, dict[str, float]]:
    """pytrec_eval with ``judged_docs_only_flag=True`` (trec_eval -J), per query."""
    cut = ",".join(str(k) for k in ks)
    spec = {f"{m}.{cut}" for m in CUT.values()} | set(UNCUT.values())
    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: dict(j) for q, j in qrels.items()}, spec, judged_docs_only_flag=True
    )
    scored = {q: {d: float(len(ds) - i) for i, d in enumerate(ds)} for q, ds in run.items()}
    result: dict[str, dict[str, float]] = evaluator.evaluate(scored)
    return result


def trec_name(key: str) -> str | None:
    name, _, k = key.partition("@")
    if not k:
        return UNCUT[name]
    return f"{CUT[name]}_{k}" if name in CUT else None


def assert_matches_trec_j(report: RetrievalEvalReport, oracle: Mapping[str, Any]) -> int:
    """Every scored query's every key with a trec_eval name equals pytrec_eval -J's."""
    checked = 0
    for qid, row in report.per_query.items():
        if qid not in oracle:  # not in the run: pytrec_eval has no row for it
            continue
        for key, value in row.items():
            name = trec_name(key)
            if name is None:
                continue
            assert value == pytest.approx(oracle[qid][name], abs=TOL), (qid, key)
            checked += 1
    return checked


# --------------------------------------------------------------------------- generated runs

DOCS = [f"d{i}" for i in range(10)] + [f"u{i}" for i in range(6)]  # u*: never judged


@st.composite
def collections(draw: st.DrawFn) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """Graded qrels (negative grades too: trec_eval reads them as unjudged) and a run whose
    rankings mix judged and unjudged docs; every query has a relevant doc."""
    n = draw(st.integers(1, 5))
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    for i in range(n):
        qid = f"q{i}"
        judged = draw(st.lists(st.sampled_from(DOCS[:10]), min_size=1, max_size=8, unique=True))
        grades = draw(st.lists(st.integers(-1, 3), min_size=len(judged), max_size=len(judged)))
        if max(grades) <= 0:
            grades[0] = draw(st.integers(1, 3))
        qrels[qid] = dict(zip(judged, grades, strict=True))
        run[qid] = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=14, unique=True))
    return qrels, run


KS = st.lists(st.integers(1, 15), min_size=1, max_size=4, unique=True).map(sorted)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(collections(), KS)
def test_judged_at_k_per_query_is_ir_measures_judged(
    data: tuple[dict[str, dict[str, int]], dict[str, list[str]]], ks: list[int]
) -> None:
    qrels, run = data
    report = evaluate_run(qrels, run, k_values=ks)
    assert report.judged is not None
    oracle = judged_oracle(qrels, run, ks)
    assert report.judged.per_query.keys() == oracle.keys()
    for qid, row in oracle.items():
        assert report.judged.per_query[qid] == pytest.approx(row, abs=TOL), qid
    for key, mean in report.judged.means.items():  # every query ranked: a plain mean
        assert mean == pytest.approx(math.fsum(r[key] for r in oracle.values()) / len(oracle))
    # the metrics are the ones asked for, as before: judged@k sits beside them
    assert not any(key.startswith("judged@") for key in report.metrics)
    assert report.metrics == evaluate_run(qrels, run, k_values=ks, judged_threshold=0).metrics


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(collections(), KS)
def test_judged_only_is_trec_eval_dash_j_per_query(
    data: tuple[dict[str, dict[str, int]], dict[str, list[str]]], ks: list[int]
) -> None:
    qrels, run = data
    report = evaluate_run(qrels, run, k_values=ks, judged_only=True)
    oracle = pytrec_judged_only(qrels, run, ks)
    assert assert_matches_trec_j(report, oracle) > 0
    # judged@k is still of the full ranking: what judged_only removed shows
    assert report.judged is not None and report.judged.judged_only
    assert report.judged.per_query == evaluate_run(qrels, run, k_values=ks).judged.per_query  # type: ignore[union-attr]
    assert report.conventions.unjudged == UNJUDGED_JUDGED_ONLY


def test_judged_only_on_trec_evals_test_collection() -> None:
    """The 4 queries of trec_eval's own test data, every key against pytrec_eval -J."""
    qrels = read_trec_qrels(TREC / "qrels.test")
    run = read_trec_run(TREC / "results.test")
    oracle_qrels = {q: {d: int(g) for d, g in j.items()} for q, j in qrels.items()}
    ks = (1, 5, 10, 100, 1000)
    report = evaluate_run(qrels, run, k_values=ks, judged_only=True)
    assert assert_matches_trec_j(report, pytrec_judged_only(oracle_qrels, run, ks)) > 50
    # and without -J the rankings hold unjudged docs, so the two differ
    plain = evaluate_run(qrels, run, k_values=ks)
    assert plain.judged is not None and plain.judged.means["judged@1000"] < 1.0
    assert plain.metrics != report.metrics


def test_a_ranking_with_no_judged_doc_left_scores_zero_like_trec_eval() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1, "d3": 0}}
    run = {"q1": ["u1", "u2"], "q2": ["u3", "d3", "d2"]}
    report = evaluate_run(qrels, run, k_values=(1, 2), judged_only=True)
    oracle = pytrec_judged_only(qrels, run, (1, 2))
    assert assert_matches_trec_j(report, oracle) > 0
    assert report.per_query["q2"]["ndcg@2"] == pytest.approx(oracle["q2"]["ndcg_cut_2"])


# --------------------------------------------------------------------------- kernels


@settings(max_examples=300, deadline=None)
@given(collections(), KS, st.sampled_from([None, 1, 2]))
def test_both_kernels_give_the_same_judged_values(
    data: tuple[dict[str, dict[str, int]], dict[str, list[str]]],
    ks: list[int],
    level: int | None,
) -> None:
    if _kernel.c_score_query is None:  # pragma: no cover - the compiled kernel is built here
        pytest.skip("the compiled kernel is not built")
    qrels, run = data
    codes = kernel_codes(["ndcg", "recall", "precision", "hit_rate", "mrr", "map", "judged"])
    for qid, ranking in run.items():
        py = py_score_query(ranking, qrels[qid], ks, codes, level)
        c = _kernel.c_score_query(ranking, qrels[qid], ks, codes, level)
        assert repr(py) == repr(c), qid  # the same floats, bit for bit
        empty = _kernel.c_score_query([], qrels[qid], ks, codes[-1:], level)
        assert empty == py_score_query([], qrels[qid], ks, codes[-1:], level)
        assert empty is None or empty == [0.0] * len(ks)


# --------------------------------------------------------------------------- the warning

QRELS = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d4": 1, "d5": 0}, "q3": {"d6": 1}}
RUN = {
    "q1": ["d1", "new1", "d2", "new2", "d3"],
    "q2": ["new3", "new4", "new5", "d4"],
    "q3": ["d6"],
}


def counts_oracle(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Sequence[str]], k: int
) -> tuple[int, int, int]:
    """(top-k docs, unjudged among them, queries with one) from ir_measures' Judged@k."""
    shares = judged_oracle(qrels, run, [k])
    docs = {q: min(k, len(run[q])) for q in shares}
    unjudged = {q: docs[q] - round(shares[q][f"judged@{k}"] * docs[q]) for q in shares}
    return sum(docs.values()), sum(unjudged.values()), sum(1 for u in unjudged.values() if u)


def test_the_warning_counts_the_unjudged_top_docs_and_says_what_they_mean() -> None:
    log = WarningLog()
    report = evaluate_run(QRELS, RUN, k_values=(1, 10), warnings=log)
    docs, unjudged, affected = counts_oracle(QRELS, RUN, 10)
    j = report.judged
    assert j is not None and (j.k, j.documents, j.unjudged) == (10, docs, unjudged)
    assert (j.queries, j.queries_with_unjudged) == (3, affected)
    assert j.share == pytest.approx(1 - unjudged / docs) and j.below_threshold
    [warning] = [w for w in report.warnings if "(judged@10)" in w]
    assert warning in log.entries
    assert f"{unjudged:,} of the {docs:,} docs in the top 10 of 3 rankings" in warning
    assert f"in {affected:,} of those queries" in warning
    assert f"{1 - unjudged / docs:.1%}" in warning
    assert "lower bound" in warning and "judged_only=True" in warning


def test_the_cut_off_is_10_or_the_nearest_and_the_threshold_is_an_option() -> None:
    assert evaluate_run(QRELS, RUN, k_values=(1, 3, 100)).judged.k == 3  # type: ignore[union-attr]
    assert evaluate_run(QRELS, RUN, k_values=(20, 100)).judged.k == 20  # type: ignore[union-attr]
    quiet = evaluate_run(QRELS, RUN, k_values=(10,), judged_threshold=0)
    assert not any("judged@" in w for w in quiet.warnings)
    fully = {"q1": ["d1", "d2", "d3"], "q2": ["d4"], "q3": ["d6"]}
    strict = evaluate_run(QRELS, fully, k_values=(10,), judged_threshold=1)
    assert strict.judged is not None and strict.judged.share == 1.0
    assert not any("judged@" in w for w in strict.warnings)  # nothing unjudged: no warning
    for bad in (1.5, -0.1, "0.9", True, math.nan):
        with pytest.raises(InvalidInputError, match="judged_threshold must be a number"):
            evaluate_run(QRELS, RUN, judged_threshold=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="judged_only must be True or False"):
        evaluate_run(QRELS, RUN, judged_only="yes")  # type: ignore[arg-type]


def test_judged_only_says_the_docs_were_removed() -> None:
    report = evaluate_run(QRELS, RUN, k_values=(10,), judged_only=True)
    [warning] = [w for w in report.warnings if "(judged@10)" in w]
    assert "judged_only=True removed them before scoring" in warning
    assert "not lower bounds" in warning


def test_qrels_of_relevant_docs_only_give_no_warning_judged_is_precision_there() -> None:
    """Many collections list only the relevant docs: every other doc is 'unjudged', so
    judged@k is precision@k (over min(k, n)) and a warning would fire on every run."""
    qrels = {"q1": {"d1": 1, "d3": 2}, "q2": {"d4": 1}}
    report = evaluate_run(qrels, RUN, k_values=(1, 10))
    assert report.judged is not None and report.judged.relevant_only is True
    assert report.judged.below_threshold and not report.warnings
    for qid, shares in judged_oracle(qrels, RUN, [1, 10]).items():
        assert report.judged.per_query[qid] == pytest.approx(shares)
    graded = evaluate_run(QRELS, RUN, k_values=(10,))  # QRELS judge some docs 0
    assert graded.judged is not None and graded.judged.relevant_only is False
    fine = evaluate_run(QRELS, {"q1": ["d1", "d2"], "q2": ["d4"], "q3": ["d6"]}, k_values=(10,))
    assert fine.judged is not None and fine.judged.relevant_only is None  # not looked at


def test_no_judged_doc_at_all_gives_the_doc_ids_warning_only() -> None:
    report = evaluate_run({"q1": {"d1": 1}}, {"q1": ["x1", "x2"]}, k_values=(10,))
    assert any("(doc_ids)" in w for w in report.warnings)
    assert not any("(judged@10)" in w for w in report.warnings)


def test_missing_queries_count_zero_in_the_mean_but_not_in_the_counts() -> None:
    run = {"q1": RUN["q1"]}
    zero = evaluate_run(QRELS, run, k_values=(10,))
    skip = evaluate_run(QRELS, run, k_values=(10,), missing_queries="skip")
    assert zero.judged is not None and skip.judged is not None
    share = judged_oracle(QRELS, run, [10])["q1"]["judged@10"]
    assert zero.judged.per_query["q2"] == {"judged@10": 0.0}
    assert zero.judged.means["judged@10"] == pytest.approx(share / 3)
    assert skip.judged.means["judged@10"] == pytest.approx(share)
    assert (zero.judged.documents, zero.judged.queries) == (5, 1) == (skip.judged.documents, 1)


# --------------------------------------------------------------------------- every entry point

OPTIONS = {"judged_only": False, "judged_threshold": JUDGED_THRESHOLD}


def test_every_retrieval_entry_point_takes_the_judged_options() -> None:
    dask = pytest.importorskip("ragmeter.dask")
    for fn in (evaluate_run, evaluate_run_file, evaluate_retrieval, dask.evaluate_run):
        params = inspect.signature(fn).parameters
        assert {n: params[n].default for n in OPTIONS} == OPTIONS, fn.__module__
    assert JUDGED_THRESHOLD == 0.9


def _same_judged(a: RetrievalEvalReport, b: RetrievalEvalReport) -> None:
    assert a.judged is not None and b.judged is not None
    assert a.judged.to_dict() == b.judged.to_dict()
    assert a.judged.per_query == b.judged.per_query
    assert a.metrics == b.metrics and a.warnings == b.warnings


@pytest.mark.parametrize("judged_only", [False, True])
def test_every_entry_point_gives_the_same_judged_report(tmp_path: Path, judged_only: bool) -> None:
    path = tmp_path / "run.txt"
    path.write_text(
        "".join(f"{q} Q0 {d} {r} {10 - r} t\n" for q, ds in RUN.items() for r, d in enumerate(ds))
    )
    options: dict[str, Any] = {"k_values": (1, 10), "judged_only": judged_only}
    expected = evaluate_run(QRELS, RUN, **options)
    _same_judged(evaluate_run_file(QRELS, path, **options), expected)
    texts = {q: f"text {q}" for q in QRELS}
    by_text = {f"text {q}": ds for q, ds in RUN.items()}
    _same_judged(evaluate_retrieval(by_text.__getitem__, QRELS, texts, **options), expected)
    samples = [ragmeter.RagSample(id=q, retrieved_ids=ds) for q, ds in RUN.items()]
    captured = evaluate_retrieval(samples, QRELS, **options)
    assert captured.judged is not None and expected.judged is not None
    assert captured.judged.means == expected.judged.means
    assert captured.metrics == expected.metrics
    rdask = pytest.importorskip("ragmeter.dask")
    import dask
    import dask.bag as db

    with dask.config.set(scheduler="sync"):
        bag = db.from_sequence(list(RUN.items()), npartitions=2)
        _same_judged(rdask.evaluate_run(QRELS, bag, **options), expected)


def test_streamed_reports_keep_the_means_and_counts_without_per_query_rows(
    tmp_path: Path,
) -> None:
    kept = evaluate_run(QRELS, {"q1": RUN["q1"], "q2": RUN["q2"]}, k_values=(1, 10))
    bare = evaluate_run(
        QRELS, {"q1": RUN["q1"], "q2": RUN["q2"]}, k_values=(1, 10), per_query=False
    )
    assert kept.judged is not None and bare.judged is not None
    assert bare.judged.means == kept.judged.means and bare.judged.per_query == {}
    assert bare.judged.documents == kept.judged.documents
    out = tmp_path / "scores.jsonl"
    written = evaluate_run(QRELS, RUN, k_values=(10,), per_query=out)
    assert ragmeter.read_scores(out) == evaluate_run(QRELS, RUN, k_values=(10,)).per_query
    assert written.judged is not None and written.judged.means


def test_json_carries_the_judged_share_and_reads_back() -> None:
    report = evaluate_run(QRELS, RUN, k_values=(1, 10))
    data = json.loads(report.to_json())
    assert data == report.to_dict()
    assert data["judged"]["unjudged"] == report.judged.unjudged  # type: ignore[union-attr]
    assert data["judged"]["means"] == report.judged.means  # type: ignore[union-attr]
    assert data["judged_per_query"] == report.judged.per_query  # type: ignore[union-attr]
    assert data["conventions"]["unjudged"].startswith("unjudged docs count as non-relevant")
    back = RetrievalEvalReport.from_dict(data)
    assert back.judged == report.judged
    assert back.judged is not None and back.judged.per_query == report.judged.per_query  # type: ignore[union-attr]
    assert back.to_dict() == data
