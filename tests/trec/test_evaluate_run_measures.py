"""``evaluate_run(qrels, run, measures=[...])``: trec_eval's measures as a report, equal to
trec_eval's own output and to pytrec_eval per query."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import pytrec_eval

import ragmeter
from ragmeter.errors import InvalidInputError, UnknownMetricError

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


def _trec_eval_all(path: Path) -> dict[str, float]:
    """The ``all`` lines of a trec_eval output file (numbers only)."""
    out: dict[str, float] = {}
    for line in path.read_text().splitlines():
        name, query, value = line.split()
        if query == "all" and name not in ("runid", "num_q"):
            out[name] = float(value)
    return out


@pytest.fixture(scope="module")
def collection() -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    qrels = ragmeter.read_trec_qrels(DATA / "qrels.test")
    scores: dict[str, dict[str, float]] = {}
    for line in (DATA / "results.test").read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        scores.setdefault(qid, {})[doc] = float(score)
    return {q: {d: int(g) for d, g in row.items()} for q, row in qrels.items()}, scores


def test_all_trec_means_are_trec_evals_all_line(collection) -> None:  # type: ignore[no-untyped-def]
    qrels, run = collection
    report = ragmeter.evaluate_run(qrels, run, measures="all_trec", missing_queries="skip")
    expected = _trec_eval_all(DATA / "out.test.a")
    assert set(expected) <= set(report.metrics)
    for name, value in expected.items():
        assert round(report.metrics[name], 4) == pytest.approx(value, abs=1e-12), name
    assert report.n_queries == 3 and report.missing_queries == []


def test_per_query_values_are_pytrec_evals(collection) -> None:  # type: ignore[no-untyped-def]
    qrels, run = collection
    wanted = ["ndcg_cut.10,20", "P.5", "bpref", "infAP", "Rprec", "recip_rank", "map"]
    report = ragmeter.evaluate_run(qrels, run, measures=wanted, missing_queries="skip")
    oracle = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut_10", "ndcg_cut_20", "P_5", "bpref", "infAP", "Rprec", "recip_rank", "map"}
    ).evaluate(run)
    assert set(report.per_query) == set(oracle)
    for qid, values in oracle.items():
        assert set(report.per_query[qid]) == set(values)
        for name, value in values.items():
            assert report.per_query[qid][name] == pytest.approx(value, abs=1e-12), (qid, name)


def test_ir_measures_names_and_a_missing_query(collection) -> None:  # type: ignore[no-untyped-def]
    qrels, run = collection
    partial = {q: r for q, r in run.items() if q != min(run)}
    zero = ragmeter.evaluate_run(qrels, partial, measures=["nDCG@10", "ndcg_cut.10"])
    assert zero.missing_queries == [min(run)] and zero.n_queries == len(qrels)
    assert zero.metrics["nDCG@10"] == pytest.approx(zero.metrics["ndcg_cut_10"], abs=1e-12)
    assert any("no ranking" in w for w in zero.warnings)
    skip = ragmeter.evaluate_run(qrels, partial, measures="ndcg_cut.10", missing_queries="skip")
    assert skip.n_queries == len(qrels) - 1
    assert math.isclose(
        zero.metrics["ndcg_cut_10"] * zero.n_queries, skip.metrics["ndcg_cut_10"] * skip.n_queries
    )


def test_bad_measure_requests_are_refused_before_scoring(collection) -> None:  # type: ignore[no-untyped-def]
    qrels, run = collection
    with pytest.raises(UnknownMetricError, match="ndgc_cut") as info:
        ragmeter.evaluate_run(qrels, run, measures=["ndgc_cut.10"])
    assert "ndcg_cut" in str(info.value) and "nDCG" in str(info.value)  # both vocabularies
    with pytest.raises(InvalidInputError, match="integers"):
        ragmeter.evaluate_run(qrels, run, measures="map", relevance_level=1.5)
    with pytest.raises(InvalidInputError, match="measures must"):
        ragmeter.evaluate_run(qrels, run, measures=[])


def test_measures_reports_carry_judged_at_10_and_score_judged_only_as_trec_eval_j(
    collection,  # type: ignore[no-untyped-def]
) -> None:
    qrels, run = collection
    plain = ragmeter.evaluate_run(qrels, run, measures=["P.10"], missing_queries="skip")
    ranked = ragmeter.read_trec_run(DATA / "results.test")  # trec_eval's order
    default = ragmeter.evaluate_run(qrels, ranked, k_values=[10], missing_queries="skip")
    assert plain.judged is not None and default.judged is not None
    assert plain.judged.means == pytest.approx(default.judged.means, abs=1e-12)
    assert plain.judged.unjudged == default.judged.unjudged
    assert "num_ret" not in plain.metrics and "Judged@10" not in plain.metrics
    condensed = ragmeter.evaluate_run(
        qrels, run, measures=["P.10", "map"], judged_only=True, missing_queries="skip"
    )
    oracle = pytrec_eval.RelevanceEvaluator(
        qrels, {"P_10", "map"}, judged_docs_only_flag=True
    ).evaluate(run)
    for qid, values in oracle.items():
        for name, value in values.items():
            assert condensed.per_query[qid][name] == pytest.approx(value, abs=1e-12)
    assert condensed.judged is not None and condensed.judged.means == plain.judged.means
