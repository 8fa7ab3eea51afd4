"""Benchmark: what RagmeterRecorder adds to a Haystack pipeline run (target: under 5%).

Two pipelines of the same shape (InMemoryBM25Retriever -> ChatPromptBuilder -> a fake chat
generator, offline), each run plain (``pipeline.run``) and through the recorder
(``recorder.run``), interleaved query by query in one process so both see the same machine:

* **cranfield**: BM25 over Cranfield's 1,400 abstracts, top 10 -- a realistic retrieval cost;
* **tiny**: BM25 over 20 short documents, top 5 -- the pipeline does almost nothing, so the
  recorder's fixed cost (include_outputs_from, building and storing a RagSample) shows.

A real LLM call (hundreds of milliseconds) would shrink the ratio further. Reports the median
per-run time of each side, their ratio, the median of the per-query paired ratios (robust to
a shared machine's drift), and the recorder's own work (building and storing the sample)
timed in isolation.

    python benchmarks/bench_haystack.py              # 40 queries x 3 rounds
    python benchmarks/bench_haystack.py --queries 100 --rounds 5
"""

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from haystack import Document, Pipeline, component
from haystack.components.builders import ChatPromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from ragmeter_haystack import RagmeterRecorder

from ragmeter.datasets import load_cranfield

TEMPLATE = (
    "Documents:\n{% for d in documents %}{{ d.content }}\n{% endfor %}Question: {{ question }}"
)


@component
class FakeChat:
    """Answers with the first 10 words of the prompt's first document; reports usage."""

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
        text = (messages[-1].text or "").split("\n")[1]
        answer = " ".join(text.split()[:10])
        meta = {"usage": {"prompt_tokens": 100, "completion_tokens": 10}}
        return {"replies": [ChatMessage.from_assistant(answer, meta=meta)]}


def build(docs: dict[str, str], top_k: int) -> Pipeline:
    store = InMemoryDocumentStore()
    store.write_documents([Document(id=i, content=t) for i, t in docs.items()])
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=top_k))
    pipe.add_component(
        "prompt_builder",
        ChatPromptBuilder(
            template=[ChatMessage.from_user(TEMPLATE)], required_variables=["question", "documents"]
        ),
    )
    pipe.add_component("llm", FakeChat())
    pipe.connect("retriever.documents", "prompt_builder.documents")
    pipe.connect("prompt_builder.prompt", "llm.messages")
    return pipe


def bench(name: str, pipe: Pipeline, questions: list[str], rounds: int) -> dict[str, float]:
    recorder = RagmeterRecorder(pipe, generator="llm")
    plain: list[float] = []
    recorded: list[float] = []
    paired: list[float] = []
    for q in questions[:3]:  # warm up both paths
        data = {"retriever": {"query": q}, "prompt_builder": {"question": q}}
        pipe.run(data)
        recorder.run(data)
    for r in range(rounds):
        for i, q in enumerate(questions):
            data = {"retriever": {"query": q}, "prompt_builder": {"question": q}}
            order = (0, 1) if (i + r) % 2 == 0 else (1, 0)  # alternate who goes first
            pair = [0.0, 0.0]
            for side in order:
                t0 = time.perf_counter()
                if side == 0:
                    pipe.run(data)
                else:
                    recorder.run(data, sample_id=f"{r}:{i}")
                pair[side] = time.perf_counter() - t0
            plain.append(pair[0])
            recorded.append(pair[1])
            paired.append(pair[1] / pair[0])
    base, rec = statistics.median(plain), statistics.median(recorded)
    assert len(recorder) == rounds * len(questions) + 3
    # the recorder's own work on one captured result, without the pipeline (the sample is
    # built when read: that is timed apart, as ``build_us``)
    q = questions[0]
    data = {"retriever": {"query": q}, "prompt_builder": {"question": q}}
    result = pipe.run(data, include_outputs_from={"retriever", "llm"})
    n = 500
    fresh = RagmeterRecorder(pipe, generator="llm")
    t0 = time.perf_counter()
    for i in range(n):
        run = fresh._start(data, str(i), None, None, None, None)
        fresh._finish(run, result, None)
        fresh._restore(result, {"retriever"})
    own = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    built = fresh.drain()
    build = (time.perf_counter() - t0) / n
    assert len(built) == n
    row = {
        "plain_ms": base * 1e3,
        "recorded_ms": rec * 1e3,
        "ratio": rec / base,
        "paired_ratio": statistics.median(paired),
        "capture_us": own * 1e6,
        "build_us": build * 1e6,
    }
    print(
        f"{name:<10} plain {row['plain_ms']:8.3f} ms   recorded {row['recorded_ms']:8.3f} ms   "
        f"ratio {row['ratio']:.3f}   paired ratio {row['paired_ratio']:.3f}   "
        f"capture alone {row['capture_us']:6.1f} us ({own / base:.1%} of a plain run), "
        f"sample built on read {row['build_us']:6.1f} us"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    corpus, queries, _ = load_cranfield()
    questions = list(queries.values())[: args.queries]
    print(f"{len(questions)} queries x {args.rounds} rounds, median time per pipeline run")
    bench("cranfield", build(corpus, 10), questions, args.rounds)
    tiny = dict(list(corpus.items())[:20])
    bench("tiny", build(tiny, 5), questions, args.rounds)


if __name__ == "__main__":
    main()
