"""A hybrid Haystack pipeline scored stage by stage: two BM25 retrievers, reciprocal rank
fusion, a ranker, a prompt.

``RagmeterTracer`` records every component that produced documents as a stage of the sample
(``bm25_okapi``, ``bm25_plus``, ``joiner``, ``ranker``) and ``context``, the documents the
prompt builder received, which is what ``retrieved_ids`` holds and what is scored by
default. ``evaluate_retrieval(stages=True)`` prints one table: every stage's metrics and
what each step gained or lost against the stage(s) it consumed, with a paired confidence
interval. Offline: Cranfield ships with ragmeter, the "LLM" is Haystack's mock generator.

    python examples/hybrid_stages_haystack.py          # 60 queries
    python examples/hybrid_stages_haystack.py 225      # all of Cranfield
"""

# No `from __future__ import annotations` here: Haystack reads a component's socket types
# from its real (not string) annotations.
import os
import sys
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # this example runs offline

from haystack import Document, Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat import MockChatGenerator
from haystack.components.joiners import DocumentJoiner
from haystack.components.rankers import LostInTheMiddleRanker
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from ragmeter_haystack import RagmeterTracer

from ragmeter.datasets import load_cranfield
from ragmeter.stages import StageReport

TEMPLATE = "Context:\n{% for doc in documents %}{{ doc.content }}\n{% endfor %}Q: {{ question }}"


def hybrid_pipeline(corpus: dict[str, str]) -> Pipeline:
    docs = [Document(id=d, content=t) for d, t in corpus.items()]
    okapi = InMemoryDocumentStore(bm25_algorithm="BM25Okapi")
    plus = InMemoryDocumentStore(bm25_algorithm="BM25Plus")
    okapi.write_documents(docs)
    plus.write_documents(docs)
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


def main(n_queries: int = 60) -> tuple[RagmeterTracer, StageReport]:
    corpus, queries, qrels = load_cranfield()
    pipe = hybrid_pipeline(corpus)
    with RagmeterTracer() as tracer:  # every Pipeline.run, as it is
        for qid in list(qrels)[:n_queries]:
            question = queries[qid]
            inputs: dict[str, Any] = {
                "bm25_okapi": {"query": question},
                "bm25_plus": {"query": question},
                "prompt_builder": {"question": question},
            }
            with tracer.capture(id=qid, relevance=qrels[qid]):
                pipe.run(inputs)
    report = tracer.evaluate_retrieval(stages=True, k_values=(10, 20))
    print(report)
    return tracer, report


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
