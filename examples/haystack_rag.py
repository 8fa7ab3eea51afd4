"""A BM25 RAG pipeline over Cranfield, captured with ragmeter and scored two ways.

1. ``RagmeterTracer`` is Haystack's tracer while the queries run: every ``pipeline.run``
   records a ``RagSample`` without wrapping anything (a pipeline loaded from YAML or served
   by Hayhooks is captured the same way); ``with tracer.capture(id=qid):`` gives each run
   its Cranfield query id. The captured run is scored against Cranfield's graded qrels
   (trec_eval conventions) and the answers with ragmeter's no-LLM answer metrics.
2. An *evaluation pipeline* made of ``RagmeterRetrievalEvaluator`` and
   ``RagmeterAnswerEvaluator`` scores the same outputs the Haystack way, and
   ``EvaluationRunResult`` reports every metric in its own column (``spread_metrics``).

Runs offline: the "LLM" is a tiny fake component that answers with the first sentence of
the best document; swap in ``OpenAIChatGenerator`` (or any chat generator) for real use.

    python examples/haystack_rag.py            # 30 queries
    python examples/haystack_rag.py 225        # all of Cranfield
"""

# No `from __future__ import annotations` here: Haystack 2.x reads a component's socket
# types from its real (not string) annotations.
import os
import sys
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # this example runs offline

from haystack import Document, Pipeline, component
from haystack.components.builders import ChatPromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.evaluation import EvaluationRunResult
from ragmeter_haystack import (
    RagmeterAnswerEvaluator,
    RagmeterRetrievalEvaluator,
    RagmeterTracer,
    spread_metrics,
)

from ragmeter.datasets import load_cranfield

TEMPLATE = """Answer the question from the documents.
Documents:
{% for doc in documents %}{{ doc.content }}
{% endfor %}
Question: {{ question }}"""


@component
class FirstSentenceGenerator:
    """A stand-in chat generator: replies with the first sentence of the first document."""

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
        prompt = messages[-1].text or ""
        docs = prompt.split("Documents:\n", 1)[-1].split("\nQuestion:", 1)[0]
        first = docs.strip().split("\n", 1)[0]
        answer = first.split(" . ", 1)[0].strip()
        return {"replies": [ChatMessage.from_assistant(answer)]}

    @component.output_types(replies=list[ChatMessage])
    async def run_async(self, messages: list[ChatMessage]) -> dict[str, Any]:
        return self.run(messages)


def build_pipeline(store: InMemoryDocumentStore, *, top_k: int = 10) -> Pipeline:
    """retriever -> prompt_builder -> llm, the usual Haystack RAG shape."""
    rag = Pipeline()
    rag.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=top_k))
    rag.add_component(
        "prompt_builder",
        ChatPromptBuilder(
            template=[ChatMessage.from_user(TEMPLATE)], required_variables=["question", "documents"]
        ),
    )
    rag.add_component("llm", FirstSentenceGenerator())
    rag.connect("retriever.documents", "prompt_builder.documents")
    rag.connect("prompt_builder.prompt", "llm.messages")
    return rag


def main(n_queries: int = 30, *, echo: bool = True) -> dict[str, Any]:
    """Capture ``n_queries`` Cranfield queries, score them, and return the numbers."""
    corpus, queries, qrels = load_cranfield()
    store = InMemoryDocumentStore()
    store.write_documents([Document(id=doc_id, content=text) for doc_id, text in corpus.items()])
    rag = build_pipeline(store)

    # 1. Capture: run the pipeline as usual; the tracer sees every run.
    qids = [q for q in queries if q in qrels][:n_queries]
    retrieved: list[list[Document]] = []
    with RagmeterTracer() as tracer:
        for qid in qids:
            question = queries[qid]
            with tracer.capture(id=qid):
                result = rag.run(
                    {"retriever": {"query": question}, "prompt_builder": {"question": question}},
                    include_outputs_from={"retriever"},  # we also want the documents ourselves
                )
            retrieved.append(result["retriever"]["documents"])
    # Judge only the captured queries (a judged query never run would score 0); a run whose
    # pipeline raised before retrieving would score 0 too, and be listed in
    # report.extra["capture"]["failed"].
    retrieval_report = tracer.evaluate_retrieval(qrels, missing_queries="skip", k_values=(1, 5, 10))
    answer_report = tracer.evaluate(metrics=["faithfulness", "non_empty_rate"])

    # 2. The Haystack way: an evaluation pipeline of ragmeter components.
    ground_truth = [
        [Document(id=doc_id, score=float(grade)) for doc_id, grade in qrels[qid].items()]
        for qid in qids
    ]
    samples = tracer.samples
    evaluation = Pipeline()
    evaluation.add_component("retrieval", RagmeterRetrievalEvaluator(k_values=[1, 5, 10]))
    evaluation.add_component("answers", RagmeterAnswerEvaluator(metrics=["faithfulness"]))
    scores = evaluation.run(
        {
            "retrieval": {"ground_truth_documents": ground_truth, "retrieved_documents": retrieved},
            "answers": {
                "questions": [s.user_input or "" for s in samples],
                "predicted_answers": [s.response or "" for s in samples],
                "contexts": [s.retrieved_contexts or [] for s in samples],
            },
        }
    )
    run_result = EvaluationRunResult(  # one column per metric, not one per component
        run_name="bm25-top10",
        inputs={"question": [queries[q] for q in qids]},
        results=spread_metrics(scores),
    )
    if echo:
        print(retrieval_report.to_text())
        print()
        print(answer_report.to_markdown())
        print()
        print("Evaluation pipeline:", run_result.aggregated_report())
    return {
        "qids": qids,
        "run": tracer.to_run(),
        "retrieval_report": retrieval_report,
        "answer_report": answer_report,
        "pipeline_scores": scores,
        "aggregated": run_result.aggregated_report(),
    }


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:2]))  # no argument: main()'s own default
