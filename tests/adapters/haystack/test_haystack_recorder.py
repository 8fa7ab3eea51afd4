"""RagmeterRecorder and pipeline_retriever on a real BM25 RAG pipeline over Cranfield."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("haystack")
from haystack import Document, Pipeline, component
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from ragmeter_haystack import RagmeterRecorder, pipeline_retriever

from ragmeter.capture import SampleStore, content_doc_id
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_retrieval, evaluate_run
from ragmeter.schema import RagSample

pytrec_eval = pytest.importorskip("pytrec_eval")

N_QUERIES = 25


def _qids(cranfield: Any, n: int = N_QUERIES) -> list[str]:
    _, queries, qrels = cranfield
    return [q for q in queries if q in qrels][:n]


def test_run_returns_the_normal_result_and_records_a_sample(
    rag: Pipeline, make_rag: Any, rag_input: Any, cranfield: Any
) -> None:
    _, queries, _ = cranfield
    recorder = RagmeterRecorder(rag, generator="llm")
    plain = make_rag().run(rag_input(queries["1"]))
    result = recorder.run(rag_input(queries["1"]), sample_id="1")
    assert result == plain  # the documents asked for with include_outputs_from are removed
    assert set(result) == {"llm"}
    (sample,) = recorder.samples
    assert isinstance(sample, RagSample)
    assert sample.id == "1"
    assert sample.user_input == queries["1"]
    assert sample.response == result["llm"]["replies"][0].text
    assert len(sample.retrieved_ids or []) == 10
    assert (
        sample.retrieved_texts is not None and sample.retrieved_contexts == sample.retrieved_texts
    )
    assert sample.response is not None and sample.retrieved_texts[0].startswith(sample.response)
    assert sample.latency_ms is not None and sample.latency_ms > 0
    assert sample.input_tokens is not None and sample.input_tokens > 0
    assert sample.output_tokens == len(sample.response.split())
    assert recorder.to_run() == {"1": sample.retrieved_ids}


def test_ids_are_the_retrievers_ranking(rag: Pipeline, rag_input: Any, cranfield: Any) -> None:
    _, queries, _ = cranfield
    recorder = RagmeterRecorder(rag)  # defaults: what reached the prompt, the llm's replies
    recorder.run(rag_input(queries["2"]), sample_id="2", include_outputs_from={"retriever"})
    recorder.run(rag_input(queries["3"]), sample_id="3")
    direct = rag.run(rag_input(queries["2"]), include_outputs_from={"retriever"})
    assert recorder.to_run()["2"] == [d.id for d in direct["retriever"]["documents"]]
    assert recorder.to_run(stage="retriever") == recorder.to_run()
    [stage, context] = recorder.samples[0].stages or []
    assert (stage.name, stage.kind, context.same_as) == ("retriever", "retriever", "retriever")


def test_user_include_outputs_from_is_kept(rag: Pipeline, rag_input: Any, cranfield: Any) -> None:
    _, queries, _ = cranfield
    recorder = RagmeterRecorder(rag)
    result = recorder.run(rag_input(queries["4"]), include_outputs_from={"retriever"})
    assert set(result) == {"retriever", "llm"}
    assert len(result["retriever"]["documents"]) == 10


def test_captured_run_scores_match_pytrec_eval(
    rag: Pipeline, rag_input: Any, cranfield: Any
) -> None:
    _, queries, qrels = cranfield
    recorder = RagmeterRecorder(rag, generator="llm")
    qids = _qids(cranfield)
    for qid in qids:
        recorder.run(rag_input(queries[qid]), sample_id=qid)
    run = recorder.to_run()
    judged = {q: qrels[q] for q in qids}
    report = recorder.evaluate_retrieval(judged, k_values=(5, 10))
    assert report.n_queries == len(qids)
    trec_run = {q: {d: float(len(ids) - r) for r, d in enumerate(ids)} for q, ids in run.items()}
    trec_qrels = {q: {d: int(g) for d, g in row.items()} for q, row in judged.items()}
    ref = pytrec_eval.RelevanceEvaluator(
        trec_qrels, {"ndcg_cut_10", "P_5", "recall_10", "map", "recip_rank"}
    ).evaluate(trec_run)
    for ours, theirs in (
        ("ndcg@10", "ndcg_cut_10"),
        ("precision@5", "P_5"),
        ("recall@10", "recall_10"),
        ("map", "map"),
        ("mrr", "recip_rank"),
    ):
        for q in qids:
            assert report.per_query[q][ours] == pytest.approx(ref[q][theirs], abs=1e-12), (q, ours)
        mean = sum(ref[q][theirs] for q in qids) / len(qids)
        assert report.metrics[ours] == pytest.approx(mean, abs=1e-12)


def test_pipeline_retriever_gives_the_same_run_as_the_recorder(
    rag: Pipeline, make_rag: Any, rag_input: Any, cranfield: Any
) -> None:
    _, queries, qrels = cranfield
    qids = _qids(cranfield, 12)
    recorder = RagmeterRecorder(rag)
    for qid in qids:
        recorder.run(rag_input(queries[qid]), sample_id=qid)
    judged = {q: qrels[q] for q in qids}
    retrieve = pipeline_retriever(
        make_rag(top_k=50),
        retriever_component="retriever",
        query_input=["query", "prompt_builder.question"],
    )
    assert len(retrieve(queries["1"])) == 50
    assert retrieve(queries["1"], limit=10) == recorder.to_run()["1"]
    report = evaluate_retrieval(
        retrieve, judged, queries, k_values=(10,), metrics=["ndcg", "recall"]
    )
    assert (
        report.metrics
        == evaluate_run(
            judged, recorder.to_run(), k_values=(10,), metrics=["ndcg", "recall"]
        ).metrics
    )


def test_pipeline_retriever_on_a_retrieval_pipeline(
    store: InMemoryDocumentStore, cranfield: Any
) -> None:
    _, queries, _ = cranfield
    pipe = Pipeline()
    pipe.add_component("bm25", InMemoryBM25Retriever(document_store=store, top_k=3))
    retrieve = pipeline_retriever(pipe)  # one retriever, flat "query" input
    assert len(retrieve(queries["1"])) == 3
    assert len(retrieve(queries["1"], limit=7)) == 7  # limit is passed on as top_k
    by_content = pipeline_retriever(pipe, "bm25", "bm25.query", doc_id="content")
    assert all(i.startswith("sha256:") for i in by_content(queries["1"], limit=2))


def test_run_async_and_concurrent_runs(async_rag: Any, rag_input: Any, cranfield: Any) -> None:
    _, queries, _ = cranfield
    recorder = RagmeterRecorder(async_rag, generator="llm")
    qids = ["1", "2", "3", "4"]

    async def main() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(recorder.run_async(rag_input(queries[q]), sample_id=q) for q in qids)
        )

    results = asyncio.run(main())
    assert all(set(r) == {"llm"} for r in results)
    assert sorted(recorder.to_run()) == qids
    by_id = {s.id: s for s in recorder.samples}
    sync = RagmeterRecorder(async_rag)
    sync.run(rag_input(queries["3"]), sample_id="3")
    assert by_id["3"].retrieved_ids == sync.samples[0].retrieved_ids
    assert by_id["3"].response == sync.samples[0].response


def test_store_surface_clear_and_metadata(rag: Pipeline, rag_input: Any, cranfield: Any) -> None:
    _, queries, _ = cranfield
    recorder = RagmeterRecorder(rag)
    recorder.run(
        rag_input(queries["1"]),
        metadata={"ragmeter_id": "q1", "ragmeter_reference": "similarity laws", "team": "x"},
    )
    recorder.run(rag_input(queries["2"]), reference="flutter", reference_ids=["12"])
    first, second = recorder.samples
    assert first.id == "q1" and first.reference == "similarity laws"
    assert first.metadata["run_metadata"] == {"team": "x"}
    assert first.metadata["framework"] == "haystack"
    stage, context = first.stages or []  # as in every adapter
    assert stage.name == "retriever" and stage.ids == first.retrieved_ids
    assert context.name == "context" and context.same_as == "retriever"
    assert second.reference_ids == ["12"] and len(second.id) == 32  # a generated uuid4 hex
    assert recorder.to_qrels() == {second.id: {"12": 1}}
    recorder.clear()
    assert recorder.samples == [] and recorder.to_run() == {}


def test_to_jsonl(rag: Pipeline, rag_input: Any, cranfield: Any, tmp_path: Path) -> None:
    pytest.importorskip("ragmeter.io.jsonl")
    _, queries, _ = cranfield
    recorder = RagmeterRecorder(rag)
    recorder.run(rag_input(queries["1"]), sample_id="q1")
    assert recorder.to_jsonl(tmp_path / "s.jsonl") == 1
    (line,) = (tmp_path / "s.jsonl").read_text().splitlines()
    assert json.loads(line)["id"] == "q1"


def test_doc_id_meta_collapses_chunks_to_their_best_rank() -> None:
    store = InMemoryDocumentStore()
    store.write_documents(
        [
            Document(content="wing flutter at high speed", meta={"source": "s1"}),
            Document(content="flutter of a wing panel", meta={"source": "s1"}),
            Document(content="flutter boundary of a panel", meta={"source": "s2"}),
        ]
    )
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=3))
    recorder = RagmeterRecorder(pipe, doc_id="meta.source")
    recorder.run({"query": "flutter wing"}, sample_id="q")
    (sample,) = recorder.samples
    assert sample.retrieved_ids == ["s1", "s2"]
    assert sample.retrieved_texts is not None and len(sample.retrieved_texts) == 3
    assert sample.response is None and sample.user_input == "flutter wing"


def _partly_sourced_pipeline() -> Pipeline:
    """Three documents; the second has no ``meta["source"]``."""
    store = InMemoryDocumentStore()
    store.write_documents(
        [
            Document(id="a", content="wing flutter at high speed", meta={"source": "s1"}),
            Document(id="b", content="flutter of a wing panel"),
            Document(id="c", content="flutter boundary of a panel wing", meta={"source": "s2"}),
        ]
    )
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=3))
    return pipe


def test_a_document_without_the_doc_id_keeps_its_rank_everywhere(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipe = _partly_sourced_pipeline()
    ranking = pipe.run({"query": "flutter wing"})["retriever"]["documents"]
    expected = [d.meta.get("source", d.id) for d in ranking]
    assert expected == ["s1", "b", "s2"]  # the unsourced document ranks second

    retrieve = pipeline_retriever(pipe, doc_id="meta.source")
    with caplog.at_level(logging.WARNING, logger="ragmeter_haystack"):
        assert retrieve("flutter wing") == expected  # not dropped: s2 must not move up a rank
        assert retrieve("flutter wing", limit=2) == expected[:2]
    (warning,) = caplog.records  # said, once
    assert "1 of 3 documents" in warning.getMessage()
    recorder = RagmeterRecorder(pipe, doc_id="meta.source")
    recorder.run({"query": "flutter wing"}, sample_id="q")
    (sample,) = recorder.samples
    assert sample.retrieved_ids == expected
    assert sample.metadata["capture_errors"] == [
        "1 of 3 retrieved document(s) had no value for doc_id='meta.source'; their "
        "Document.id was used instead"
    ]


def test_doc_id_field_is_a_deprecated_alias_of_doc_id() -> None:
    pipe = _partly_sourced_pipeline()
    with pytest.warns(DeprecationWarning, match=r"RagmeterRecorder\(doc_id_field=...\)"):
        old = RagmeterRecorder(pipe, doc_id_field="meta.source")
    assert old.doc_id == old.doc_id_field == "meta.source"
    old.run({"query": "flutter wing"}, sample_id="q")
    assert old.to_run() == {"q": ["s1", "b", "s2"]}
    with pytest.warns(DeprecationWarning, match=r"pipeline_retriever\(doc_id_field=...\)"):
        retrieve = pipeline_retriever(pipe, doc_id_field="meta.source")
    assert retrieve("flutter wing") == ["s1", "b", "s2"]
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="doc_id= alone"):
        RagmeterRecorder(pipe, doc_id="id", doc_id_field="meta.source")


def test_doc_id_as_content_hash_and_as_a_function() -> None:
    pipe = _partly_sourced_pipeline()
    docs = pipe.run({"query": "flutter wing"})["retriever"]["documents"]
    by_content = RagmeterRecorder(pipe, doc_id="content")
    by_content.run({"query": "flutter wing"}, sample_id="q")
    assert by_content.to_run()["q"] == [content_doc_id(d.content) for d in docs]
    by_fn = RagmeterRecorder(pipe, doc_id=lambda d: d.id.upper())
    by_fn.run({"query": "flutter wing"}, sample_id="q")
    assert by_fn.to_run()["q"] == [d.id.upper() for d in docs]


def test_invalid_ground_truth_is_left_out_and_the_rest_of_the_sample_kept(
    rag: Pipeline, rag_input: Any, cranfield: Any
) -> None:
    _, queries, _ = cranfield
    recorder = RagmeterRecorder(rag)
    result = recorder.run(
        rag_input(queries["1"]), sample_id="1", reference="x", relevance={"d": float("nan")}
    )
    (sample,) = recorder.samples
    assert sample.relevance is None and sample.reference == "x"
    assert sample.user_input == queries["1"]
    assert sample.response == result["llm"]["replies"][0].text
    assert len(sample.retrieved_ids or []) == 10
    (note,) = sample.metadata["capture_errors"]
    assert note.startswith("invalid relevance left out:") and "NaN" in note


def test_run_metadata_is_json_safe_and_cannot_overwrite_ours(
    rag: Pipeline, rag_input: Any, cranfield: Any, tmp_path: Path
) -> None:
    import datetime

    _, queries, _ = cranfield
    recorder = RagmeterRecorder(rag)
    day = datetime.date(2026, 1, 1)
    recorder.run(
        rag_input(queries["1"]),
        sample_id="1",
        metadata={"framework": "mine", "capture_errors": "none", "day": day},
    )
    (sample,) = recorder.samples
    assert sample.metadata["framework"] == "haystack"
    assert sample.metadata["run_metadata"] == {
        "framework": "mine",
        "capture_errors": "none",
        "day": "2026-01-01",
    }
    assert "capture_errors" not in sample.metadata
    assert recorder.to_jsonl(tmp_path / "s.jsonl") == 1


def test_the_recorder_has_the_store_every_adapter_has(rag: Pipeline) -> None:
    recorder = RagmeterRecorder(rag, max_samples=3)
    assert isinstance(recorder.store, SampleStore) and recorder.store.max_samples == 3
    assert recorder.store.dropped == 0 and len(recorder) == 0


@component
class Broken:
    """A component that always fails."""

    @component.output_types(replies=list[str])
    def run(self, query: str) -> dict[str, Any]:
        raise RuntimeError("model is down")


def test_pipeline_errors_are_recorded_and_re_raised() -> None:
    pipe = Pipeline()
    pipe.add_component("llm", Broken())
    recorder = RagmeterRecorder(pipe)
    with pytest.raises(Exception, match="model is down"):
        recorder.run({"llm": {"query": "q"}}, sample_id="q")
    (sample,) = recorder.samples
    assert sample.id == "q" and sample.error is not None and "model is down" in sample.error


def test_capture_errors_never_break_the_pipeline_and_are_logged_once(
    rag: Pipeline, rag_input: Any, cranfield: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, queries, _ = cranfield
    recorder = RagmeterRecorder(rag)
    with caplog.at_level(logging.DEBUG, logger="ragmeter_haystack"):
        for qid in ("1", "2"):
            result = recorder.run(
                rag_input(queries[qid]), sample_id=qid, relevance={"d": float("nan")}
            )
            assert set(result) == {"llm"}
        # validation is deferred to the first read of the samples: that is when it is logged
        assert [s.id for s in recorder.samples] == ["1", "2"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "could not capture" in warnings[0].getMessage()
    assert [s.id for s in recorder.samples] == ["1", "2"]
    assert all("NaN" in s.metadata["capture_errors"][0] for s in recorder.samples)


# -- errors --------------------------------------------------------------------------------


def test_missing_component_names_it(rag: Pipeline) -> None:
    with pytest.raises(
        ValueError, match=r"stage='retriver': the pipeline has no component named 'retriver'"
    ):
        RagmeterRecorder(rag, stage="retriver")
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(ValueError, match=r"retriever='retriver': the pipeline has no component"),
    ):
        RagmeterRecorder(rag, retriever="retriver")
    with pytest.raises(
        ValueError, match=r"generator='gpt': the pipeline has no component named 'gpt'"
    ):
        RagmeterRecorder(rag, generator="gpt")
    with pytest.raises(
        InvalidInputError, match=r"component 'prompt_builder' has no output 'documents'"
    ):
        RagmeterRecorder(rag, stage="prompt_builder")
    with pytest.raises(ValueError, match=r"contexts='ranker': the pipeline has no component"):
        RagmeterRecorder(rag, contexts="ranker")


def test_two_retrievers_are_two_stages_and_neither_is_picked_by_guess(
    store: InMemoryDocumentStore,
) -> None:
    pipe = Pipeline()
    pipe.add_component("bm25_a", InMemoryBM25Retriever(document_store=store, top_k=3))
    pipe.add_component("bm25_b", InMemoryBM25Retriever(document_store=store, top_k=2))
    recorder = RagmeterRecorder(pipe)
    recorder.run({"bm25_a": {"query": "wing"}, "bm25_b": {"query": "wing"}}, sample_id="q")
    [sample] = recorder.samples
    assert sorted(s.name for s in sample.stages or []) == ["bm25_a", "bm25_b"]
    assert sample.retrieved_ids is None  # two rankings reach the end side by side
    assert any(
        "each reaches the end of the pipeline" in n for n in sample.metadata["capture_errors"]
    )
    picked = RagmeterRecorder(pipe, stage="bm25_b")
    picked.run({"bm25_a": {"query": "wing"}, "bm25_b": {"query": "wing"}})
    assert picked.samples[0].retrieved_ids == (sample.stage("bm25_b") or sample).ids
    with pytest.warns(DeprecationWarning, match="retriever="):
        assert RagmeterRecorder(pipe, retriever="bm25_b").retriever == "bm25_b"


def test_pipeline_without_documents_or_replies(rag_input: Any) -> None:
    @component
    class Upper:
        @component.output_types(text=str)
        def run(self, text: str) -> dict[str, str]:
            return {"text": text.upper()}

    pipe = Pipeline()
    pipe.add_component("upper", Upper())
    with pytest.raises(ValueError, match="no component with a 'documents' or 'replies' output"):
        RagmeterRecorder(pipe)


def test_bad_doc_id(rag: Pipeline) -> None:
    with pytest.raises(ValueError, match=r"doc_id must be 'id', 'content' or 'meta\.<key>'"):
        RagmeterRecorder(rag, doc_id="source")
    with pytest.raises(ValueError, match=r"doc_id must be 'id', 'content' or 'meta\.<key>'"):
        pipeline_retriever(rag, doc_id="meta.")


def test_pipeline_retriever_errors(rag: Pipeline) -> None:
    with pytest.raises(
        ValueError, match=r"retriever_component='bm25': the pipeline has no component named 'bm25'"
    ):
        pipeline_retriever(rag, retriever_component="bm25")
    with pytest.raises(
        ValueError, match=r"query_input='text': no component of the pipeline has an open input"
    ):
        pipeline_retriever(rag, retriever_component="retriever", query_input="text")
    with pytest.raises(
        ValueError, match=r"query_input='embedder.text': the pipeline has no component"
    ):
        pipeline_retriever(rag, retriever_component="retriever", query_input="embedder.text")
    retrieve = pipeline_retriever(rag, "retriever", ["query", "prompt_builder.question"])
    with pytest.raises(ValueError, match="limit must be an int >= 1"):
        retrieve("flutter", limit=0)


def test_a_calls_own_ground_truth_wins_over_the_recorders_scope(
    rag: Pipeline, rag_input: Any, cranfield: Any
) -> None:
    _, queries, _ = cranfield
    recorder = RagmeterRecorder(rag)
    with recorder.capture(id="scope", relevance={"A": 1}, reference="from scope"):
        recorder.run(rag_input(queries["1"]), sample_id="call", relevance={"B": 1})
        recorder.run(rag_input(queries["2"]))
    given, scoped = recorder.samples
    assert (given.id, given.relevance, given.reference) == ("call", {"B": 1.0}, "from scope")
    assert (scoped.id, scoped.relevance) == ("scope", {"A": 1.0})
