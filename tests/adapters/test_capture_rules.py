"""The rules every adapter shares, on ``ragmeter.capture`` itself (no framework needed).

The framework-driven versions of these checks are in
``test_failed_forgotten_and_repeated_ids.py``; here each rule is pinned down on hand-made
samples, edge cases included.
"""

from __future__ import annotations

import copy
import logging
import pickle
import threading
from dataclasses import dataclass
from typing import Any

import pytest

from ragmeter.capture import (
    Hints,
    IdWatch,
    SampleStore,
    StageRecord,
    doc_id_problem,
    infer_context,
    sample_keys,
    select_calls,
    stage_list,
    stage_names,
)
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.report import WarningLog
from ragmeter.schema import RagSample, samples_to_qrels, samples_to_run

QRELS = {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 1}, "q3": {"d1": 1, "d4": 1}}


def store_of(*samples: RagSample, hints: Hints | None = None) -> SampleStore:
    store = SampleStore(hints=hints)
    store.extend(samples)
    return store


# -- repeated ids: one key rule everywhere ---------------------------------------------------


def test_one_key_rule_for_runs_qrels_stores_and_evaluate_rag() -> None:
    # 'q1#2' is also a real id, captured after a repeat of q1 took that key
    samples = [
        RagSample(id="q1", retrieved_ids=["d1"], reference_ids=["d1"]),
        RagSample(id="q1", retrieved_ids=["d2"], reference_ids=["d2"]),
        RagSample(id="q2", reference_ids=["d3"]),  # no ranking: still counts for the suffixes
        RagSample(id="q1#2", retrieved_ids=["d3"]),
        RagSample(id="q1", retrieved_ids=["d4"], reference_ids=["d4"]),
    ]
    keys = ["q1", "q1#2", "q2", "q1#2#2", "q1#3"]
    assert sample_keys([s.id for s in samples]) == keys
    assert list(samples_to_run(samples)) == ["q1", "q1#2", "q1#2#2", "q1#3"]
    assert samples_to_qrels(samples) == {
        "q1": {"d1": 1},
        "q1#2": {"d2": 1},
        "q2": {"d3": 1},
        "q1#3": {"d4": 1},
    }
    assert list(evaluate_rag(samples, metrics=["non_empty_rate"]).per_sample) == keys
    assert store_of(*samples).to_run() == samples_to_run(samples)


def test_repeats_are_judged_by_the_qrels_of_their_id() -> None:
    store = store_of(
        RagSample(id="q1", retrieved_ids=["d1", "d2"]),
        RagSample(id="q1", retrieved_ids=["d9", "d2"]),
        RagSample(id="q2", retrieved_ids=["d3"]),
    )
    report = store.evaluate_retrieval(
        QRELS, k_values=(2,), metrics=["recall"], missing_queries="skip"
    )
    assert report.per_query == {
        "q1": {"recall@2": 1.0},
        "q1#2": {"recall@2": 0.5},
        "q2": {"recall@2": 1.0},
    }
    assert report.extra["capture"]["repeated"] == {"q1": 2}
    assert any("1 sample repeats an earlier sample id" in w for w in report.warnings)


def test_own_relevance_with_repeats_keeps_each_samples_judgements() -> None:
    store = store_of(
        RagSample(id="q1", retrieved_ids=["d1"], reference_ids=["d1"]),
        RagSample(id="q1", retrieved_ids=["d1"], reference_ids=["d2"]),
    )
    report = store.evaluate_retrieval(k_values=(1,), metrics=["recall"])
    assert report.per_query == {"q1": {"recall@1": 1.0}, "q1#2": {"recall@1": 0.0}}


def test_a_qrels_id_that_is_a_repeats_key_is_refused() -> None:
    store = store_of(RagSample(id="q1", retrieved_ids=["d1"]), RagSample(id="q1", retrieved_ids=[]))
    with pytest.raises(InvalidInputError, match="'q1#2' has the key a repeated sample"):
        store.evaluate_retrieval({"q1": {"d1": 1}, "q1#2": {"d1": 1}})


def test_colliding_qrels_ids_are_refused() -> None:
    store = store_of(RagSample(id="1", retrieved_ids=["d1"]))
    with pytest.raises(InvalidInputError, match="same string"):
        store.evaluate_retrieval({1: {"d1": 1}, "1": {"d2": 1}})  # type: ignore[dict-item]


# -- failed and unranked samples --------------------------------------------------------------


def test_unranked_samples_that_did_not_fail_score_zero_with_a_warning() -> None:
    store = store_of(
        RagSample(id="q1", retrieved_ids=["d1"]),
        RagSample(id="q2", metadata={"capture_errors": ["retriever_name: 'x' matched no call"]}),
    )
    report = store.evaluate_retrieval(
        QRELS, k_values=(1,), metrics=["recall"], missing_queries="skip"
    )
    assert report.per_query["q2"] == {"recall@1": 0.0} and report.missing_queries == ["q3"]
    assert report.extra["capture"]["unranked"] == ["q2"]
    assert report.extra["capture"]["capture_errors"] == 1
    assert any("have no ranking although their run did not fail" in w for w in report.warnings)
    assert any("matched no call" in w for w in report.warnings)


def test_a_failed_run_that_had_retrieved_keeps_its_ranking() -> None:
    store = store_of(RagSample(id="q1", retrieved_ids=["d1"], error="ValueError: LLM down"))
    report = store.evaluate_retrieval(
        QRELS, k_values=(1,), metrics=["recall"], missing_queries="skip"
    )
    assert report.per_query == {"q1": {"recall@1": 0.5}}
    assert report.extra["capture"]["failed"] == []


def test_every_judged_sample_failed_and_skipped_is_refused() -> None:
    store = store_of(RagSample(id="q1", error="ValueError: down"))
    assert store.evaluate_retrieval(QRELS, missing_queries="skip").per_query["q1"]["ndcg@10"] == 0.0
    with pytest.raises(InvalidInputError, match="nothing is left to score"):
        store.evaluate_retrieval(QRELS, failed_queries="skip")


def test_no_ground_truth_at_all_is_refused_with_the_fix() -> None:
    store = store_of(RagSample(id="q1", retrieved_ids=["d1"]))
    with pytest.raises(InvalidInputError, match="pass qrels="):
        store.evaluate_retrieval()


def test_warnings_go_to_the_callers_log_and_the_logger(caplog: pytest.LogCaptureFixture) -> None:
    hints = Hints("toy", "Set the ids.", "Pick the id field.")
    store = store_of(RagSample(id="q1", error="ValueError: down"), hints=hints)
    log = WarningLog()
    with caplog.at_level(logging.WARNING, logger="ragmeter_toy"):
        report = store.evaluate_retrieval(QRELS, warnings=log, missing_queries="skip")
    assert any("failed before a ranking" in w for w in log.entries)
    assert report.warnings == log.entries
    assert [r.name for r in caplog.records] == ["ragmeter_toy"]
    assert report.extra["capture"]["framework"] == "toy"


# -- forgotten ids ----------------------------------------------------------------------------


def test_doc_id_problem_none_most_and_fine() -> None:
    hint = "Pick the id field."
    assert doc_id_problem({"q1": ["x", "y"]}, QRELS, hint).startswith(  # type: ignore[union-attr]
        "none of the 2 doc ids retrieved for the 1 judged queries"
    )
    # a doc judged for another query counts as a match (a poor retriever, not wrong ids)
    most = {"q1": ["x"], "q2": ["d4"], "q3": ["y"]}
    assert "only 1 of 3 judged queries" in str(doc_id_problem(most, QRELS, hint))
    assert doc_id_problem({"q1": ["x"], "q2": ["d4"]}, QRELS, hint) is None
    assert doc_id_problem({"q9": ["x"]}, QRELS, hint) is None  # nothing judged retrieved
    assert doc_id_problem({"q1": []}, QRELS, hint) is None


def test_store_warns_when_most_doc_ids_are_unknown() -> None:
    store = store_of(
        RagSample(id="q1", retrieved_ids=["d1"]),
        RagSample(id="q2", retrieved_ids=["x"]),
        RagSample(id="q3", retrieved_ids=["y"]),
        hints=Hints("toy", "Set the ids.", "Pick the id field."),
    )
    report = store.evaluate_retrieval(QRELS, k_values=(1,))
    assert any(
        "only 1 of 3 judged queries" in w and "Pick the id field." in w for w in report.warnings
    )


def test_the_generic_doc_id_warning_gives_way_to_the_one_naming_the_fix() -> None:
    store = store_of(RagSample(id="q1", retrieved_ids=["x"]))
    qrels = {"q1": QRELS["q1"]}
    generic = evaluate_run(qrels, {"q1": ["x"]}).warnings
    assert len(generic) == 1 and "(doc_ids)" in generic[0]  # what evaluate_run says alone
    ours = store.evaluate_retrieval(qrels).warnings
    assert len(ours) == 1 and "[capture] (doc_ids)" in ours[0]


def test_id_watch_warns_once_until_an_id_matches(caplog: pytest.LogCaptureFixture) -> None:
    watch = IdWatch("Pass id_map=.", min_queries=3, logger=logging.getLogger("ragmeter_toy"))
    with caplog.at_level(logging.WARNING, logger="ragmeter_toy"):
        assert watch.observe(["n1"], ["d1"]) is None
        assert watch.observe([], ["d1"]) is None  # nothing retrieved: not counted
        assert watch.observe(["n2"], ["d2"]) is None
        first = watch.observe(["n3"], ["d3"])
        again = watch.observe(["n4"], ["d4"])
    assert first is not None and "4 queries" not in first and "3 queries" in first
    assert again is not None and "4 queries" in again
    assert len(caplog.records) == 1  # logged once
    assert watch.observe(["d1"], ["d5"]) is None  # d1 was judged for an earlier query
    assert watch.observe(["n6"], ["d6"]) is None  # matched once: quiet from now on
    fresh = copy.deepcopy(watch)
    assert fresh.queries == 0 and not fresh.matched
    assert pickle.loads(pickle.dumps(watch)).queries == 0


# -- several retriever calls ------------------------------------------------------------------


@dataclass
class Call:
    name: str | None
    ids: list[str] | None
    seq: int
    start: float
    end: float | None
    thread: int = 1
    depth: int = 0


def test_select_calls_last_first_merge_and_name() -> None:
    a = Call("a", ["1"], seq=0, start=0.0, end=1.0)
    b = Call("b", ["2"], seq=1, start=2.0, end=3.0)
    inner = Call("a", ["3"], seq=2, start=3.5, end=3.6, depth=1)
    calls = [b, a, inner]  # listed in start order would be a, b: selection is by seq
    assert select_calls(calls, "last") == ([b], [])
    assert select_calls(calls, "first") == ([a], [])
    assert select_calls(calls, "merge") == ([a, b], [])
    assert select_calls(calls, "last", "a") == ([inner], [])
    chosen, notes = select_calls(calls, "last", "zzz", name_hint="name it so")
    assert chosen == [] and notes[0][0] == "retriever_name"
    assert "'zzz' matched no finished retriever call" in notes[0][1] and "name it so" in notes[0][1]
    unfinished = Call("c", None, seq=-1, start=0.5, end=None)
    assert select_calls([a, unfinished], "last") == ([a], [])  # never finished: not a candidate


@pytest.mark.parametrize("retrieval", ["last", "first", "merge"])
def test_concurrent_calls_are_noted_because_the_pick_depends_on_timing(retrieval: str) -> None:
    a = Call("dense", ["1"], seq=0, start=0.0, end=2.0)
    b = Call("sparse", ["2"], seq=1, start=1.0, end=3.0)  # overlaps a in time
    chosen, notes = select_calls([a, b], retrieval)  # type: ignore[arg-type]
    assert chosen == ([a, b] if retrieval == "merge" else [b] if retrieval == "last" else [a])
    ((where, message),) = notes
    assert where == "retrieval" and "ran concurrently" in message
    assert "stage=" in message and "dense, sparse" in message
    # one after the other but on two threads (a thread pool): the order is timing's too
    c = Call("sparse", ["2"], seq=1, start=2.5, end=3.0, thread=threading.get_ident())
    assert select_calls([a, c], retrieval)[1] != []  # type: ignore[arg-type]
    # one after the other on one thread: deterministic, nothing to note
    d = Call("sparse", ["2"], seq=1, start=2.5, end=3.0)
    assert select_calls([a, d], retrieval)[1] == []  # type: ignore[arg-type]
    # picked by a name that is called once: nothing to note
    assert select_calls([a, b], retrieval, "dense")[1] == []  # type: ignore[arg-type]


# -- stages: which ranking reached the generator ------------------------------------------------


def _stage(name: str, start: float, end: float, **kwargs: Any) -> StageRecord:
    stage = StageRecord(name, None, kwargs.pop("depth", 0), **kwargs)
    stage.done([name], [name])
    stage.start, stage.end = start, end
    return stage


def test_one_outermost_stage_is_the_context() -> None:
    inner = _stage("inner", 0.0, 1.0, depth=1)
    outer = _stage("outer", 0.0, 2.0)
    assert infer_context([outer, inner]) == (outer, None)


def test_stages_one_after_the_other_the_last_is_the_context() -> None:
    first, second = _stage("a", 0.0, 1.0), _stage("b", 1.5, 2.0)
    assert infer_context([first, second]) == (second, None)


def test_stages_that_overlap_in_time_have_no_context() -> None:
    a, b = _stage("dense", 0.0, 2.0), _stage("sparse", 1.0, 3.0)
    context, note = infer_context([a, b], hint="Mark the fused list.")
    assert context is None and note is not None
    assert note.startswith("2 stages produced rankings (dense, sparse) and none can be")
    assert "ran concurrently" in note and note.endswith("Mark the fused list.")


def test_stages_in_two_branches_of_one_fork_have_no_context_whatever_the_clock() -> None:
    # a thread pool may run two parallel branches one after the other on one thread
    a = _stage("dense", 0.0, 1.0, branch=((7, "dense"),))
    b = _stage("sparse", 1.5, 2.0, branch=((7, "sparse"),))
    assert infer_context([a, b])[0] is None
    fused = _stage("fused", 2.5, 3.0, branch=())
    assert infer_context([a, b, fused]) == (fused, None)  # after the fork: the context
    # the same branch of a fork, one after the other: deterministic
    c = _stage("c", 1.5, 2.0, branch=((7, "dense"),))
    assert infer_context([a, c]) == (c, None)


def test_when_the_flow_is_known_two_unconsumed_stages_have_no_context() -> None:
    a = _stage("bm25", 0.0, 1.0)
    b = _stage("dense", 1.5, 2.0)
    assert infer_context([a, b], flow_known=True)[0] is None
    joiner = _stage("joiner", 2.5, 3.0, inputs=("bm25", "dense"))
    assert infer_context([a, b, joiner], flow_known=True) == (joiner, None)


def test_stage_names_are_unique_and_same_named_concurrent_stages_are_noted() -> None:
    a, b = _stage("bm25", 0.0, 2.0), _stage("bm25", 1.0, 3.0)
    names, notes = stage_names([a, b, _stage("dense", 4.0, 5.0)])
    assert names == ["bm25", "bm25#2", "dense"]
    [note] = notes
    assert "2 stages named 'bm25' ran concurrently" in note and "'bm25#2'" in note
    assert stage_names([_stage("x", 0.0, 1.0), _stage("x", 2.0, 3.0)])[1] == []


def test_the_stage_list_names_inputs_and_the_context() -> None:
    inner = _stage("bm25", 0.0, 1.0, depth=1)
    outer = _stage("ensemble", 0.0, 2.0, kind="fusion")
    inner.parent = outer
    listed, _, _ = stage_list([outer, inner], outer)
    assert [(s["name"], s.get("inputs"), s.get("same_as")) for s in listed] == [
        ("bm25", None, None),
        ("ensemble", ["bm25"], None),
        ("context", ["ensemble"], "ensemble"),
    ]


def test_stages_that_ran_side_by_side_are_listed_by_name_not_by_who_finished_first() -> None:
    sparse = _stage("sparse", 0.0, 1.0, branch=((0, "sparse"),))
    dense = _stage("dense", 0.0, 2.0, branch=((0, "dense"),))  # finished last
    fused = _stage("fused", 2.5, 3.0, branch=(), inputs=(sparse, dense))
    for stages in ([sparse, dense, fused], [dense, sparse, fused]):
        listed, _, _ = stage_list(stages, fused)
        assert [s["name"] for s in listed] == ["dense", "sparse", "fused", "context"]
    one_after_the_other = [_stage("b", 0.0, 1.0), _stage("a", 1.5, 2.0)]
    assert [s["name"] for s in stage_list(one_after_the_other, None)[0]] == ["b", "a"]
