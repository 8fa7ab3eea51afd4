"""Embedding metrics in evaluate_rag: by name (the offline default embedder) or as objects,
mixed with the lexical and the judge metrics in one report."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ragmeter.embed import EMBED_METRICS, FunctionEmbedder, SemanticSimilarity, runner
from ragmeter.errors import MissingDependencyError, UnknownMetricError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.judge import Correctness, FunctionJudge
from ragmeter.metrics.registry import available_metrics, get_metric

SAMPLES = [
    {
        "id": "a",
        "user_input": "capital of France?",
        "response": "The capital is Paris",
        "reference": "Paris is France's capital",
        "retrieved_contexts": ["Paris is the capital of France."],
    },
    {
        "id": "a",  # a repeated id: reported as "a#2", as every metric does
        "user_input": "2 + 2?",
        "response": "four",
        "reference": "4",
        "retrieved_contexts": ["Two plus two is four."],
    },
]


@pytest.fixture
def default_is(monkeypatch: pytest.MonkeyPatch, embedder: Any) -> Any:
    """Make the offline default embedder the counting test embedder."""
    monkeypatch.setattr(runner, "load_default_embedder", lambda: embedder)
    return embedder


def test_the_names_mean_the_metrics_with_the_default_embedder(default_is: Any) -> None:
    names = ["semantic_similarity", "semantic_context_recall", "semantic_context_precision"]
    by_name = evaluate_rag(SAMPLES, metrics=names, embed_cache=None)
    objects = [type(EMBED_METRICS[n])(default_is) for n in names]
    by_object = evaluate_rag(SAMPLES, metrics=objects, embed_cache=None)
    assert by_name.per_sample == by_object.per_sample
    assert set(by_name.per_sample) == {"a", "a#2"}
    assert by_name.extra["embed_models"] == [{"model": "bow-test", "dim": 32}]
    assert set(by_name.metrics) == set(names)


def test_one_default_embedder_serves_every_metric_and_each_text_once(default_is: Any) -> None:
    evaluate_rag(
        SAMPLES, metrics=["semantic_similarity", "semantic_context_precision"], embed_cache=None
    )
    assert len(default_is.texts) == len(set(default_is.texts))


def test_without_the_semantic_extra_the_names_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ragmeter.embed.default", None)  # import fails
    with pytest.raises(MissingDependencyError, match=r"pip install 'ragmeter\[semantic\]'"):
        evaluate_rag(SAMPLES, metrics=["semantic_similarity"], embed_cache=None)


def test_mixed_with_lexical_and_judge_metrics_in_one_report(embedder: Any) -> None:
    judge = FunctionJudge(lambda messages: '{"score": 1}', model="always-one")
    report = evaluate_rag(
        SAMPLES,
        metrics=["token_f1", Correctness(judge=judge), SemanticSimilarity(embedder)],
        embed_cache=None,
        judge_cache=None,
    )
    assert set(report.metrics) == {"token_f1", "judge_correctness", "semantic_similarity"}
    assert report.judge_calls == 2 and report.extra["embed_calls"] == 1
    alone = evaluate_rag(SAMPLES, metrics=["token_f1"])
    assert report.metrics["token_f1"] == alone.metrics["token_f1"]


def test_per_sample_scores_go_to_a_file(embedder: Any, tmp_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    report = evaluate_rag(
        SAMPLES, metrics=[SemanticSimilarity(embedder)], embed_cache=None, per_sample=out
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["semantic_similarity"] for r in rows] == [
        report.per_sample[sid]["semantic_similarity"] for sid in ("a", "a#2")
    ]


def test_the_report_round_trips_through_json(embedder: Any) -> None:
    report = evaluate_rag(SAMPLES, metrics=[SemanticSimilarity(embedder)], embed_cache=None)
    data = json.loads(report.to_json())
    assert data["extra"]["embed_models"] == [{"model": "bow-test", "dim": 32}]
    assert data["metrics"]["semantic_similarity"] == report.metrics["semantic_similarity"]


def test_the_registry_knows_the_names_as_embedding_metrics() -> None:
    assert available_metrics("embed") == (
        "semantic_context_precision",
        "semantic_context_recall",
        "semantic_similarity",
    )
    assert isinstance(get_metric("semantic_similarity"), SemanticSimilarity)
    assert "semantic_similarity" not in available_metrics("rag")  # those call no model
    with pytest.raises(UnknownMetricError, match="Embedding metrics \\(kind='embed'\\)"):
        get_metric("semantic_similarty")


@pytest.mark.filterwarnings("ignore::ragmeter.judge.JudgeIdentityWarning")  # `calls` is a list
def test_a_function_embedder_with_the_default_model_name_is_keyed_by_its_code(
    tmp_path: Path,
) -> None:
    calls: list[int] = []

    def one(texts: Any) -> list[list[float]]:
        calls.append(1)
        return [[1.0, 0.0] for _ in texts]

    def other(texts: Any) -> list[list[float]]:
        calls.append(2)
        return [[0.0, 1.0] for _ in texts]

    path = tmp_path / "e.sqlite"
    evaluate_rag(SAMPLES, metrics=[SemanticSimilarity(FunctionEmbedder(one))], embed_cache=path)
    evaluate_rag(SAMPLES, metrics=[SemanticSimilarity(FunctionEmbedder(other))], embed_cache=path)
    assert calls == [1, 2]  # the second function does not reuse the first one's vectors
