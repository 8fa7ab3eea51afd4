"""examples/langchain_rag.py runs offline and prints reports that match trec_eval."""

from __future__ import annotations

import runpy
from pathlib import Path

from lc_testkit import assert_matches_trec_eval

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "langchain_rag.py"


def test_example_prints_retrieval_and_answer_reports(capsys, cranfield):
    namespace = runpy.run_path(str(EXAMPLE))  # defines, does not run main
    result = namespace["main"](25)
    out = capsys.readouterr().out

    assert "What the chain retrieved:\nRetrieval evaluation: 25 queries scored" in out
    assert "RAG evaluation: 25 samples" in out
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
    assert answers.coverage["faithfulness"] == 25 and answers.coverage["total_tokens"] == 25
