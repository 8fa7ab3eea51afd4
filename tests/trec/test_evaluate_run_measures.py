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
    with pytest.raises(UnknownMetricError, match="nDGC@10") as info:
        ragmeter.evaluate_run(qrels, run, measures=["nDGC@10"])
    assert "Registry names are bare" not in str(info.value)  # @k is ir_measures' syntax
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


def test_int_doc_ids_are_their_digits_and_a_bad_ranking_is_named() -> None:
    """Ids compare as strings on this path too (1 is "1"); a ranking of (doc, score) pairs
    or a non-numeric score is refused naming the query, never scored 0."""
    qrels = {"q1": {"1": 1, "3": 2}}
    as_ints = ragmeter.evaluate_run(qrels, {"q1": {1: 0.9, 3: 0.5}}, measures=["P.2", "map"])
    as_text = ragmeter.evaluate_run(qrels, {"q1": {"1": 0.9, "3": 0.5}}, measures=["P.2", "map"])
    assert as_ints.metrics == as_text.metrics and as_text.metrics["P_2"] == 1.0
    with pytest.raises(InvalidInputError, match=r"run\['q1'\]: id \('3', 0.4\)"):
        ragmeter.evaluate_run(qrels, {"q1": [("3", 0.4), ("1", 0.3)]}, measures="P.2")
    with pytest.raises(InvalidInputError, match=r"run\['q1'\]\['1'\] = 'high'"):
        ragmeter.evaluate_run(qrels, {"q1": {"1": "high"}}, measures="P.2")
    with pytest.raises(InvalidInputError, match="judged_only"):
        ragmeter.evaluate_run(qrels, {"q1": ["1"]}, measures="P.2", judged_only="yes")  # type: ignore[arg-type]


def test_registry_entries_score_one_query_or_say_why_not() -> None:
    import math as m

    import pytrec_eval

    qrels = {"q": {"d1": 1, "d2": 0, "d3": 1}}
    ranked = ["d2", "d1", "x"]
    run = {"q": {d: float(3 - i) for i, d in enumerate(ranked)}}
    ap = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)["q"]["map"]
    assert ragmeter.get_metric("gm_map").evaluate(qrels["q"], ranked) == pytest.approx(ap)
    assert ragmeter.get_metric("map", kind="trec").evaluate(qrels["q"], ranked) == ap
    assert not m.isnan(ragmeter.get_metric("gm_bpref").evaluate(qrels["q"], ranked))
    for name in ("num_q", "relstring", "runid"):
        with pytest.raises(InvalidInputError, match="not a score of one query"):
            ragmeter.get_metric(name, kind="trec").evaluate(qrels["q"], ranked)
