"""Stages of a hybrid Haystack pipeline: two BM25 retrievers -> RRF joiner -> ranker -> prompt.

Each stage's ranking is recorded independently of ragmeter (Haystack's own
``include_outputs_from``) and scored by pytrec_eval: the tracer's and the recorder's stage
rankings must equal them and score the same to 0.0, per query; the context (what the prompt
builder received) is the ranker's output. The same pipeline is saved to YAML and loaded
back, as a deployment would run it.
"""

# No `from __future__ import annotations` here: Haystack reads a component's socket types
# from its real (not string) annotations.
from typing import Any

import pytest
import pytrec_eval
from haystack import Document, Pipeline, component
from haystack.components.builders import ChatPromptBuilder
from haystack.components.joiners import DocumentJoiner
from haystack.components.rankers import LostInTheMiddleRanker
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from ragmeter_haystack import RagmeterRecorder, RagmeterTracer, allow_deserialization

pytest.importorskip("haystack.components.generators.chat", reason="Haystack >= 3 mock generator")
from haystack.components.generators.chat import MockChatGenerator

TEMPLATE = "Context:\n{% for doc in documents %}{{ doc.content }}\n{% endfor %}Q: {{ question }}"
STAGES = ("bm25_okapi", "bm25_plus", "joiner", "ranker")
N_QUERIES = 30


@pytest.fixture(scope="module")
def stores(cranfield: Any) -> tuple[InMemoryDocumentStore, InMemoryDocumentStore]:
    corpus, _, _ = cranfield
    docs = [Document(id=i, content=t) for i, t in corpus.items()]
    # named indexes: a pipeline loaded from YAML finds the same in-memory stores
    okapi = InMemoryDocumentStore(bm25_algorithm="BM25Okapi", index="ragmeter-stages-okapi")
    plus = InMemoryDocumentStore(bm25_algorithm="BM25Plus", index="ragmeter-stages-plus")
    for store in (okapi, plus):
        if not store.count_documents():
            store.write_documents(docs)
    return okapi, plus


def hybrid(stores: Any) -> Pipeline:
    okapi, plus = stores
    pipe = Pipeline()
    pipe.add_component("bm25_okapi", InMemoryBM25Retriever(document_store=okapi, top_k=20))
    pipe.add_component("bm25_plus", InMemoryBM25Retriever(document_store=plus, top_k=20))
    pipe.add_component("joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=15))
    pipe.add_component("ranker", LostInTheMiddleRanker(top_k=10))
    pipe.add_component(
        "prompt_builder",
        ChatPromptBuilder(
            template=[ChatMessage.from_user(TEMPLATE)], required_variables=["question", "documents"]
        ),
    )
    pipe.add_component("llm", MockChatGenerator(responses="an answer"))
    pipe.connect("bm25_okapi.documents", "joiner.documents")
    pipe.connect("bm25_plus.documents", "joiner.documents")
    pipe.connect("joiner.documents", "ranker.documents")
    pipe.connect("ranker.documents", "prompt_builder.documents")
    pipe.connect("prompt_builder.prompt", "llm.messages")
    return pipe


def data(question: str) -> dict[str, Any]:
    return {
        "bm25_okapi": {"query": question},
        "bm25_plus": {"query": question},
        "prompt_builder": {"question": question},
    }


def judged(cranfield: Any) -> dict[str, str]:
    _, queries, qrels = cranfield
    return {q: queries[q] for q in list(qrels)[:N_QUERIES]}


def independent(pipe: Pipeline, questions: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """Every stage's ranking per query, from Haystack's own outputs (no ragmeter)."""
    runs: dict[str, dict[str, list[str]]] = {name: {} for name in STAGES}
    for qid, text in questions.items():
        out = pipe.run(data(text), include_outputs_from=set(STAGES))
        for name in STAGES:
            runs[name][qid] = [d.id for d in out[name]["documents"]]
    runs["context"] = runs["ranker"]
    return runs


def pytrec(qrels: dict[str, dict[str, int]], run: dict[str, list[str]]) -> dict[str, Any]:
    scored = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    return pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_20"}).evaluate(scored)


def assert_every_stage_matches(captured: Any, cranfield: Any, expected: dict[str, Any]) -> None:
    _, _, qrels = cranfield
    for name, run in expected.items():
        assert captured.to_run(stage=name) == run, name
        mine = {q: {d: int(g) for d, g in qrels[q].items()} for q in run}
        oracle = pytrec(mine, run)
        report = captured.evaluate_retrieval(
            mine, stage=name, k_values=(10, 20), metrics=["ndcg", "recall"]
        )
        for qid, row in oracle.items():
            assert report.per_query[qid]["ndcg@10"] - row["ndcg_cut_10"] == 0.0, (name, qid)
            assert report.per_query[qid]["recall@20"] - row["recall_20"] == 0.0, (name, qid)


def test_tracer_and_recorder_record_every_stage_as_haystack_ran_it(
    stores: Any, cranfield: Any
) -> None:
    pipe = hybrid(stores)
    questions = judged(cranfield)
    expected = independent(pipe, questions)
    recorder = RagmeterRecorder(pipe)
    with RagmeterTracer() as tracer:
        for qid, text in questions.items():
            with tracer.capture(id=qid):
                pipe.run(data(text))
    for qid, text in questions.items():
        recorder.run(data(text), sample_id=qid)
    for captured in (tracer, recorder):
        sample = captured.samples[0]
        kinds = [(s.name, s.kind, s.inputs, s.same_as) for s in sample.stages or []]
        assert kinds == [
            ("bm25_okapi", "retriever", None, None),
            ("bm25_plus", "retriever", None, None),
            ("joiner", "fusion", ["bm25_okapi", "bm25_plus"], None),
            ("ranker", "reranker", ["joiner"], None),
            ("context", "context", ["ranker"], "ranker"),
        ]
        assert "capture_errors" not in sample.metadata
        assert sample.retrieved_ids == expected["context"][sample.id]  # what the prompt got
        assert_every_stage_matches(captured, cranfield, expected)
    # the default (context) is the ranker's list, not the last retriever's
    assert tracer.to_run() == expected["ranker"] != expected["bm25_plus"]


def test_the_stage_report_compares_each_step_with_what_it_consumed(
    stores: Any, cranfield: Any
) -> None:
    pipe = hybrid(stores)
    questions = judged(cranfield)
    _, _, qrels = cranfield
    tracer = RagmeterTracer()
    for qid, text in questions.items():
        with tracer.capture(id=qid, relevance=qrels[qid]):
            pipe.run(data(text))
    report = tracer.evaluate_retrieval(stages=True, k_values=(10, 20))
    assert report.stages == [*STAGES, "context"]
    joiner, ranker, context = report["joiner"], report["ranker"], report["context"]
    best = max(("bm25_okapi", "bm25_plus"), key=lambda s: report[s].metrics["ndcg@10"])
    assert joiner.against == best and ranker.against == "joiner"
    assert context.same_as == "ranker" and context.comparison is None
    assert ranker.comparison is not None
    diff = ranker.metrics["ndcg@10"] - joiner.metrics["ndcg@10"]
    assert ranker.comparison.mean_diff == pytest.approx(diff, abs=1e-12)
    assert ranker.comparison.ci_low <= ranker.comparison.mean_diff <= ranker.comparison.ci_high
    assert ranker.comparison.n == N_QUERIES
    text = report.to_text()
    assert "ranker" in text and "= ranker" in text and "95% CI" in text


def test_a_pipeline_loaded_from_yaml_is_captured_the_same(stores: Any, cranfield: Any) -> None:
    allow_deserialization()
    pipe = hybrid(stores)
    loaded = Pipeline.loads(pipe.dumps())
    questions = dict(list(judged(cranfield).items())[:8])
    expected = independent(pipe, questions)
    with RagmeterTracer() as tracer:
        for qid, text in questions.items():
            with tracer.capture(id=qid):
                loaded.run(data(text))
    assert_every_stage_matches(tracer, cranfield, expected)


@component
class KeywordSearch:
    """A custom retriever component (no Haystack retriever class): documents sharing the
    most words with the query, ties by id."""

    def __init__(self, corpus: dict[str, str], top_k: int = 10) -> None:
        self.corpus = corpus
        self.top_k = top_k
        self.words = {d: set(t.lower().split()) for d, t in corpus.items()}

    @component.output_types(documents=list[Document])
    def run(self, query: str) -> dict[str, Any]:
        terms = set(query.lower().split())
        ranked = sorted(self.words, key=lambda d: (-len(terms & self.words[d]), d))
        return {"documents": [Document(id=d, content=self.corpus[d]) for d in ranked[: self.top_k]]}


def test_a_custom_retriever_component_is_a_stage_in_tracer_and_recorder(cranfield: Any) -> None:
    corpus, queries, qrels = cranfield
    pipe = Pipeline()
    pipe.add_component("kw", KeywordSearch(corpus))
    pipe.add_component(
        "prompt_builder",
        ChatPromptBuilder(
            template=[ChatMessage.from_user(TEMPLATE)], required_variables=["question", "documents"]
        ),
    )
    pipe.add_component("llm", MockChatGenerator(responses="an answer"))
    pipe.connect("kw.documents", "prompt_builder.documents")
    pipe.connect("prompt_builder.prompt", "llm.messages")
    qids = list(qrels)[:10]
    recorder = RagmeterRecorder(pipe)
    tracer = RagmeterTracer()
    for qid in qids:
        inputs = {"kw": {"query": queries[qid]}, "prompt_builder": {"question": queries[qid]}}
        with tracer.capture(id=qid):  # the tracer listens inside its scopes only
            pipe.run(inputs)
        recorder.run(inputs, sample_id=qid)
    expected = {q: [d.id for d in KeywordSearch(corpus).run(queries[q])["documents"]] for q in qids}
    assert tracer.to_run() == recorder.to_run() == expected
    assert [s.name for s in tracer.samples[0].stages or []] == ["kw", "context"]
    report = tracer.evaluate_retrieval({q: qrels[q] for q in qids}, k_values=(10,))
    assert report.metrics["ndcg@10"] > 0  # it was 0 for every query when found by class name
