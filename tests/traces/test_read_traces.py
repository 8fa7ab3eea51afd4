"""Traces read into samples (ragmeter.traces): the instrumentors' fixture files give what the
native adapters recorded for the same runs, stage by stage."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import ragmeter
from ragmeter.errors import DataFormatError, InvalidInputError
from ragmeter.io.otel import TraceSpan, iter_otlp_json
from ragmeter.traces import read

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"

FILES = [
    ("langchain", "basic", "basic.jsonl"),
    ("langchain", "hybrid", "hybrid.jsonl"),
    ("llamaindex", "basic", "basic.jsonl"),
    ("llamaindex", "basic", "basic.legacy.jsonl"),  # base64 ids, instrumentationLibrarySpans
    ("llamaindex", "rerank", "rerank.jsonl"),
    ("haystack", "basic", "basic.jsonl"),
    ("haystack", "basic", "basic.jsonl.gz"),
    ("haystack", "hybrid", "hybrid.jsonl"),
]

# The Haystack instrumentor records a component's class, not its name in the pipeline.
HAYSTACK_NAMES = {
    "retriever": "InMemoryBM25Retriever",
    "bm25_okapi": "InMemoryBM25Retriever",
    "bm25_plus": "InMemoryBM25Retriever#2",
    "joiner": "DocumentJoiner",
    "ranker": "LostInTheMiddleRanker",
}


def _expected(framework: str, variant: str) -> dict[str, Any]:
    native = json.loads((DATA / framework / "native.json").read_text(encoding="utf-8"))
    return dict(native[variant])


def _name(framework: str, name: str) -> str:
    return HAYSTACK_NAMES.get(name, name) if framework == "haystack" else name


@pytest.mark.parametrize(("framework", "variant", "file"), FILES, ids=lambda v: str(v))
def test_a_trace_file_reads_as_the_native_adapter_recorded_the_run(
    framework: str, variant: str, file: str
) -> None:
    traces = read(DATA / framework / file, join_key="session.id")
    expected = _expected(framework, variant)
    assert (
        sorted(s.id for s in traces.samples) == sorted(expected) == ["q1", "q2", "q3", "q4", "q5"]
    )
    for sample in traces.samples:
        want = expected[sample.id]
        assert sample.user_input == want["user_input"]
        assert sample.response == want["response"]
        assert sample.retrieved_ids == want["retrieved_ids"]
        got = [(s.name, s.kind, s.ids, s.inputs, s.same_as) for s in sample.stages or ()]
        assert got == [
            (
                _name(framework, s["name"]),
                s["kind"],
                s["ids"],
                [_name(framework, i) for i in s["inputs"]] if s.get("inputs") else None,
                _name(framework, s["same_as"]) if s.get("same_as") else None,
            )
            for s in want["stages"]
        ]
        assert sample.metadata["framework"] == framework
        assert len(sample.metadata["trace_id"]) == 32 and len(sample.metadata["span_id"]) == 16
        assert sample.latency_ms is not None and sample.latency_ms > 0
    assert traces.counts["traces"] == traces.counts["runs"] == traces.counts["joined"] == 5
    assert traces.notes == []


def test_hex_and_base64_ids_are_the_same_spans() -> None:
    hexed = list(iter_otlp_json(DATA / "llamaindex" / "basic.jsonl"))
    assert all(len(s.trace_id) == 32 for s in hexed)
    legacy = list(iter_otlp_json(DATA / "llamaindex" / "basic.legacy.jsonl"))
    assert len(legacy) == len(hexed) and all(len(s.span_id) == 16 for s in legacy)


def test_token_counts_and_model_come_from_the_llm_spans() -> None:
    sample = read(DATA / "haystack" / "basic.jsonl", join_key="session.id").samples[0]
    assert sample.input_tokens is not None and sample.input_tokens > 0
    assert sample.output_tokens is not None and sample.output_tokens > 0
    assert sample.metadata["model"] == "fake-rag-model"


def test_without_a_join_key_the_run_metadata_or_the_trace_id_names_the_sample() -> None:
    traces = read(DATA / "langchain" / "basic.jsonl")
    ids = [s.id for s in traces.samples]
    assert ids == [s.metadata["trace_id"] for s in traces.samples]
    joined = read(DATA / "langchain" / "basic.jsonl", join_key="metadata.query_id")
    assert sorted(s.id for s in joined.samples) == ["q1", "q2", "q3", "q4", "q5"]


def test_queries_join_runs_by_their_question_text() -> None:
    questions = {
        qid: sample["user_input"].upper() + "  "
        for qid, sample in _expected("llamaindex", "basic").items()
    }
    traces = read(DATA / "llamaindex" / "basic.jsonl", queries={**questions, "q9": "unasked"})
    assert sorted(s.id for s in traces.samples) == ["q1", "q2", "q3", "q4", "q5"]
    assert traces.counts["joined"] == 5 and traces.counts["not_joined"] == 0


# --------------------------------------------------------------------------- bad input


def _write(tmp_path: Path, lines: list[str], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_malformed_line_names_the_file_and_line(tmp_path: Path) -> None:
    good = (DATA / "langchain" / "basic.jsonl").read_text(encoding="utf-8").splitlines()[0]
    path = _write(tmp_path, [good, "", '{"resourceSpans": [ {"scopeSpans": '])
    with pytest.raises(DataFormatError, match=r"t\.jsonl:3: not valid JSON"):
        read(path)
    path = _write(tmp_path, [good, '{"spans": []}'])
    with pytest.raises(DataFormatError, match=r"t\.jsonl:2: not an OTLP TracesData object"):
        read(path)
    bad_id = json.dumps(
        {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz", "spanId": "1"}]}]}]}
    )
    path = _write(tmp_path, [bad_id])
    with pytest.raises(
        DataFormatError, match=r"t\.jsonl:1: span \(no name\): traceId 'xyz' is neither 32 hex"
    ):
        read(path)
    with pytest.raises(FileNotFoundError):
        read(tmp_path / "absent.jsonl")
    with pytest.raises(InvalidInputError, match="doc_id must be"):
        read(DATA / "langchain" / "basic.jsonl", doc_id="meta.doc_id")


def test_a_truncated_gzip_file_is_an_error_not_fewer_traces(tmp_path: Path) -> None:
    whole = (DATA / "haystack" / "basic.jsonl.gz").read_bytes()
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataFormatError, match=r"truncated|corrupt"):
        read(path)
    assert len(gzip.decompress(whole).splitlines()) == 5


def _span(
    name: str,
    kind: str,
    span_id: str,
    parent: str | None,
    start: int,
    end: int,
    **attributes: Any,
) -> TraceSpan:
    attrs = {"openinference.span.kind": kind, **attributes}
    return TraceSpan(
        "0" * 31 + "1",
        span_id.rjust(16, "0"),
        parent and parent.rjust(16, "0"),
        name,
        attrs,
        start,
        end,
    )


def _docs(*ids: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, doc in enumerate(ids):
        out[f"retrieval.documents.{i}.document.id"] = doc
        out[f"retrieval.documents.{i}.document.content"] = f"text of {doc}"
    return out


def test_problems_are_counted_and_reported_never_silently_scored() -> None:
    spans = [  # trace 1: two retrievers side by side and nothing says which reached the LLM
        _span("a", "RETRIEVER", "2", "1", 10, 20, **_docs("d1", "d2")),
        _span("b", "RETRIEVER", "3", "1", 12, 22, **_docs("d2", "d3")),
        _span("run", "CHAIN", "1", None, 0, 30, **{"input.value": "q?", "session.id": "q1"}),
    ]
    lonely = [  # trace 2: an LLM call with no run span around it
        TraceSpan(
            "0" * 31 + "2",
            "9".rjust(16, "0"),
            None,
            "llm",
            {"openinference.span.kind": "LLM"},
            0,
            1,
        )
    ]
    no_retriever = [  # trace 3: a run that retrieved nothing
        TraceSpan(
            "0" * 31 + "3",
            "8".rjust(16, "0"),
            None,
            "chain",
            {"openinference.span.kind": "CHAIN", "input.value": "hi", "session.id": "q2"},
            0,
            1,
        )
    ]
    unjoined = [  # trace 4: a run without the join key, with a document without an id
        TraceSpan(
            "0" * 31 + "4",
            "7".rjust(16, "0"),
            "6".rjust(16, "0"),
            "r",
            {"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": "x"},
            1,
            2,
        ),
        TraceSpan(
            "0" * 31 + "4",
            "6".rjust(16, "0"),
            None,
            "chain",
            {"openinference.span.kind": "CHAIN", "input.value": "hello"},
            0,
            3,
        ),
    ]
    traces = read([*spans, *lonely, *no_retriever, *unjoined], join_key="session.id")
    assert traces.counts == {
        "traces": 4,
        "runs": 3,
        "no_run": 1,
        "no_retriever": 1,
        "hashed_doc_ids": 1,
        "joined": 2,
        "not_joined": 1,
    }
    first = next(s for s in traces.samples if s.id == "q1")
    assert first.retrieved_ids is None
    assert any("none can be identified" in e for e in first.metadata["capture_errors"])
    report = traces.evaluate_retrieval({"q1": {"d1": 1}, "q2": {"d9": 1}}, k_values=(10,))
    text = "\n".join(report.warnings)
    assert "1 of 4 traces have no CHAIN or AGENT span" in text
    assert "1 of 3 runs have no retriever span" in text
    assert "1 retrieved documents carry no document.id" in text
    assert "1 of 3 runs matched no query id" in text
    assert report.extra["traces"] == traces.counts
    assert report.extra["capture"]["no_context"] == 1  # the adapters' own count and warning
    assert "none can be identified" in text


def test_ragmeter_evaluate_rag_scores_samples_read_from_traces() -> None:
    traces = read(DATA / "llamaindex" / "basic.jsonl", join_key="session.id")
    report = traces.evaluate(metrics=["non_empty_rate", "latency_ms", "total_tokens"])
    assert report.metrics["non_empty_rate"] == 1.0
    assert report.extra["traces"]["runs"] == 5
    again = ragmeter.evaluate_rag(list(traces.samples), metrics=["non_empty_rate"])
    assert again.metrics["non_empty_rate"] == 1.0


def test_ragmeter_evaluate_retrieval_scores_traces_as_their_own_method() -> None:
    traces = read(DATA / "haystack" / "hybrid.jsonl", join_key="session.id")
    qrels = {
        "q1": {"d1": 2, "d2": 1},
        "q2": {"d4": 2},
        "q3": {"d7": 1},
        "q4": {"d19": 2},
        "q5": {"d16": 1},
    }
    own = traces.evaluate_retrieval(qrels, k_values=(5,))
    top = ragmeter.evaluate_retrieval(traces, qrels, k_values=(5,))
    assert top.metrics == own.metrics and top.extra["traces"] == traces.counts
    plain = ragmeter.evaluate_retrieval(list(traces.samples), qrels, k_values=(5,))
    assert plain.per_query == own.per_query
    with pytest.raises(InvalidInputError, match="queries=, limit= and doc_id= are for a retriever"):
        ragmeter.evaluate_retrieval(traces, qrels, {"q1": "text"})
    with pytest.raises(InvalidInputError, match="a retriever needs the qrels and the queries"):
        ragmeter.evaluate_retrieval(lambda q: [], qrels)


def test_reading_traces_needs_no_framework_and_the_span_processor_names_its_extra() -> None:
    import subprocess
    import sys

    code = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top in ("opentelemetry", "openinference", "haystack", "langchain_core", "llama_index"):
            raise ImportError("blocked " + name)
sys.meta_path.insert(0, Block())
import ragmeter.traces as T
traces = T.read({str(DATA / "langchain" / "basic.jsonl")!r}, join_key="session.id")
print(len(traces.samples))
try:
    T.SpanProcessor
except Exception as exc:
    print(type(exc).__name__, exc)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == "5"
    assert out[1].startswith("MissingDependencyError") and "ragmeter[otel]" in out[1]


@pytest.mark.parametrize("doc_id", [None, "content"])
def test_a_reranker_names_the_stage_it_reranked_whatever_the_doc_id_rule(
    doc_id: str | None,
) -> None:
    """With ``doc_id="content"`` every id is a hash of the text; the reranker's input
    documents are known by the same hashes, so it still names the retriever it reranked."""
    sample = read(DATA / "llamaindex" / "rerank.jsonl", doc_id=doc_id).samples[0]
    stages = {stage.name: stage for stage in sample.stages or ()}
    assert stages["OverlapRerank"].inputs == ["BM25Retriever"]
    assert stages["OverlapRerank"].ids == sample.retrieved_ids
