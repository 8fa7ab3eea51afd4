"""Benchmark: what RagmeterCallbackHandler adds to a LangChain chain's invocation.

Target (issue 5): under 5% of the chain's own time, or under 100 µs per captured sample.

A trivial RAG-shaped LCEL chain (a retriever returning 4 fixed documents -> a
``ChatPromptTemplate`` -> ``GenericFakeChatModel`` -> ``StrOutputParser``: five runs per
invocation, no real work) is invoked in one process with four callback setups, interleaved
round by round so all see the same machine:

* **none**: no callbacks (the chain's own time);
* **noop handler**: a ``BaseCallbackHandler`` that does nothing (LangChain's own cost of
  dispatching events to any handler);
* **ragmeter**: ``RagmeterCallbackHandler`` (capture + one ``RagSample`` per invocation);
* **noop tracer**: a ``BaseTracer`` that builds LangChain's ``Run`` tree and drops it (what
  tracer-based instrumentation such as LangSmith/OpenInference starts from).

Setups alternate in small blocks so a shared machine's drift hits all of them; the report
gives each setup's best block (least disturbed) and median block per invocation, both as
ratios to **none**. Then the handler's own work per captured sample is timed without
LangChain: the events of one invocation, recorded once, are replayed to a fresh handler
(best of 7 x 500). A real retriever and LLM call (milliseconds to seconds) shrink every
ratio.

    python benchmarks/bench_langchain.py                       # 40 blocks x 20 invocations
    python benchmarks/bench_langchain.py --blocks 100 --block 50
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnablePassthrough
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from ragmeter_langchain import RagmeterCallbackHandler

DOCS = [Document(f"document {i} about wings and lift", id=f"d{i}") for i in range(4)]


class FixedRetriever(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return DOCS


class NoopTracer(BaseTracer):
    def _persist_run(self, run: Run) -> None:
        pass


def build_chain() -> Runnable[Any, str]:
    prompt = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{question}")])
    llm = GenericFakeChatModel(messages=itertools.repeat(AIMessage("lift comes from the wing")))
    return (
        {"context": FixedRetriever(), "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )


def time_block(chain: Runnable[Any, str], config: Any, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        chain.invoke(f"question {i}", config=config)
    return (time.perf_counter() - start) / n


class _Recorder(BaseCallbackHandler):
    """Records the events LangChain sends for one invocation, to replay them to a handler."""

    def __init__(self) -> None:
        self.events: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("on_"):
            events = object.__getattribute__(self, "events")
            return lambda *a, **k: events.append((name, a, k))
        return object.__getattribute__(self, name)


def handler_cost(chain: Runnable[Any, str], n: int, repeats: int) -> float:
    """Seconds the handler itself spends per captured sample: the recorded events of one
    invocation replayed to it ``n`` times (no LangChain dispatch); the best of ``repeats``."""
    recorder = _Recorder()
    chain.invoke("question", config={"callbacks": [recorder]})
    events = [(name, a, k) for name, a, k in recorder.events if name != "on_llm_new_token"]
    handler = RagmeterCallbackHandler(max_samples=n)
    calls = [(getattr(handler, name), a, k) for name, a, k in events]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            for method, a, k in calls:
                method(*a, **k)
        best = min(best, (time.perf_counter() - start) / n)
    if handler.open_runs or len(handler) != n:
        raise RuntimeError("the replayed events did not produce one sample per invocation")
    return best


def main(blocks: int = 40, block: int = 20) -> dict[str, float]:
    chain = build_chain()
    handler = RagmeterCallbackHandler(max_samples=1000)
    setups: dict[str, Any] = {
        "none": lambda: None,
        "noop handler": lambda: {"callbacks": [BaseCallbackHandler()]},
        "ragmeter": lambda: {"callbacks": [handler]},
        "noop tracer": lambda: {"callbacks": [NoopTracer()]},
    }
    for make in setups.values():  # warm up imports and caches
        time_block(chain, make(), 20)
    times: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(blocks):  # interleaved in small blocks: a shared machine's drift hits all
        for name, make in setups.items():
            times[name].append(time_block(chain, make(), block))
    if handler.open_runs:
        raise RuntimeError("runs left open")
    best = {name: min(ts) for name, ts in times.items()}
    med = {name: statistics.median(ts) for name, ts in times.items()}
    own = handler_cost(chain, 500, 7)

    print(
        f"LangChain handler overhead: {blocks} interleaved blocks of {block} invocations "
        "(best block and median block, per invocation)"
    )
    print(f"{'setup':<14} {'best µs':>9} {'vs none':>8} {'median µs':>10} {'vs none':>8}")
    for name in setups:
        print(
            f"{name:<14} {best[name] * 1e6:>9.1f} {best[name] / best['none']:>8.3f} "
            f"{med[name] * 1e6:>10.1f} {med[name] / med['none']:>8.3f}"
        )
    print(
        f"ragmeter's own work per captured sample (events replayed, no dispatch): "
        f"{own * 1e6:.1f} µs = {own / best['none']:.1%} of the chain's own best time"
    )
    return {"own": own, **{f"best {k}": v for k, v in best.items()}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=40, help="interleaved blocks per setup")
    parser.add_argument("--block", type=int, default=20, help="invocations per block")
    args = parser.parse_args()
    main(args.blocks, args.block)
