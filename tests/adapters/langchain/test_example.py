"""examples/langchain_rag.py runs offline, at its default settings, and prints reports that
match trec_eval."""

from __future__ import annotations

import inspect
import runpy
from pathlib import Path

from lc_testkit import assert_matches_trec_eval

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "langchain_rag.py"


def test_example_prints_retrieval_and_answer_reports(capsys, cranfield):
    namespace = runpy.run_path(str(EXAMPLE))  # defines, does not run main
    n = inspect.signature(namespace["main"]).parameters["n_queries"].default
    result = namespace["main"]()  # what `python examples/langchain_rag.py` runs
    out = capsys.readouterr().out

    assert f"What the chain retrieved:\nRetrieval evaluation: {n} queries scored" in out
    assert f"RAG evaluation: {n} samples" in out
    assert out.startswith("Q1: " + cranfield.queries["1"])

    # The captured run is what the example's retriever really returns, scored as trec_eval does.
    retriever = namespace["KeywordRetriever"](corpus=cranfield.corpus)
    run = {s.id: [d.id for d in retriever.invoke(s.user_input)] for s in result["samples"]}
    qrels = {q: cranfield.qrels[q] for q in run}
    assert_matches_trec_eval(result["captured"], qrels, run)
    assert result["alone"].per_query == result["captured"].per_query
    ndcg10 = result["captured"].metrics["ndcg@10"]
    assert f"ndcg       {result['captured'].metrics['ndcg@1']:.4f}" in out
    assert f"{ndcg10:.4f}" in out
    answers = result["answers"]
    assert answers.coverage["faithfulness"] == n and answers.coverage["total_tokens"] == n
    assert result["captured"].extra["capture"]["failed"] == []
