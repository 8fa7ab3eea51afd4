"""Traces from the real OpenInference instrumentors score exactly as ragmeter's own adapters
(and as pytrec_eval on the rankings the adapters recorded), per query, to 0.0."""

from __future__ import annotations

from typing import Any

import pytest
import pytrec_eval

from ragmeter.evaluation.captured import evaluate_captured
from ragmeter.traces import read

from ._pipelines import QRELS, VARIANTS, make_provider, run

CASES = [(fw, v) for fw, variants in VARIANTS.items() for v in variants]
MEASURES = {
    "ndcg_cut_10": "ndcg@10",
    "map": "map",
    "recall_100": "recall@100",
    "P_5": "precision@5",
}


@pytest.mark.parametrize(("framework", "variant"), CASES, ids=lambda v: str(v))
def test_traced_runs_score_as_the_native_adapter_and_pytrec_eval(
    framework: str, variant: str
) -> None:
    provider, exporter = make_provider()
    _, native = run(framework, variant=variant, provider=provider, adapter=True)
    provider.shutdown()
    traces = read(exporter.get_finished_spans(), join_key="session.id")
    assert traces.counts["runs"] == len(native) == 5
    ours = traces.evaluate_retrieval(QRELS, k_values=(5, 10, 100))
    theirs = evaluate_captured(native, QRELS, k_values=(5, 10, 100))
    assert ours.metrics == theirs.metrics
    assert ours.per_query == theirs.per_query
    # the oracle: pytrec_eval on the rankings the native adapter recorded
    run_scores: dict[str, dict[str, float]] = {
        s.id: {doc: float(len(s.retrieved_ids) - i) for i, doc in enumerate(s.retrieved_ids)}
        for s in native
    }
    evaluator = pytrec_eval.RelevanceEvaluator(QRELS, set(MEASURES))
    oracle = evaluator.evaluate(run_scores)
    for qid, values in oracle.items():
        for measure, key in MEASURES.items():
            assert ours.per_query[qid][key] == values[measure], (qid, key)


@pytest.mark.parametrize(("framework", "variant"), CASES, ids=lambda v: str(v))
def test_every_stage_of_a_traced_run_scores_as_the_native_one(framework: str, variant: str) -> None:
    provider, exporter = make_provider()
    _, native = run(framework, variant=variant, provider=provider, adapter=True)
    provider.shutdown()
    traces = read(exporter.get_finished_spans(), join_key="session.id")
    by_id = {s.id: s for s in native}
    for sample in traces.samples:
        ours = [(s.kind, s.ids) for s in sample.stages or ()]
        theirs = [(s.kind, s.ids) for s in by_id[sample.id].stages or ()]
        assert ours == theirs
    names = [s.name for s in traces.samples[0].stages or ()]
    ours_report: Any = traces.evaluate_retrieval(QRELS, stages=True, k_values=(10,))
    assert [row.stage for row in ours_report.rows] == names
