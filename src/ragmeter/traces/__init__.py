"""Evaluate the traces you already collect: OpenTelemetry / OpenInference spans as samples.

Teams that run RAG in production trace it with the OpenInference instrumentors
(``openinference-instrumentation-langchain``, ``-llama-index``, ``-haystack``) and export to
files, Arize Phoenix or Langfuse. :func:`read` turns those traces into
:class:`~ragmeter.schema.RagSample` objects with the native adapters' rules (one sample per
top-level CHAIN/AGENT span; stages from RETRIEVER and RERANKER spans; ``context`` = what
reached the LLM), so trec_eval-exact retrieval metrics and the offline answer metrics run
on production traffic::

    traces = ragmeter.traces.read("traces.jsonl", join_key="metadata.query_id")
    report = traces.evaluate_retrieval(qrels)          # trec_eval's numbers
    rag = traces.evaluate()                            # evaluate_rag's metrics
    frame = ragmeter.traces.span_annotations(report, traces.samples)  # back to Phoenix

Readers live in :mod:`ragmeter.io.otel` (OTLP/JSON files, Phoenix exports, SDK spans); the
conversion rules in :mod:`ragmeter.traces._convert`. No framework is imported.
"""

from __future__ import annotations

from typing import Any

from ragmeter.traces._convert import normalise
from ragmeter.traces._read import TraceSamples, iter_samples, read, spans_of
from ragmeter.traces._writeback import annotation_records, document_annotations, span_annotations

__all__ = [
    "SpanProcessor",
    "TraceSamples",
    "annotation_records",
    "document_annotations",
    "iter_samples",
    "normalise",
    "read",
    "span_annotations",
    "spans_of",
]


def __getattr__(name: str) -> Any:
    if name == "SpanProcessor":  # needs opentelemetry-sdk (ragmeter[otel]); loaded on use
        try:
            from ragmeter.traces._processor import SpanProcessor
        except ImportError as exc:
            from ragmeter.errors import MissingDependencyError

            raise MissingDependencyError("opentelemetry-sdk", "otel") from exc
        return SpanProcessor
    raise AttributeError(f"module 'ragmeter.traces' has no attribute {name!r}")
