"""The retrieval metric registry: names, lookup errors, registration of custom metrics."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import contextgrid as cg
import pytest

from ragmeter.errors import InvalidInputError, RagmeterError, UnknownMetricError
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.metrics import ranking
from ragmeter.metrics.registry import (
    BUILTIN_METRICS,
    METRICS,
    NDCG,
    RETRIEVAL_METRICS,
    MetricRegistry,
    RetrievalMetric,
    available_metrics,
    get_metric,
)

SIX = ("hit_rate", "map", "mrr", "ndcg", "precision", "recall")


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names registered by a test are removed afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        if name in METRICS:
            METRICS.unregister(name)


def test_six_builtins_sorted_like_seed_004() -> None:
    assert available_metrics() == SIX == BUILTIN_METRICS
    assert available_metrics() == cg.available_metrics()  # the seed package agrees
    assert METRICS is RETRIEVAL_METRICS
    assert tuple(METRICS) == SIX and len(METRICS) == 6


@pytest.mark.parametrize("name", SIX)
def test_get_metric_returns_a_metric_named_as_asked(name: str) -> None:
    metric = get_metric(name)
    assert metric.name == name
    assert isinstance(metric, RetrievalMetric)
    assert METRICS[name] is metric


def test_get_metric_repr_is_the_class_call() -> None:
    assert repr(get_metric("recall")) == "Recall()"  # seed 004 prints RecallMetric()


@pytest.mark.parametrize(
    ("name", "fn", "k"),
    [
        ("ndcg", ranking.ndcg_at_k, 3),
        ("recall", ranking.recall_at_k, 2),
        ("precision", ranking.precision_at_k, 2),
        ("hit_rate", ranking.hit_rate_at_k, 1),
        ("mrr", ranking.reciprocal_rank, 3),
        ("map", ranking.average_precision, 3),
    ],
)
def test_builtin_evaluate_is_the_primitive(name: str, fn: object, k: int) -> None:
    judgements = {"a": 2, "c": 1, "z": 3}
    ranked = ["x", "a", "c"]
    assert get_metric(name).evaluate(judgements, ranked, k) == fn(ranked, judgements, k)  # type: ignore[operator]


def test_metric_at_k_is_not_a_registry_name() -> None:
    """Seed 004: get_metric('recall@5') raises, listing what exists."""
    with pytest.raises(UnknownMetricError) as info:
        get_metric("recall@5")
    message = str(info.value)
    assert message.startswith(
        "no metric named 'recall@5'. Available: hit_rate, map, mrr, ndcg, precision, recall."
    )
    assert "pass 'recall'" in message
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)
    assert isinstance(info.value, RagmeterError)


def test_unknown_name_lists_the_available_metrics() -> None:
    with pytest.raises(
        UnknownMetricError, match=r"no metric named 'bleu'\. Available: hit_rate, map"
    ):
        get_metric("bleu")
    with pytest.raises(UnknownMetricError, match="no metric named 3"):
        get_metric(3)  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        METRICS["nope"]


def test_register_a_function_by_decorator_and_use_it(registered: list[str]) -> None:
    @METRICS.register("first_relevant")
    def first_relevant(judgements: Mapping[str, float], ranked: Sequence[str], k: int) -> float:
        return 1.0 if ranked[:1] and judgements.get(ranked[0], 0) > 0 else 0.0

    registered.append("first_relevant")
    assert "first_relevant" in available_metrics()
    report = evaluate_run(
        {"q": {"a": 1}, "p": {"b": 1}},
        {"q": ["a"], "p": ["x", "b"]},
        k_values=[1],
        metrics=["first_relevant"],
    )
    assert report.metrics == {"first_relevant@1": 0.5}
    assert report.per_query == {"q": {"first_relevant@1": 1.0}, "p": {"first_relevant@1": 0.0}}


def test_register_an_object_with_a_name(registered: list[str]) -> None:
    @dataclass(frozen=True)
    class TopIsJudged:
        name: ClassVar[str] = "top_is_judged"

        def evaluate(self, judgements: Mapping[str, float], ranked: Sequence[str], k: int) -> float:
            return 1.0 if ranked and ranked[0] in judgements else 0.0

    METRICS.register(TopIsJudged())
    registered.append("top_is_judged")
    assert get_metric("top_is_judged").evaluate({"a": 0}, ["a"], 1) == 1.0


def test_register_a_class_under_a_name_builds_it(registered: list[str]) -> None:
    """Seed 004's form: METRICS.register("broken")(BrokenMetric)."""

    @dataclass(frozen=True)
    class Constant:
        name: ClassVar[str] = "constant"

        def evaluate(self, judgements: Mapping[str, float], ranked: Sequence[str], k: int) -> float:
            return 0.25

    METRICS.register("constant")(Constant)
    registered.append("constant")
    assert isinstance(get_metric("constant"), Constant)
    assert evaluate_run({"q": {"a": 1}}, {"q": []}, k_values=[2], metrics=["constant"]).metrics == {
        "constant@2": 0.25
    }


def test_a_builtin_registered_under_another_name_is_still_computed(registered: list[str]) -> None:
    METRICS.register("graded_ndcg", NDCG())
    registered.append("graded_ndcg")
    qrels = {"q": {"a": 3, "b": 1}}
    run = {"q": ["b", "x", "a"]}
    report = evaluate_run(qrels, run, k_values=[3], metrics=["graded_ndcg", "ndcg"])
    assert report.metrics["graded_ndcg@3"] == report.metrics["ndcg@3"] > 0


def test_registering_a_taken_name_needs_replace(registered: list[str]) -> None:
    METRICS.register("dup_name", lambda j, r, k: 0.0)
    registered.append("dup_name")
    with pytest.raises(
        InvalidInputError, match="'dup_name' is already registered; pass replace=True"
    ):
        METRICS.register("dup_name", lambda j, r, k: 1.0)
    METRICS.register("dup_name", lambda j, r, k: 1.0, replace=True)
    assert get_metric("dup_name").evaluate({}, [], 1) == 1.0
    with pytest.raises(InvalidInputError, match="'recall' is already registered"):
        METRICS.register("recall", lambda j, r, k: 1.0)


@pytest.mark.parametrize("bad", ["", "recall@5", "a@b"])
def test_a_registry_name_is_bare(bad: str) -> None:
    with pytest.raises(InvalidInputError, match="bare name without '@'"):
        MetricRegistry().register(bad, lambda j, r, k: 0.0)


def test_what_cannot_be_registered() -> None:
    reg = MetricRegistry()
    with pytest.raises(InvalidInputError, match="has no string 'name'"):
        reg.register(object())
    with pytest.raises(InvalidInputError, match="need an object with evaluate"):
        reg.register("number", 42)


def test_unregister(registered: list[str]) -> None:
    METRICS.register("temp_metric", lambda j, r, k: 0.0)
    METRICS.unregister("temp_metric")
    assert "temp_metric" not in available_metrics()
    with pytest.raises(
        InvalidInputError, match="'ndcg' is a built-in metric and cannot be unregistered"
    ):
        METRICS.unregister("ndcg")
    with pytest.raises(UnknownMetricError, match="no metric named 'never_there'"):
        METRICS.unregister("never_there")


def test_a_fresh_registry_is_independent() -> None:
    reg = MetricRegistry()
    assert len(reg) == 0 and reg.names() == ()
    reg.register("one", lambda j, r, k: 1.0)
    assert reg.names() == ("one",) and "one" not in METRICS


def test_one_lookup_finds_retrieval_and_sample_level_metrics() -> None:
    """Issue 19: get_metric("faithfulness") used to raise; names live in one place."""
    from ragmeter.metrics.base import RAG_METRICS

    assert get_metric("faithfulness") is RAG_METRICS["faithfulness"]
    assert get_metric("token_f1", kind="rag") is RAG_METRICS["token_f1"]
    assert get_metric("ndcg") is METRICS["ndcg"]  # the retrieval metric first
    assert get_metric("ndcg", kind="rag") is RAG_METRICS["ndcg"]
    with pytest.raises(UnknownMetricError, match="no metric named 'token_f1'"):
        get_metric("token_f1", kind="retrieval")
    with pytest.raises(UnknownMetricError) as info:
        get_metric("bleu")
    assert "Sample-level RAG metrics: " in str(info.value)
    assert "faithfulness" in str(info.value) and "token_f1" in str(info.value)
    assert available_metrics("rag") == tuple(RAG_METRICS)
    assert "faithfulness" in available_metrics("rag")
    with pytest.raises(InvalidInputError, match="kind must be"):
        get_metric("ndcg", kind="judge")  # type: ignore[arg-type]


def test_every_trec_eval_measure_is_in_the_registry_with_its_meaning() -> None:
    """``get_metric`` finds trec_eval's measures (kind ``"trec"``, or by a name no other
    registry has), each with its convention in words; a retrieval name stays the built-in."""
    import pytrec_eval

    from ragmeter.metrics.trec import NICKNAMES

    names = available_metrics("trec")
    assert set(NICKNAMES["all_trec"]) <= set(names)
    for name in names:
        measure = get_metric(name, kind="trec")
        assert measure.name == name and measure.meaning, name
    assert get_metric("bpref") is get_metric("bpref", kind="trec")
    assert get_metric("map").name == "map" and get_metric("map") is not get_metric("map", "trec")
    qrels = {"q": {"d1": 2, "d2": 0, "d3": 1, "d4": 1}}
    ranked = ["d2", "x", "d1", "y", "d3"]
    run = {"q": {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}}
    oracle = pytrec_eval.RelevanceEvaluator(qrels, {"bpref", "Rprec", "infAP", "P_2", "ndcg"})
    expected = oracle.evaluate(run)["q"]
    for name, k, key in [
        ("bpref", None, "bpref"),
        ("Rprec", None, "Rprec"),
        ("infAP", None, "infAP"),
        ("P", 2, "P_2"),
        ("ndcg", None, "ndcg"),
    ]:
        assert get_metric(name, kind="trec").evaluate(qrels["q"], ranked, k) == expected[key]
    with pytest.raises(UnknownMetricError, match=r"trec_eval measures \(kind='trec'\): .*bpref"):
        get_metric("bperf")
