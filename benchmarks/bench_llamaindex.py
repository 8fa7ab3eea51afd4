"""Capture overhead of RagmeterEventHandler on a real LlamaIndex query engine (target: < 5%).

Runs the same queries through one ``VectorStoreIndex`` query engine (hashed bag-of-words
embedding, ``MockLLM``) in one process; each query runs under every configuration back to back, in
rotating order, so drift hits them alike:

* ``bare``      -- nothing attached (LlamaIndex still builds its events and spans);
* ``ragmeter``  -- ``RagmeterEventHandler`` attached (one RagSample per query);
* ``simple``    -- LlamaIndex's own ``SimpleSpanHandler`` attached, the built-in peer.

It reports the median per-query time of each and the median of its per-query ratio to
``bare`` (the same query, run seconds apart), for a corpus that makes retrieval cheap (so
any overhead shows) and the full 1,400-document one.

Run: python benchmarks/bench_llamaindex.py [--queries 40] [--rounds 5]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
import statistics
import time
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
from llama_index.core.llms import MockLLM
from llama_index.core.schema import TextNode
from ragmeter_llamaindex import RagmeterEventHandler

from ragmeter.datasets import load_cranfield


class HashEmbedding(BaseEmbedding):
    def _embed(self, text: str) -> list[float]:
        vec = [0.0] * 256
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % 256] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embed(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._embed(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed(text)


def _one(engine: Any, qid: str, text: str) -> float:
    start = time.perf_counter()
    with instrument_tags({"ragmeter_id": qid}):
        engine.query(text)
    return time.perf_counter() - start


def bench(n_docs: int, n_queries: int, rounds: int) -> dict[str, float]:
    """Median per-query seconds per configuration, and each one's median paired ratio to bare.

    Every query runs once per configuration back to back (the order rotating from query to
    query), so each ratio compares runs seconds apart; the median of those ratios is the
    reported overhead.
    """
    corpus, queries, _ = load_cranfield()
    docs = [(d, t) for d, t in corpus.items() if t.strip()][:n_docs]
    index = VectorStoreIndex(
        [TextNode(id_=d, text=t) for d, t in docs], embed_model=HashEmbedding()
    )
    engine = index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=5)
    qs = list(queries.items())[:n_queries]
    for qid, text in qs[:5]:  # warm-up
        _one(engine, qid, text)
    root = get_dispatcher()
    ragmeter = RagmeterEventHandler()
    simple = SimpleSpanHandler()
    spans_before = list(root.span_handlers)

    def attach(name: str) -> None:
        if name == "ragmeter":
            ragmeter.attach()
        elif name == "simple":
            root.add_span_handler(simple)

    def detach(name: str) -> None:
        if name == "ragmeter":
            ragmeter.detach()
        elif name == "simple":
            root.span_handlers = list(spans_before)

    names = ["bare", "ragmeter", "simple"]
    times: dict[str, list[float]] = {n: [] for n in names}
    ratios: dict[str, list[float]] = {n: [] for n in names}
    i = 0
    for _ in range(rounds):
        for qid, text in qs:
            took: dict[str, float] = {}
            for name in names[i % 3 :] + names[: i % 3]:
                attach(name)
                took[name] = _one(engine, qid, text)
                detach(name)
            i += 1
            for name in names:
                times[name].append(took[name])
                ratios[name].append(took[name] / took["bare"])
    if len(ragmeter) != rounds * len(qs):
        raise RuntimeError(f"captured {len(ragmeter)} samples, expected {rounds * len(qs)}")
    out = {name: statistics.median(times[name]) for name in names}
    out.update({f"{name}/bare": statistics.median(ratios[name]) for name in names})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for label, n_docs in (("cheap retrieval, 50 docs", 50), ("1,400 docs", 1400)):
        result = bench(n_docs, args.queries, args.rounds)
        print(f"{label}: {args.queries} queries x {args.rounds} rounds")
        for name in ("bare", "ragmeter", "simple"):
            print(
                f"  {name:<9} median {result[name] * 1000:8.3f} ms/query   "
                f"median paired ratio to bare x{result[name + '/bare']:.3f}"
            )


if __name__ == "__main__":
    main()
