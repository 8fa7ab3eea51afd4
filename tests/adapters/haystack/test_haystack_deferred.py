"""The tracer keeps references while a pipeline runs and interprets finished runs later (in
batches, or when its samples are read): what it records must be what live capture records,
at the times the pipeline ran, whatever the caller does with the results meanwhile."""

# No `from __future__ import annotations` here: Haystack reads a component's socket types
# from its real (not string) annotations.
import time
from typing import Any

from haystack import Document, Pipeline, component
from ragmeter_haystack import RagmeterTracer
from ragmeter_haystack._tracer import BACKLOG

from ragmeter.capture import BACKLOG_SIZE


@component
class SlowRetriever:
    """Returns fixed documents after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    @component.output_types(documents=list[Document])
    def run(self, query: str) -> dict[str, Any]:
        time.sleep(self.delay)
        return {"documents": [Document(id=f"d{i}", content=f"text {i} {query}") for i in range(5)]}


def test_latencies_are_the_runs_own_not_when_they_were_read() -> None:
    pipe = Pipeline()
    pipe.add_component("retriever", SlowRetriever(0.03))
    with RagmeterTracer() as tracer:
        pipe.run({"retriever": {"query": "wings"}})
        time.sleep(0.2)  # read long after the run
        [sample] = tracer.samples
    assert 30 <= sample.latency_ms < 150
    [stage] = [s for s in sample.stages if s.name == "retriever"]
    assert stage.latency_ms is not None and 30 <= stage.latency_ms < 150


def test_the_caller_reordering_the_returned_documents_changes_nothing(
    rag: Pipeline, rag_input: Any
) -> None:
    with RagmeterTracer() as tracer:
        result = rag.run(rag_input("lift of wings"), include_outputs_from={"retriever"})
        returned = [d.id for d in result["retriever"]["documents"]]
        result["retriever"]["documents"].reverse()  # before the run was interpreted
        result["retriever"]["documents"].clear()
        [sample] = tracer.samples
    assert len(returned) == 10
    assert sample.retrieved_ids == returned
    assert [s.ids for s in sample.stages if s.name == "retriever"] == [returned]


def test_unread_runs_are_interpreted_in_batches(rag: Pipeline, rag_input: Any) -> None:
    BACKLOG.settle()
    with RagmeterTracer() as tracer:
        for i in range(BACKLOG_SIZE + 5):
            with tracer.capture(id=f"q{i}"):
                rag.run(rag_input("lift of wings"))
        # the 64th run interpreted the batch; the 5 after it still wait (references only)
        assert len(BACKLOG) == 5
        assert len(tracer.store._items) == BACKLOG_SIZE  # no read: the store's own list
        ids = [s.id for s in tracer.samples]  # a read interprets the rest
    assert len(BACKLOG) == 0
    assert ids == [f"q{i}" for i in range(BACKLOG_SIZE + 5)]
