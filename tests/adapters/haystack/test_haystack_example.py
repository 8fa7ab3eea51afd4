"""examples/haystack_rag.py runs at its default settings, and its two ways of scoring agree
(and agree with pytrec_eval)."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from typing import Any

import pytest

pytrec_eval = pytest.importorskip("pytrec_eval")

pytest.importorskip("haystack")
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "haystack_rag.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("haystack_rag_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_captures_scores_and_agrees_with_pytrec_eval(
    cranfield: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    main = _load().main
    n = inspect.signature(main).parameters["n_queries"].default
    out = main()  # what `python examples/haystack_rag.py` runs
    printed = capsys.readouterr().out
    assert f"Retrieval evaluation: {n} queries scored" in printed
    assert "Evaluation pipeline:" in printed
    _, _, qrels = cranfield
    qids, run = out["qids"], out["run"]
    assert sorted(run) == sorted(qids) and all(len(ids) == 10 for ids in run.values())
    report = out["retrieval_report"]
    component = out["pipeline_scores"]["retrieval"]
    assert component["metrics"]["ndcg@10"] == pytest.approx(report.metrics["ndcg@10"], abs=1e-12)
    assert component["metrics"]["recall@5"] == pytest.approx(report.metrics["recall@5"], abs=1e-12)
    trec_run = {q: {d: float(len(ids) - r) for r, d in enumerate(ids)} for q, ids in run.items()}
    trec_qrels = {q: {d: int(g) for d, g in qrels[q].items()} for q in qids}
    ref = pytrec_eval.RelevanceEvaluator(trec_qrels, {"ndcg_cut_10"}).evaluate(trec_run)
    assert component["individual_scores"] == pytest.approx(
        [ref[q]["ndcg_cut_10"] for q in qids], abs=1e-12
    )
    # spread_metrics: every ragmeter metric is its own EvaluationRunResult column
    aggregated = dict(zip(out["aggregated"]["metrics"], out["aggregated"]["score"], strict=True))
    assert set(aggregated) == set(component["metrics"]) | {"faithfulness"}
    assert aggregated["ndcg@10"] == pytest.approx(report.metrics["ndcg@10"], abs=1e-12)
    answers = out["answer_report"]
    assert answers.coverage["faithfulness"] == n
    assert out["retrieval_report"].extra["capture"]["failed"] == []
    assert out["pipeline_scores"]["answers"]["score"] == pytest.approx(
        answers.metrics["faithfulness"], abs=1e-12
    )
