"""``log_report`` against a real local MLflow store (sqlite, no server), read back with
``MlflowClient``: the metrics are the report's means, and trec_eval's own numbers for the
Cranfield BM25 run; the table rows are the per-query scores; the tags hold the fingerprints."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pytest
import scipy.stats
from mlflow.tracking import MlflowClient

from ragmeter import evaluate_rag, evaluate_run, evaluate_run_file
from ragmeter.errors import InvalidInputError
from ragmeter.io import read_beir_qrels, read_trec_run
from ragmeter.mlflow import log_report, metric_name, plan_report
from ragmeter.report import RagEvalReport, RetrievalEvalReport

pytestmark = pytest.mark.slow  # a real MLflow store: ~8 s to create its tables

DATA = Path(__file__).resolve().parents[1] / "data"
CRANFIELD = DATA / "cranfield_beir"
TREC_EVAL = json.loads((CRANFIELD / "bm25.expected.fullprec.json").read_text())
# ragmeter's result keys and trec_eval's measures for them
AS_TREC = {
    "ndcg@5": "ndcg_cut_5",
    "ndcg@10": "ndcg_cut_10",
    "precision@5": "P_5",
    "precision@10": "P_10",
    "recall@10": "recall_10",
    "hit_rate@5": "success_5",
    "hit_rate@10": "success_10",
    "map": "map",
    "mrr": "recip_rank",
}


@pytest.fixture(scope="module")
def bm25() -> RetrievalEvalReport:
    qrels = read_beir_qrels(CRANFIELD / "qrels" / "test.tsv")
    run = read_trec_run(CRANFIELD / "bm25.run")
    return evaluate_run(qrels, run, k_values=(5, 10))


def _table(run_id: str, path: str = "eval_results_table.json") -> list[dict[str, Any]]:
    table = mlflow.artifacts.load_dict(f"runs:/{run_id}/{path}")
    return [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]


def _artifacts(run_id: str, path: str = "") -> set[str]:
    return {f.path for f in MlflowClient().list_artifacts(run_id, path)}


def test_a_retrieval_report_read_back(experiment: str, bm25: RetrievalEvalReport) -> None:
    run_id = log_report(bm25, run_name="bm25")
    run = MlflowClient().get_run(run_id)
    assert (run.info.status, run.info.run_name, run.info.experiment_id) == (
        "FINISHED",
        "bm25",
        experiment,
    )
    metrics = run.data.metrics
    for key, mean in bm25.metrics.items():
        assert metrics[f"{metric_name(key)}/mean"] == mean  # exactly the report's number
    for key, measure in AS_TREC.items():  # and trec_eval's own
        assert metrics[f"{metric_name(key)}/mean"] == pytest.approx(
            TREC_EVAL["mean"][measure], abs=1e-12
        )
    rows = _table(run_id)
    assert [r["query_id"] for r in rows] == list(bm25.per_query)
    for row in rows:
        qid = row["query_id"]
        for key in bm25.metrics:
            assert row[f"{metric_name(key)}/score"] == bm25.per_query[qid][key]
        for key, measure in AS_TREC.items():
            expected = TREC_EVAL["per_query"][qid][measure]
            assert row[f"{metric_name(key)}/score"] == pytest.approx(expected, abs=1e-12)


def test_spread_and_interval_match_numpy_and_scipy(
    experiment: str, bm25: RetrievalEvalReport
) -> None:
    metrics = MlflowClient().get_run(log_report(bm25)).data.metrics
    for key in ("ndcg@10", "map", "recall@10"):
        values = np.array([row[key] for row in bm25.per_query.values()])
        name = metric_name(key)
        low, high = scipy.stats.t.interval(
            0.95, len(values) - 1, loc=values.mean(), scale=scipy.stats.sem(values)
        )
        assert metrics[f"{name}/n"] == len(values) == 225
        assert metrics[f"{name}/ci_low"] == pytest.approx(low, rel=1e-9)
        assert metrics[f"{name}/ci_high"] == pytest.approx(high, rel=1e-9)
        assert metrics[f"{name}/std"] == pytest.approx(values.std(), rel=1e-12)
        assert metrics[f"{name}/median"] == pytest.approx(np.median(values), rel=1e-12)
        assert (metrics[f"{name}/min"], metrics[f"{name}/max"]) == (values.min(), values.max())
    assert metrics["judged_at_10/mean"] == bm25.judged.means["judged@10"]  # type: ignore[union-attr]


def test_tags_hold_the_fingerprints_and_params_the_conventions(
    experiment: str, bm25: RetrievalEvalReport
) -> None:
    run_id = log_report(bm25)
    data = MlflowClient().get_run(run_id).data
    dataset, config = bm25.dataset_fingerprint, bm25.config_fingerprint
    assert dataset is not None and len(dataset.digest) == 64
    assert data.tags["ragmeter.dataset_fingerprint"] == dataset.digest
    assert data.tags["ragmeter.config_fingerprint"] == config.digest
    assert data.tags["ragmeter.kind"] == "retrieval"
    assert data.tags["ragmeter.version"] == bm25.conventions.ragmeter_version
    assert data.params["ragmeter.k_values"] == "[5, 10]"
    assert data.params["ragmeter.relevance_level"] == "null"
    assert data.params["ragmeter.ties"] == bm25.conventions.ties
    assert json.loads(data.params["ragmeter.metrics"]) == sorted(bm25.metrics)
    # the report's JSON (without the per-query rows) reads back with the same fingerprints
    saved = mlflow.artifacts.load_dict(f"runs:/{run_id}/ragmeter_report.json")
    again = RetrievalEvalReport.from_dict(saved)
    assert again.metrics == bm25.metrics and again.per_query == {}
    assert again.config_fingerprint == config
    assert again.dataset_fingerprint == dataset
    assert _artifacts(run_id) == {"eval_results_table.json", "ragmeter_report.json"}


def test_warnings_go_to_an_artifact(experiment: str) -> None:
    qrels = read_beir_qrels(CRANFIELD / "qrels" / "test.tsv")
    run = read_trec_run(CRANFIELD / "bm25.run")
    partial = {q: run[q] for q in list(run)[:200]}  # 25 judged queries left out of the run
    report = evaluate_run(qrels, partial, k_values=10, metrics="ndcg")
    assert report.warnings and len(report.missing_queries) == 25
    run_id = log_report(report, log_per_query=False)
    warned = mlflow.artifacts.load_dict(f"runs:/{run_id}/ragmeter_warnings.json")
    assert warned == {"warnings": report.warnings, "missing_queries": report.missing_queries}
    data = MlflowClient().get_run(run_id).data
    assert data.tags["ragmeter.warnings"] == str(len(report.warnings))
    assert "eval_results_table.json" not in _artifacts(run_id)
    assert data.metrics["ndcg_at_10/mean"] == report.metrics["ndcg@10"]


def test_a_streamed_report_without_per_query_scores(experiment: str) -> None:
    qrels = read_beir_qrels(CRANFIELD / "qrels" / "test.tsv")
    report = evaluate_run_file(qrels, CRANFIELD / "bm25.run", k_values=10, per_query=False)
    assert report.per_query == {}
    run_id = log_report(report)
    metrics = MlflowClient().get_run(run_id).data.metrics
    trec = np.array([row["ndcg_cut_10"] for row in TREC_EVAL["per_query"].values()])
    assert metrics["ndcg_at_10/mean"] == pytest.approx(trec.mean(), abs=1e-12)
    assert metrics["ndcg_at_10/n"] == 225
    assert metrics["ndcg_at_10/std"] == pytest.approx(trec.std(), rel=1e-9)
    assert (metrics["ndcg_at_10/min"], metrics["ndcg_at_10/max"]) == (trec.min(), trec.max())
    assert "ndcg_at_10/ci_low" in metrics
    assert "eval_results_table.json" not in _artifacts(run_id)  # no rows to tabulate


def _squad_samples() -> list[dict[str, Any]]:
    article = json.loads((DATA / "squad" / "small.json").read_text(encoding="utf-8"))["data"][1]
    samples = []
    for i, para in enumerate(article["paragraphs"][:4]):
        context = para["context"]
        for j, qa in enumerate(para["qas"]):
            answers = [a["text"] for a in qa["answers"]]
            # every other answerable question answered as one annotator did
            answer = answers[-1] if answers and j % 2 else context.split(". ")[0]
            samples.append(
                {
                    "id": str(qa["id"]),
                    "user_input": qa["question"],
                    "response": answer,
                    "retrieved_contexts": [context],
                    "retrieved_ids": [f"p{i}", f"p{i + 1}"],
                    "reference_ids": [f"p{i + 1}"] if i % 2 else [f"p{i}"],
                    **({"reference": answers[0], "references": answers[1:]} if answers else {}),
                }
            )
    return samples


def test_a_rag_report_into_the_active_run(experiment: str) -> None:
    report = evaluate_rag(
        _squad_samples(),
        metrics=["exact_match", "token_f1", "faithfulness", "context_recall", "ndcg"],
        k_values=2,
    )
    assert isinstance(report, RagEvalReport)
    assert report.coverage["token_f1"] < report.n_samples  # unanswerable ones are skipped
    assert 0 < report.metrics["exact_match"] < 1
    with mlflow.start_run() as active:
        assert log_report(report) == active.info.run_id
    data = MlflowClient().get_run(active.info.run_id).data
    for key, mean in report.metrics.items():
        assert data.metrics[f"{metric_name(key)}/mean"] == mean
        assert data.metrics[f"{metric_name(key)}/n"] == report.coverage[key]
    rows = _table(active.info.run_id)
    assert [r["sample_id"] for r in rows] == list(report.per_sample)
    for row in rows:
        for key in report.metrics:
            value = row[f"{metric_name(key)}/score"]
            ours = report.per_sample[row["sample_id"]].get(key)
            assert (None if value is None or math.isnan(value) else value) == ours
    assert data.tags["ragmeter.kind"] == "rag"
    dataset = report.dataset_fingerprint  # the samples' ground truth
    assert dataset is not None and dataset.kind == "samples"
    assert data.tags["ragmeter.dataset_fingerprint"] == dataset.digest
    assert data.tags["ragmeter.config_fingerprint"] == report.config_fingerprint.digest


def test_two_reports_in_one_run_under_prefixes(experiment: str, bm25: RetrievalEvalReport) -> None:
    qrels = read_beir_qrels(CRANFIELD / "qrels" / "test.tsv")
    run = read_trec_run(CRANFIELD / "bm25.run")
    other = evaluate_run(qrels, run, k_values=(1, 3), metrics=["ndcg", "recall"])
    run_id = log_report(bm25, prefix="dev/")
    assert log_report(other, run_id=run_id, prefix="test/") == run_id
    data = MlflowClient().get_run(run_id).data
    assert data.metrics["dev/ndcg_at_10/mean"] == bm25.metrics["ndcg@10"]
    assert data.metrics["test/ndcg_at_3/mean"] == other.metrics["ndcg@3"]
    assert data.params["test/ragmeter.k_values"] == "[1, 3]"
    assert _artifacts(run_id, "test") == {
        "test/eval_results_table.json",
        "test/ragmeter_report.json",
    }
    with pytest.raises(InvalidInputError, match=r"already has other values.*pass prefix="):
        log_report(other, run_id=run_id, prefix="dev/")


def test_a_run_started_in_a_named_experiment(tracking: Path, bm25: RetrievalEvalReport) -> None:
    run_id = log_report(bm25, experiment="ragmeter-nightly", run_name="bm25 nightly")
    run = MlflowClient().get_run(run_id)
    found = mlflow.get_experiment_by_name("ragmeter-nightly")
    assert found is not None and run.info.experiment_id == found.experiment_id
    assert (run.info.run_name, run.info.status) == ("bm25 nightly", "FINISHED")
    assert mlflow.active_run() is None  # the run it started is ended
    again = log_report(bm25, experiment="ragmeter-nightly")  # the experiment is reused
    assert MlflowClient().get_run(again).info.experiment_id == found.experiment_id


def test_a_report_made_by_hand(experiment: str) -> None:
    report = RetrievalEvalReport(
        metrics={"ndcg@10": 0.5}, per_query={}, n_queries=12, k_values=(10,)
    )
    data = MlflowClient().get_run(log_report(report)).data
    assert data.metrics == {"ndcg_at_10/mean": 0.5, "ndcg_at_10/n": 12.0}
    assert "ragmeter.dataset_fingerprint" not in data.tags
    assert data.tags["ragmeter.config_fingerprint"] == report.config_fingerprint.digest


def test_bad_arguments_are_refused(experiment: str, bm25: RetrievalEvalReport) -> None:
    with pytest.raises(InvalidInputError, match="no MLflow run 'f00' in the tracking store"):
        log_report(bm25, run_id="f00")
    with pytest.raises(InvalidInputError, match="takes a RetrievalEvalReport or a RagEvalReport"):
        log_report({"ndcg@10": 0.5})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"prefix must be .* got '/x'"):
        log_report(bm25, prefix="/x")
    with pytest.raises(InvalidInputError, match=r"prefix must be .* got 'a@b'"):
        log_report(bm25, prefix="a@b")
    with (
        mlflow.start_run() as active,
        pytest.raises(InvalidInputError, match=f"logs into the active run '{active.info.run_id}'"),
    ):
        log_report(bm25, run_name="other")
    assert not MlflowClient().get_run(active.info.run_id).data.metrics  # nothing half-logged


def test_keys_mlflow_would_name_alike_are_refused() -> None:
    report = RetrievalEvalReport(
        metrics={"P(rel=2)@5": 0.5, "P_rel_2__at_5": 0.25}, per_query={}, n_queries=3, k_values=(5,)
    )
    with pytest.raises(InvalidInputError, match=r"'P\(rel=2\)@5' and 'P_rel_2__at_5' would both"):
        log_report(report)


def test_a_param_longer_than_mlflow_takes_is_cut_saying_so() -> None:
    metrics = {f"metric_{i:04d}_with_a_long_name": 0.5 for i in range(300)}
    report = RagEvalReport(metrics=metrics, coverage=dict.fromkeys(metrics, 1), n_samples=1)
    param = plan_report(report).params["ragmeter.metrics"]
    assert len(json.dumps(sorted(metrics))) > 6000 == len(param)
    assert param.endswith("... (cut: the whole value is in ragmeter_report.json)")


def test_a_run_from_the_registry_logs_as_it_was_scored(
    experiment: str, bm25: RetrievalEvalReport, tmp_path: Path
) -> None:
    from ragmeter.registry import Registry

    with Registry(tmp_path / "runs.sqlite") as registry:
        bm25.save(name="bm25", registry=registry)
        saved = registry.load_report("bm25")
    data = MlflowClient().get_run(log_report(saved)).data
    assert data.tags["ragmeter.dataset_fingerprint"] == bm25.dataset_fingerprint.digest  # type: ignore[union-attr]
    assert data.tags["ragmeter.config_fingerprint"] == bm25.config_fingerprint.digest
    for key, mean in bm25.metrics.items():
        assert data.metrics[f"{metric_name(key)}/mean"] == mean
    rows = _table(MlflowClient().search_runs([experiment], max_results=1)[0].info.run_id)
    assert {r["query_id"]: r["ndcg_at_10/score"] for r in rows} == bm25.scores("ndcg@10")
