"""Measure a LlamaIndex query engine over Cranfield with ragmeter, offline (no API key).

A ``VectorStoreIndex`` over the 1,400 Cranfield abstracts answers judged queries; a
``RagmeterEventHandler`` captures every query as a ``RagSample``: ``handler.run_dataset``
runs the queries (4 at a time, a progress bar on stderr) each inside
``handler.capture(id=qid)``, and one more query is run by hand in that scope. ragmeter scores
the captured run against Cranfield's graded qrels (trec_eval numbers) and the answers with
its no-LLM metrics. The same retriever is
then scored inside LlamaIndex's own ``RetrieverEvaluator`` with ``RagmeterRetrievalMetric``.

The embedding is a hashed bag of words and the LLM a stand-in that answers with the first
sentence of the context it is given, so this runs anywhere; use your own
``embed_model``/``llm`` for real. (LlamaIndex's ``MockLLM`` echoes its whole prompt: once
ten abstracts no longer fit one prompt, the refine step feeds that echo back as the
"existing answer" and the prompt outgrows the context window.)

    python examples/llamaindex_rag.py            # 25 queries
    python examples/llamaindex_rag.py 225        # all of Cranfield
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import sys
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.evaluation import RetrieverEvaluator
from llama_index.core.llms import (
    CompletionResponse,
    CompletionResponseGen,
    CustomLLM,
    LLMMetadata,
)
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import TextNode
from ragmeter_llamaindex import RagmeterEventHandler, RagmeterRetrievalMetric

from ragmeter.datasets import load_cranfield


class HashEmbedding(BaseEmbedding):
    """Hashed bag-of-words vectors (deterministic, offline): a stand-in for a real model."""

    def _embed(self, text: str) -> list[float]:
        vec = [0.0] * 512
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % 512] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embed(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._embed(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed(text)


class FirstSentenceLLM(CustomLLM):
    """A stand-in LLM: answers with the first sentence of the context in its prompt."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=3900, num_output=64, model_name="first-sentence")

    @staticmethod
    def _answer(prompt: str) -> str:
        if "existing answer: " in prompt:  # a refine step: keep the first answer
            return prompt.split("existing answer: ", 1)[1].split("\n", 1)[0]
        context = prompt.split("---------------------\n", 1)[-1].strip()
        return context.split("\n", 1)[0].split(" . ", 1)[0].strip()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._answer(prompt))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        text = self._answer(prompt)
        yield CompletionResponse(text=text, delta=text)


def main(n_queries: int = 25) -> dict[str, Any]:
    """Capture ``n_queries`` judged Cranfield queries, score them, and return the reports."""
    corpus, queries, qrels = load_cranfield()
    nodes = [TextNode(id_=doc_id, text=text) for doc_id, text in corpus.items() if text.strip()]
    index = VectorStoreIndex(nodes, embed_model=HashEmbedding())
    query_engine = index.as_query_engine(llm=FirstSentenceLLM(), similarity_top_k=10)
    judged = [q for q in queries if any(g > 0 for g in qrels.get(q, {}).values())][:n_queries]

    # 1. Capture: one RagSample per query, its id set by the capture scope.
    handler = RagmeterEventHandler()
    *looped, last = judged
    if looped:  # 4 at a time, each inside handler.capture(id=qid); attached for the run
        handler.run_dataset(query_engine, {q: queries[q] for q in looped})
    with handler.capture(id=last):  # one by hand: attached while the block runs
        query_engine.query(queries[last])

    # 2. Score what was captured: retrieval against the qrels (only the captured queries;
    #    a query that raised would score 0 and be listed in report.extra["capture"]["failed"]),
    #    answers without an LLM.
    retrieval = handler.evaluate_retrieval(
        qrels, missing_queries="skip", k_values=(1, 5, 10), metrics=["ndcg", "recall", "mrr"]
    )
    print(retrieval)
    answers = handler.evaluate(metrics=["faithfulness", "latency_ms"])
    print(answers.to_markdown())

    # 3. The same retriever inside LlamaIndex's RetrieverEvaluator, graded NDCG included.
    relevance = {queries[q]: qrels[q] for q in judged}
    evaluator = RetrieverEvaluator(
        metrics=[RagmeterRetrievalMetric("ndcg", 10, relevance=relevance)],
        retriever=index.as_retriever(similarity_top_k=10),
    )

    async def run_all() -> list[Any]:
        return [
            await evaluator.aevaluate(query=queries[q], expected_ids=list(qrels[q])) for q in judged
        ]

    results = asyncio.run(run_all())
    mean = sum(r.metric_dict["ndcg@10"].score for r in results) / len(results)
    print(f"RetrieverEvaluator ndcg@10 = {mean:.4f} (captured run: {retrieval.primary:.4f})")
    return {"handler": handler, "retrieval": retrieval, "answers": answers, "ndcg10": mean}


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:2]))  # no argument: main()'s own default
