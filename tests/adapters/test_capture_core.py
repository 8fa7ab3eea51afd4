"""The core every adapter captures through: scoped ids, the lazy run record, the store's views
and atomic drain, and loading a dataset for ``run_dataset``."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ragmeter.capture import (
    CallRecord,
    CaptureConfig,
    Hints,
    ProblemLog,
    RunRecord,
    SampleStore,
    SampleView,
    Scope,
    capture,
    check_record,
    content_doc_id,
    current_scope,
    deprecated_option,
    load_dataset,
    propagate,
    scope_for,
)
from ragmeter.errors import InvalidInputError
from ragmeter.io import read_qrels
from ragmeter.schema import RagSample

DATA = Path(__file__).resolve().parents[1] / "data"


def config(**kwargs: Any) -> CaptureConfig:
    import logging

    return CaptureConfig("test", ProblemLog(logging.getLogger("ragmeter_test"), "Test"), **kwargs)


def record(cfg: CaptureConfig, ids: list[str | None], texts: list[str], **kwargs: Any) -> RunRecord:
    run = RunRecord(cfg, **kwargs)
    run.user_input = "q?"
    call = CallRecord("bm25", "q?", 0)
    call.done(ids, texts)
    run.add_call(call)
    run.response = "answer"
    run.finish()
    return run


# -- scoped ids -----------------------------------------------------------------------------


def test_capture_scopes_nest_and_restore() -> None:
    assert current_scope() is None
    with capture(id="outer", reference="A") as outer:
        assert current_scope() is outer
        with capture(id=7, relevance={"d1": 2}) as inner:
            assert current_scope() is inner and inner.id == "7"
            assert inner.fields() == {"id": "7", "relevance": {"d1": 2.0}}
        assert current_scope() is outer
    assert current_scope() is None


def test_capture_checks_every_value_before_anything_runs() -> None:
    with pytest.raises(InvalidInputError, match=r"capture\(\): id must be a str or an int"):
        capture(id=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"capture\(\): .*'relevance'.*NaN"):
        capture(id="q1", relevance={"d1": float("nan")})
    with pytest.raises(InvalidInputError, match=r"capture\(\): .*'reference'"):
        capture(id="q1", reference=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"capture\(\): metadata must be a mapping"):
        capture(id="q1", metadata=["x"])  # type: ignore[arg-type]


def test_each_thread_and_each_task_sees_its_own_scope() -> None:
    barrier = threading.Barrier(4)

    def in_thread(qid: str) -> str | None:
        with capture(id=qid):
            barrier.wait()  # all four scopes are open at once
            scope = current_scope()
            return None if scope is None else scope.id

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(in_thread, ["a", "b", "c", "d"])) == ["a", "b", "c", "d"]

    async def in_task(qid: str) -> str | None:
        with capture(id=qid):
            await asyncio.sleep(0.01 if qid == "x" else 0)  # interleave the tasks
            scope = current_scope()
            return None if scope is None else scope.id

    async def main() -> list[str | None]:
        return list(await asyncio.gather(in_task("x"), in_task("y")))

    assert asyncio.run(main()) == ["x", "y"]


def test_ground_truth_precedence_scope_then_run_metadata_then_sample_id() -> None:
    cfg = config()
    with capture(id="scope-id", reference="from scope", relevance={"d1": 1}):
        plain = record(cfg, ["d1"], ["t"])
        own = record(cfg, ["d1"], ["t"], meta={"ragmeter_id": "meta-id", "team": "x"})
        explicit = record(cfg, ["d1"], ["t"], meta={"ragmeter_id": "meta-id"}, sample_id="mine")
    assert (plain.to_sample().id, plain.to_sample().reference) == ("scope-id", "from scope")
    assert own.to_sample().id == "meta-id" and own.to_sample().relevance == {"d1": 1.0}
    assert own.to_sample().metadata["run_metadata"] == {"team": "x"}
    assert explicit.to_sample().id == "mine"


def test_record_option_and_tagged_runs() -> None:
    assert check_record("tagged") == "tagged"
    with pytest.raises(InvalidInputError, match=r"record must be one of 'all', 'tagged'"):
        check_record("some")
    cfg = config(record="tagged")
    assert not RunRecord(cfg).wanted
    assert RunRecord(cfg, meta={"ragmeter_id": "q"}).wanted
    with capture(id="q"):
        assert RunRecord(cfg).wanted
    with capture(reference="no id"):
        assert not RunRecord(cfg).wanted
    assert RunRecord(config()).wanted  # "all"


def test_deprecated_option_warns_naming_both() -> None:
    with pytest.warns(DeprecationWarning, match=r"Thing\(old=...\) is deprecated; use new="):
        deprecated_option("Thing", "old", "new")


# -- the lazy record ------------------------------------------------------------------------


def test_a_record_becomes_its_sample_when_read_and_holds_it_only_while_used() -> None:
    cfg = config()
    run = record(cfg, ["d1", None, "d1"], ["a", "Paris is the capital of France.", "a"])
    assert run.sample is None  # nothing built while capturing
    sample = run.to_sample()
    assert run.to_sample() is sample  # the same object while someone holds it
    assert sample.retrieved_ids == ["d1", "sha256:557be7eca214f188"]  # hashed, deduped
    assert sample.retrieved_contexts == ["a", "Paris is the capital of France."]
    retriever, context = sample.stages or []
    assert retriever.ids == ["d1", content_doc_id("Paris is the capital of France.")]
    assert context.name == "context" and context.same_as == retriever.name
    assert sample.user_input == "q?" and sample.response == "answer"
    assert sample.latency_ms is not None and sample.latency_ms >= 0
    first = sample.model_dump()
    del sample, retriever, context
    gc.collect()
    assert run.sample is None  # dropped by its reader: the record keeps only references
    again = run.to_sample()
    assert again.model_dump() == first  # built again, equal (the same generated id too)


def test_reading_samples_does_not_grow_the_store() -> None:
    cfg = config()
    store = SampleStore()
    texts = [f"text {i}" for i in range(10)]
    ids = [f"d{i}" for i in range(10)]
    for _ in range(500):
        run = record(cfg, ids, texts)
        run.finish()
        store.add(run)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert sum(len(s.retrieved_ids or []) for s in store.samples) == 5000
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 500 * 64  # the generated id of each id-less record, no kept sample


def test_a_value_that_does_not_validate_is_left_out_and_logged_when_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = config()
    run = record(cfg, ["d1"], ["t"], meta={"ragmeter_id": "q", "ragmeter_relevance": {"d": "x"}})
    assert cfg.problems.count == 0
    with caplog.at_level("WARNING", logger="ragmeter_test"):
        sample = run.to_sample()
    assert sample.id == "q" and sample.relevance is None and sample.retrieved_ids == ["d1"]
    assert sample.metadata["capture_errors"][0].startswith("invalid relevance left out")
    assert cfg.problems.count == 1 and "could not capture part of a Test run" in caplog.text


def test_amend_changes_the_raw_record_or_the_built_sample() -> None:
    cfg = config()
    early, late = record(cfg, [], []), record(cfg, [], [])
    late.to_sample()
    for run in (early, late):
        run.amend(
            lambda run=run: setattr(run, "response", "streamed"),  # type: ignore[misc]
            lambda sample: setattr(sample, "response", "streamed"),
        )
    assert early.to_sample().response == late.to_sample().response == "streamed"


# -- the store ------------------------------------------------------------------------------


def _samples(n: int, prefix: str = "q") -> list[RagSample]:
    return [RagSample(id=f"{prefix}{i}", retrieved_ids=[f"d{i}"]) for i in range(n)]


def test_samples_is_a_view_that_copies_nothing() -> None:
    store = SampleStore()
    store.extend(_samples(20_000))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        views = [store.samples for _ in range(100)]
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert all(isinstance(v, SampleView) and len(v) == 20_000 for v in views)
    assert grown < 100 * 200  # a copy of the list alone would be 160 kB each
    view = views[0]
    assert view[0].id == "q0" and view[-1].id == "q19999" and view[1:3] == list(view)[1:3]
    with pytest.raises(IndexError, match="sample index 20000 out of range for 20000 samples"):
        view[20_000]


def test_a_view_keeps_what_it_saw_whatever_happens_next() -> None:
    store = SampleStore()
    store.extend(_samples(3))
    view = store.samples
    store.add(RagSample(id="later"))
    assert [s.id for s in view] == ["q0", "q1", "q2"]
    drained = store.drain()
    assert [s.id for s in drained] == ["q0", "q1", "q2", "later"] and len(store) == 0
    assert [s.id for s in view] == ["q0", "q1", "q2"] and view == drained[:3]
    store.add(RagSample(id="after"))
    store.clear()
    assert [s.id for s in view] == ["q0", "q1", "q2"] and store.samples == []


def test_max_samples_keeps_the_newest_and_frees_the_rest() -> None:
    store = SampleStore(max_samples=5)
    view = None
    for i, sample in enumerate(_samples(100)):
        store.add(sample)
        if i == 6:
            view = store.samples
    assert [s.id for s in store.samples] == [f"q{i}" for i in range(95, 100)]
    assert store.dropped == 95 and len(store) == 5
    assert len(store._items) <= 2 * 5 + 16  # evicted entries are released in batches
    assert view is not None and [s.id for s in view] == [f"q{i}" for i in range(2, 7)]
    with pytest.raises(InvalidInputError, match="max_samples must be an int >= 1"):
        SampleStore(max_samples=0)


def test_drain_under_threads_loses_nothing() -> None:
    store = SampleStore()
    n_threads, per_thread = 8, 5_000
    done = threading.Event()
    drained: list[RagSample] = []

    def drainer() -> None:
        while not done.is_set():
            drained.extend(store.drain())
        drained.extend(store.drain())

    def producer(t: int) -> None:
        for i in range(per_thread):
            store.add(RagSample(id=f"{t}-{i}"))

    thread = threading.Thread(target=drainer)
    thread.start()
    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        list(pool.map(producer, range(n_threads)))
    done.set()
    thread.join()
    ids = [s.id for s in drained]
    assert len(ids) == len(set(ids)) == n_threads * per_thread


def test_scope_collects_the_records_stored_under_it() -> None:
    cfg = config()
    store, other = SampleStore(), SampleStore()
    with Scope("q1", collect=True) as scope:
        store.add(record(cfg, ["d1"], ["t"]))
        other.add(record(cfg, ["d2"], ["u"]))
    store.add(record(cfg, ["d3"], ["v"]))  # after the scope: not collected
    assert [r.to_sample().retrieved_ids for r in scope.records(store)] == [["d1"]]
    assert len(scope.records()) == 2


# -- datasets -------------------------------------------------------------------------------


def test_load_dataset_from_a_mapping_judges_only_its_queries() -> None:
    qrels = {"q1": {"d1": 2}, "q9": {"d9": 1}}
    items, judged = load_dataset({"q1": "lift?", 2: "drag?"}, qrels=qrels)
    assert [(i.id, i.query) for i in items] == [("q1", "lift?"), ("2", "drag?")]
    assert judged == {"q1": {"d1": 2.0}}  # q9 is not run, so not judged


def test_load_dataset_from_a_beir_directory() -> None:
    items, judged = load_dataset(DATA / "cranfield_beir")
    qrels = read_qrels(DATA / "cranfield_beir")
    assert {i.id for i in items} == set(judged) == set(qrels)
    queries = {
        json.loads(line)["_id"]: json.loads(line)["text"]
        for line in (DATA / "cranfield_beir" / "queries.jsonl").read_text().splitlines()
    }
    assert all(i.query == queries[i.id] for i in items)
    assert all(i.relevance == {d: float(g) for d, g in qrels[i.id].items()} for i in items)


def test_load_dataset_from_jsonl_and_samples(tmp_path: Path) -> None:
    from ragmeter.io.jsonl import write_jsonl

    samples = [
        {"id": "a", "user_input": "lift?", "reference": "wings", "reference_ids": ["d1"]},
        {"id": "b", "question": "drag?", "relevance": {"d2": 3}},
    ]
    write_jsonl(samples, tmp_path / "set.jsonl")
    for dataset in (tmp_path / "set.jsonl", str(tmp_path / "set.jsonl"), samples):
        items, judged = load_dataset(dataset)
        assert [(i.id, i.query, i.reference) for i in items] == [
            ("a", "lift?", "wings"),
            ("b", "drag?", None),
        ]
        assert judged == {"a": {"d1": 1.0}, "b": {"d2": 3.0}}


def test_load_dataset_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="dataset not found"):
        load_dataset(tmp_path / "nope")
    with pytest.raises(InvalidInputError, match="the dataset has no query to run"):
        load_dataset({})
    with pytest.raises(InvalidInputError, match=r"query 'q1' of the dataset has no text"):
        load_dataset({"q1": ""})
    with pytest.raises(InvalidInputError, match=r"the value of 'q1' is int"):
        load_dataset({"q1": 3})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match=r"query id 'a' occurs twice in the samples"):
        load_dataset([{"id": "a", "user_input": "x"}, {"id": "a", "user_input": "y"}])
    with pytest.raises(InvalidInputError, match=r"sample 'a' has no user_input"):
        load_dataset([{"id": "a"}])


# -- scopes of several observers, batches, threads ------------------------------------------


class _Owner:
    """Stands for an adapter: what a scope's owner needs (told when its scopes open)."""

    def _scope_opened(self, scope: Any) -> None:
        pass

    def _scope_closed(self, scope: Any) -> None:
        pass


def test_each_observer_takes_the_innermost_scope_that_is_its_own_or_everyones() -> None:
    a, b = _Owner(), _Owner()
    shared = capture(id="shared")
    mine = capture(id="a1")
    mine._owner = a  # type: ignore[assignment]
    theirs = capture(id="b1")
    theirs._owner = b  # type: ignore[assignment]
    with shared, mine, theirs:
        assert scope_for(a) is mine and scope_for(b) is theirs
        assert scope_for(_Owner()) is shared  # a third observer: only the shared one
        assert current_scope() is theirs
    with mine:
        assert scope_for(b) is None


def test_a_batch_scope_gives_each_run_the_id_of_its_question() -> None:
    cfg = config()
    store = SampleStore()
    with capture(
        batch={"q1": "wing flutter", "q2": "heat transfer", "q3": "wing flutter"},
        qrels={"q1": {"d1": 2}, "q2": {"d2": 1}, "q9": {"d9": 1}},
        answers={"q2": "heat"},
    ):
        runs = [RunRecord(cfg) for _ in range(4)]
    questions = ["heat transfer", "wing flutter", "wing flutter", "drag"]
    for run, question in zip(runs, questions, strict=True):
        run.user_input = question
        run.finish()
        store.add(run)
    samples = list(store.samples)
    assert [s.id for s in samples[:3]] == ["q2", "q1", "q3"]  # a question asked twice: next id
    assert samples[0].reference == "heat" and samples[1].relevance == {"d1": 2.0}
    assert samples[2].relevance is None and len(samples[3].id) == 32  # not in the batch
    assert "batch: the question 'drag' is not one of" in samples[3].metadata["capture_errors"][0]
    with pytest.raises(InvalidInputError, match="batch= gives each run its own id"):
        capture(id="x", batch={"q1": "a"})
    with pytest.raises(InvalidInputError, match=r"batch\['q1'\] must be the question"):
        capture(batch={"q1": 3})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match="qrels= and answers= go with batch="):
        capture(qrels={"q1": {"d": 1}})


def test_a_scope_is_carried_into_worker_threads_by_propagate() -> None:
    cfg = config()
    with capture(id="q1"), ThreadPoolExecutor(max_workers=2) as pool:
        lost = pool.submit(lambda: RunRecord(cfg).to_sample().id).result()
        kept = pool.submit(propagate(lambda: RunRecord(cfg).to_sample().id)).result()
    assert lost != "q1" and kept == "q1"


# -- what an empty or bounded store says --------------------------------------------------------


def test_an_empty_store_names_the_likely_causes() -> None:
    store = SampleStore(hints=Hints("test", label="Test"))
    with pytest.raises(InvalidInputError) as caught:
        store.evaluate_retrieval({"q1": {"d1": 1}})
    message = str(caught.value)
    assert message.startswith("the Test adapter holds 0 captured samples")
    for cause in ("not attached", "record='tagged'", "propagate(fn)", "drain()/clear()"):
        assert cause in message


def test_samples_dropped_by_max_samples_are_counted_on_every_report() -> None:
    store = SampleStore(max_samples=3)
    for i in range(5):
        store.add(RagSample(id=f"q{i}", retrieved_ids=["d1"], response="a", reference="a"))
    report = store.evaluate_retrieval({f"q{i}": {"d1": 1} for i in range(5)}, k_values=(1,))
    [warning] = [w for w in report.warnings if "(max_samples)" in w]
    assert "2 captured samples were dropped" in warning and "max_samples=3" in warning
    assert report.extra["capture"]["dropped"] == 2
    answers = store.evaluate(metrics=["exact_match"])
    assert any("2 captured samples were dropped" in w for w in answers.warnings)
    assert answers.extra["capture_dropped"] == 2


def test_forgotten_ids_name_the_unjudged_samples_not_missing_queries_skip() -> None:
    store = SampleStore()
    store.add(RagSample(id="1", retrieved_ids=["d1"]))
    store.add(RagSample(id="4f1c", retrieved_ids=["d2"]))
    qrels = {"1": {"d1": 1}, "2": {"d2": 1}}
    for rule in ("zero", "skip"):
        report = store.evaluate_retrieval(qrels, missing_queries=rule, k_values=(10,))
        [warning] = [w for w in report.warnings if "(missing_queries)" in w]
        assert "1 judged queries have no captured sample (e.g. '2')" in warning
        assert "1 captured samples are not judged (e.g. '4f1c')" in warning
        assert "pass missing_queries='skip'" not in warning


def test_only_captured_is_a_deprecated_missing_queries_skip() -> None:
    """``only_captured=True`` still works for one release: it warns, pointing at the caller,
    and scores exactly as ``missing_queries="skip"``; with ``missing_queries="zero"`` it is
    refused."""
    import pytest

    from ragmeter.errors import InvalidInputError

    store = SampleStore()
    store.add(RagSample(id="1", retrieved_ids=["d1", "d2"]))
    qrels = {"1": {"d2": 1}, "2": {"d9": 1}}
    skip = store.evaluate_retrieval(qrels, missing_queries="skip", k_values=(10,))
    with pytest.warns(DeprecationWarning, match="only_captured=True. is deprecated") as seen:
        old = store.evaluate_retrieval(qrels, only_captured=True, k_values=(10,))
    assert seen[0].filename == __file__
    assert old.metrics == skip.metrics and old.per_query == skip.per_query
    staged = [
        RagSample(
            id="1",
            retrieved_ids=["d1", "d2"],
            stages=[{"name": "bm25", "ids": ["d2", "d1"]}],
        )
    ]
    staged_store = SampleStore()
    staged_store.extend(staged)
    with pytest.warns(DeprecationWarning, match="only_captured"):
        table = staged_store.evaluate_retrieval(qrels, stages=True, only_captured=True)
    assert table.rows
    with (
        pytest.warns(DeprecationWarning, match="only_captured"),
        pytest.raises(InvalidInputError, match="only_captured=True means missing_queries='skip'"),
    ):
        store.evaluate_retrieval(qrels, only_captured=True, missing_queries="zero")
