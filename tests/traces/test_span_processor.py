"""ragmeter.traces.SpanProcessor: a live instrumented app captured with no ragmeter adapter,
scored exactly as the native adapter scores the same runs."""

from __future__ import annotations

import threading

import pytest

from ragmeter.evaluation.captured import evaluate_captured
from ragmeter.traces import SpanProcessor

from ._pipelines import QRELS, QUERIES, VARIANTS, instrumented, make_provider, pipeline, run

CASES = [(fw, v) for fw, variants in VARIANTS.items() for v in variants]


@pytest.mark.parametrize(("framework", "variant"), CASES, ids=lambda v: str(v))
def test_a_live_app_is_captured_with_capture_scopes_and_scored_as_natively(
    framework: str, variant: str
) -> None:
    provider, _ = make_provider()
    processor = SpanProcessor()
    provider.add_span_processor(processor)
    ask = pipeline(framework, variant)
    with instrumented(framework, provider):
        for qid, question in QUERIES.items():
            with processor.capture(id=qid, relevance=QRELS[qid]):
                ask(question)
    provider.shutdown()
    assert sorted(s.id for s in processor.samples) == sorted(QUERIES)
    assert all(
        s.relevance == {k: float(v) for k, v in QRELS[s.id].items()} for s in processor.samples
    )
    _, native = run(framework, variant=variant, adapter=True)
    ours = processor.evaluate_retrieval(k_values=(5, 10))  # judged by the scopes' relevance
    theirs = evaluate_captured(native, QRELS, k_values=(5, 10))
    assert ours.per_query == theirs.per_query
    assert ours.extra["traces"]["runs"] == 5
    drained = processor.drain()
    assert len(drained) == 5 and len(processor.samples) == 0


def test_scopes_of_other_threads_and_other_processors_do_not_cross() -> None:
    provider, _ = make_provider()
    mine, other = SpanProcessor(), SpanProcessor()
    provider.add_span_processor(mine)
    provider.add_span_processor(other)
    ask = pipeline("langchain")
    errors: list[BaseException] = []

    def work(qid: str) -> None:
        try:
            with mine.capture(id=qid):
                ask(QUERIES[qid])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with instrumented("langchain", provider):
        threads = [threading.Thread(target=work, args=(q,)) for q in QUERIES]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    got = {s.id: s.user_input for s in mine.samples}
    assert got == QUERIES
    assert all(s.id not in QUERIES for s in other.samples)  # not its scope: trace ids
    assert len(other.samples) == 5


def test_a_trace_it_cannot_convert_is_counted_not_raised_into_the_app() -> None:
    provider, _ = make_provider()
    processor = SpanProcessor(question_key="data.query")
    provider.add_span_processor(processor)
    broken = processor._conversion  # a conversion option that fails on any run
    broken.root_kinds = None  # type: ignore[assignment]
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("run") as span:
        span.set_attribute("openinference.span.kind", "CHAIN")
    assert processor.counts["failed"] == 1
    assert len(processor.samples) == 0


def test_a_trace_that_began_in_another_service_ends_with_this_services_root() -> None:
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    provider, _ = make_provider()
    processor = SpanProcessor()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    context = otel_trace.set_span_in_context(NonRecordingSpan(remote))
    with (
        processor.capture(id="q7"),
        tracer.start_as_current_span("run", context=context) as run_span,
    ):
        run_span.set_attribute("openinference.span.kind", "CHAIN")
        run_span.set_attribute("input.value", "a question")
        with tracer.start_as_current_span("retrieve") as retrieve:
            retrieve.set_attribute("openinference.span.kind", "RETRIEVER")
            retrieve.set_attribute("retrieval.documents.0.document.id", "d1")
    assert [(s.id, s.retrieved_ids) for s in processor.samples] == [("q7", ["d1"])]


def test_two_runs_under_one_remote_parent_are_two_samples_with_their_own_ids() -> None:
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    provider, _ = make_provider()
    processor = SpanProcessor()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    parent = otel_trace.set_span_in_context(NonRecordingSpan(remote))
    runs = []
    for qid, doc in (("qa", "da"), ("qb", "db")):  # both start before either ends
        with processor.capture(id=qid):
            run_span = tracer.start_span("run", context=parent)
        run_span.set_attribute("openinference.span.kind", "CHAIN")
        runs.append((run_span, doc))
    for run_span, doc in runs:
        with tracer.start_as_current_span(
            "retrieve", context=otel_trace.set_span_in_context(run_span)
        ) as retrieve:
            retrieve.set_attribute("openinference.span.kind", "RETRIEVER")
            retrieve.set_attribute("retrieval.documents.0.document.id", doc)
    for run_span, _ in runs:
        run_span.end()
    got = sorted((s.id, s.retrieved_ids) for s in processor.samples)
    assert got == [("qa", ["da"]), ("qb", ["db"])]
