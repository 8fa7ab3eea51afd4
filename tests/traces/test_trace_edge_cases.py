"""What production traces throw at the reader: truncated spans, retried exports, remote
parents, repeated documents, nested LLM spans. Counted and reported, never a silent 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragmeter.traces._read as traces_read
from ragmeter.io.otel import TraceSpan
from ragmeter.traces import SpanProcessor, document_annotations, read
from ragmeter.traces._read import group_traces

TRACE = "0" * 31 + "1"
KIND = "openinference.span.kind"


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(
    span: int, parent: int | None, name: str, attrs: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    out = {
        "traceId": TRACE,
        "spanId": f"{span:016x}",
        "name": name,
        "startTimeUnixNano": str(span),
        "endTimeUnixNano": str(100 - span),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
        **extra,
    }
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
    return out


def _line(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def _docs(ids: list[str], prefix: str = "retrieval.documents", start: int = 0) -> dict[str, Any]:
    return {f"{prefix}.{start + i}.document.id": d for i, d in enumerate(ids)}


def _file(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


RUN = {KIND: "CHAIN", "input.value": "q?", "session.id": "q1"}


def test_a_ranking_cut_by_the_attribute_limit_is_counted_and_noted() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("run") as run:
        run.set_attribute(KIND, "CHAIN")
        with tracer.start_as_current_span("retrieve") as retrieve:
            retrieve.set_attribute(KIND, "RETRIEVER")
            for i in range(70):  # 140 document attributes: the first ones (the kind too) go
                retrieve.set_attribute(f"retrieval.documents.{i}.document.id", f"d{i}")
                retrieve.set_attribute(f"retrieval.documents.{i}.document.content", "x")
    traces = read(exporter.get_finished_spans())
    assert traces.counts["truncated_rankings"] == 1
    sample = traces.samples[0]
    assert sample.retrieved_ids is not None and sample.retrieved_ids[-1] == "d69"
    assert len(sample.retrieved_ids) < 70  # what the SDK kept, not a silent empty ranking
    assert any("ranking is incomplete" in e for e in sample.metadata["capture_errors"])
    assert "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT" in " ".join(traces.notes)


def test_a_ranking_with_missing_positions_keeps_its_documents_and_says_so(tmp_path: Path) -> None:
    retriever = _span(2, 1, "r", {KIND: "RETRIEVER", **_docs(["d5", "d6"], start=3)})
    traces = read(
        _file(tmp_path, _line(retriever, _span(1, None, "run", RUN))), join_key="session.id"
    )
    assert traces.samples[0].retrieved_ids == ["d5", "d6"]
    assert traces.counts["truncated_rankings"] == 1


def test_a_retried_export_and_two_roots_in_one_batch_are_read_once(tmp_path: Path) -> None:
    retriever = _span(2, 1, "r", {KIND: "RETRIEVER", **_docs(["d1", "d2"])})
    root = _span(1, None, "run", RUN)
    other = _span(3, None, "run", {**RUN, "session.id": "q2"})
    traces = read(
        _file(tmp_path, _line(retriever, root, root, retriever, other)), join_key="session.id"
    )
    assert sorted(s.id for s in traces.samples) == ["q1", "q2"]
    first = next(s for s in traces.samples if s.id == "q1")
    assert first.retrieved_ids == ["d1", "d2"] and [s.name for s in first.stages or ()] == [
        "r",
        "context",
    ]
    assert traces.counts["duplicate_spans"] == 2
    assert "2 spans were in the input twice" in " ".join(traces.notes)


def test_a_trace_begun_in_another_service_streams_from_its_local_root(tmp_path: Path) -> None:
    remote_flags = {"flags": 0x300}  # the parent's remoteness is known, and it is remote
    lines = [
        _line(
            _span(2, 1, "r", {KIND: "RETRIEVER", **_docs(["d1"])}),
            _span(1, 99, "run", RUN, **remote_flags),
        ),
    ]
    traces = read(_file(tmp_path, *lines), join_key="session.id")
    assert traces.samples[0].retrieved_ids == ["d1"]
    assert "no_root_span" not in traces.counts


def test_the_join_key_is_found_on_a_span_above_the_run(tmp_path: Path) -> None:
    http = _span(1, None, "GET /ask", {"session.id": "q9"})
    run = _span(2, 1, "run", {KIND: "CHAIN", "input.value": "q?"})
    retriever = _span(3, 2, "r", {KIND: "RETRIEVER", **_docs(["d1"])})
    traces = read(_file(tmp_path, _line(retriever, run, http)), join_key="session.id")
    assert [s.id for s in traces.samples] == ["q9"]


def test_tokens_of_nested_llm_spans_are_counted_once(tmp_path: Path) -> None:
    counts = {"llm.token_count.prompt": 100, "llm.token_count.completion": 20}
    outer = _span(2, 1, "ChatOpenAI", {KIND: "LLM", **counts})
    inner = _span(3, 2, "openai.chat", {KIND: "LLM", **counts})
    traces = read(_file(tmp_path, _line(inner, outer, _span(1, None, "run", RUN))))
    sample = traces.samples[0]
    assert (sample.input_tokens, sample.output_tokens) == (100, 20)


def test_repeated_documents_are_written_back_at_their_own_positions(tmp_path: Path) -> None:
    chunks = {
        f"retrieval.documents.{i}.document.metadata": json.dumps({"doc_id": d})
        for i, d in enumerate(["d1", "d1", "d2", "d3"])
    }
    chunks.update({f"retrieval.documents.{i}.document.content": f"chunk {i}" for i in range(4)})
    retriever = _span(2, 1, "r", {KIND: "RETRIEVER", **chunks})
    traces = read(
        _file(tmp_path, _line(retriever, _span(1, None, "run", RUN))),
        join_key="session.id",
        doc_id="metadata.doc_id",
    )
    assert traces.samples[0].retrieved_ids == ["d1", "d2", "d3"]
    frame = document_annotations(traces.samples, {"q1": {"d3": 2}})
    assert list(frame.document_position) == [0, 2, 3]
    assert list(frame.label) == ["unjudged", "unjudged", "relevant"]
    assert list(frame.score) == [None, None, 2.0]  # None, not NaN: the rows upload as JSON
    json.dumps(frame.to_dict("records"), allow_nan=False)


def test_a_trace_evicted_unfinished_is_counted_and_not_scored_half() -> None:
    provider = TracerProvider()
    processor = SpanProcessor(max_open_traces=1)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    first = tracer.start_span("run-a", attributes={KIND: "CHAIN"})
    with tracer.start_as_current_span("r-a", context=_context(first)) as r:
        r.set_attribute(KIND, "RETRIEVER")
    second = tracer.start_span("run-b", attributes={KIND: "CHAIN"})
    with tracer.start_as_current_span("r-b", context=_context(second)) as r:
        r.set_attribute(KIND, "RETRIEVER")
        r.set_attribute("retrieval.documents.0.document.id", "d1")
    first.end()  # its trace was dropped when the second one opened: ignored
    second.end()
    assert [s.retrieved_ids for s in processor.samples] == [["d1"]]
    assert processor.counts["dropped_traces"] == 1
    assert "dropped unfinished" in " ".join(processor.notes)


def _context(span: Any) -> Any:
    from opentelemetry import trace as otel_trace

    return otel_trace.set_span_in_context(span)


def test_a_malformed_span_names_the_span_and_the_field(tmp_path: Path) -> None:
    import pytest

    from ragmeter.errors import DataFormatError

    cases = [
        ({**_span(1, None, "run", RUN), "attributes": "oops"}, "'attributes' must be a list"),
        (
            {**_span(1, None, "run", RUN), "attributes": [{"value": {"stringValue": "x"}}]},
            "'attributes' must be",
        ),
        ({**_span(1, None, "run", RUN), "startTimeUnixNano": "abc"}, "startTimeUnixNano is 'abc'"),
        ({**_span(1, None, "run", RUN), "status": "ERROR"}, "'status' must be an object"),
    ]
    for bad, message in cases:
        path = _file(tmp_path, _line(bad))
        with pytest.raises(DataFormatError, match=rf"t\.jsonl:1: span 'run': {message}"):
            read(path)


def test_spans_whose_parent_was_not_exported_are_counted(tmp_path: Path) -> None:
    orphan = _span(2, 7, "r", {KIND: "RETRIEVER", **_docs(["d1"])})  # parent 7 is absent
    traces = read(_file(tmp_path, _line(orphan, _span(1, None, "run", RUN))))
    assert traces.counts["orphan_spans"] == 1
    assert "have a parent that is not in the input" in " ".join(traces.notes)


def test_no_run_to_score_says_what_was_read(tmp_path: Path) -> None:
    import pytest

    from ragmeter.errors import NoSamplesError

    empty = _file(tmp_path, "")
    with pytest.raises(NoSamplesError, match=r"no run to score: 0 traces were read \(is the input"):
        read(empty).evaluate_retrieval({"q1": {"d1": 1}})
    llm_only = _file(tmp_path, _line(_span(1, None, "llm", {KIND: "LLM"})))
    with pytest.raises(NoSamplesError, match="1 of them have no CHAIN or AGENT span"):
        read(llm_only).evaluate()


def test_retrievers_in_two_arms_of_a_parallel_step_are_listed_by_name_whatever_their_times(
    tmp_path: Path,
) -> None:
    """LangChain's RunnableParallel runs its arms side by side: which one ends first is the
    thread pool's, so (as the adapter does) they are ordered by name, never by time."""
    fork = _span(2, 1, "RunnableParallel<zeta,alpha>", {KIND: "CHAIN"})
    zeta = {**_span(3, 2, "zeta", {KIND: "RETRIEVER", **_docs(["d1"])}), "endTimeUnixNano": "10"}
    alpha = {
        **_span(4, 2, "alpha", {KIND: "RETRIEVER", **_docs(["d2"])}),
        "startTimeUnixNano": "20",  # starts after zeta ended: no overlap in time
        "endTimeUnixNano": "30",
    }
    traces = read(_file(tmp_path, _line(zeta, alpha, fork, _span(1, None, "run", RUN))))
    sample = traces.samples[0]
    assert [s.name for s in sample.stages or ()][:2] == ["alpha", "zeta"]
    assert sample.retrieved_ids is None  # two arms reach the end: no context, and it says so
    assert any("none can be identified" in e for e in sample.metadata["capture_errors"])


def test_late_spans_are_recognised_for_the_last_handed_on_traces_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A span of a trace handed on lately is counted late and dropped; the window is the
    last ``_DONE_KEPT`` traces, and a span of a trace older than that starts a trace of its
    own (no root: handed on at the end and counted)."""
    monkeypatch.setattr(traces_read, "_DONE_KEPT", 2)

    def span(trace: str, span_id: str, parent: str | None) -> TraceSpan:
        return TraceSpan(trace, span_id, parent, "s", {})

    batches = [
        [span("a", "1", None)],
        [span("b", "2", None), span("a", "3", "1")],  # late: a was handed on
        [span("c", "4", None)],  # a leaves the window (b, c are in it)
        [span("a", "5", "1"), span("b", "6", "2")],  # a again: a trace of its own; b late
    ]
    counts: dict[str, int] = {}
    grouped = [[s.span_id for s in group] for group in group_traces(batches, counts)]
    assert grouped == [["1"], ["2"], ["4"], ["5"]]
    assert counts == {"late_spans": 2, "no_root_span": 1}
