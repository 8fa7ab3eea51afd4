"""examples/llamaindex_rag.py runs offline, at its default settings, and its numbers are
trec_eval's (at 4 queries it once passed while ``python examples/llamaindex_rag.py`` crashed
at query 11)."""

from __future__ import annotations

import inspect
import runpy
from pathlib import Path
from typing import Any

import pytest

from ragmeter.datasets import load_cranfield

pytrec_eval = pytest.importorskip("pytrec_eval")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llamaindex_rag.py"


def test_example_captures_and_scores(capsys: pytest.CaptureFixture[str]) -> None:
    main: Any = runpy.run_path(str(EXAMPLE))["main"]
    default = inspect.signature(main).parameters["n_queries"].default
    out = main()  # what `python examples/llamaindex_rag.py` runs
    printed = capsys.readouterr().out
    handler, retrieval = out["handler"], out["retrieval"]
    run = handler.to_run()
    assert len(handler.samples) == default and all(len(ids) == 10 for ids in run.values())
    assert all(s.response and s.latency_ms > 0 and s.error is None for s in handler.samples)
    assert retrieval.n_queries == default and retrieval.extra["capture"]["failed"] == []
    _, _, qrels = load_cranfield()
    trec_run = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    trec_qrels = {q: {d: int(g) for d, g in qrels[q].items()} for q in run}
    ref = pytrec_eval.RelevanceEvaluator(trec_qrels, {"ndcg_cut.10"}).evaluate(trec_run)
    expected = sum(r["ndcg_cut_10"] for r in ref.values()) / len(ref)
    assert retrieval.metrics["ndcg@10"] == pytest.approx(expected, abs=1e-12)
    # RetrieverEvaluator with RagmeterRetrievalMetric agrees with the captured run
    assert out["ndcg10"] == pytest.approx(expected, abs=1e-12)
    assert f"RetrieverEvaluator ndcg@10 = {expected:.4f} (captured run: {expected:.4f})" in printed
    assert out["answers"].coverage["faithfulness"] == default
    # the stand-in LLM answers with a sentence of the retrieved text
    assert out["answers"].metrics["faithfulness"] == 1.0
