"""A LangChain RAG chain over Cranfield, measured with ragmeter without changing the chain.

``handler.run_dataset(chain, queries, qrels=qrels)`` runs the chain over the judged queries
(4 at a time, a progress bar on stderr), each inside ``handler.capture(id=qid, ...)``: LangChain
attaches the handler to every run in the block and each ``RagSample`` gets the Cranfield
query id, so the captured run joins Cranfield's graded qrels. One more query is run by hand
with ``with handler.capture(id=...)``, the scoped form. The script prints:

1. the retrieval report of what the chain really retrieved (trec_eval conventions);
2. the same retriever scored on its own through ``as_retriever_fn`` (same numbers);
3. the answer report (no-LLM metrics: faithfulness to the retrieved text, non-empty
   answers, latency, tokens).

Runs offline: the retriever is a small BM25 over the bundled corpus and the chat model is
a stand-in that answers with the first sentence of the best document (swap in
``ChatOpenAI``/any chat model for real use).

    python examples/langchain_rag.py            # 30 queries
    python examples/langchain_rag.py 225        # all of Cranfield
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnablePassthrough
from pydantic import PrivateAttr
from ragmeter_langchain import RagmeterCallbackHandler, as_retriever_fn

from ragmeter.datasets import load_cranfield
from ragmeter.evaluation.retrieval import evaluate_retrieval

_WORD = re.compile(r"[a-z0-9]+")


class KeywordRetriever(BaseRetriever):
    """BM25 (k1=0.9, b=0.4) over ``{doc_id: text}``; ``Document.id`` is the corpus id."""

    corpus: dict[str, str]
    k: int = 10
    _index: dict[str, list[tuple[str, float]]] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        tfs = {d: Counter(_WORD.findall(t.lower())) for d, t in self.corpus.items()}
        avg = sum(sum(tf.values()) for tf in tfs.values()) / len(tfs)
        index: dict[str, list[tuple[str, float]]] = {}
        for d, tf in tfs.items():
            norm = 0.9 * (0.6 + 0.4 * sum(tf.values()) / avg)
            for term, f in tf.items():
                index.setdefault(term, []).append((d, f * 1.9 / (f + norm)))
        n = len(tfs)
        for term, postings in index.items():
            idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            index[term] = [(d, w * idf) for d, w in postings]
        self._index = index

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        scores: Counter[str] = Counter()
        index = self._index
        for term in set(_WORD.findall(query.lower())):
            for d, w in index.get(term, ()):
                scores[d] += w
        best = sorted(scores, key=lambda d: (-scores[d], d))[: self.k]
        return [Document(self.corpus[d], id=d) for d in best]


class FirstSentenceChatModel(BaseChatModel):
    """A stand-in chat model: replies with the first sentence of the context it is given."""

    @property
    def _llm_type(self) -> str:
        return "first-sentence"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        context = str(messages[0].text).split("Context:\n", 1)[-1]
        answer = context.strip().split("\n", 1)[0].split(" . ", 1)[0].strip()
        words_in = sum(len(str(m.text).split()) for m in messages)
        usage = {"input_tokens": words_in, "output_tokens": len(answer.split())}
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        message = AIMessage(answer, usage_metadata=usage)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])


def build_chain(retriever: Runnable[Any, Any], llm: Runnable[Any, Any]) -> Runnable[Any, str]:
    """retriever -> prompt -> chat model -> string: the usual LCEL RAG shape."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the context.\nContext:\n{context}"), ("human", "{question}")]
    )

    def join(docs: list[Document]) -> str:
        return "\n".join(d.page_content for d in docs)

    return (
        {"context": retriever | join, "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )


def main(n_queries: int = 30, *, echo: bool = True) -> dict[str, Any]:
    """Capture ``n_queries`` Cranfield queries, score them, and return the reports."""
    corpus, queries, qrels = load_cranfield()
    retriever = KeywordRetriever(corpus=corpus)
    chain = build_chain(retriever, FirstSentenceChatModel())

    # What a LangChain user adds: a handler, and a loop over the judged queries.
    handler = RagmeterCallbackHandler()
    qids = [q for q in qrels if q in queries][:n_queries]
    *looped, last = qids
    if looped:  # 4 at a time, each inside handler.capture(id=qid)
        handler.run_dataset(chain, {q: queries[q] for q in looped}, progress=echo)
    with handler.capture(id=last, relevance=qrels[last]):  # one by hand: the same capture
        chain.invoke(queries[last])

    ks, metrics = (1, 5, 10), ["ndcg", "recall", "precision", "mrr", "map"]
    # Joined by sample id (the query ids); missing_queries="skip" scores the captured queries only
    # (a run that raised would score 0 and be listed in captured.extra["capture"]["failed"]).
    captured = handler.evaluate_retrieval(
        qrels, missing_queries="skip", k_values=ks, metrics=metrics
    )
    fn = as_retriever_fn(retriever)
    judged = {q: qrels[q] for q in qids}
    alone = evaluate_retrieval(fn, judged, queries, k_values=ks, metrics=metrics)
    answers = handler.evaluate(
        metrics=["faithfulness", "non_empty_rate", "latency_ms", "total_tokens"]
    )
    if echo:
        first = next(s for s in handler.samples if s.id == qids[0])
        print(f"Q{first.id}: {first.user_input}\nA: {first.response}\n")
        print("What the chain retrieved:")
        print(captured.to_text(), end="\n\n")
        print("The retriever alone (as_retriever_fn + evaluate_retrieval):")
        print(alone.to_text(), end="\n\n")
        print(answers.to_text())
    return {"captured": captured, "alone": alone, "answers": answers, "samples": handler.samples}


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:2]))  # no argument: main()'s own default
