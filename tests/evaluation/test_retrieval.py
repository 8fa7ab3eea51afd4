"""evaluate_run, per_query and evaluate_retrieval: seed examples, rules, errors, seed oracles.

Oracles: the seed packages ``contextgrid`` (seed 004's evaluate/per_query; compared on
non-negative grades and duplicate-free runs, where its conventions are ragmeter's) and
``ef.evaluation`` (seed 000's evaluate_retrieval). trec_eval parity is in
test_trec_eval_parity.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import contextgrid as cg
import ef.evaluation as ef
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import (
    DuplicateDocumentError,
    InvalidInputError,
    NoScorableQueriesError,
    UnknownMetricError,
)
from ragmeter.evaluation.retrieval import (
    DEFAULT_K_VALUES,
    dedupe_best_rank,
    evaluate_retrieval,
    evaluate_run,
    per_query,
)
from ragmeter.io.trec import TREC_ORDERING, parse_trec_run
from ragmeter.metrics import ranking
from ragmeter.metrics.registry import METRICS
from ragmeter.report import WarningLog

QRELS = {"q1": {"c1": 2, "c2": 1, "c3": 0}, "q2": {"c4": 2}}
RUN = {"q1": ["c3", "c1", "c5", "c2"], "q2": ["c9", "c4", "c1"]}


@pytest.fixture
def registered() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        if name in METRICS:
            METRICS.unregister(name)


# --------------------------------------------------------------------------- seed 004 examples


def test_seed_004_evaluate_example() -> None:
    report = evaluate_run(QRELS, RUN, k_values=[1, 3], metrics=["recall", "ndcg"])
    assert report.metrics == {
        "recall@1": 0.0,
        "recall@3": 0.75,
        "ndcg@1": 0.0,
        "ndcg@3": 0.5552773433538603,
    }
    assert report.n_queries == 2 and report.k_values == (1, 3)


def test_seed_004_per_query_example() -> None:
    assert per_query(QRELS, RUN, "recall", 3) == {"q1": 0.5, "q2": 1.0}


def test_seed_004_empty_and_grade_zero_judgements_are_the_same() -> None:
    run_two = {"q1": ["x"], "q2": ["c9"]}
    graded_zero = evaluate_run(
        {"q1": {"c1": 0}, "q2": {"c9": 2}}, run_two, k_values=[3], metrics=["recall"]
    )
    empty = evaluate_run({"q1": {}, "q2": {"c9": 2}}, run_two, k_values=[3], metrics=["recall"])
    assert graded_zero.metrics == empty.metrics == {"recall@3": 1.0}
    assert graded_zero.n_queries == empty.n_queries == 1
    assert per_query({"q1": {"c1": 0}, "q2": {"c9": 2}}, run_two, "recall", 3) == {"q2": 1.0}


def test_seed_004_duplicate_refusal_names_query_and_ids() -> None:
    with pytest.raises(
        ValueError, match=r"the run for query 'qa' returns the same doc id more than once: 'c1'\."
    ) as info:
        evaluate_run({"qa": {"c1": 2, "c2": 2}}, {"qa": ["c1", "c1", "c1", "c2"]}, k_values=[3])
    assert isinstance(info.value, DuplicateDocumentError)
    assert info.value.query_id == "qa" and info.value.duplicates == ["c1"]
    assert "keeping each doc at its best rank" in str(info.value)
    with pytest.raises(DuplicateDocumentError, match="'qa'"):
        per_query({"qa": {"c1": 2}}, {"qa": ["c1", "c1"]}, "recall", 3)


def test_duplicate_message_lists_every_repeated_id_sorted() -> None:
    with pytest.raises(DuplicateDocumentError, match=r"more than once: 'a', 'b'\."):
        evaluate_run({"q": {"a": 1}}, {"q": ["b", "a", "b", "c", "a", "a"]})


def test_seed_004_k_below_one_is_refused() -> None:
    for bad in (0, -1):
        with pytest.raises(
            ValueError,
            match=rf"k_values must be an int >= 1, got {bad} \(a k of 0 or below is not a smaller",
        ):
            evaluate_run({"q1": {"c1": 2}}, {"q1": ["c1"]}, k_values=[bad], metrics=["recall"])
    with pytest.raises(InvalidInputError, match=r"^k must be an int >= 1, got 0"):
        per_query({"q1": {"c1": 2}}, {"q1": ["c1"]}, "recall", 0)


def test_seed_004_get_metric_with_cut_off_is_refused_by_the_drivers() -> None:
    with pytest.raises(
        UnknownMetricError,
        match=r"no metric named 'recall@5'\. Available: hit_rate, map, mrr, ndcg, precision, rec",
    ):
        evaluate_run(QRELS, RUN, metrics=["recall@5"])
    with pytest.raises(UnknownMetricError, match="'recall@5'"):
        per_query(QRELS, RUN, "recall@5", 5)


def test_unknown_metric_is_refused_before_any_scoring() -> None:
    # the run would be refused for its duplicates if scoring had started
    with pytest.raises(UnknownMetricError, match="'bleu'"):
        evaluate_run({"q": {"a": 1}}, {"q": ["a", "a"]}, metrics=["ndcg", "bleu"])


@dataclass(frozen=True, slots=True)
class BrokenMetric:
    name: ClassVar[str] = "broken"
    version: ClassVar[str] = "1"

    def evaluate(self, judgements: Mapping[str, int], ranked: Sequence[str], k: int) -> float:
        raise RuntimeError("oops")


def test_seed_004_custom_metric_that_raises_is_left_out_and_logged(registered: list[str]) -> None:
    METRICS.register("broken")(BrokenMetric)
    registered.append("broken")
    warnings = WarningLog()
    report = evaluate_run(QRELS, RUN, k_values=[5], metrics=["recall", "broken"], warnings=warnings)
    assert report.metrics == {"recall@5": 1.0}  # 'broken@5' is absent, not zero
    assert all("broken@5" not in row for row in report.per_query.values())
    # the broken metric's warning, then (issue 21) the count of unjudged docs in the top 5:
    # 3 of the 7 retrieved here have no judgement
    assert len(warnings) == 2 and warnings.entries[1].startswith("CAUTION [run] (judged@5)")
    assert warnings.entries[0].startswith(
        "CAUTION [score] (broken): the 'broken' metric raised RuntimeError('oops')"
    )
    assert warnings.entries[0].endswith(
        "was left out of this run's results rather than silently scoring zero"
    )
    assert report.warnings == warnings.entries
    # without a log passed in, the report still carries the warning
    assert len(evaluate_run(QRELS, RUN, k_values=[5], metrics=["broken", "recall"]).warnings) == 2


def test_custom_metric_failing_on_a_later_query_is_removed_everywhere(
    registered: list[str],
) -> None:
    def picky(judgements: Mapping[str, float], ranked: Sequence[str], k: int) -> float:
        if "c4" in judgements:
            raise KeyError("c4")
        return 0.5

    METRICS.register("picky", picky)
    registered.append("picky")
    report = evaluate_run(QRELS, RUN, k_values=[1, 2], metrics=["picky", "precision"])
    assert list(report.metrics) == ["precision@1", "precision@2"]
    assert all(set(row) == {"precision@1", "precision@2"} for row in report.per_query.values())
    assert "on query 'q2'" in report.warnings[0]


def test_custom_metric_returning_nan_is_treated_as_failed(registered: list[str]) -> None:
    METRICS.register("nan_metric", lambda j, r, k: math.nan)
    registered.append("nan_metric")
    report = evaluate_run(QRELS, RUN, k_values=[1], metrics=["nan_metric", "recall"])
    assert list(report.metrics) == ["recall@1"]
    assert "returned NaN" in report.warnings[0]


def test_metrics_default_to_the_six_builtins_not_to_everything_registered(
    registered: list[str],
) -> None:
    METRICS.register("extra_metric", lambda j, r, k: 1.0)
    registered.append("extra_metric")
    report = evaluate_run(QRELS, RUN)
    names = {key.split("@")[0] for key in report.metrics}
    assert names == {"hit_rate", "map", "mrr", "ndcg", "precision", "recall"}
    assert report.k_values == DEFAULT_K_VALUES == (1, 3, 5, 10, 20, 100)


# --------------------------------------------------------------------------- run rules


def test_a_judged_query_missing_from_the_run_scores_zero_and_counts() -> None:
    report = evaluate_run(
        {"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": ["a"]}, k_values=[1], metrics=["recall", "mrr"]
    )
    assert report.n_queries == 2
    assert report.per_query["q2"] == {"recall@1": 0.0, "mrr@1": 0.0, "mrr": 0.0}
    assert report.metrics == {"recall@1": 0.5, "mrr@1": 0.5, "mrr": 0.5}


def test_rankings_for_unjudged_queries_are_ignored_even_with_duplicates() -> None:
    report = evaluate_run(
        {"q1": {"a": 1}, "q2": {"b": 0}},
        {"q1": ["a"], "q2": ["b", "b"], "q9": ["z", "z"]},
        k_values=[1],
        metrics=["recall"],
    )
    assert report.per_query == {"q1": {"recall@1": 1.0}}


def test_nothing_scorable_is_an_error_not_an_empty_result() -> None:
    with pytest.raises(
        NoScorableQueriesError, match=r"no query in qrels has a relevant judgement \(grade > 0\)"
    ):
        evaluate_run({"q1": {"a": 0}, "q2": {}}, {"q1": ["a"]})
    with pytest.raises(NoScorableQueriesError, match=r"\(grade >= 3\)"):
        evaluate_run({"q1": {"a": 2}}, {"q1": ["a"]}, relevance_level=3)
    with pytest.raises(ValueError):
        evaluate_run({}, {})


def test_key_order_metric_major_with_uncut_last() -> None:
    report = evaluate_run(QRELS, RUN, k_values=[3, 1], metrics=["map", "recall", "mrr"])
    assert list(report.metrics) == [
        "map@1",
        "map@3",
        "map",
        "recall@1",
        "recall@3",
        "mrr@1",
        "mrr@3",
        "mrr",
    ]
    assert list(report.per_query["q1"]) == list(report.metrics)


def test_k_values_are_deduplicated_sorted_and_an_int_is_accepted() -> None:
    assert evaluate_run(QRELS, RUN, k_values=[3, 1, 3], metrics="recall").k_values == (1, 3)
    assert evaluate_run(QRELS, RUN, k_values=2, metrics="recall").metrics == {"recall@2": 0.75}


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"k_values": []}, "k_values is empty"),
        ({"metrics": []}, "metrics is empty"),
        ({"k_values": [1.5]}, r"every k in k_values must be an int >= 1, got 1\.5"),
        ({"relevance_level": "2"}, r"relevance_level must be a finite number .* got '2'"),
        ({"relevance_level": True}, "relevance_level must be a finite number"),
        ({"relevance_level": math.nan}, "relevance_level must be a finite number"),
        ({"relevance_level": math.inf}, "relevance_level must be a finite number"),
        ({"missing_queries": "drop"}, "missing_queries must be 'zero' or 'skip'"),
    ],
)
def test_argument_errors(kwargs: dict[str, Any], pattern: str) -> None:
    with pytest.raises(InvalidInputError, match=pattern):
        evaluate_run(QRELS, RUN, **kwargs)


@pytest.mark.parametrize(
    ("ranking", "pattern"),
    [
        (
            {"c1": 1.0, "c2": 0.5},
            r"run for query 'q1' must be a list of doc ids, best first; got dict .*sort it",
        ),
        ("c1", r"run for query 'q1' must be a list of doc ids, best first; got str 'c1'"),
        (None, "got NoneType"),
    ],
)
def test_a_ranking_must_be_a_list(ranking: Any, pattern: str) -> None:
    with pytest.raises(InvalidInputError, match=pattern):
        evaluate_run({"q1": {"c1": 1}}, {"q1": ranking})


def test_a_tuple_ranking_is_a_sequence_and_is_scored() -> None:
    assert (
        evaluate_run({"q1": {"c1": 1}}, {"q1": ("x", "c1")}, k_values=[2], metrics="mrr").metrics[
            "mrr"
        ]
        == 0.5
    )


def test_non_numeric_grades_and_unhashable_ids_name_the_query() -> None:
    with pytest.raises(InvalidInputError, match=r"cannot score query 'q1': .*numeric grade"):
        evaluate_run({"q1": {"c1": "relevant"}}, {"q1": ["c1"]})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match=r"run\['q1'\]: id \['c1'\] is a list"):
        evaluate_run({"q1": {"c1": 1}}, {"q1": [["c1"]]})  # type: ignore[list-item]


def test_relevance_level_is_applied_and_recorded() -> None:
    qrels = {"q": {"a": 1, "b": 2}}
    report = evaluate_run(
        qrels, {"q": ["a", "b"]}, k_values=[1, 2], metrics=["precision", "ndcg"], relevance_level=2
    )
    assert report.metrics["precision@1"] == 0.0 and report.metrics["precision@2"] == 0.5
    # gains ignore the level, as trec_eval's ndcg_cut does
    assert (
        report.metrics["ndcg@2"]
        == evaluate_run(qrels, {"q": ["a", "b"]}, k_values=[2], metrics="ndcg").metrics["ndcg@2"]
    )
    assert report.conventions.relevance_level == 2
    assert evaluate_run(qrels, {"q": ["a"]}).conventions.relevance_level is None


def test_a_list_and_a_trec_run_record_their_tie_order() -> None:
    trec = parse_trec_run(["q1 Q0 c2 1 1.0 t", "q1 Q0 c1 2 1.0 t", "q2 Q0 c4 1 0.5 t"])
    assert trec["q1"] == ["c2", "c1"]  # tie: doc id descending
    assert evaluate_run(QRELS, trec).conventions.ties == TREC_ORDERING
    assert evaluate_run(QRELS, RUN).conventions.ties == "list order"


def test_long_rankings_beyond_the_precomputed_rank_tables() -> None:
    ranked = [f"d{i}" for i in range(5000)]
    qrels = {"q": {"d4999": 2, "d2500": 1}}
    report = evaluate_run(
        qrels, {"q": ranked}, k_values=[3000, 5000], metrics=["ndcg", "mrr", "map"]
    )
    assert report.metrics["mrr"] == pytest.approx(1 / 2501)
    assert report.metrics["map"] == pytest.approx((1 / 2501 + 2 / 5000) / 2)
    ideal = 2 + 1 / math.log2(3)
    assert report.metrics["ndcg@5000"] == pytest.approx(
        (1 / math.log2(2502) + 2 / math.log2(5001)) / ideal
    )


# --------------------------------------------------------------------------- contextgrid oracle

DOCS = [f"c{i}" for i in range(10)]
QIDS = ["q0", "q1", "q2", "q3", "q4"]
cg_qrels = st.dictionaries(
    st.sampled_from(QIDS),
    st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), max_size=6),
    min_size=1,
)
cg_runs = st.dictionaries(
    st.sampled_from([*QIDS, "q9"]), st.lists(st.sampled_from(DOCS), unique=True, max_size=10)
)
cg_ks = st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True)
SIX = ["recall", "precision", "hit_rate", "mrr", "map", "ndcg"]


@settings(max_examples=300, deadline=None)
@given(qrels=cg_qrels, run=cg_runs, ks=cg_ks)
def test_evaluate_matches_seed_004_contextgrid(
    qrels: dict[str, dict[str, int]], run: dict[str, list[str]], ks: list[int]
) -> None:
    want = cg.evaluate(qrels, run, ks=ks, metrics=SIX)
    if not want:  # contextgrid returns {} when nothing is relevant; ragmeter refuses
        with pytest.raises(NoScorableQueriesError):
            evaluate_run(qrels, run, k_values=ks, metrics=SIX)
        return
    if not {q for q, j in qrels.items() if any(g > 0 for g in j.values())} & set(run):
        # contextgrid scores every judged query 0; ragmeter refuses a run that ranks none
        with pytest.raises(InvalidInputError, match="has a ranking in the run"):
            evaluate_run(qrels, run, k_values=ks, metrics=SIX)
        return
    report = evaluate_run(qrels, run, k_values=ks, metrics=SIX)
    cut_keys = {key for key in report.metrics if "@" in key}
    assert cut_keys == set(want)
    for key in cut_keys:
        assert report.metrics[key] == pytest.approx(want[key], abs=1e-12), key
    metric = SIX[len(ks) % len(SIX)]
    assert per_query(qrels, run, metric, ks[0]) == pytest.approx(
        cg.per_query(qrels, run, metric, ks[0]), abs=1e-12
    )


# --------------------------------------------------------------------------- evaluate_retrieval


def test_seed_000_evaluate_retrieval_examples() -> None:
    qrels = {"q1": {"d1": 1.0, "d2": 1.0}, "q2": {"d3": 1.0}}
    queries = {"q1": "first query", "q2": "second query"}
    rankings = {"first query": ["d1", "d9", "d2"], "second query": ["d9", "d3"]}

    def retriever(query: str, *, limit: int = 10) -> list[str]:
        return rankings[query][:limit]

    report = evaluate_retrieval(retriever, qrels, queries, k_values=(1, 3))
    assert report.metrics["recall@3"] == 1.0
    assert round(report.primary_at(1) or -1, 3) == 0.5

    qrels2 = {"q1": {"d1": 1.0}, "q2": {"d2": 1.0}}

    def retriever2(query: str, *, limit: int = 10) -> list[str]:
        return {"alpha": ["d1", "d2"], "beta": ["d1", "d2"]}[query][:limit]

    report2 = evaluate_retrieval(retriever2, qrels2, {"q1": "alpha", "q2": "beta"}, k_values=(1, 2))
    assert (report2.metrics["recall@2"], report2.n_queries) == (1.0, 2)


@dataclass
class Hit:
    doc_id: str


@dataclass
class Node:
    id: str


@dataclass
class Chunk:
    metadata: dict[str, Any]


@pytest.mark.parametrize(
    "results",
    [
        ["a", "x", "b"],
        [("a", 0.9), ("x", 0.5), ("b", 0.1)],
        [Hit("a"), Hit("x"), Hit("b")],
        [Node("a"), Node("x"), Node("b")],
        [Chunk({"doc_id": "a"}), Chunk({"doc_id": "x"}), Chunk({"doc_id": "b"})],
        [{"doc_id": "a"}, {"id": "x"}, {"metadata": {"doc_id": "b"}}],
        [{"meta": {"doc_id": "a"}}, "x", ("b", 1.0)],
        [(Chunk({"doc_id": "a"}), 0.9), (Node("x"), 0.5), ({"id": "b"}, 1)],
    ],
    ids=["str", "pairs", "doc_id", "id", "metadata", "mappings", "mixed", "document-score"],
)
def test_results_map_to_doc_ids(results: list[Any]) -> None:
    qrels = {"q": {"a": 1, "b": 1}}
    report = evaluate_retrieval(
        lambda text: results, qrels, {"q": "text"}, k_values=(1, 3), metrics=["recall", "mrr"]
    )
    assert report.per_query["q"] == {
        "recall@1": 0.5,
        "recall@3": 1.0,
        "mrr@1": 1.0,
        "mrr@3": 1.0,
        "mrr": 1.0,
    }


def test_a_user_doc_id_function_wins() -> None:
    results = [{"source": "a", "id": "chunk-7"}, {"source": "b", "id": "chunk-8"}]
    report = evaluate_retrieval(
        lambda text: results,
        {"q": {"b": 1}},
        {"q": "t"},
        k_values=[1],
        metrics="mrr",
        doc_id=lambda r: r["source"],
    )
    assert report.metrics["mrr"] == 0.5


def test_chunks_are_deduplicated_to_each_docs_best_rank() -> None:
    assert dedupe_best_rank(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    results = [("a", 0.9), ("a", 0.8), ("x", 0.7), ("a", 0.6), ("b", 0.5)]
    report = evaluate_retrieval(
        lambda t: results, {"q": {"b": 1}}, {"q": "t"}, k_values=[3], metrics=["mrr", "precision"]
    )
    assert report.per_query["q"]["mrr"] == pytest.approx(1 / 3)  # b is third after de-duplication
    assert report.per_query["q"]["precision@3"] == pytest.approx(1 / 3)


def test_limit_is_passed_when_the_retriever_accepts_it() -> None:
    seen: list[Any] = []

    def with_limit(text: str, limit: int = 99) -> list[str]:
        seen.append(limit)
        return ["a"]

    def with_kwargs(text: str, **kwargs: Any) -> list[str]:
        seen.append(kwargs.get("limit"))
        return ["a"]

    def without(text: str) -> list[str]:
        seen.append("none")
        return ["a"]

    args = ({"q": {"a": 1}}, {"q": "t"})
    evaluate_retrieval(with_limit, *args, k_values=(1, 20))
    evaluate_retrieval(with_limit, *args, k_values=(1, 20), limit=50)
    evaluate_retrieval(with_kwargs, *args, k_values=(5,))
    evaluate_retrieval(without, *args)
    assert seen == [20, 50, 5, "none"]
    with pytest.raises(InvalidInputError, match="limit must be an int >= 1, got 0"):
        evaluate_retrieval(with_limit, *args, limit=0)


def test_an_unmappable_result_names_the_query_and_result_index() -> None:
    with pytest.raises(
        InvalidInputError,
        match=r"query 'q', result 1: cannot tell which document this result is: 42",
    ):
        evaluate_retrieval(lambda t: ["a", 42], {"q": {"a": 1}}, {"q": "t"})
    with pytest.raises(InvalidInputError, match=r"pass doc_id=<function result -> id>"):
        evaluate_retrieval(lambda t: [object()], {"q": {"a": 1}}, {"q": "t"})


def test_judged_queries_without_text_are_skipped_with_a_warning() -> None:
    calls: list[str] = []

    def retriever(text: str) -> list[str]:
        calls.append(text)
        return ["a"]

    qrels = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 0}}
    report = evaluate_retrieval(retriever, qrels, {"q1": "one", "q3": "three"}, k_values=[1])
    assert calls == ["one"]  # q3 has nothing relevant: not even run
    assert report.n_queries == 1
    assert report.warnings == [
        "CAUTION [retrieve] (q2): query 'q2' is judged but has no text in queries; skipped"
    ]
    with pytest.raises(NoScorableQueriesError, match="no judged query could be run"):
        evaluate_retrieval(retriever, qrels, {"q9": "nine"})


def test_evaluate_retrieval_checks_arguments_before_running_anything() -> None:
    def retriever(text: str) -> list[str]:
        raise AssertionError("must not be called")

    with pytest.raises(UnknownMetricError):
        evaluate_retrieval(retriever, {"q": {"a": 1}}, {"q": "t"}, metrics=["nope"])
    with pytest.raises(InvalidInputError, match="k_values"):
        evaluate_retrieval(retriever, {"q": {"a": 1}}, {"q": "t"}, k_values=[0])
    with pytest.raises(InvalidInputError, match="relevance_level"):
        evaluate_retrieval(retriever, {"q": {"a": 1}}, {"q": "t"}, relevance_level="high")  # type: ignore[arg-type]


ret_qrels = st.dictionaries(
    st.sampled_from(QIDS),
    st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), max_size=6),
    min_size=1,
)
# rankings may repeat a doc (several chunks of one source)
ret_rankings = st.dictionaries(st.sampled_from(QIDS), st.lists(st.sampled_from(DOCS), max_size=14))


@settings(max_examples=200, deadline=None)
@given(qrels=ret_qrels, rankings=ret_rankings, ks=cg_ks)
def test_evaluate_retrieval_matches_seed_000_ef(
    qrels: dict[str, dict[str, int]], rankings: dict[str, list[str]], ks: list[int]
) -> None:
    queries = {q: f"text of {q}" for q in QIDS}

    def retriever(text: str, *, limit: int = 10) -> list[str]:
        return rankings.get(text.removeprefix("text of "), [])[: limit * 2]

    metrics = ["ndcg", "recall", "precision", "mrr", "map"]
    fqrels = {q: {d: float(g) for d, g in j.items()} for q, j in qrels.items()}
    if not any(g > 0 for j in qrels.values() for g in j.values()):
        with pytest.raises(NoScorableQueriesError):
            evaluate_retrieval(retriever, fqrels, queries, k_values=ks, metrics=metrics)
        with pytest.raises(ValueError):
            ef.evaluate_retrieval(retriever, fqrels, queries, k_values=ks, metrics=metrics)
        return
    ours = evaluate_retrieval(retriever, fqrels, queries, k_values=ks, metrics=metrics)
    want = ef.evaluate_retrieval(retriever, fqrels, queries, k_values=ks, metrics=metrics)
    assert ours.n_queries == want.n_queries
    for key, value in want.metrics.items():
        assert ours.metrics[key] == pytest.approx(value, abs=1e-12), key
    for qid, row in want.per_query.items():
        for key, value in row.items():
            assert ours.per_query[qid][key] == pytest.approx(value, abs=1e-12), (qid, key)
    assert ours.primary == pytest.approx(want.primary, abs=1e-12)
    assert ours.primary_at(ks[0]) == pytest.approx(want.primary_at(ks[0]), abs=1e-12)


# --------------------------------------------------------------------------- fused kernel

PRIMITIVES = {
    "ndcg": lambda ranked, rel, k, level: ranking.ndcg_at_k(ranked, rel, k),
    "recall": lambda ranked, rel, k, level: ranking.recall_at_k(
        ranked, rel, k, relevance_level=level
    ),
    "precision": lambda ranked, rel, k, level: ranking.precision_at_k(
        ranked, rel, k, relevance_level=level
    ),
    "hit_rate": lambda ranked, rel, k, level: ranking.hit_rate_at_k(
        ranked, rel, k, relevance_level=level
    ),
    "mrr": lambda ranked, rel, k, level: ranking.reciprocal_rank(
        ranked, rel, k, relevance_level=level
    ),
    "map": lambda ranked, rel, k, level: ranking.average_precision(
        ranked, rel, k, relevance_level=level
    ),
}


@settings(max_examples=300, deadline=None)
@given(
    qrels=st.dictionaries(
        st.sampled_from(QIDS),
        st.dictionaries(st.sampled_from(DOCS), st.integers(-3, 3) | st.floats(-1, 3), max_size=6),
    ),
    run=cg_runs,
    ks=cg_ks,
    level=st.sampled_from([None, -1, 0, 0.5, 1, 2]),
)
def test_fused_kernel_equals_the_primitives_at_any_relevance_level(
    qrels: dict[str, dict[str, float]],
    run: dict[str, list[str]],
    ks: list[int],
    level: float | None,
) -> None:
    """evaluate_run's one-pass kernel gives each primitive's value, also for levels <= 0."""
    scored = {
        q
        for q, j in qrels.items()
        if any((g > 0 if level is None else g >= level) for g in j.values())
    }
    if not scored:
        with pytest.raises(NoScorableQueriesError):
            evaluate_run(qrels, run, k_values=ks, relevance_level=level)
        return
    if not scored & set(run):
        with pytest.raises(InvalidInputError, match="has a ranking in the run"):
            evaluate_run(qrels, run, k_values=ks, relevance_level=level)
        return
    report = evaluate_run(qrels, run, k_values=ks, metrics=list(PRIMITIVES), relevance_level=level)
    assert set(report.per_query) == scored
    for qid, row in report.per_query.items():
        ranked = run.get(qid, [])
        for name, fn in PRIMITIVES.items():
            for k in ks:
                assert row[f"{name}@{k}"] == pytest.approx(
                    fn(ranked, qrels[qid], k, level), abs=1e-12
                )
        assert row["mrr"] == pytest.approx(
            PRIMITIVES["mrr"](ranked, qrels[qid], None, level), abs=1e-12
        )
        assert row["map"] == pytest.approx(
            PRIMITIVES["map"](ranked, qrels[qid], None, level), abs=1e-12
        )
