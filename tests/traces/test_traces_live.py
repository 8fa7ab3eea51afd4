"""Traces from the real OpenInference instrumentors score exactly as ragmeter's own adapters
(and as pytrec_eval on the rankings the adapters recorded), per query, to 0.0."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import pytrec_eval

from ragmeter.evaluation.captured import evaluate_captured
from ragmeter.traces import read

from ._pipelines import QRELS, VARIANTS, make_provider, run

_SCRIPT = Path(__file__).resolve().parents[1] / "data" / "traces" / "make_fixtures.py"
_spec = importlib.util.spec_from_file_location("make_fixtures", _SCRIPT)
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)
otlp_lines = _fixtures.otlp_lines  # the OTLP/JSON encoding the fixture files were made with

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


@pytest.mark.parametrize("framework", ["langchain", "llamaindex", "haystack"])
def test_live_spans_written_as_otlp_json_read_back_as_the_same_samples(
    framework: str, tmp_path: Path
) -> None:
    provider, exporter = make_provider()
    run(framework, variant=VARIANTS[framework][-1], provider=provider)
    provider.shutdown()
    finished = exporter.get_finished_spans()
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(otlp_lines(finished)) + "\n", encoding="utf-8")
    legacy = tmp_path / "legacy.jsonl"
    legacy.write_text("\n".join(otlp_lines(finished, legacy=True)) + "\n", encoding="utf-8")
    in_memory = read(finished, join_key="session.id").samples
    for source in (path, legacy):
        from_file = read(source, join_key="session.id").samples
        assert [s.model_dump(exclude={"latency_ms"}) for s in from_file] == [
            s.model_dump(exclude={"latency_ms"}) for s in in_memory
        ]
