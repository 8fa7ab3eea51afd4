"""Small offline RAG pipelines built with the real frameworks, traced by the real OpenInference
instrumentors (and, for comparison, captured by ragmeter's native adapters).

Three frameworks, each with a plain and a multi-stage variant:

* LangChain: ``basic`` = BM25 retriever -> prompt -> fake chat model -> string (LCEL, ``.invoke``);
  ``hybrid`` = two retrievers side by side -> reciprocal rank fusion -> prompt -> model.
* LlamaIndex: ``basic`` = ``RetrieverQueryEngine`` over a BM25 retriever with a stand-in LLM;
  ``rerank`` = the same plus a node postprocessor that fires LlamaIndex's rerank events.
* Haystack: ``basic`` = ``InMemoryBM25Retriever`` -> ``PromptBuilder`` -> fake generator;
  ``hybrid`` = two BM25 retrievers -> ``DocumentJoiner`` (RRF) -> ``LostInTheMiddleRanker`` ->
  ``ChatPromptBuilder`` -> ``MockChatGenerator``.

Every document has its id twice: as the framework's id (``Document.id`` / node id) and as
``metadata["doc_id"]``. ``trace(framework, provider, ...)`` instruments the framework with its
OpenInference instrumentor on ``provider``, runs the queries and uninstruments;
``native(framework, ...)`` runs the same pipeline under the ragmeter adapter and returns its
samples; ``run(framework, provider=..., adapter=True)`` does both in one run. Nothing here
touches the network.
"""

# No `from __future__ import annotations`: Haystack reads a component's socket types from its
# real (not string) annotations.
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from haystack import component
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

FRAMEWORKS = ("langchain", "llamaindex", "haystack")
VARIANTS: dict[str, tuple[str, ...]] = {
    "langchain": ("basic", "hybrid"),
    "llamaindex": ("basic", "rerank"),
    "haystack": ("basic", "hybrid"),
}
MODEL = "fake-rag-model"  # the model name the fake LLMs report

DOCS: dict[str, str] = {
    "d1": "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    "d2": "Paris is the capital of France and sits on the river Seine.",
    "d3": "The Louvre in Paris is the most visited art museum in the world.",
    "d4": "Mount Everest is the highest mountain on Earth at 8849 metres.",
    "d5": "K2 is the second highest mountain and lies on the border of Pakistan and China.",
    "d6": "Climbers on Everest use bottled oxygen above the death zone at 8000 metres.",
    "d7": "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "d8": "Chlorophyll is the green pigment that absorbs light in plant leaves.",
    "d9": "Plants release oxygen through small pores in their leaves called stomata.",
    "d10": "The Great Wall of China is thousands of kilometres long.",
    "d11": "Beijing is the capital of China and home to the Forbidden City.",
    "d12": "The Amazon river carries more water than any other river on Earth.",
    "d13": "The Nile is often called the longest river in the world.",
    "d14": "Honey bees communicate the location of flowers with a waggle dance.",
    "d15": "Bees make honey from the nectar of flowers.",
    "d16": "Python is a programming language created by Guido van Rossum.",
    "d17": "Python lists are mutable sequences and tuples are immutable.",
    "d18": "The Rust programming language guarantees memory safety without a garbage collector.",
    "d19": "Jupiter is the largest planet in the solar system.",
    "d20": "Saturn is a gas giant planet known for its bright rings of ice.",
    "d21": "Mars is called the red planet because of iron oxide dust on its surface.",
    "d22": "The speed of light in vacuum is about 300000 kilometres per second.",
    "d23": "Sound travels faster in water than in air.",
    "d24": "The Pacific is the largest and deepest ocean on Earth.",
}

QUERIES: dict[str, str] = {
    "q1": "When was the Eiffel Tower in Paris completed?",
    "q2": "What is the highest mountain on Earth?",
    "q3": "How do plants make oxygen from light?",
    "q4": "Which planet is the largest in the solar system?",
    "q5": "Who created the Python programming language?",
}

QRELS: dict[str, dict[str, int]] = {
    "q1": {"d1": 2, "d2": 1, "d3": 0},
    "q2": {"d4": 2, "d5": 1, "d6": 1},
    "q3": {"d7": 2, "d8": 1, "d9": 1},
    "q4": {"d19": 2, "d20": 1, "d21": 0},
    "q5": {"d16": 2, "d17": 1, "d18": 0},
}

_WORD = re.compile(r"[a-z0-9]+")
TOP_K = 5


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens."""
    return _WORD.findall(text.lower())


class BM25:
    """Okapi BM25 (k1=0.9, b=0.4) over ``{doc_id: text}``; ties broken by doc id."""

    def __init__(self, corpus: Mapping[str, str]) -> None:
        tfs = {d: Counter(tokenize(t)) for d, t in corpus.items()}
        avg = sum(sum(tf.values()) for tf in tfs.values()) / len(tfs)
        self.index: dict[str, list[tuple[str, float]]] = {}
        for d, tf in tfs.items():
            norm = 0.9 * (0.6 + 0.4 * sum(tf.values()) / avg)
            for term, f in tf.items():
                self.index.setdefault(term, []).append((d, f * 1.9 / (f + norm)))
        n = len(tfs)
        for term, postings in self.index.items():
            idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            self.index[term] = [(d, w * idf) for d, w in postings]

    def search(self, query: str, k: int = TOP_K) -> list[tuple[str, float]]:
        """The ``k`` best ``(doc_id, score)`` pairs, best first."""
        scores: Counter[str] = Counter()
        for term in set(tokenize(query)):
            for d, w in self.index.get(term, ()):
                scores[d] += w
        best = sorted(scores, key=lambda d: (-scores[d], d))[:k]
        return [(d, scores[d]) for d in best]


def overlap_search(query: str, k: int = TOP_K) -> list[tuple[str, float]]:
    """The documents sharing the most distinct words with ``query`` (ties by doc id)."""
    terms = set(tokenize(query))
    counts = {d: len(terms & set(tokenize(t))) for d, t in DOCS.items()}
    best = sorted((d for d in counts if counts[d]), key=lambda d: (-counts[d], d))[:k]
    return [(d, float(counts[d])) for d in best]


def first_sentence(context: str) -> str:
    """The stand-in LLMs' answer: the first line of the context they were given."""
    return context.strip().split("\n", 1)[0].strip()


def make_provider(service: str = "ragmeter-tests") -> tuple[TracerProvider, InMemorySpanExporter]:
    """A ``TracerProvider`` exporting every finished span to an ``InMemorySpanExporter``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


# -- LangChain ------------------------------------------------------------------------------


def _langchain_pipeline(variant: str) -> Callable[[str], Any]:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

    bm25 = BM25(DOCS)

    def document(doc_id: str, score: float) -> Document:
        return Document(DOCS[doc_id], id=doc_id, metadata={"doc_id": doc_id, "score": score})

    class BM25Retriever(BaseRetriever):
        """BM25 over DOCS; ``Document.id`` and ``metadata["doc_id"]`` are the doc id."""

        k: int = TOP_K

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [document(d, s) for d, s in bm25.search(query, self.k)]

    class OverlapRetriever(BaseRetriever):
        """Word overlap with the query over DOCS."""

        k: int = TOP_K

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [document(d, s) for d, s in overlap_search(query, self.k)]

    class FakeChatModel(BaseChatModel):
        """Answers with the first line of the context; reports word counts as token usage."""

        model_name: str = MODEL

        @property
        def _llm_type(self) -> str:
            return "fake-chat-model"

        @property
        def _identifying_params(self) -> dict[str, Any]:
            return {"model_name": self.model_name}

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            answer = first_sentence(str(messages[0].text).split("Context:\n", 1)[-1])
            n_in = sum(len(str(m.text).split()) for m in messages)
            n_out = len(answer.split())
            usage = {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
            message = AIMessage(answer, usage_metadata=usage)  # type: ignore[arg-type]
            return ChatResult(
                generations=[ChatGeneration(message=message)],
                llm_output={"model_name": self.model_name},
            )

    def rrf(rankings: dict[str, list[Document]]) -> list[Document]:
        score: dict[str, float] = {}
        docs: dict[str, Document] = {}
        for ranking in rankings.values():
            for rank, doc in enumerate(ranking, 1):
                score[str(doc.id)] = score.get(str(doc.id), 0.0) + 1 / (60 + rank)
                docs[str(doc.id)] = doc
        return [docs[d] for d in sorted(score, key=lambda d: (-score[d], d))][:TOP_K]

    retrieve: Any = BM25Retriever()
    if variant == "hybrid":
        from ragmeter_langchain import stage

        both = RunnableParallel(
            bm25=BM25Retriever().with_config(run_name="bm25"),
            overlap=OverlapRetriever().with_config(run_name="overlap"),
        )
        retrieve = both | RunnableLambda(rrf).with_config(run_name="rrf") | stage("fused")
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the context.\nContext:\n{context}"), ("human", "{question}")]
    )

    def join(docs: list[Document]) -> str:
        return "\n".join(d.page_content for d in docs)

    chain = (
        {"context": retrieve | join, "question": RunnablePassthrough()}
        | prompt
        | FakeChatModel()
        | StrOutputParser()
    )
    return chain.invoke


@contextmanager
def _langchain_instrumented(provider: TracerProvider) -> Iterator[None]:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


# -- LlamaIndex -----------------------------------------------------------------------------


def _llamaindex_pipeline(variant: str) -> Callable[[str], Any]:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    dispatcher = get_dispatcher("ragmeter.tests.traces")
    hidden = ["doc_id"]  # kept on the node, not shown to the LLM or the embedding
    nodes = {
        d: TextNode(
            id_=d,
            text=t,
            metadata={"doc_id": d},
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=hidden,
        )
        for d, t in DOCS.items()
    }
    bm25 = BM25(DOCS)

    class BM25Retriever(BaseRetriever):
        """BM25 over the nodes (node id = doc id)."""

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            hits = bm25.search(query_bundle.query_str, TOP_K)
            return [NodeWithScore(node=nodes[d], score=s) for d, s in hits]

    class OverlapRerank(BaseNodePostprocessor):
        """A stand-in reranker firing LlamaIndex's rerank events, as its real rerankers do:
        the nodes sharing the most distinct words with the query first (stable), top 3."""

        top_n: int = 3

        def _postprocess_nodes(
            self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
        ) -> list[NodeWithScore]:
            dispatcher.event(
                ReRankStartEvent(
                    query=query_bundle, nodes=nodes, top_n=self.top_n, model_name=MODEL
                )
            )
            terms = set(tokenize(query_bundle.query_str if query_bundle else ""))
            scored = [(len(terms & set(tokenize(n.node.get_content()))), n.node) for n in nodes]
            ranked = sorted(scored, key=lambda pair: -pair[0])[: self.top_n]
            out = [NodeWithScore(node=node, score=float(score)) for score, node in ranked]
            dispatcher.event(ReRankEndEvent(nodes=out))
            return out

    class FirstSentenceLLM(CustomLLM):
        """Answers with the first line of the context in its prompt."""

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(context_window=3900, num_output=64, model_name=MODEL)

        @staticmethod
        def _answer(prompt: str) -> str:
            return first_sentence(prompt.split("---------------------\n", 1)[-1])

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> CompletionResponse:
            text = self._answer(prompt)
            n_in, n_out = len(prompt.split()), len(text.split())
            usage = {
                "prompt_tokens": n_in,
                "completion_tokens": n_out,
                "total_tokens": n_in + n_out,
            }
            return CompletionResponse(text=text, raw={"model": MODEL, "usage": usage})

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
            yield self.complete(prompt)

    post = [OverlapRerank()] if variant == "rerank" else []
    engine = RetrieverQueryEngine.from_args(
        BM25Retriever(), llm=FirstSentenceLLM(), node_postprocessors=post
    )
    return engine.query


@contextmanager
def _llamaindex_instrumented(provider: TracerProvider) -> Iterator[None]:
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


# -- Haystack -------------------------------------------------------------------------------


@component
class FakeGenerator:
    """Answers with the first line after "Context:"; reports usage like OpenAI's generators.

    Module-level on purpose: the Haystack instrumentor patches every registered component class
    at ``<module>.<ClassName>.run``, which fails for a class defined inside a function.
    """

    @component.output_types(replies=list[str], meta=list[dict[str, Any]])
    def run(self, prompt: str) -> dict[str, Any]:
        context = prompt.split("Context:\n", 1)[-1]
        answer = first_sentence(context)
        n_in, n_out = len(prompt.split()), len(answer.split())
        usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
        return {"replies": [answer], "meta": [{"model": MODEL, "usage": usage}]}


HAYSTACK_TEMPLATE = (
    "Answer from the context.\nContext:\n"
    "{% for doc in documents %}{{ doc.content }}\n{% endfor %}Question: {{ question }}"
)


def _haystack_pipeline(variant: str) -> Callable[[str], Any]:
    from haystack import Document, Pipeline
    from haystack.components.builders import ChatPromptBuilder, PromptBuilder
    from haystack.components.generators.chat import MockChatGenerator
    from haystack.components.joiners import DocumentJoiner
    from haystack.components.rankers import LostInTheMiddleRanker
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.dataclasses import ChatMessage
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    docs = [Document(id=d, content=t, meta={"doc_id": d}) for d, t in DOCS.items()]
    pipe = Pipeline()
    if variant == "basic":
        store = InMemoryDocumentStore()
        store.write_documents(docs)
        pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=TOP_K))
        pipe.add_component(
            "prompt_builder",
            PromptBuilder(template=HAYSTACK_TEMPLATE, required_variables=["question", "documents"]),
        )
        pipe.add_component("llm", FakeGenerator())
        pipe.connect("retriever.documents", "prompt_builder.documents")
        pipe.connect("prompt_builder.prompt", "llm.prompt")

        def run(question: str) -> Any:
            inputs = {"retriever": {"query": question}, "prompt_builder": {"question": question}}
            return pipe.run(inputs)

        return run

    okapi = InMemoryDocumentStore(bm25_algorithm="BM25Okapi")
    plus = InMemoryDocumentStore(bm25_algorithm="BM25Plus")
    okapi.write_documents(docs)
    plus.write_documents(docs)

    def answer(messages: list[ChatMessage]) -> str:
        return first_sentence((messages[-1].text or "").split("Context:\n", 1)[-1])

    pipe.add_component("bm25_okapi", InMemoryBM25Retriever(document_store=okapi, top_k=TOP_K))
    pipe.add_component("bm25_plus", InMemoryBM25Retriever(document_store=plus, top_k=TOP_K))
    pipe.add_component("joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=6))
    pipe.add_component("ranker", LostInTheMiddleRanker(top_k=4))
    pipe.add_component(
        "prompt_builder",
        ChatPromptBuilder(
            template=[ChatMessage.from_user(HAYSTACK_TEMPLATE)],
            required_variables=["question", "documents"],
        ),
    )
    pipe.add_component("llm", MockChatGenerator(response_fn=answer))
    pipe.connect("bm25_okapi.documents", "joiner.documents")
    pipe.connect("bm25_plus.documents", "joiner.documents")
    pipe.connect("joiner.documents", "ranker.documents")
    pipe.connect("ranker.documents", "prompt_builder.documents")
    pipe.connect("prompt_builder.prompt", "llm.messages")

    def run_hybrid(question: str) -> Any:
        inputs = {
            "bm25_okapi": {"query": question},
            "bm25_plus": {"query": question},
            "prompt_builder": {"question": question},
        }
        return pipe.run(inputs)

    return run_hybrid


def _importable(cls: type[Any]) -> bool:
    module = sys.modules.get(cls.__module__)
    return module is not None and getattr(module, cls.__name__, None) is cls


@contextmanager
def _haystack_instrumented(provider: TracerProvider) -> Iterator[None]:
    from openinference.instrumentation.haystack import HaystackInstrumentor

    # The instrumentor patches every registered component class at <module>.<ClassName>.run
    # and raises on a class it cannot find there (one defined inside a function, as some
    # tests do): such classes are hidden from it while it instruments.
    registry = component.registry
    hidden = {path: cls for path, cls in registry.items() if not _importable(cls)}
    for path in hidden:
        del registry[path]
    instrumentor = HaystackInstrumentor()
    try:
        instrumentor.instrument(tracer_provider=provider)
    finally:
        registry.update(hidden)
    try:
        yield
    finally:
        instrumentor.uninstrument()


# -- the common entry points ----------------------------------------------------------------

_PIPELINES: dict[str, Callable[[str], Callable[[str], Any]]] = {
    "langchain": _langchain_pipeline,
    "llamaindex": _llamaindex_pipeline,
    "haystack": _haystack_pipeline,
}
_INSTRUMENTED = {
    "langchain": _langchain_instrumented,
    "llamaindex": _llamaindex_instrumented,
    "haystack": _haystack_instrumented,
}


def pipeline(framework: str, variant: str = "basic") -> Callable[[str], Any]:
    """``ask(question)``: one run of ``framework``'s ``variant`` pipeline."""
    if variant not in VARIANTS[framework]:
        raise ValueError(f"{framework} has variants {VARIANTS[framework]}, not {variant!r}")
    return _PIPELINES[framework](variant)


@contextmanager
def instrumented(framework: str, provider: TracerProvider) -> Iterator[None]:
    """``framework``'s OpenInference instrumentor on ``provider`` while the block runs."""
    with _INSTRUMENTED[framework](provider):
        yield


@contextmanager
def _adapter(framework: str) -> Iterator[tuple[Callable[[str], Any], list[Any]]]:
    """``(scope, samples)``: ragmeter's adapter for ``framework`` is attached while the block
    runs; ``scope(qid)`` is its ``capture(id=qid)``; ``samples`` is filled when the block ends."""
    samples: list[Any] = []
    if framework == "langchain":
        from ragmeter_langchain import RagmeterCallbackHandler

        handler = RagmeterCallbackHandler()
        yield (lambda qid: handler.capture(id=qid)), samples
        samples.extend(handler.samples)
    elif framework == "llamaindex":
        from ragmeter_llamaindex import RagmeterEventHandler

        li_handler = RagmeterEventHandler()
        yield (lambda qid: li_handler.capture(id=qid)), samples
        samples.extend(li_handler.samples)
    else:
        from ragmeter_haystack import RagmeterTracer

        with RagmeterTracer() as tracer:
            yield (lambda qid: tracer.capture(id=qid)), samples
        samples.extend(tracer.samples)


def run(
    framework: str,
    queries: Mapping[str, str] = QUERIES,
    *,
    variant: str = "basic",
    provider: TracerProvider | None = None,
    adapter: bool = False,
    tag: bool = True,
) -> tuple[dict[str, Any], list[Any]]:
    """Run ``queries`` once through ``framework``'s ``variant`` pipeline; return each query's
    raw result and the ragmeter adapter's samples (``[]`` without ``adapter``).

    With ``provider`` the OpenInference instrumentor traces the run on it; with ``adapter``
    ragmeter's native adapter captures the same run, each query in ``capture(id=qid)``. With
    ``tag`` (and a provider) each run carries ``metadata = {"query_id": qid}`` and
    ``session.id = qid`` (OpenInference's ``using_attributes``), so traces join by id.
    """
    from contextlib import ExitStack, nullcontext

    from openinference.instrumentation import using_attributes

    ask = pipeline(framework, variant)
    results: dict[str, Any] = {}
    samples: list[Any] = []
    with ExitStack() as stack:
        if provider is not None:
            stack.enter_context(instrumented(framework, provider))
        scope: Callable[[str], Any] = lambda qid: nullcontext()  # noqa: E731
        if adapter:
            scope, samples = stack.enter_context(_adapter(framework))
        for qid, question in queries.items():
            tags = using_attributes(session_id=qid, metadata={"query_id": qid})
            with scope(qid), tags if tag and provider is not None else nullcontext():
                results[qid] = ask(question)
    return results, samples


def trace(
    framework: str,
    provider: TracerProvider,
    queries: Mapping[str, str] = QUERIES,
    *,
    variant: str = "basic",
    tag: bool = True,
) -> dict[str, Any]:
    """Run ``queries`` through the instrumented pipeline; return each query's raw result."""
    return run(framework, queries, variant=variant, provider=provider, tag=tag)[0]


def native(
    framework: str, queries: Mapping[str, str] = QUERIES, *, variant: str = "basic"
) -> list[Any]:
    """Run ``queries`` under ragmeter's own adapter for ``framework``; return its samples."""
    return run(framework, queries, variant=variant, adapter=True)[1]


def spans(
    framework: str, queries: Mapping[str, str] = QUERIES, *, variant: str = "basic"
) -> list[Any]:
    """The finished ``ReadableSpan``s of one traced run of ``queries`` (a fresh provider)."""
    provider, exporter = make_provider()
    trace(framework, provider, queries, variant=variant)
    provider.shutdown()
    return list(exporter.get_finished_spans())
