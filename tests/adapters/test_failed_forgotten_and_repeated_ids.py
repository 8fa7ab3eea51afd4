"""No silent wrong number from captured samples: failed runs, forgotten ids and repeated ids,
in all three frameworks, each driven for real (in-memory stores, offline).

Every adapter scores its captured samples through :class:`ragmeter.capture.SampleStore`, so
the rules and the option names are the same everywhere:

* ``evaluate_retrieval(qrels, missing_queries=..., failed_queries=...)``;
* a sample whose run failed before anything was retrieved is reported apart
  (``report.extra["capture"]["failed"]`` and a warning) and scored 0 or left out;
* no (or few) captured sample ids / retrieved doc ids in the qrels is refused or warned
  about, naming the option of *that* framework which fixes it;
* two samples with one id are both scored, as ``id`` and ``id#2``, judged by ``id``'s qrels.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_run

DOCS = {
    "d1": "wing flutter at high speed",
    "d2": "heat transfer in a nozzle",
    "d3": "boundary layer transition on a flat plate",
    "d4": "shock waves over a wedge at high mach number",
}
# Every document is relevant to every query (graded), so each captured ranking scores > 0
# whatever order a retriever returns, and a failed (empty) one scores 0.
GRADES = {"d1": 3, "d2": 1, "d3": 2, "d4": 1}
QUERIES = {
    f"q{i}": text
    for i, text in enumerate(
        [
            "wing flutter",
            "nozzle heat",
            "flat plate transition",
            "wedge shock",
            "high speed wing",
            "mach number",
            "boundary layer",
            "heat transfer",
        ],
        start=1,
    )
}
QRELS = {q: dict(GRADES) for q in QUERIES}
FAIL = "FAIL"  # a query containing this raises inside the pipeline

# What a run is: (sample id or None, query text)
Runs = Sequence[tuple[str | None, str]]


# -- one real pipeline per framework -------------------------------------------------------


def _langchain(runs: Runs, *, good_doc_ids: bool = True) -> Any:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda
    from ragmeter_langchain import RagmeterCallbackHandler

    class Retriever(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            if FAIL in query:
                raise ValueError("index offline")
            words = set(query.split())
            best = sorted(DOCS, key=lambda d: (-len(words & set(DOCS[d].split())), d))[:2]
            # good_doc_ids=False: documents without any id (their id becomes a content hash)
            return [Document(DOCS[d], id=d if good_doc_ids else None) for d in best]

    chain = Retriever() | RunnableLambda(lambda docs: docs[0].page_content)
    handler = RagmeterCallbackHandler()
    for sid, text in runs:
        config: dict[str, Any] = {"callbacks": [handler]}
        if sid is not None:
            config["metadata"] = {"ragmeter_id": sid}
        with contextlib.suppress(ValueError):  # the handler records it; the caller sees it
            chain.invoke(text, config=config)
    return handler


def _haystack(runs: Runs, *, good_doc_ids: bool = True) -> Any:
    from haystack import Document, Pipeline, component
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from ragmeter_haystack import RagmeterRecorder

    @component
    class Guard:
        @component.output_types(query=str)
        def run(self, query: str) -> dict[str, Any]:
            if FAIL in query:
                raise ValueError("index offline")
            return {"query": query}

    store = InMemoryDocumentStore()
    # good_doc_ids=False: the store's own ids (a hash); the qrels id is only in meta
    store.write_documents(
        [
            Document(id=d, content=t) if good_doc_ids else Document(content=t, meta={"doc": d})
            for d, t in DOCS.items()
        ]
    )
    pipe = Pipeline()
    pipe.add_component("guard", Guard())
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=2))
    pipe.connect("guard.query", "retriever.query")
    recorder = RagmeterRecorder(pipe)
    for sid, text in runs:
        with contextlib.suppress(Exception):  # Haystack wraps it in PipelineRuntimeError
            recorder.run({"guard": {"query": text}}, sample_id=sid)
    return recorder


def _llamaindex(runs: Runs, *, good_doc_ids: bool = True) -> Any:
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.instrumentation.dispatcher import instrument_tags
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import CustomQueryEngine
    from ragmeter_llamaindex import RagmeterEventHandler

    # Documents become nodes with their own (uuid) node ids; the qrels name the documents.
    index = VectorStoreIndex.from_documents(
        [Document(id_=d, text=t) for d, t in DOCS.items()], embed_model=MockEmbedding(embed_dim=8)
    )
    inner = index.as_query_engine(llm=MockLLM(max_tokens=2), similarity_top_k=2)

    class Guarded(CustomQueryEngine):
        engine: Any

        def custom_query(self, query_str: str) -> str:
            if FAIL in query_str:
                raise ValueError("index offline")
            return str(self.engine.query(query_str))

    engine = Guarded(engine=inner)
    handler = RagmeterEventHandler(doc_id="ref_doc_id" if good_doc_ids else "node_id")
    with handler:
        for sid, text in runs:
            try:
                if sid is None:
                    engine.query(text)
                else:
                    with instrument_tags({"ragmeter_id": sid}):
                        engine.query(text)
            except ValueError:
                pass
    return handler


FRAMEWORKS: dict[str, Callable[..., Any]] = {
    "langchain": _langchain,
    "haystack": _haystack,
    "llamaindex": _llamaindex,
}
# The option that fixes each id problem, as each framework spells it (doc_id= is one name in
# all three adapters).
SAMPLE_ID_FIX = {
    "langchain": "ragmeter_id",
    "haystack": "sample_id=",
    "llamaindex": "instrument_tags",
}
DOC_ID_FIX = {"langchain": "doc_id=", "haystack": "doc_id=", "llamaindex": "doc_id="}


@pytest.fixture(params=sorted(FRAMEWORKS))
def framework(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


# -- 1. failed runs and judged queries that were never captured -----------------------------


def test_failed_runs_are_reported_apart_and_can_be_left_out(
    framework: str, caplog: pytest.LogCaptureFixture
) -> None:
    runs = [(q, text if q not in ("q2", "q5") else f"{FAIL} {text}") for q, text in QUERIES.items()]
    captured = FRAMEWORKS[framework](runs[:6])  # q7, q8 judged but never run
    failed = [s for s in captured.samples if s.error is not None]
    assert sorted(s.id for s in failed) == ["q2", "q5"]
    assert all(s.retrieved_ids is None for s in failed)
    good = {s.id: s.retrieved_ids for s in captured.samples if s.error is None}
    per_good = evaluate_run(QRELS, good, k_values=(2,), metrics=["ndcg"]).per_query
    good_scores = [per_good[q]["ndcg@2"] for q in good]
    assert min(good_scores) > 0

    with caplog.at_level(logging.WARNING):
        default = captured.evaluate_retrieval(QRELS, k_values=(2,), metrics=["ndcg"])
    # trec_eval -c: failed and never-run judged queries score 0 and count
    assert default.metrics["ndcg@2"] == pytest.approx(_mean([*good_scores, 0.0, 0.0, 0.0, 0.0]))
    assert default.per_query["q2"]["ndcg@2"] == 0.0
    assert default.missing_queries == ["q7", "q8"]  # failed runs are not "missing"
    capture = default.extra["capture"]
    assert capture["failed"] == ["q2", "q5"] and capture["failed_queries"] == "zero"
    assert capture["samples"] == 6 and capture["framework"] == framework
    warning = next(w for w in default.warnings if "failed" in w and "q2" in w)
    assert "2 of 6" in warning and "failed_queries='skip'" in warning
    assert any("q2" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)

    captured_only = captured.evaluate_retrieval(
        QRELS, k_values=(2,), metrics=["ndcg"], missing_queries="skip"
    )
    assert captured_only.metrics["ndcg@2"] == pytest.approx(_mean([*good_scores, 0.0, 0.0]))
    assert captured_only.n_queries == 6 and "q7" not in captured_only.per_query
    same = captured.evaluate_retrieval(
        QRELS, k_values=(2,), metrics=["ndcg"], missing_queries="skip"
    )
    assert same.metrics == captured_only.metrics

    good_only = captured.evaluate_retrieval(
        QRELS, k_values=(2,), metrics=["ndcg"], missing_queries="skip", failed_queries="skip"
    )
    assert good_only.metrics["ndcg@2"] == pytest.approx(_mean(good_scores))
    assert sorted(good_only.per_query) == sorted(good)
    assert good_only.extra["capture"]["failed"] == ["q2", "q5"]
    assert good_only.extra["capture"]["failed_queries"] == "skip"
    assert any("left out" in w and "q2" in w for w in good_only.warnings)


def test_option_values_are_checked(framework: str) -> None:
    captured = FRAMEWORKS[framework]([("q1", QUERIES["q1"])])
    with pytest.raises(InvalidInputError, match="failed_queries"):
        captured.evaluate_retrieval(QRELS, failed_queries="exclude")
    with (
        pytest.warns(DeprecationWarning, match="only_captured"),
        pytest.raises(InvalidInputError, match="only_captured"),
    ):
        captured.evaluate_retrieval(QRELS, only_captured=True, missing_queries="zero")


# -- 2. forgotten ids -----------------------------------------------------------------------


def test_no_sample_id_in_the_qrels_is_refused_naming_the_fix(framework: str) -> None:
    captured = FRAMEWORKS[framework]([(None, t) for t in list(QUERIES.values())[:3]])
    with pytest.raises(InvalidInputError, match="sample id") as exc:
        captured.evaluate_retrieval(QRELS)
    assert SAMPLE_ID_FIX[framework] in str(exc.value)


def test_most_sample_ids_not_in_the_qrels_is_a_warning_naming_the_fix(
    framework: str, caplog: pytest.LogCaptureFixture
) -> None:
    runs = [("q1", QUERIES["q1"])] + [(None, t) for t in list(QUERIES.values())[1:4]]
    captured = FRAMEWORKS[framework](runs)
    with caplog.at_level(logging.WARNING):
        report = captured.evaluate_retrieval(QRELS, k_values=(2,), missing_queries="skip")
    warning = next(w for w in report.warnings if "sample id" in w)
    assert "only 1 of 4" in warning and SAMPLE_ID_FIX[framework] in warning
    assert any(SAMPLE_ID_FIX[framework] in r.getMessage() for r in caplog.records)
    # all ids given: no such warning
    fine = FRAMEWORKS[framework](list(QUERIES.items())[:4])
    assert not any("sample id" in w for w in fine.evaluate_retrieval(QRELS).warnings)


def test_doc_ids_that_never_match_the_qrels_warn_naming_the_fix(
    framework: str, caplog: pytest.LogCaptureFixture
) -> None:
    runs = list(QUERIES.items())[:4]
    wrong = FRAMEWORKS[framework](runs, good_doc_ids=False)
    with caplog.at_level(logging.WARNING):
        report = wrong.evaluate_retrieval(QRELS, k_values=(2,), missing_queries="skip")
    assert report.metrics["ndcg@2"] == 0.0
    warning = next(w for w in report.warnings if "none of the" in w and "doc ids" in w)
    assert DOC_ID_FIX[framework] in warning
    assert any(DOC_ID_FIX[framework] in r.getMessage() for r in caplog.records)
    right = FRAMEWORKS[framework](runs)
    ok = right.evaluate_retrieval(QRELS, k_values=(2,), missing_queries="skip")
    assert ok.metrics["ndcg@2"] > 0 and not any("doc id" in w for w in ok.warnings)


# -- 3. repeated sample ids -----------------------------------------------------------------


def test_repeated_ids_are_all_scored_under_one_rule(framework: str) -> None:
    runs = [
        ("q1", QUERIES["q1"]),
        ("q2", QUERIES["q2"]),
        ("q1", QUERIES["q4"]),
        ("q1", QUERIES["q3"]),
    ]
    captured = FRAMEWORKS[framework](runs)
    run = captured.to_run()
    assert list(run) == ["q1", "q2", "q1#2", "q1#3"]
    assert [run[k] for k in run] == [s.retrieved_ids for s in captured.samples]
    report = captured.evaluate_retrieval(
        QRELS, k_values=(2,), metrics=["ndcg"], missing_queries="skip"
    )
    # each repeat is judged with the qrels of its id
    expected = evaluate_run(
        {k: QRELS[k.split("#")[0]] for k in run}, run, k_values=(2,), metrics=["ndcg"]
    )
    assert report.per_query == expected.per_query and report.n_queries == 4
    assert report.extra["capture"]["repeated"] == {"q1": 3}
    assert any("2 samples repeat" in w and "'q1#2'" in w for w in report.warnings)
    # evaluate_rag (handler.evaluate) reports the repeats under the same keys
    answers = captured.evaluate(metrics=["non_empty_rate"])
    assert list(answers.per_sample) == list(run)
