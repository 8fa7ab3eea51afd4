"""RagmeterEventHandler: capture from real LlamaIndex query engines"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import TextNode
from ragmeter_llamaindex import RagmeterEventHandler

from ragmeter.capture import capture
from ragmeter.errors import InvalidInputError
from ragmeter.io.jsonl import read_jsonl

pytrec_eval = pytest.importorskip("pytrec_eval")

TOP_K = 5


def retrieved_node_ids(index: Any, query: str, k: int = TOP_K) -> list[str]:
    """The oracle: what LlamaIndex's own retriever returns for ``query``."""
    return [n.node.node_id for n in index.as_retriever(similarity_top_k=k).retrieve(query)]


def engine(index: Any, **kwargs: Any) -> Any:
    return index.as_query_engine(llm=MockLLM(max_tokens=4), similarity_top_k=TOP_K, **kwargs)


def test_attach_is_idempotent_and_detach_removes_it(index: Any) -> None:
    root = get_dispatcher()
    handler = RagmeterEventHandler()
    assert handler.attach() is handler
    handler.attach()
    assert sum(h is handler for h in root.event_handlers) == 1
    assert sum(type(h).__name__ == "_SpanTracker" for h in root.span_handlers) == 1
    engine(index).query("shock waves")
    assert len(handler) == 1
    handler.detach()
    assert all(h is not handler for h in root.event_handlers)
    assert all(type(h).__name__ != "_SpanTracker" for h in root.span_handlers)
    engine(index).query("shock waves")
    assert len(handler) == 1  # nothing captured once detached


def test_context_manager_attaches_and_detaches(index: Any) -> None:
    with RagmeterEventHandler() as handler:
        engine(index).query("boundary layer")
    engine(index).query("boundary layer")
    assert len(handler.samples) == 1
    assert all(h is not handler for h in get_dispatcher().event_handlers)


def test_query_is_captured_as_one_sample(index: Any, cranfield: Any) -> None:
    _, queries, _ = cranfield
    qid, text = next(iter(queries.items()))
    qe = engine(index)
    with RagmeterEventHandler().attach() as handler, instrument_tags({"ragmeter_id": qid}):
        response = qe.query(text)
    (sample,) = handler.samples
    assert sample.id == qid
    assert sample.user_input == text
    assert sample.retrieved_ids == retrieved_node_ids(index, text)
    assert sample.response == response.response == "text text text text"
    assert sample.retrieved_contexts == [n.node.get_content() for n in response.source_nodes]
    assert sample.retrieved_texts == sample.retrieved_contexts
    assert sample.metadata["node_ids"] == sample.retrieved_ids
    assert sample.metadata["scores"] == [n.score for n in response.source_nodes]
    assert sample.latency_ms is not None and sample.latency_ms > 0
    assert sample.error is None
    assert "capture_errors" not in sample.metadata


def test_captured_run_scores_exactly_like_pytrec_eval(index: Any, cranfield: Any) -> None:
    _, queries, qrels = cranfield
    qe = engine(index)
    with RagmeterEventHandler() as handler:
        for qid, text in queries.items():
            with instrument_tags({"ragmeter_id": qid}):
                qe.query(text)
    run = handler.to_run()
    assert run == {qid: retrieved_node_ids(index, text) for qid, text in queries.items()}
    report = handler.evaluate_retrieval(qrels, k_values=(5,), metrics=["ndcg", "recall"])
    trec_run = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    trec_qrels = {q: {d: int(g) for d, g in row.items()} for q, row in qrels.items()}
    ref = pytrec_eval.RelevanceEvaluator(trec_qrels, {"ndcg_cut.5", "recall.5"}).evaluate(trec_run)
    for qid in queries:
        assert report.per_query[qid]["ndcg@5"] == pytest.approx(ref[qid]["ndcg_cut_5"], abs=1e-12)
        assert report.per_query[qid]["recall@5"] == pytest.approx(ref[qid]["recall_5"], abs=1e-12)


def test_tags_carry_ground_truth_and_extra_tags_are_kept(index: Any, tmp_path: Any) -> None:
    tags = {
        "ragmeter_id": "q7",
        "ragmeter_reference": "text text",
        "ragmeter_reference_ids": ["12", "51"],
        "user": "alice",
    }
    with RagmeterEventHandler() as handler, instrument_tags(tags):
        engine(index).query("similarity laws for wind tunnel models")
    (sample,) = handler.samples
    assert sample.reference == "text text"
    assert sample.reference_ids == ["12", "51"]
    assert sample.metadata["run_metadata"] == {"user": "alice"}
    assert sample.metadata["framework"] == "llamaindex"
    assert handler.to_qrels() == {"q7": {"12": 1, "51": 1}}
    report = handler.evaluate(metrics=["token_f1", "exact_match"])
    assert report.per_sample["q7"]["exact_match"] == 0.0  # "text text text text" vs "text text"
    assert 0.0 < report.per_sample["q7"]["token_f1"] < 1.0
    path = tmp_path / "samples.jsonl"
    assert handler.to_jsonl(path) == 1
    assert [s.id for s in read_jsonl(path)] == ["q7"]
    handler.clear()
    assert handler.samples == [] and handler.to_run() == {}


def test_an_unusable_tag_is_left_out_and_the_rest_kept(index: Any, tmp_path: Any) -> None:
    tags = {
        "ragmeter_id": "q8",
        "ragmeter_reference": "text",
        "ragmeter_relevance": {"12": "high"},  # not a grade
        "score": float("nan"),  # JSON cannot hold it
    }
    with RagmeterEventHandler() as handler, instrument_tags(tags):
        engine(index).query("similarity laws for wind tunnel models")
    (sample,) = handler.samples
    assert sample.id == "q8" and sample.reference == "text" and sample.relevance is None
    assert sample.retrieved_ids == retrieved_node_ids(
        index, "similarity laws for wind tunnel models"
    )
    (note,) = sample.metadata["capture_errors"]
    assert note.startswith("invalid relevance left out:")
    assert handler.capture_errors == 1  # counted and logged like every capture problem
    assert sample.metadata["run_metadata"] == {"score": "nan"}
    assert handler.to_jsonl(tmp_path / "s.jsonl") == 1


def gated_copy(embed_model: Any, release_order: list[str]) -> Any:
    """``embed_model``'s vectors, but async query embeddings form a barrier.

    No query embedding finishes before every query in ``release_order`` has started one
    (so all the queries are in flight at once, whatever the machine's load), and they then
    finish one by one in ``release_order``. Deterministic: no sleeps, no timing.
    """
    arrived: list[str] = []
    released: list[str] = []
    state: dict[str, asyncio.Condition] = {}

    class GatedEmbedding(type(embed_model)):  # type: ignore[misc]
        async def _aget_query_embedding(self, query: str) -> list[float]:
            cond = state.setdefault("cond", asyncio.Condition())
            async with cond:
                arrived.append(query)
                cond.notify_all()
                await cond.wait_for(
                    lambda: (
                        len(arrived) == len(release_order) and release_order[len(released)] == query
                    )
                )
                released.append(query)
                cond.notify_all()
            return self._get_query_embedding(query)

    return GatedEmbedding(model_name="gated-" + embed_model.model_name)


def test_concurrent_aquery_keeps_samples_apart(
    index: Any, cranfield: Any, embed_model: Any
) -> None:
    _, queries, _ = cranfield
    qids = list(queries)[:8]
    # every query is in flight before any retrieval finishes; they finish in reverse start order
    qe = engine(index)
    qe.retriever._embed_model = gated_copy(embed_model, [queries[q] for q in reversed(qids)])

    async def one(qid: str) -> Any:
        with instrument_tags({"ragmeter_id": qid}):
            return await qe.aquery(queries[qid])

    async def main() -> list[Any]:
        return await asyncio.wait_for(asyncio.gather(*(one(q) for q in qids)), timeout=60)

    with RagmeterEventHandler() as handler:
        responses = asyncio.run(main())
    samples = handler.samples
    assert sorted(s.id for s in samples) == sorted(qids)
    for sample in samples:
        assert sample.user_input == queries[sample.id]
        assert sample.retrieved_ids == retrieved_node_ids(index, queries[sample.id])
    for response, qid in zip(responses, qids, strict=True):
        assert [n.node.node_id for n in response.source_nodes] == handler.to_run()[qid]


def test_queries_in_threads_keep_samples_apart(index: Any, cranfield: Any) -> None:
    _, queries, _ = cranfield
    qe = engine(index)

    def one(qid: str) -> None:
        with instrument_tags({"ragmeter_id": qid}):
            qe.query(queries[qid])

    with RagmeterEventHandler() as handler, ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, queries))
    assert handler.to_run() == {q: retrieved_node_ids(index, t) for q, t in queries.items()}


def test_streaming_response_is_never_drained_by_capture(index: Any) -> None:
    qe = index.as_query_engine(llm=MockLLM(max_tokens=3), similarity_top_k=TOP_K, streaming=True)
    with RagmeterEventHandler() as handler:
        response = qe.query("heat transfer in hypersonic flow")
        assert isinstance(response, StreamingResponse)
        (sample,) = handler.samples
        assert sample.response is None
        assert sample.metadata["response_status"] == "stream not consumed yet"
        tokens = list(response.response_gen)  # the caller reads the whole stream
    assert "".join(tokens) == "text text text"
    assert sample.response == "text text text"
    assert sample.metadata["response_status"] == "streamed"
    assert sample.retrieved_ids == retrieved_node_ids(index, "heat transfer in hypersonic flow")


def test_stream_closed_early_stays_unknown(index: Any) -> None:
    qe = index.as_query_engine(llm=MockLLM(max_tokens=3), similarity_top_k=TOP_K, streaming=True)
    with RagmeterEventHandler() as handler:
        response = qe.query("heat transfer")
        gen = response.response_gen
        assert next(gen) == "text "
        gen.close()
    (sample,) = handler.samples
    assert sample.response is None
    assert sample.metadata["response_status"] == "stream closed before the end; text unknown"


def test_async_streaming_response(index: Any) -> None:
    qe = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=TOP_K, streaming=True)

    async def main() -> str:
        response = await qe.aquery("laminar flow")
        assert isinstance(response, AsyncStreamingResponse)
        assert handler.samples[0].response is None
        return "".join([t async for t in response.async_response_gen()])

    with RagmeterEventHandler() as handler:
        text = asyncio.run(main())
    assert text == "text text"
    assert handler.samples[0].response == "text text"
    assert handler.samples[0].metadata["response_status"] == "streamed"


class Rephrasing(CustomQueryEngine):
    """A custom engine that calls another engine: one top-level query, one sample."""

    inner: Any

    def custom_query(self, query_str: str) -> str:
        return str(self.inner.query(query_str + " at high mach numbers"))


class Failing(CustomQueryEngine):
    def custom_query(self, query_str: str) -> str:
        raise ValueError("the vector store is down")


def test_nested_engines_make_one_sample_for_the_outer_query(index: Any) -> None:
    outer = Rephrasing(inner=engine(index))
    with RagmeterEventHandler() as handler, instrument_tags({"ragmeter_id": "outer"}):
        answer = outer.query("pressure distribution")
    (sample,) = handler.samples
    assert sample.id == "outer"
    assert sample.user_input == "pressure distribution"
    assert sample.response == str(answer)
    assert sample.retrieved_ids == retrieved_node_ids(
        index, "pressure distribution at high mach numbers"
    )


def test_a_failing_query_raises_as_usual_and_is_recorded(index: Any) -> None:
    with RagmeterEventHandler() as handler, pytest.raises(ValueError, match="vector store is down"):
        Failing().query("anything")
    (sample,) = handler.samples
    assert sample.error == "ValueError: the vector store is down"
    assert sample.response is None


def test_retrieval_outside_a_query_is_not_a_sample(index: Any) -> None:
    with RagmeterEventHandler() as handler:
        index.as_retriever(similarity_top_k=3).retrieve("wing")
    assert handler.samples == []


def test_chunks_are_mapped_to_their_source_documents(chunked: Any) -> None:
    index, nodes, queries, qrels = chunked
    source = {n.node_id: n.ref_doc_id for n in nodes}
    qe = index.as_query_engine(llm=MockLLM(max_tokens=1), similarity_top_k=20)
    with RagmeterEventHandler(doc_id="ref_doc_id") as handler:
        for qid, text in queries.items():
            with instrument_tags({"ragmeter_id": qid}):
                qe.query(text)
    repeated = 0
    for sample in handler.samples:
        node_ids = retrieved_node_ids(index, sample.user_input, 20)
        assert sample.metadata["node_ids"] == node_ids
        assert sample.retrieved_ids == list(dict.fromkeys(source[n] for n in node_ids))
        repeated += len(node_ids) - len(sample.retrieved_ids)
    assert repeated > 0  # some documents were retrieved as several chunks
    report = handler.evaluate_retrieval(qrels, k_values=(10,), metrics=["ndcg"])
    run = handler.to_run()
    trec_run = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    trec_qrels = {q: {d: int(g) for d, g in row.items()} for q, row in qrels.items()}
    ref = pytrec_eval.RelevanceEvaluator(trec_qrels, {"ndcg_cut.10"}).evaluate(trec_run)
    for qid in queries:
        assert report.per_query[qid]["ndcg@10"] == pytest.approx(ref[qid]["ndcg_cut_10"], abs=1e-12)


def metadata_index(embed_model: Any) -> Any:
    from llama_index.core import VectorStoreIndex

    nodes = [
        TextNode(id_="n1", text="supersonic wing flutter", metadata={"paper": "p1"}),
        TextNode(id_="n2", text="supersonic wing drag", metadata={"paper": "p1"}),
        TextNode(id_="n3", text="supersonic inlet", metadata={}),
    ]
    return VectorStoreIndex(nodes, embed_model=embed_model)


def test_metadata_doc_id_and_nodes_without_the_key(embed_model: Any) -> None:
    qe = metadata_index(embed_model).as_query_engine(llm=MockLLM(max_tokens=1), similarity_top_k=3)
    with RagmeterEventHandler(doc_id="metadata.paper") as handler:
        qe.query("supersonic wing")
    (sample,) = handler.samples
    assert set(sample.metadata["node_ids"][:2]) == {"n1", "n2"}
    assert sample.retrieved_ids == ["p1", "n3"]  # n3 has no 'paper': its node id stands in
    assert sample.metadata["capture_errors"] == [
        "1 of 3 retrieved node(s) had no value for doc_id='metadata.paper'; their node_id "
        "was used instead"
    ]


def test_capture_errors_never_reach_the_query_and_are_logged_once(
    embed_model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(node: Any) -> str:
        raise KeyError("no such field")

    qe = metadata_index(embed_model).as_query_engine(llm=MockLLM(max_tokens=1), similarity_top_k=2)
    handler = RagmeterEventHandler(doc_id=broken)
    with caplog.at_level(logging.DEBUG, logger="ragmeter_llamaindex"), handler:
        first = qe.query("supersonic wing")
        second = qe.query("supersonic inlet")
    assert str(first) == str(second) == "text"
    assert handler.capture_errors == 2
    for sample in handler.samples:
        assert sample.retrieved_ids == sample.metadata["node_ids"]  # fell back to node ids
        assert sample.metadata["capture_errors"][0] == "KeyError: 'no such field'"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "could not capture part of a LlamaIndex run" in warnings[0].getMessage()
    assert any(r.levelno == logging.DEBUG for r in caplog.records)


def test_max_samples_keeps_the_newest(index: Any) -> None:
    qe = engine(index)
    with RagmeterEventHandler(max_samples=2) as handler:
        for i in range(3):
            with instrument_tags({"ragmeter_id": f"q{i}"}):
                qe.query(f"query number {i}")
    assert [s.id for s in handler.samples] == ["q1", "q2"]
    assert handler.store.dropped == 1


def test_nothing_is_kept_per_query_once_it_ends(index: Any) -> None:
    """Bounded memory: span and query state is dropped when a query ends, however it ends."""
    plain = engine(index)
    streaming = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=2, streaming=True)
    with RagmeterEventHandler(max_samples=5) as handler:
        for i in range(40):
            plain.query(f"wing {i}")
            streaming.query(f"flutter {i}")  # a stream nobody reads
            with pytest.raises(ValueError):
                Failing().query("x")
        core = handler._core
        assert not core.roots and not core.retrievals and not core.chat_streams
        assert core.run.get() is None and core.enclosing.get() is None
    assert len(handler) == 5 and handler.store.dropped == 115


def test_bad_doc_id() -> None:
    with pytest.raises(
        InvalidInputError, match=r"doc_id must be 'node_id', 'ref_doc_id', 'metadata\.<key>'"
    ):
        RagmeterEventHandler(doc_id="doc_id")
    with pytest.raises(InvalidInputError, match=r"got 'metadata\.'"):
        RagmeterEventHandler(doc_id="metadata.")


def test_id_field_is_a_deprecated_alias_of_doc_id(chunked: Any) -> None:
    index, nodes, queries, _ = chunked
    qid, text = next(iter(queries.items()))
    qe = index.as_query_engine(llm=MockLLM(max_tokens=1), similarity_top_k=5)
    with pytest.warns(
        DeprecationWarning, match=r"RagmeterEventHandler\(id_field=...\) is deprecated"
    ):
        old = RagmeterEventHandler(id_field="ref_doc_id")
    assert old.doc_id == old.id_field == "ref_doc_id"
    new = RagmeterEventHandler(doc_id="ref_doc_id")
    with old, new, capture(id=qid):  # a scope for every observer: both handlers see it
        qe.query(text)
    assert old.to_run() == new.to_run() and old.to_run()[qid]
    source = {n.node_id: n.ref_doc_id for n in nodes}
    assert set(old.to_run()[qid]) <= set(source.values())
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInputError, match="doc_id= alone"):
        RagmeterEventHandler(doc_id="node_id", id_field="ref_doc_id")
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(InvalidInputError, match="id_field must be"),
    ):
        RagmeterEventHandler(id_field="doc_id")


# -- doc_id="ref_doc_id" on nodes that were never split (the README's snippet) --------------


def readme_block() -> str:
    """The README's LlamaIndex snippet, as written there."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## LlamaIndex\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert 'RagmeterEventHandler(doc_id="ref_doc_id")' in block
    return block


def test_readme_snippet_on_plain_text_nodes_neither_warns_nor_notes(
    index: Any, cranfield: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """``index`` holds TextNodes built directly (ids = Cranfield doc ids, no source Document):
    with doc_id="ref_doc_id" each node is its own document, so nothing is wrong to report."""
    _, queries, qrels = cranfield
    qid, text = next(iter(queries.items()))
    ns: dict[str, Any] = {"query_engine": engine(index), "queries": queries, "qrels": qrels}
    ns.update(qid=qid, text=text)
    with caplog.at_level(logging.DEBUG, logger="ragmeter_llamaindex"):
        exec(compile(readme_block(), "README.md:LlamaIndex", "exec"), ns)
    handler, report = ns["handler"], ns["report"]
    assert caplog.records == []
    assert report.retrieval.warnings == [] and report.failed == {}
    assert report.retrieval.extra["capture"]["capture_errors"] == 0
    assert all("capture_errors" not in s.metadata for s in handler.samples)
    run = {q: retrieved_node_ids(index, t) for q, t in queries.items()}
    assert handler.to_run()[qid] == run[qid]  # the snippet's scoped query is there too
    trec_run = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    trec_qrels = {q: {d: int(g) for d, g in row.items()} for q, row in qrels.items()}
    ref = pytrec_eval.RelevanceEvaluator(trec_qrels, {"ndcg_cut.5"}).evaluate(trec_run)
    for q in queries:
        assert report.retrieval.per_query[q]["ndcg@5"] == pytest.approx(
            ref[q]["ndcg_cut_5"], abs=1e-12
        )


def test_ref_doc_id_still_warns_when_plain_nodes_carry_no_qrels_id(
    embed_model: Any, cranfield: Any
) -> None:
    """Nodes built without the document's id (a uuid id, the doc id in metadata): with
    doc_id="ref_doc_id" their uuids never match the qrels, and scoring says so."""
    from llama_index.core import VectorStoreIndex

    corpus, queries, qrels = cranfield
    nodes = [TextNode(text=t, metadata={"doc": d}) for d, t in list(corpus.items())[:300]]
    index = VectorStoreIndex(nodes, embed_model=embed_model)
    handler = RagmeterEventHandler(doc_id="ref_doc_id")
    report = handler.run_dataset(engine(index), queries, qrels=qrels, progress=False)
    assert report.retrieval is not None
    assert all(v == 0.0 for v in report.retrieval.metrics.values())
    (warning,) = [w for w in report.retrieval.warnings if "(doc_ids)" in w]
    assert "appears anywhere in the qrels" in warning and "doc_id='ref_doc_id'" in warning
    fixed = RagmeterEventHandler(doc_id="metadata.doc")
    good = fixed.run_dataset(engine(index), queries, qrels=qrels, progress=False)
    assert good.retrieval is not None and not any("(doc_ids)" in w for w in good.retrieval.warnings)


def test_captured_rankings_are_scored_in_list_order_ties_included() -> None:
    """A retriever's list is the ranking: neither re-sorted by score nor tie-broken by id."""
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.schema import NodeWithScore, QueryBundle

    listed = [("d3", 0.2), ("d1", 0.9), ("d2", 0.9)]  # a low score first, then a tie

    class Listed(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [NodeWithScore(node=TextNode(id_=d, text=d), score=s) for d, s in listed]

    qe = RetrieverQueryEngine.from_args(Listed(), llm=MockLLM(max_tokens=1))
    qrels = {"q": {"d2": 1}}
    handler = RagmeterEventHandler()
    with handler.capture(id="q", relevance=qrels["q"]):
        qe.query("anything")
    assert handler.to_run() == {"q": ["d3", "d1", "d2"]}
    report = handler.evaluate_retrieval(qrels, k_values=(3,), metrics=["mrr", "ndcg"])
    assert report.per_query["q"]["mrr"] == 1 / 3  # d2 is third in the list
    trec_qrels = {"q": {"d2": 1}}
    by_list = {"q": {d: float(3 - i) for i, (d, _) in enumerate(listed)}}
    by_score = {"q": dict(listed)}  # trec_eval: score descending, ties by doc id descending
    measures = {"recip_rank", "ndcg_cut.3"}
    ref = pytrec_eval.RelevanceEvaluator(trec_qrels, measures).evaluate(by_list)["q"]
    resorted = pytrec_eval.RelevanceEvaluator(trec_qrels, measures).evaluate(by_score)["q"]
    assert report.per_query["q"]["mrr"] == ref["recip_rank"] != resorted["recip_rank"] == 1.0
    assert report.per_query["q"]["ndcg@3"] == ref["ndcg_cut_3"]
