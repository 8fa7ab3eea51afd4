"""RagmeterEvaluator: a LlamaIndex BaseEvaluator, alone and under BatchEvalRunner."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from llama_index.core.evaluation import BaseEvaluator, BatchEvalRunner, EvaluationResult
from llama_index.core.llms import MockLLM
from ragmeter_llamaindex import RagmeterEvaluator

from ragmeter.errors import InvalidInputError, UnknownMetricError
from ragmeter.evaluation.rag import evaluate_rag

ANSWER = "Paris is the capital of France. It has 90 million people."
CONTEXTS = ["Paris is the capital and largest city of France."]


def test_is_a_base_evaluator_whose_score_is_the_first_metric() -> None:
    evaluator = RagmeterEvaluator(metrics=["token_f1", "exact_match", "faithfulness"])
    assert isinstance(evaluator, BaseEvaluator)
    result = evaluator.evaluate(
        query="capital of France?", response="Paris France", contexts=CONTEXTS, reference="Paris"
    )
    assert isinstance(result, EvaluationResult)
    assert result.score == pytest.approx(2 * 1.0 * 0.5 / 1.5)  # precision 1/2, recall 1/1
    assert result.metrics == {
        "token_f1": result.score,
        "exact_match": 0.0,
        "faithfulness": 1.0,
    }
    assert not result.invalid_result
    assert result.passing is None
    assert result.query == "capital of France?" and result.contexts == CONTEXTS


def test_every_metric_is_the_core_s_number() -> None:
    names = ["faithfulness", "token_f1", "exact_match", "context_recall", "context_precision"]
    kwargs: dict[str, Any] = {"reference": "Paris", "reference_contexts": CONTEXTS}
    result = RagmeterEvaluator(metrics=names).evaluate(
        query="q", response=ANSWER, contexts=CONTEXTS, **kwargs
    )
    sample = {
        "id": "s",
        "user_input": "q",
        "response": ANSWER,
        "retrieved_contexts": CONTEXTS,
        **kwargs,
    }
    core = evaluate_rag([sample], metrics=names).per_sample["s"]
    assert result.metrics == core
    assert result.score == core["faithfulness"] == 0.5


def test_unsupported_claims_are_reported() -> None:
    result = RagmeterEvaluator(metrics=["faithfulness"]).evaluate(
        query="q", response=ANSWER, contexts=CONTEXTS
    )
    assert result.score == 0.5
    assert result.details["faithfulness"]["unsupported_claims"] == ["It has 90 million people"]
    assert "faithfulness=0.5000" in (result.feedback or "")
    assert "unsupported claims: ['It has 90 million people']" in (result.feedback or "")


def test_a_metric_the_inputs_do_not_allow_is_invalid_not_zero() -> None:
    result = RagmeterEvaluator(metrics=["token_f1", "faithfulness"]).evaluate(
        query="q", response=ANSWER, contexts=CONTEXTS
    )
    assert result.score is None
    assert result.invalid_result
    assert "token_f1 needs a reference answer" in (result.invalid_reason or "")
    assert result.metrics == {"token_f1": None, "faithfulness": 0.5}
    assert "token_f1 not computed" in (result.feedback or "")


def test_passing_threshold() -> None:
    evaluator = RagmeterEvaluator(metrics="faithfulness", passing_threshold=0.75)
    assert evaluator.evaluate(query="q", response=ANSWER, contexts=CONTEXTS).passing is False
    good = evaluator.evaluate(
        query="q", response="Paris is the capital of France.", contexts=CONTEXTS
    )
    assert good.passing is True


def test_evaluate_response_reads_a_real_query_engine_response(index: Any) -> None:
    # MockLLM without max_tokens echoes its prompt: the contexts plus the template's lines
    qe = index.as_query_engine(llm=MockLLM(), similarity_top_k=2)
    response = qe.query("boundary layer transition")
    result = RagmeterEvaluator(metrics=["faithfulness"]).evaluate_response(
        query="boundary layer transition", response=response
    )
    assert result.contexts == [n.node.get_content() for n in response.source_nodes]
    assert result.response == response.response
    detail = result.details["faithfulness"]
    joined = " ".join(result.contexts or [])
    assert detail["supported_claims"] and detail["unsupported_claims"]
    # what is unsupported is the prompt template's own wording, never a context sentence
    assert all(claim not in joined for claim in detail["unsupported_claims"])
    assert "Query: boundary layer transition" in detail["unsupported_claims"]
    n = len(detail["supported_claims"]) + len(detail["unsupported_claims"])
    assert result.score == len(detail["supported_claims"]) / n


def test_batch_eval_runner(index: Any, cranfield: Any) -> None:
    _, queries, _ = cranfield
    texts = list(queries.values())[:6]
    qe = index.as_query_engine(llm=MockLLM(max_tokens=3), similarity_top_k=3)
    references = ["text text text", "text", "nothing alike", "text text", "x", "text text text"]
    runner = BatchEvalRunner(
        {
            "f1": RagmeterEvaluator(metrics=["token_f1", "exact_match"]),
            "faith": RagmeterEvaluator(metrics=["faithfulness"]),
        },
        workers=3,
    )
    results = asyncio.run(
        runner.aevaluate_queries(qe, queries=texts, f1={"reference": references}, faith={})
    )
    assert len(results["f1"]) == len(results["faith"]) == len(texts)
    for result, reference in zip(results["f1"], references, strict=True):
        direct = RagmeterEvaluator(metrics=["token_f1", "exact_match"]).evaluate(
            query=result.query,
            response=result.response,
            contexts=result.contexts,
            reference=reference,
        )
        assert result.metrics == direct.metrics
    assert [r.metrics["exact_match"] for r in results["f1"]] == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    # "text text text" is not in Cranfield abstracts: the answer is not supported
    assert all(r.score == 0.0 for r in results["faith"])


def test_batch_response_strings() -> None:
    runner = BatchEvalRunner({"f1": RagmeterEvaluator(metrics=["token_f1"])}, workers=2)
    results = runner.evaluate_response_strs(
        queries=["a", "b"], response_strs=["Paris", "Lyon"], reference=["Paris", "Paris"]
    )
    assert [r.score for r in results["f1"]] == [1.0, 0.0]


def test_unknown_metric() -> None:
    with pytest.raises(UnknownMetricError, match="no metric named 'f1'"):
        RagmeterEvaluator(metrics=["f1"])


def test_empty_metrics_and_bad_k() -> None:
    with pytest.raises(InvalidInputError, match="metrics is empty"):
        RagmeterEvaluator(metrics=[])
    with pytest.raises(InvalidInputError, match="k must be an int >= 1, got 0"):
        RagmeterEvaluator(metrics=["precision"], k=0)


def test_unknown_keyword_argument() -> None:
    with pytest.raises(InvalidInputError, match=r"unexpected keyword argument\(s\) \['refrence'\]"):
        RagmeterEvaluator().evaluate(query="q", response="a", refrence="a")


def test_invalid_value_names_the_field() -> None:
    with pytest.raises(InvalidInputError, match="field 'reference'"):
        RagmeterEvaluator().evaluate(query="q", response="a", reference=["not", "a", "string"])


def test_retrieved_ids_that_never_match_the_references_warn(chunked: Any) -> None:
    """Node ids of chunks given as retrieved_ids against document ids: every score is 0."""
    index, _, queries, qrels = chunked
    qe = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=5)
    texts = list(queries.values())
    responses = [qe.query(t) for t in texts]
    references = [[d for d, g in qrels[q].items() if g > 0] for q in queries]

    def run(retrieved: list[list[str]]) -> list[Any]:
        runner = BatchEvalRunner({"ids": RagmeterEvaluator(metrics=["recall"], k=5)}, workers=1)
        kwargs = {"retrieved_ids": retrieved, "reference_ids": references}
        out = asyncio.run(runner.aevaluate_responses(texts, responses=responses, ids=kwargs))
        return list(out["ids"])

    node_ids = [[n.node.node_id for n in r.source_nodes] for r in responses]
    forgot = run(node_ids)
    assert all(r.score == 0.0 for r in forgot)
    warned = [r for r in forgot if r.details.get("warnings")]
    assert len(warned) == len(texts) - 4  # from the 5th query on
    assert "ref_doc_id" in warned[0].details["warnings"][0]
    assert "ref_doc_id" in warned[0].feedback
    doc_ids = [[n.node.ref_doc_id or "" for n in r.source_nodes] for r in responses]
    right = run(doc_ids)
    assert not any(r.details.get("warnings") for r in right)
    assert any(r.score and r.score > 0 for r in right)
