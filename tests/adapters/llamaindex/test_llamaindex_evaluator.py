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


# -- cut-offs: k_values, "ndcg@10" names, k=None, map uncut (issue 18) ------------------------

pytrec_eval = pytest.importorskip("pytrec_eval")

# result key -> pytrec_eval measure
TREC = {
    "ndcg@5": "ndcg_cut_5",
    "ndcg@10": "ndcg_cut_10",
    "recall@5": "recall_5",
    "recall@10": "recall_10",
    "precision@5": "P_5",
    "precision@10": "P_10",
    "hit_rate@5": "success_5",
    "hit_rate@10": "success_10",
    "map": "map",
    "map@10": "map_cut_10",
    "mrr": "recip_rank",
}


def trec(run: dict[str, list[str]], qrels: dict[str, dict[str, float]]) -> Any:
    """pytrec_eval on ranked lists: scores descend with rank, so its order is the list's."""
    measures = {"ndcg_cut.5,10", "recall.5,10", "P.5,10", "success.5,10"}
    measures |= {"map", "map_cut.10", "recip_rank"}
    trec_run = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    trec_qrels = {q: {d: int(g) for d, g in row.items()} for q, row in qrels.items()}
    return pytrec_eval.RelevanceEvaluator(trec_qrels, measures).evaluate(trec_run)


def source_ids(response: Any) -> list[str]:
    return [n.node.node_id for n in response.source_nodes]


def test_k_values_and_uncut_map_equal_pytrec_eval_on_a_real_engine(
    index: Any, cranfield: Any
) -> None:
    """Top-20 rankings of a real query engine, graded Cranfield judgements: every key is
    pytrec_eval's number exactly; "map" is uncut (trec_eval map), "map@10" is map_cut_10."""
    _, queries, qrels = cranfield
    engine = index.as_query_engine(llm=MockLLM(max_tokens=1), similarity_top_k=20)
    cut = RagmeterEvaluator(
        metrics=["ndcg", "recall", "precision", "hit_rate", "map", "map@10"], k_values=(5, 10)
    )
    uncut = RagmeterEvaluator(metrics=["mrr", "map"], k=None)
    assert cut.keys == [*list(TREC)[:8], "map", "map@10"] and uncut.keys == ["mrr", "map"]
    texts = list(queries.values())
    responses = [engine.query(t) for t in texts]
    run = {q: source_ids(r) for q, r in zip(queries, responses, strict=True)}
    assert all(len(ids) == 20 for ids in run.values())
    runner = BatchEvalRunner({"cut": cut, "uncut": uncut}, workers=2)
    results = asyncio.run(
        runner.aevaluate_responses(
            texts, responses=responses, relevance=[qrels[q] for q in queries]
        )
    )
    ref = trec(run, qrels)
    for qid, a, b in zip(queries, results["cut"], results["uncut"], strict=True):
        assert list(a.metrics) == cut.keys and list(b.metrics) == uncut.keys
        for key, value in [*a.metrics.items(), *b.metrics.items()]:
            assert value == ref[qid][TREC[key]], (qid, key)  # exactly, not approximately
        assert a.score == a.metrics["ndcg@5"] and b.score == b.metrics["mrr"]
    # the ranking is longer than 10, so the uncut map is not map_cut_10 everywhere
    assert any(r.metrics["map"] != r.metrics["map@10"] for r in results["cut"])


def test_names_spelled_as_the_results_spell_them(index: Any, cranfield: Any) -> None:
    _, queries, qrels = cranfield
    qid, text = next(iter(queries.items()))
    response = index.as_query_engine(llm=MockLLM(max_tokens=1), similarity_top_k=20).query(text)
    ref = trec({qid: source_ids(response)}, {qid: qrels[qid]})[qid]
    one = RagmeterEvaluator(metrics=["ndcg@10"]).evaluate_response(
        query=text, response=response, relevance=qrels[qid]
    )
    assert one.metrics == {"ndcg@10": ref["ndcg_cut_10"]} and one.score == ref["ndcg_cut_10"]
    # a written cut-off is that metric at that cut-off only; bare names take k_values
    mixed = RagmeterEvaluator(metrics=["ndcg@10", "ndcg", "recall", "map@10"], k_values=(5, 10))
    assert mixed.keys == ["ndcg@10", "ndcg@5", "recall@5", "recall@10", "map@10"]
    got = mixed.evaluate_response(query=text, response=response, relevance=qrels[qid])
    assert got.metrics == {key: ref[TREC[key]] for key in mixed.keys}
    # a result key fed back as a metric name gives the same key and number
    for key, value in got.metrics.items():
        again = RagmeterEvaluator(metrics=[key]).evaluate_response(
            query=text, response=response, relevance=qrels[qid]
        )
        assert again.metrics == {key: value}


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ndcg@0", r"metric 'ndcg@0': the cut-off after '@' must be a whole number >= 1"),
        ("ndcg@x", r"metric 'ndcg@x': the cut-off after '@' must be a whole number >= 1.*'x'"),
        ("ndcg@", r"metric 'ndcg@': the cut-off .* got ''"),
        ("ndcg@-3", r"metric 'ndcg@-3': the cut-off"),
        ("ndcg@1.5", r"metric 'ndcg@1.5': the cut-off"),
        ("ndcg@5@5", r"metric 'ndcg@5@5': the cut-off"),
        ("token_f1@5", r"metric 'token_f1@5': 'token_f1' has no cut-off .* write 'token_f1'"),
    ],
)
def test_malformed_metric_names_are_refused_naming_them(name: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        RagmeterEvaluator(metrics=["token_f1", name])


def test_unknown_metric_with_a_cut_off() -> None:
    with pytest.raises(UnknownMetricError, match="no metric named 'ndgc'"):
        RagmeterEvaluator(metrics=["ndgc@10"])


def test_k_is_the_one_cut_off_shorthand_and_none_means_uncut() -> None:
    kwargs: dict[str, Any] = {"retrieved_ids": ["d3", "d1", "d2"], "relevance": {"d1": 2, "d9": 1}}
    short = RagmeterEvaluator(metrics=["ndcg", "mrr", "map"], k=2)
    assert short.keys == ["ndcg@2", "mrr@2", "map"] and short.k == 2 and short.k_values == (2,)
    same = RagmeterEvaluator(metrics=["ndcg", "mrr", "map"], k_values=(2,))
    assert short.evaluate(**kwargs).metrics == same.evaluate(**kwargs).metrics
    default = RagmeterEvaluator(metrics=["ndcg"])
    assert default.keys == ["ndcg@5"] and default.k == 5
    ref = trec({"q": kwargs["retrieved_ids"]}, {"q": kwargs["relevance"]})["q"]
    none = RagmeterEvaluator(metrics=["mrr", "map", "ndcg@10"], k=None)
    assert none.k is None and none.k_values == ()
    assert none.evaluate(**kwargs).metrics == {
        "mrr": ref["recip_rank"],
        "map": ref["map"],
        "ndcg@10": ref["ndcg_cut_10"],
    }
    with pytest.raises(InvalidInputError, match=r"metric 'ndcg' needs a cut-off and k=None"):
        RagmeterEvaluator(metrics=["ndcg"], k=None)


def test_headline_is_the_first_cut_off_given() -> None:
    evaluator = RagmeterEvaluator(metrics=["precision"], k_values=(3, 1, 3))
    assert evaluator.keys == ["precision@3", "precision@1"]
    result = evaluator.evaluate(retrieved_ids=["x", "d1", "y"], reference_ids=["d1"])
    assert result.score == result.metrics["precision@3"] == 1 / 3
    assert result.metrics["precision@1"] == 0.0


def test_bad_cut_offs() -> None:
    with pytest.raises(InvalidInputError, match=r"pass k= .* or k_values= .*, not both"):
        RagmeterEvaluator(metrics=["ndcg"], k=5, k_values=(5, 10))
    with pytest.raises(InvalidInputError, match="k_values is empty"):
        RagmeterEvaluator(metrics=["ndcg"], k_values=())
    with pytest.raises(InvalidInputError, match=r"k_values\[1\] must be an int >= 1, got 0"):
        RagmeterEvaluator(metrics=["ndcg"], k_values=(5, 0))
    with pytest.raises(InvalidInputError, match=r"metrics\[1\] must be a metric name"):
        RagmeterEvaluator(metrics=["ndcg", 10])  # type: ignore[list-item]


def test_retrieval_metrics_the_inputs_do_not_allow_are_invalid_not_zero() -> None:
    evaluator = RagmeterEvaluator(metrics=["ndcg", "map"], k_values=(5, 10))
    no_truth = evaluator.evaluate(retrieved_ids=["d1"])
    assert no_truth.metrics == {"ndcg@5": None, "ndcg@10": None, "map": None}
    assert no_truth.invalid_result and "this sample has no reference_ids/relevance" in (
        no_truth.invalid_reason or ""
    )
    nothing_relevant = evaluator.evaluate(retrieved_ids=["d1"], relevance={"d1": 0})
    assert set(nothing_relevant.not_computed) == {"ndcg@5", "ndcg@10", "map"}
    assert "no relevant judgement (grade > 0)" in nothing_relevant.not_computed["map"]
    repeated = evaluator.evaluate(retrieved_ids=["d1", "d1"], reference_ids=["d1"])
    assert repeated.score is None and "same doc id more than once" in (
        repeated.invalid_reason or ""
    )
    # an answer metric next to them is unaffected
    mixed = RagmeterEvaluator(metrics=["exact_match", "ndcg"]).evaluate(
        response="Paris", reference="Paris", retrieved_ids=["d1"]
    )
    assert mixed.score == 1.0 and mixed.metrics["ndcg@5"] is None


# -- rankings are scored in list order, ties included ------------------------------------


def test_source_nodes_are_scored_in_list_order_not_re_sorted_by_score(
    index: Any, cranfield: Any
) -> None:
    """LongContextReorder moves the best nodes to both ends of source_nodes: the evaluator
    scores that order (what the LLM saw), as pytrec_eval does on the list, not score order."""
    from llama_index.core.postprocessor import LongContextReorder

    _, queries, qrels = cranfield
    engine = index.as_query_engine(
        llm=MockLLM(max_tokens=1), similarity_top_k=10, node_postprocessors=[LongContextReorder()]
    )
    evaluator = RagmeterEvaluator(metrics=["ndcg", "map"], k=10)
    listed, by_score, results = {}, {}, {}
    for qid, text in queries.items():
        response = engine.query(text)
        listed[qid] = source_ids(response)
        ordered = sorted(response.source_nodes, key=lambda n: -(n.score or 0.0))
        by_score[qid] = [n.node.node_id for n in ordered]
        results[qid] = evaluator.evaluate_response(
            query=text, response=response, relevance=qrels[qid]
        )
    assert any(listed[q] != by_score[q] for q in queries)
    as_listed, as_sorted = trec(listed, qrels), trec(by_score, qrels)
    for qid, result in results.items():
        assert result.metrics["ndcg@10"] == as_listed[qid]["ndcg_cut_10"]
    assert any(results[q].metrics["ndcg@10"] != as_sorted[q]["ndcg_cut_10"] for q in queries)
    # map is order-sensitive too, and stays uncut (all 10 nodes)
    assert all(results[q].metrics["map"] == as_listed[q]["map"] for q in queries)


def test_tied_scores_keep_their_list_order(embed_model: Any) -> None:
    """Two nodes with the same text tie; trec_eval would order them by doc id (descending),
    the evaluator keeps the order of source_nodes."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.postprocessor import LongContextReorder
    from llama_index.core.schema import TextNode

    nodes = [
        TextNode(id_="d1", text="supersonic wing flutter"),
        TextNode(id_="d2", text="supersonic wing flutter"),
        TextNode(id_="d3", text="supersonic inlet"),
    ]
    engine = VectorStoreIndex(nodes, embed_model=embed_model).as_query_engine(
        llm=MockLLM(max_tokens=1), similarity_top_k=3, node_postprocessors=[LongContextReorder()]
    )
    response = engine.query("supersonic wing flutter")
    scores = {n.node.node_id: n.score for n in response.source_nodes}
    assert scores["d1"] == scores["d2"] > scores["d3"]  # a tie
    listed = source_ids(response)
    later = max(["d1", "d2"], key=listed.index)  # the tied node listed second
    evaluator = RagmeterEvaluator(metrics=["mrr", "map", "ndcg@10"], k=None)
    result = evaluator.evaluate_response(response=response, reference_ids=[later])
    assert result.metrics["mrr"] == 1 / (listed.index(later) + 1)
    ref = trec({"q": listed}, {"q": {later: 1}})["q"]
    assert result.metrics == {
        "mrr": ref["recip_rank"],
        "map": ref["map"],
        "ndcg@10": ref["ndcg_cut_10"],
    }
    # pytrec_eval given the scores themselves re-sorts: the tie goes to the larger doc id
    trec_run = {"q": {n.node.node_id: float(n.score or 0.0) for n in response.source_nodes}}
    raw = pytrec_eval.RelevanceEvaluator({"q": {later: 1}}, {"recip_rank"}).evaluate(trec_run)
    assert raw["q"]["recip_rank"] != result.metrics["mrr"]
