"""Haystack runs as the tracer sees them: the tracer (no wrapped run), YAML-loaded pipelines,
failed runs that had retrieved, the recorder as a drop-in, token usage from a generator's
``meta`` output, ``spread_metrics`` and ``run_dataset``.

Real Haystack pipelines over Cranfield (in-memory BM25), offline.
"""

# No `from __future__ import annotations` here: Haystack 2.x reads a component's socket
# types from its real (not string) annotations.
import asyncio
import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from haystack import Document, Pipeline, component
from haystack.components.builders import ChatPromptBuilder, PromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.core.errors import PipelineRuntimeError
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.evaluation import EvaluationRunResult
from haystack.tracing import tracer as haystack_tracer
from haystack.tracing.tracer import NullSpan, Span, Tracer, disable_tracing, enable_tracing
from ragmeter_haystack import (
    RagmeterRecorder,
    RagmeterRetrievalEvaluator,
    RagmeterTracer,
    spread_metrics,
)

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_run

pytest.importorskip("haystack.components.generators.chat", reason="Haystack >= 3 mock generator")
from haystack.components.generators.chat import MockChatGenerator

DATA = Path(__file__).resolve().parents[2] / "data"
INDEX = "ragmeter-issue13"
USAGE = {"prompt_tokens": 120, "completion_tokens": 7}


@pytest.fixture(scope="module")
def shared_store(cranfield: Any) -> InMemoryDocumentStore:
    """Cranfield in an in-memory store whose index a YAML-loaded pipeline shares."""
    corpus, _, _ = cranfield
    store = InMemoryDocumentStore(index=INDEX)
    if not store.count_documents():
        store.write_documents([Document(id=i, content=t) for i, t in corpus.items()])
    return store


def rag_pipeline(store: InMemoryDocumentStore) -> Pipeline:
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=10))
    pipe.add_component(
        "prompt_builder",
        ChatPromptBuilder(
            template=[ChatMessage.from_user("{{ documents|length }} docs. {{ question }}")],
            required_variables=["question", "documents"],
        ),
    )
    pipe.add_component("llm", MockChatGenerator(responses="lift", meta={"usage": USAGE}))
    pipe.connect("retriever.documents", "prompt_builder.documents")
    pipe.connect("prompt_builder.prompt", "llm.messages")
    return pipe


def data(question: str) -> dict[str, Any]:
    return {"retriever": {"query": question}, "prompt_builder": {"question": question}}


def bm25(pipe: Pipeline, question: str) -> list[str]:
    """The oracle: the pipeline's own retriever output, run without ragmeter."""
    disable_tracing()
    result = pipe.run(data(question), include_outputs_from={"retriever"})
    return [d.id for d in result["retriever"]["documents"]]


@pytest.fixture(autouse=True)
def _tracing_restored() -> Iterator[None]:
    before = haystack_tracer.actual_tracer
    yield
    enable_tracing(before)


# -- 3. a YAML-loaded pipeline, captured by the tracer ------------------------------------


def test_a_yaml_loaded_pipeline_is_captured_without_the_recorder(
    shared_store: InMemoryDocumentStore, cranfield: Any, tmp_path: Path
) -> None:
    _, queries, qrels = cranfield
    path = tmp_path / "rag.yaml"
    path.write_text(rag_pipeline(shared_store).dumps())
    with path.open() as f:
        loaded = Pipeline.load(f)  # what Hayhooks and deployments do
    qids = ["1", "2", "3", "4", "5"]
    with RagmeterTracer() as tracer:
        for qid in qids:
            with tracer.capture(id=qid, relevance=qrels[qid]):
                result = loaded.run(data(queries[qid]))
                assert set(result) == {"llm"}  # the pipeline's result is untouched
    run = {q: bm25(loaded, queries[q]) for q in qids}
    assert tracer.to_run() == run
    sample = tracer.samples[0]
    assert sample.user_input == queries["1"] and sample.response == "lift"
    assert (sample.input_tokens, sample.output_tokens) == (120, 7)
    assert sample.retrieved_contexts is not None and len(sample.retrieved_contexts) == 10
    (stage, context) = sample.stages or []
    assert stage.name == "retriever" and stage.query == queries["1"]
    assert context.same_as == "retriever" and context.ids == sample.retrieved_ids
    report = tracer.evaluate_retrieval(k_values=(10,), metrics=["ndcg"])
    assert (
        report.metrics
        == evaluate_run({q: qrels[q] for q in qids}, run, k_values=(10,), metrics=["ndcg"]).metrics
    )


class Recording(Tracer):
    """A tracer someone had enabled before ragmeter's: it must keep getting every span."""

    def __init__(self) -> None:
        self.spans: list[str] = []
        self.contents: list[str] = []

    @contextlib.contextmanager
    def trace(
        self, operation_name: str, tags: Any = None, parent_span: Any = None
    ) -> Iterator[Span]:
        self.spans.append(operation_name)
        outer = self

        class Kept(NullSpan):
            def set_tag(self, key: str, value: Any) -> None:
                outer.contents.append(key)

        yield Kept()

    def current_span(self) -> Span | None:
        return None


def test_the_tracer_forwards_to_the_tracer_that_was_active(
    shared_store: InMemoryDocumentStore, cranfield: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, queries, _ = cranfield
    monkeypatch.setattr(haystack_tracer, "is_content_tracing_enabled", True)
    previous = Recording()
    enable_tracing(previous)
    pipe = rag_pipeline(shared_store)
    with RagmeterTracer() as tracer:
        assert tracer.attached and tracer.inner is previous
        with tracer.capture(id="1"):
            pipe.run(data(queries["1"]))
    assert haystack_tracer.actual_tracer is previous  # detach gave it back
    assert previous.spans.count("haystack.component.run") == 3
    assert "haystack.component.output" in previous.contents  # content tags forwarded too
    assert tracer.to_run() == {"1": bm25(pipe, queries["1"])}


def test_record_tagged_and_concurrent_async_runs(
    shared_store: InMemoryDocumentStore, cranfield: Any
) -> None:
    _, queries, _ = cranfield
    pipe = rag_pipeline(shared_store)
    qids = ["1", "2", "3", "4"]

    async def one(tracer: RagmeterTracer, qid: str) -> None:
        with tracer.capture(id=qid):
            await asyncio.sleep(0)
            await pipe.run_async(data(queries[qid]))

    async def main(tracer: RagmeterTracer) -> None:
        await asyncio.gather(*(one(tracer, q) for q in qids))

    with RagmeterTracer(record="tagged") as tracer:
        pipe.run(data("untagged: not recorded"))
        asyncio.run(main(tracer))
    assert tracer.to_run() == {q: bm25(pipe, queries[q]) for q in qids}


# -- 3. a run that failed after retrieval keeps its ranking ---------------------------------


@component
class Broken:
    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
        raise RuntimeError("the model is down")


def test_a_run_that_failed_after_retrieval_keeps_its_ranking(
    shared_store: InMemoryDocumentStore, cranfield: Any
) -> None:
    _, queries, qrels = cranfield
    pipe = rag_pipeline(shared_store)
    pipe.remove_component("llm")
    pipe.add_component("llm", Broken())
    pipe.connect("prompt_builder.prompt", "llm.messages")
    expected = bm25(rag_pipeline(shared_store), queries["1"])
    recorder = RagmeterRecorder(pipe)
    with pytest.raises(PipelineRuntimeError, match="the model is down"):
        recorder.run(data(queries["1"]), sample_id="1")
    with (
        RagmeterTracer() as tracer,
        tracer.capture(id="1"),
        pytest.raises(PipelineRuntimeError, match="the model is down"),
    ):
        pipe.run(data(queries["1"]))
    for captured in (recorder, tracer):
        (sample,) = captured.samples
        assert sample.error is not None and "the model is down" in sample.error
        assert sample.retrieved_ids == expected  # from the snapshot / the retriever's span
        report = captured.evaluate_retrieval({"1": qrels["1"]}, k_values=(10,))
        assert report.extra["capture"]["failed"] == []  # it had a ranking: it is scored
        assert (
            report.per_query["1"]["ndcg@10"]
            == evaluate_run({"1": qrels["1"]}, {"1": expected}, k_values=(10,)).per_query["1"][
                "ndcg@10"
            ]
        )


# -- the recorder as a drop-in for Pipeline.run ---------------------------------------------


def test_recorder_run_takes_pipeline_runs_arguments(
    shared_store: InMemoryDocumentStore, cranfield: Any
) -> None:
    _, queries, _ = cranfield
    pipe = rag_pipeline(shared_store)
    recorder = RagmeterRecorder(pipe)
    inputs = data(queries["2"])
    positional = recorder.run(inputs, {"retriever"})  # include_outputs_from, positionally
    plain = pipe.run(inputs, {"retriever"})
    assert set(positional) == set(plain) == {"retriever", "llm"}
    assert [d.id for d in positional["retriever"]["documents"]] == [
        d.id for d in plain["retriever"]["documents"]
    ]
    assert set(recorder.run(inputs)) == set(pipe.run(inputs)) == {"llm"}
    assert len(recorder) == 2


# -- token usage from a text generator's ``meta`` output (OpenAIGenerator's shape) ----------


@component
class TextGenerator:
    """Returns what ``OpenAIGenerator`` returns: ``replies`` strings and a ``meta`` list."""

    @component.output_types(replies=list[str], meta=list[dict[str, Any]])
    def run(self, prompt: str) -> dict[str, Any]:
        return {
            "replies": ["Lift comes from the pressure difference."],
            "meta": [{"model": "gpt-4o-mini", "finish_reason": "stop", "usage": USAGE}],
        }


def test_token_usage_from_a_generators_meta_output(
    shared_store: InMemoryDocumentStore, cranfield: Any
) -> None:
    _, queries, _ = cranfield
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=shared_store, top_k=3))
    pipe.add_component(
        "prompt_builder",
        PromptBuilder("{{ documents|length }} {{ question }}", required_variables=["question"]),
    )
    pipe.add_component("llm", TextGenerator())
    pipe.connect("retriever.documents", "prompt_builder.documents")
    pipe.connect("prompt_builder.prompt", "llm.prompt")
    recorder = RagmeterRecorder(pipe)
    recorder.run(data(queries["1"]), sample_id="1")
    with RagmeterTracer() as tracer, tracer.capture(id="1"):
        pipe.run(data(queries["1"]))
    for captured in (recorder, tracer):
        (sample,) = captured.samples
        assert sample.response == "Lift comes from the pressure difference."
        assert (sample.input_tokens, sample.output_tokens) == (120, 7)


# -- spread_metrics: one EvaluationRunResult column per ragmeter metric ---------------------


def test_spread_metrics_gives_each_metric_its_own_column(cranfield: Any) -> None:
    _, _, qrels = cranfield
    truth = [[Document(id=d, score=float(g)) for d, g in qrels[q].items()] for q in ("1", "2")]
    retrieved = [[Document(id=d) for d in ["184", "29", "31"]], [Document(id="12")]]
    evaluation = Pipeline()
    evaluation.add_component(
        "retrieval", RagmeterRetrievalEvaluator(metrics=["ndcg", "recall"], k_values=[3])
    )
    scores = evaluation.run(
        {"retrieval": {"ground_truth_documents": truth, "retrieved_documents": retrieved}}
    )
    result = EvaluationRunResult(
        "bm25", inputs={"question": ["q1", "q2"]}, results=spread_metrics(scores)
    )
    report = result.aggregated_report(output_format="json")
    assert report == {
        "metrics": ["ndcg@3", "recall@3"],
        "score": [
            scores["retrieval"]["metrics"]["ndcg@3"],
            scores["retrieval"]["metrics"]["recall@3"],
        ],
    }
    detailed = result.detailed_report(output_format="json")
    rows = scores["retrieval"]["individual_metrics"]
    assert detailed["ndcg@3"] == [row["ndcg@3"] for row in rows]
    assert detailed["recall@3"] == [row["recall@3"] for row in rows]
    both = spread_metrics({"a": scores["retrieval"], "b": scores["retrieval"]})
    assert sorted(both) == ["a.ndcg@3", "a.recall@3", "b.ndcg@3", "b.recall@3"]
    passthrough = spread_metrics({"other": {"score": 0.5, "individual_scores": [0.5]}})
    assert passthrough == {"other": {"score": 0.5, "individual_scores": [0.5]}}
    unscored = spread_metrics(
        {"r": {"metrics": {"m": 1.0}, "individual_metrics": [None, {"m": 1.0}]}}
    )
    assert math.isnan(unscored["m"]["individual_scores"][0])
    with pytest.raises(InvalidInputError, match=r"results\['x'\] must be a component's outputs"):
        spread_metrics({"x": 3})  # type: ignore[dict-item]


# -- run_dataset ----------------------------------------------------------------------------


def test_run_dataset_with_the_recorder_and_the_tracer(
    shared_store: InMemoryDocumentStore, cranfield: Any
) -> None:
    _, queries, qrels = cranfield
    few = {q: queries[q] for q in ["1", "2", "3", "4", "5", "6"]}
    pipe = rag_pipeline(shared_store)
    run = {q: bm25(pipe, t) for q, t in few.items()}
    expected = evaluate_run({q: qrels[q] for q in few}, run, k_values=(10,))
    by_recorder = RagmeterRecorder(pipe).run_dataset(
        few, qrels=qrels, concurrency=3, k_values=(10,), progress=False
    )
    tracer = RagmeterTracer()
    by_tracer = tracer.run_dataset(pipe, few, qrels=qrels, k_values=(10,), progress=False)
    assert not tracer.attached  # attached for the run only
    for report in (by_recorder, by_tracer):
        assert report.retrieval is not None and report.retrieval.metrics == expected.metrics
        assert [s.id for s in report.samples] == list(few)
    with pytest.raises(InvalidInputError, match="no open 'query' or 'question' input"):
        retrieval_only = Pipeline()
        retrieval_only.add_component("r", Broken())
        RagmeterRecorder(retrieval_only, generator="r").run_dataset(few, progress=False)


def test_run_dataset_over_a_beir_directory(shared_store: InMemoryDocumentStore) -> None:
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=shared_store, top_k=10))
    tracer = RagmeterTracer()
    report = tracer.run_dataset(
        pipe, DATA / "cranfield_beir", k_values=(10,), metrics=["ndcg"], progress=False
    )
    from ragmeter.io import read_qrels

    qrels = read_qrels(DATA / "cranfield_beir")
    assert report.retrieval is not None and report.retrieval.n_queries == len(qrels)
    assert (
        report.retrieval.metrics
        == evaluate_run(qrels, tracer.to_run(), k_values=(10,), metrics=["ndcg"]).metrics
    )
