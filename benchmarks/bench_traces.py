"""Reading production traces: ``ragmeter.traces`` against ``json.loads`` over the same lines.

Generates an OTLP/JSON lines file of N traces (one line per trace, 5 spans each, as the
OpenTelemetry Collector's file exporter writes them: a CHAIN run, a RETRIEVER span with 10
documents, a RERANKER span with 5, an LLM span, and a CHAIN step) in a temp dir, then times,
in one process, best of ``--repeat`` rounds in which they take turns:

* ``json.loads`` over every line (the floor: any reader parses the JSON);
* ``ragmeter.traces.read`` (spans -> traces -> runs, kept in a store as compact records);
* ``ragmeter.traces.iter_samples`` (the same, each run built into a ``RagSample`` and
  dropped: constant memory), with its peak traced memory.

Run::

    python benchmarks/bench_traces.py                  # 100,000 traces
    python benchmarks/bench_traces.py --traces 10000   # quicker
    python benchmarks/bench_traces.py --chunk-chars 800 # documents of a typical chunk's size

Two timings, both CPU time of the same lines:

* **whole file**: each reader over the whole file, best of ``--repeat`` rounds;
* **alternating slices** (``--slice``, 1,000 traces by default): the file cut into slices,
  and on each slice the readers run one after the other, in an order that rotates. The sums
  over all slices are compared, and the median of the per-slice ratios is printed. This
  machine's speed swings by +-40% from minute to minute (other VMs on the host); a reader
  timed a minute after another can look 1.6x or 2.9x as slow. Slices a tenth of a second
  long put every reader under the same swings, so the ratio is steady from run to run.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import random
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragmeter.traces import iter_samples, read


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def _span(
    trace: str, span: str, parent: str, name: str, start: int, attrs: dict[str, Any]
) -> dict[str, Any]:
    return {
        "traceId": trace,
        "spanId": span,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1_000_000),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
        "status": {"code": 1},
    }


CHUNK_CHARS = [120]
"""How long each document's text is (``--chunk-chars``)."""


def _documents(prefix: str, docs: list[int], rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, doc in enumerate(docs):
        out[f"{prefix}.{i}.document.id"] = f"d{doc}"
        out[f"{prefix}.{i}.document.score"] = round(rng.random() * 20, 4)
        text = f"text of document {doc} " * (CHUNK_CHARS[0] // 20 + 1)
        out[f"{prefix}.{i}.document.content"] = text[: CHUNK_CHARS[0]]
    return out


def make_file(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for t in range(n):
            trace = f"{t:032x}"
            ids = [f"{t * 8 + i + 1:016x}" for i in range(5)]
            docs = rng.sample(range(1, 5000), 10)
            question = f"question number {t} about topic {rng.randrange(100)}?"
            spans = [
                _span(
                    trace,
                    ids[1],
                    ids[0],
                    "retriever",
                    10,
                    {
                        "openinference.span.kind": "RETRIEVER",
                        "input.value": question,
                        **_documents("retrieval.documents", docs, rng),
                    },
                ),
                _span(
                    trace,
                    ids[2],
                    ids[0],
                    "reranker",
                    20,
                    {
                        "openinference.span.kind": "RERANKER",
                        "reranker.query": question,
                        **_documents("reranker.input_documents", docs, rng),
                        **_documents("reranker.output_documents", docs[:5], rng),
                    },
                ),
                _span(
                    trace,
                    ids[3],
                    ids[0],
                    "llm",
                    30,
                    {
                        "openinference.span.kind": "LLM",
                        "llm.model_name": "m",
                        "llm.token_count.prompt": 300,
                        "llm.token_count.completion": 20,
                        "llm.output_messages.0.message.content": "an answer " * 5,
                    },
                ),
                _span(
                    trace,
                    ids[4],
                    ids[0],
                    "parser",
                    40,
                    {"openinference.span.kind": "CHAIN", "input.value": "x", "output.value": "y"},
                ),
                _span(
                    trace,
                    ids[0],
                    "",
                    "rag",
                    0,
                    {
                        "openinference.span.kind": "CHAIN",
                        "input.value": question,
                        "output.value": "an answer " * 5,
                        "session.id": f"q{t}",
                    },
                ),
            ]
            line = {
                "resourceSpans": [
                    {
                        "resource": {"attributes": [_attr("service.name", "rag")]},
                        "scopeSpans": [
                            {
                                "scope": {"name": "openinference.instrumentation.langchain"},
                                "spans": spans,
                            }
                        ],
                    }
                ]
            }
            fh.write(json.dumps(line) + "\n")


def interleaved(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Each function's best CPU time over ``repeat`` rounds, the functions taking turns in
    each round (a slow spell of a shared machine then falls on all of them alike)."""
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            start = time.process_time()
            fn()
            best[name] = min(best[name], time.process_time() - start)
    return best


def cut(path: Path, lines_per_slice: int) -> list[Path]:
    """The file cut into slices of ``lines_per_slice`` lines (one trace a line), beside it."""
    slices: list[Path] = []
    with path.open("rb") as fh:
        batch: list[bytes] = []
        for line in fh:
            batch.append(line)
            if len(batch) == lines_per_slice:
                slices.append(_write_slice(path, len(slices), batch))
                batch = []
        if batch:
            slices.append(_write_slice(path, len(slices), batch))
    return slices


def _write_slice(path: Path, number: int, lines: list[bytes]) -> Path:
    out = path.with_name(f"{path.stem}.{number:05d}{path.suffix}")
    out.write_bytes(b"".join(lines))
    return out


def alternating(
    fns: dict[str, Callable[[Path], Any]], slices: list[Path]
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Each function's CPU time summed over the slices, run one after the other on each
    slice (the order rotating from slice to slice), and its time on each slice."""
    names = list(fns)
    per_slice: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    for i, piece in enumerate(slices):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            start = time.process_time()
            fns[name](piece)
            per_slice[name].append(time.process_time() - start)
    return {name: sum(times) for name, times in per_slice.items()}, per_slice


def floor(path: Path) -> None:
    """``json.loads`` over every line of ``path``: the floor any reader stands on."""
    with path.open("rb") as fh:
        for line in fh:
            json.loads(line)


def stored(path: Path) -> None:
    read(path, join_key="session.id")


def streamed(path: Path) -> None:
    for _ in iter_samples(path, join_key="session.id"):
        pass


READERS: dict[str, Callable[[Path], Any]] = {
    "floor": floor,
    "stored": stored,
    "streamed": streamed,
}
LABELS = (
    ("traces.read (store of records)", "stored"),
    ("traces.iter_samples (RagSample)", "streamed"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--slice", type=int, default=1000, help="traces per slice for the alternating timing"
    )
    parser.add_argument(
        "--chunk-chars", type=int, default=120, help="length of each document's text"
    )
    args = parser.parse_args()
    CHUNK_CHARS[0] = args.chunk_chars
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traces.jsonl"
        make_file(path, args.traces)
        size = os.path.getsize(path)
        print(
            f"{args.traces:,} traces x 5 spans, documents of {args.chunk_chars} characters, "
            f"{size / 2**20:.0f} MiB; OTLP/JSON decoded with "
            + (
                "json (RAGMETER_OTLP_JSON=1)"
                if os.environ.get("RAGMETER_OTLP_JSON")
                else "msgspec if installed (ragmeter[otel])"
            )
        )

        times = interleaved(
            {k: functools.partial(f, path) for k, f in READERS.items()}, args.repeat
        )
        base = times["floor"]
        print(f"whole file, best of {args.repeat}:")
        print(f"json.loads over the lines        {base:7.2f} s CPU   1.00x")
        for label, key in LABELS:
            t = times[key]
            print(f"{label:32} {t:7.2f} s CPU   {t / base:.2f}x json.loads")

        slices = cut(path, args.slice)
        sums, per_slice = alternating(READERS, slices)
        print(
            f"alternating slices of {args.slice:,} traces ({len(slices)} slices): "
            f"json.loads {sums['floor']:.2f} s CPU"
        )
        for label, key in LABELS:
            ratios = [t / f for t, f in zip(per_slice[key], per_slice["floor"], strict=True)]
            quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            print(
                f"{label:32} {sums[key]:7.2f} s CPU   {sums[key] / sums['floor']:.2f}x json.loads"
                f"   (per slice: median {quartiles[1]:.2f}x, "
                f"quartiles {quartiles[0]:.2f}-{quartiles[2]:.2f}x)"
            )
        for piece in slices:
            piece.unlink()
        tracemalloc.start()
        streamed(path)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"iter_samples peak traced memory: {peak / 2**20:.1f} MiB (file {size / 2**20:.0f} MiB)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
