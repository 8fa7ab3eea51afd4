"""What the tracer records is what the pipeline did, at the times it ran: reading the samples
long after the run, or the caller reordering the documents it got back, changes nothing."""

# No `from __future__ import annotations` here: Haystack reads a component's socket types
# from its real (not string) annotations.
import time
from typing import Any

from haystack import Document, Pipeline, component
from ragmeter_haystack import RagmeterTracer


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
        result["retriever"]["documents"].reverse()  # before the samples are read
        result["retriever"]["documents"].clear()
        [sample] = tracer.samples
    assert len(returned) == 10
    assert sample.retrieved_ids == returned
    assert [s.ids for s in sample.stages if s.name == "retriever"] == [returned]
