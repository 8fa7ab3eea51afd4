"""The three hybrid-pipeline examples run at their defaults, print their stage table, and every
stage's score is pytrec_eval's on the ranking the example captured for it."""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import pytrec_eval

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import ragmeter

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHAPES = {
    "hybrid_stages_haystack": ["bm25_okapi", "bm25_plus", "joiner", "ranker", "context"],
    "hybrid_stages_langchain": ["bm25", "overlap", "rrf", "rerank", "context"],
    "hybrid_stages_llamaindex": ["dense", "keyword", "rrf", "ShorterFirst", "context"],
}


def _load(name: str) -> Any:
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location(f"{name}_example", EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(EXAMPLES))
    return module


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_example_prints_its_stage_table_and_each_stage_is_pytrec_evals(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main = _load(name).main
    n = inspect.signature(main).parameters["n_queries"].default
    adapter, report = main()
    printed = capsys.readouterr().out
    assert printed.startswith(f"Stages over {n} judged queries")
    assert report.stages == SHAPES[name]
    steps = SHAPES[name][:-1]
    assert report["context"].same_as == steps[-1]
    assert report[steps[2]].against in steps[:2] and report[steps[3]].against == steps[2]
    _, _, qrels = ragmeter.load_cranfield()
    for stage in steps:
        run = adapter.to_run(stage=stage)
        assert len(run) == n
        judged = {q: {d: int(g) for d, g in qrels[q].items()} for q in run}
        scored = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.items()}
        oracle = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut_10"}).evaluate(scored)
        mean = sum(row["ndcg_cut_10"] for row in oracle.values()) / len(oracle)
        assert report[stage].metrics["ndcg@10"] == pytest.approx(mean, abs=1e-12)
        assert f"{report[stage].metrics['ndcg@10']:.4f}" in printed
