"""LlamaIndex engines as the handler sees them: scoped ids, chat engines, router engines, token
usage, the evaluator pollution case, ``evaluate_response`` with retrieved ids,
``run_dataset``.

Real LlamaIndex engines over the Cranfield subset of ``conftest`` (hashed bag-of-words
embedding, ``MockLLM`` or a small ``CustomLLM``), offline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_selector import BaseSelector, SelectorResult, SingleSelection
from llama_index.core.evaluation import BatchEvalRunner, FaithfulnessEvaluator
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import (
    CompletionResponse,
    CompletionResponseGen,
    CustomLLM,
    LLMMetadata,
    MockLLM,
)
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import RouterQueryEngine
from llama_index.core.schema import QueryBundle, TextNode
from llama_index.core.tools import QueryEngineTool, ToolMetadata
from ragmeter_llamaindex import RagmeterEvaluator, RagmeterEventHandler

from ragmeter.capture import capture, propagate
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_run

TOP_K = 5


def ranking(index: Any, query: str, k: int = TOP_K) -> list[str]:
    """The oracle: what LlamaIndex's own retriever returns for ``query``."""
    return [n.node.node_id for n in index.as_retriever(similarity_top_k=k).retrieve(query)]


USAGE: list[dict[str, int]] = []


class CountingLLM(CustomLLM):
    """A ``CustomLLM`` that reports token usage as OpenAI does (``raw["usage"]``), and keeps
    what it reported in ``USAGE``."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=20_000, num_output=16, model_name="counting")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": 2}
        USAGE.append(usage)
        return CompletionResponse(text="short answer", raw={"usage": usage})

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError("not used")


# -- 1. scoped capture ----------------------------------------------------------------------


def test_capture_attaches_while_open_and_names_the_sample(index: Any, cranfield: Any) -> None:
    _, queries, qrels = cranfield
    qid, text = next(iter(queries.items()))
    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=TOP_K)
    handler = RagmeterEventHandler()  # never attached by hand
    with handler.capture(id=qid, relevance=qrels[qid]):
        assert handler.attached
        engine.query(text)
    assert not handler.attached  # the scope attached it, and detached it on leaving
    engine.query("outside the scope: not captured")
    (sample,) = handler.samples
    assert sample.id == qid and sample.relevance == {d: float(g) for d, g in qrels[qid].items()}
    assert sample.retrieved_ids == ranking(index, text)
    report = handler.evaluate_retrieval(k_values=(5,), metrics=["ndcg"])
    assert (
        report.metrics
        == evaluate_run(
            {qid: qrels[qid]}, handler.to_run(), k_values=(5,), metrics=["ndcg"]
        ).metrics
    )


def test_scopes_in_asyncio_tasks_keep_their_ids(index: Any, cranfield: Any) -> None:
    _, queries, _ = cranfield
    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=TOP_K)

    async def one(handler: RagmeterEventHandler, qid: str) -> None:
        with handler.capture(id=qid):
            await asyncio.sleep(0)
            await engine.aquery(queries[qid])

    async def main(handler: RagmeterEventHandler) -> None:
        await asyncio.gather(*(one(handler, q) for q in queries))

    with RagmeterEventHandler() as handler:
        asyncio.run(main(handler))
    assert handler.to_run() == {q: ranking(index, t) for q, t in queries.items()}


# -- 4. chat engines --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
def test_chat_engines_are_captured(index: Any, cranfield: Any, mode: str) -> None:
    _, queries, _ = cranfield
    (q1, t1), (q2, t2) = list(queries.items())[:2]
    handler = RagmeterEventHandler()
    with handler:
        chat = index.as_chat_engine(
            chat_mode=mode, llm=MockLLM(max_tokens=3), similarity_top_k=TOP_K
        )
        with handler.capture(id=q1):
            answer = chat.chat(t1)
        chat.reset()
        with handler.capture(id=q2):
            streamed = chat.stream_chat(t2)
            assert handler.samples[-1].metadata["response_status"] == "stream not consumed yet"
            text = "".join(streamed.response_gen)
        chat.reset()
        with handler.capture(id="async"):
            asyncio.run(chat.achat(t1))
    first, second, third = handler.samples
    assert first.id == q1 and first.user_input == t1
    assert first.retrieved_ids == [n.node.node_id for n in answer.source_nodes]
    assert first.response == answer.response == "text text text"
    if mode == "context":  # the message itself is the query (condense_* rewrites it first)
        assert first.retrieved_ids == ranking(index, t1)
    assert second.id == q2 and second.response == text.strip() == "text text text"
    assert second.metadata["response_status"] == "streamed"
    assert second.retrieved_ids == [n.node.node_id for n in streamed.source_nodes]
    assert third.id == "async" and third.response == "text text text"


# -- token usage ------------------------------------------------------------------------------


def test_token_usage_reported_by_the_llm_is_summed(index: Any, cranfield: Any) -> None:
    _, queries, _ = cranfield
    text = next(iter(queries.values()))
    engine = index.as_query_engine(llm=CountingLLM(), similarity_top_k=TOP_K)
    USAGE.clear()
    with RagmeterEventHandler() as handler, handler.capture(id="q"):
        engine.query(text)
    calls = list(USAGE)
    (sample,) = handler.samples
    assert calls and sample.input_tokens == sum(c["prompt_tokens"] for c in calls)
    assert sample.output_tokens == 2 * len(calls)


# -- router engines ---------------------------------------------------------------------------


class EverySelector(BaseSelector):
    """Selects every choice: a multi-selection router without an LLM in the loop."""

    def _get_prompts(self) -> dict[str, Any]:
        return {}

    def _update_prompts(self, prompts: Any) -> None:
        return None

    def _select(self, choices: Sequence[Any], query: QueryBundle) -> SelectorResult:
        return SelectorResult(
            selections=[SingleSelection(index=i, reason="all") for i in range(len(choices))]
        )

    async def _aselect(self, choices: Sequence[Any], query: QueryBundle) -> SelectorResult:
        return self._select(choices, query)


def test_router_engine_keeps_each_chosen_engines_ranking(
    index: Any, cranfield: Any, embed_model: Any
) -> None:
    corpus, queries, _ = cranfield
    text = next(iter(queries.values()))
    other = VectorStoreIndex(
        [TextNode(id_=f"x{d}", text=t) for d, t in list(corpus.items())[:60]],
        embed_model=embed_model,
    )
    tools = [
        QueryEngineTool(
            query_engine=idx.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=TOP_K),
            metadata=ToolMetadata(name=name, description=name),
        )
        for name, idx in (("cranfield", index), ("other", other))
    ]
    router = RouterQueryEngine(
        selector=EverySelector(), query_engine_tools=tools, llm=MockLLM(max_tokens=2)
    )
    default = RagmeterEventHandler()
    second = RagmeterEventHandler(stage="VectorIndexRetriever#2")
    with pytest.warns(DeprecationWarning):
        merged = RagmeterEventHandler(retrieval="merge")
    with default, second, merged, capture(id="r"):
        router.query(text)
    (a,), (b,), (c,) = default.samples, second.samples, merged.samples
    stages = [(s.name, s.ids) for s in a.stages or []]
    assert stages == [
        ("VectorIndexRetriever", ranking(index, text)),
        ("VectorIndexRetriever#2", ranking(other, text)),
    ]
    # the answer combines both engines' answers: no one ranking reached the LLM
    assert a.retrieved_ids is None
    [note] = [n for n in a.metadata["capture_errors"] if n.startswith("context: ")]
    assert "not a ranking of any one retriever call" in note and "stage=" in note
    assert b.retrieved_ids == ranking(other, text)
    assert c.retrieved_ids == ranking(index, text) + ranking(other, text)


# -- record="tagged": LlamaIndex's own evaluator runs a query engine --------------------------


def test_a_faithfulness_evaluators_own_queries_are_never_samples(
    index: Any, cranfield: Any
) -> None:
    _, queries, _ = cranfield
    five = list(queries.items())[:5]
    engine = index.as_query_engine(llm=MockLLM(max_tokens=3), similarity_top_k=TOP_K)
    evaluator = FaithfulnessEvaluator(llm=MockLLM(max_tokens=3))
    counts = {}
    for record in ("all", "tagged"):
        handler = RagmeterEventHandler(record=record)
        with handler:
            for qid, text in five:
                with handler.capture(id=qid):
                    response = engine.query(text)
                    # inside the scope too: it must not become "<qid>#2"
                    evaluator.evaluate_response(query=text, response=response)
                evaluator.evaluate_response(query=text, response=response)
        counts[record] = [s.id for s in handler.samples]
        assert handler.skipped == 10
    assert counts["all"] == counts["tagged"] == [q for q, _ in five]
    asked = RagmeterEventHandler(capture_internal=True)
    with asked, asked.capture(id="1"):
        evaluator.evaluate_response(query=five[0][1], response=response)
    assert len(asked.samples) == 1 and asked.skipped == 0  # recorded when asked


# -- RagmeterEvaluator reads the response's source nodes --------------------------------------


def test_batch_eval_runner_evaluate_queries_scores_ndcg(index: Any, cranfield: Any) -> None:
    _, queries, qrels = cranfield
    items = list(queries.items())[:6]
    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=TOP_K)
    evaluator = RagmeterEvaluator(metrics=["ndcg", "recall"], k=TOP_K)
    runner = BatchEvalRunner({"ragmeter": evaluator}, workers=2)
    reference_ids = [sorted(d for d, g in qrels[q].items() if g > 0) for q, _ in items]
    results = runner.evaluate_queries(
        engine, queries=[t for _, t in items], reference_ids=reference_ids
    )["ragmeter"]
    run = {q: ranking(index, t) for q, t in items}
    binary = {q: {d: 1 for d in ids} for (q, _), ids in zip(items, reference_ids, strict=True)}
    expected = evaluate_run(binary, run, k_values=(TOP_K,), metrics=["ndcg", "recall"]).per_query
    for (qid, _), result in zip(items, results, strict=True):
        assert result.score == pytest.approx(expected[qid][f"ndcg@{TOP_K}"], abs=1e-12)
        assert result.metrics[f"recall@{TOP_K}"] == pytest.approx(
            expected[qid][f"recall@{TOP_K}"], abs=1e-12
        )


def test_evaluate_response_maps_source_nodes_by_doc_id(chunked: Any) -> None:
    index, nodes, queries, qrels = chunked
    qid, text = next(iter(queries.items()))
    response = index.as_query_engine(llm=MockLLM(max_tokens=1), similarity_top_k=8).query(text)
    source = {n.node_id: n.ref_doc_id for n in nodes}
    by_doc = RagmeterEvaluator(metrics=["recall"], k=8, doc_id="ref_doc_id")
    result = by_doc.evaluate_response(query=text, response=response, relevance=qrels[qid])
    ids = list(dict.fromkeys(source[n.node.node_id] for n in response.source_nodes))
    expected = evaluate_run({qid: qrels[qid]}, {qid: ids}, k_values=(8,), metrics=["recall"])
    assert result.score == pytest.approx(expected.metrics["recall@8"], abs=1e-12)
    given = by_doc.evaluate_response(
        query=text, response=response, relevance=qrels[qid], retrieved_ids=["nothing"]
    )
    assert given.score == 0.0  # an explicit retrieved_ids= wins over the source nodes
    with pytest.raises(InvalidInputError, match="doc_id must be"):
        RagmeterEvaluator(doc_id="doc")


# -- run_dataset ------------------------------------------------------------------------------


def test_run_dataset_runs_and_scores_and_leaves_the_handler_detached(
    index: Any, cranfield: Any
) -> None:
    _, queries, qrels = cranfield
    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=TOP_K)
    handler = RagmeterEventHandler()
    before = list(get_dispatcher().span_handlers)
    report = handler.run_dataset(engine, queries, qrels=qrels, concurrency=3, progress=False)
    assert list(get_dispatcher().span_handlers) == before and not handler.attached
    run = {q: ranking(index, t) for q, t in queries.items()}
    assert handler.to_run() == run and [s.id for s in report.samples] == list(queries)
    expected = evaluate_run(qrels, run, k_values=(1, 3, 5, 10, 20, 100))
    assert report.retrieval is not None and report.retrieval.metrics == expected.metrics
    areport = asyncio.run(
        RagmeterEventHandler().arun_dataset(
            engine, queries, qrels=qrels, concurrency=4, progress=False
        )
    )
    assert areport.retrieval is not None and areport.retrieval.metrics == expected.metrics


def test_run_dataset_of_a_chat_engine(index: Any, cranfield: Any) -> None:
    _, queries, qrels = cranfield
    chat = index.as_chat_engine(chat_mode="context", llm=MockLLM(max_tokens=2), similarity_top_k=5)
    few = dict(list(queries.items())[:3])
    report = RagmeterEventHandler().run_dataset(
        chat, few, qrels=qrels, concurrency=1, progress=False
    )
    assert [s.id for s in report.samples] == list(few)
    assert [s.retrieved_ids for s in report.samples] == [ranking(index, t) for t in few.values()]
    with pytest.raises(InvalidInputError, match="needs a query engine or chat engine"):
        RagmeterEventHandler().run_dataset(object(), few, progress=False)


@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
def test_run_dataset_gives_each_chat_query_a_fresh_conversation_at_any_concurrency(
    index: Any, cranfield: Any, mode: str
) -> None:
    """A chat engine holds one conversation: sharing it across a dataset rewrote every later
    question from the earlier ones (condense_*), and threads sharing its memory could hang."""
    _, queries, qrels = cranfield
    chat = index.as_chat_engine(chat_mode=mode, llm=MockLLM(max_tokens=2), similarity_top_k=5)
    few = dict(list(queries.items())[:6])
    for asynchronous in (False, True):
        handler = RagmeterEventHandler()
        if asynchronous:
            report = asyncio.run(handler.arun_dataset(chat, few, qrels=qrels, progress=False))
        else:
            report = handler.run_dataset(chat, few, qrels=qrels, progress=False)  # default 4
        assert [s.id for s in report.samples] == list(few)
        # each query retrieved for its own text: no earlier turn condensed into it
        assert [s.retrieved_ids for s in report.samples] == [
            ranking(index, t)[:5] for t in few.values()
        ]
        assert [s.user_input for s in report.samples] == list(few.values())


def test_propagate_carries_a_scope_into_a_thread_pool(index: Any, cranfield: Any) -> None:
    _, queries, _ = cranfield
    engine = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=TOP_K)
    (qid, text), (other, other_text) = list(queries.items())[:2]
    with RagmeterEventHandler() as handler, ThreadPoolExecutor(max_workers=2) as pool:
        with handler.capture(id=qid):
            pool.submit(propagate(engine.query), text).result()
        with handler.capture(id=other):
            pool.submit(engine.query, other_text).result()  # without it: the scope stays behind
    ids = [s.id for s in handler.samples]
    assert ids[0] == qid and ids[1] != other
