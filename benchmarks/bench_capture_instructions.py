"""What capturing costs a real pipeline, counted in instructions: repeatable on a shared machine.

``bench_capture.py`` times each adapter end to end against a do-nothing handler, paired and
interleaved; on a shared 2-core machine its per-query medians still move by tens of
microseconds from run to run (caches, the other core's load, which setup ran before).
This benchmark counts instructions instead (valgrind's callgrind, which counts, it does not
time): for each framework, the same small 10-document RAG pipeline of ``bench_capture.py``
runs N1 and N2 queries in a fresh process under each setup, and the slope
``(I(N2) - I(N1)) / (N2 - N1)`` is the instructions per query, start-up and imports left
out. The adapter's end-to-end cost is the slope with ragmeter attached (each query inside
``capture(id=...)``) minus the slope with a do-nothing handler, shown in instructions and
converted to µs at the pipeline's own rate (instructions per µs of the do-nothing setup,
timed natively in the same script).

    python benchmarks/bench_capture_instructions.py            # ~12 minutes (valgrind)
    python benchmarks/bench_capture_instructions.py --only langchain
"""

import argparse
import os
import re
import subprocess
import sys
import textwrap
import time

N1, N2 = 60, 460
TARGET_US = 30.0

PIPELINES = {
    "langchain": """
        import itertools
        from langchain_core.callbacks import BaseCallbackHandler
        from langchain_core.documents import Document
        from langchain_core.language_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.output_parsers import StrOutputParser
        from langchain_core.prompts import ChatPromptTemplate
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.runnables import RunnablePassthrough
        from ragmeter_langchain import RagmeterCallbackHandler
        docs = [Document(f"document {i} about wings and lift", id=f"d{i}") for i in range(10)]
        class Fixed(BaseRetriever):
            def _get_relevant_documents(self, query, *, run_manager):
                return list(docs)
        class Noop(BaseCallbackHandler):
            run_inline = True
            def on_chat_model_start(self, *args, **kwargs):
                pass
        prompt = ChatPromptTemplate.from_messages(
            [("system", "{context}"), ("human", "{question}")]
        )
        llm = GenericFakeChatModel(messages=itertools.repeat(AIMessage("lift from the wing")))
        retrieve = {"context": Fixed(), "question": RunnablePassthrough()}
        chain = retrieve | prompt | llm | StrOutputParser()
        handler = RagmeterCallbackHandler(max_samples=1000) if SETUP == "ragmeter" else Noop()
        def run(i):
            if SETUP == "ragmeter":
                with handler.capture(id=IDS[i]):
                    return chain.invoke("question")
            return chain.invoke("question", config={"callbacks": [handler]})
    """,
    "llamaindex": """
        import hashlib, math, re
        from llama_index.core import VectorStoreIndex
        from llama_index.core.base.embeddings.base import BaseEmbedding
        from llama_index.core.instrumentation import get_dispatcher
        from llama_index.core.instrumentation.event_handlers import BaseEventHandler
        from llama_index.core.instrumentation.span import SimpleSpan
        from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
        from llama_index.core.llms import MockLLM
        from llama_index.core.schema import TextNode
        from ragmeter_llamaindex import RagmeterEventHandler
        from ragmeter.datasets import load_cranfield
        class HashEmbedding(BaseEmbedding):
            def _embed(self, text):
                vec = [0.0] * 64
                for word in re.findall(r"[a-z0-9]+", text.lower()):
                    vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
                norm = math.sqrt(sum(v * v for v in vec)) or 1.0
                return [v / norm for v in vec]
            def _get_query_embedding(self, q): return self._embed(q)
            async def _aget_query_embedding(self, q): return self._embed(q)
            def _get_text_embedding(self, t): return self._embed(t)
        corpus, queries, _ = load_cranfield()
        texts = [(d, " ".join(t.split()[:25])) for d, t in corpus.items() if t.strip()][:200]
        nodes = [TextNode(id_=d, text=t) for d, t in texts]
        index = VectorStoreIndex(nodes, embed_model=HashEmbedding())
        engine = index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=10)
        qs = list(queries.values())
        class NoopEvents(BaseEventHandler):
            @classmethod
            def class_name(cls): return "NoopEvents"
            def handle(self, event, **kwargs): pass
        class NoopSpans(BaseSpanHandler[SimpleSpan]):
            def span_enter(self, *a, **k): pass
            def span_exit(self, *a, **k): pass
            def span_drop(self, *a, **k): pass
            def new_span(self, *a, **k): return None
            def prepare_to_exit_span(self, *a, **k): return None
            def prepare_to_drop_span(self, *a, **k): return None
        root = get_dispatcher()
        if SETUP == "ragmeter":
            handler = RagmeterEventHandler(max_samples=1000).attach()
        else:
            root.event_handlers = [*root.event_handlers, NoopEvents()]
            root.span_handlers = [*root.span_handlers, NoopSpans()]
        def run(i):
            if SETUP == "ragmeter":
                with handler.capture(id=IDS[i]):
                    return engine.query(qs[i % len(qs)])
            return engine.query(qs[i % len(qs)])
    """,
    "haystack": """
        import contextlib, os
        os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
        from typing import Any
        from haystack import Document, Pipeline, component
        from haystack.components.builders import ChatPromptBuilder
        from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
        from haystack.dataclasses import ChatMessage
        from haystack.document_stores.in_memory import InMemoryDocumentStore
        from haystack.tracing.tracer import NullSpan, Tracer, enable_tracing
        from ragmeter_haystack import RagmeterTracer
        from ragmeter.datasets import load_cranfield
        @component
        class FakeChat:
            @component.output_types(replies=list[ChatMessage])
            def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
                meta = {"usage": {"prompt_tokens": 100, "completion_tokens": 10}}
                return {"replies": [ChatMessage.from_assistant("lift from the wing", meta=meta)]}
        corpus, queries, _ = load_cranfield()
        store = InMemoryDocumentStore()
        kept = list(corpus.items())[:200]
        store.write_documents([Document(id=d, content=t) for d, t in kept if t.strip()])
        pipe = Pipeline()
        pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=10))
        pipe.add_component("prompt_builder", ChatPromptBuilder(
            template=[ChatMessage.from_user("{{ documents|length }} docs. {{ question }}")],
            required_variables=["question", "documents"]))
        pipe.add_component("llm", FakeChat())
        pipe.connect("retriever.documents", "prompt_builder.documents")
        pipe.connect("prompt_builder.prompt", "llm.messages")
        qs = list(queries.values())
        class NoopTracer(Tracer):
            def trace(self, operation_name, tags=None, parent_span=None):
                return contextlib.nullcontext(NullSpan())
            def current_span(self): return None
        if SETUP == "ragmeter":
            tracer = RagmeterTracer(max_samples=1000).attach()
        else:
            enable_tracing(NoopTracer())
        def run(i):
            q = qs[i % len(qs)]
            data = {"retriever": {"query": q}, "prompt_builder": {"question": q}}
            if SETUP == "ragmeter":
                with tracer.capture(id=IDS[i]):
                    return pipe.run(data)
            return pipe.run(data)
    """,
}

DRIVER = """
import sys, time
SETUP, N = sys.argv[1], int(sys.argv[2])
IDS = [f"q{{i}}" for i in range(N + 100)]
{pipeline}
for i in range(20):  # warm up lazy imports and caches
    run(N + i)
start = time.perf_counter()
for i in range(N):
    run(i)
print("ELAPSED", (time.perf_counter() - start) / N)
"""


def _script(framework: str) -> str:
    return DRIVER.format(pipeline=textwrap.dedent(PIPELINES[framework]))


def instructions(framework: str, setup: str, n: int) -> int:
    """Instructions of a whole process running ``n`` queries under ``setup`` (callgrind)."""
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-c",
            _script(framework),
            setup,
            str(n),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def seconds_per_query(framework: str, setup: str, n: int = 400) -> float:
    """Native time per query (for the instructions-per-µs rate)."""
    done = subprocess.run(
        [sys.executable, "-c", _script(framework), setup, str(n)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        check=True,
    )
    return float(re.search(r"ELAPSED (\S+)", done.stdout).group(1))  # type: ignore[union-attr]


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", choices=sorted(PIPELINES), action="append")
    args = parser.parse_args(argv)
    out: dict[str, float] = {}
    for framework in args.only or list(PIPELINES):
        started = time.time()
        slopes = {}
        for setup in ("noop", "ragmeter"):
            low = instructions(framework, setup, N1)
            high = instructions(framework, setup, N2)
            slopes[setup] = (high - low) / (N2 - N1)
        rate = slopes["noop"] / (seconds_per_query(framework, "noop") * 1e6)  # instr per µs
        extra = slopes["ragmeter"] - slopes["noop"]
        out[framework] = extra / rate
        print(
            f"{framework:<11} do-nothing handler {slopes['noop'] / 1e6:7.2f} M instructions per "
            f"query; ragmeter {slopes['ragmeter'] / 1e6:7.2f} M; "
            f"+{extra / 1e3:6.1f} k instructions = +{extra / rate:5.1f} µs per query "
            f"({rate:.0f} instructions/µs; {time.time() - started:.0f} s)",
            flush=True,
        )
    print(f"target: <= {TARGET_US:.0f} µs per query end to end")
    return out


if __name__ == "__main__":
    main()
