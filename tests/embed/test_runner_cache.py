"""How texts reach the model: each distinct text once, in bounded batches, cached across runs
and processes, estimated before anything is called; failures named, never NaN."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ragmeter.embed import (
    EmbedCache,
    EmbedOptions,
    FunctionEmbedder,
    SemanticContextPrecision,
    SemanticContextRecall,
    SemanticSimilarity,
    embed_key,
    estimate_embeddings,
    run_embeddings,
)
from ragmeter.errors import EmbedCacheError, EmbedderOutputError, InvalidInputError, JudgeCacheError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.judge import JudgeIdentityWarning, TransientJudgeError
from ragmeter.schema import RagSample

SAMPLES = [
    {
        "id": f"q{i}",
        "response": f"answer number {i % 7}",
        "reference": f"the reference {i % 5}. It has two sentences {i % 3}.",
        "retrieved_contexts": [f"context {i % 4}", f"shared context. More {i % 2}."],
    }
    for i in range(40)
]


def metrics(embedder: Any) -> list[Any]:
    return [
        SemanticSimilarity(embedder),
        SemanticContextRecall(embedder, threshold=0.5),
        SemanticContextPrecision(embedder, threshold=0.5),
    ]


def needed(embedder: Any) -> list[str]:
    """Every text occurrence the three metrics need (computed from the metrics' own texts)."""
    return [
        t for s in SAMPLES for m in metrics(embedder) for t in m.texts(RagSample.model_validate(s))
    ]


def test_each_distinct_text_is_embedded_once_in_batches_of_at_most_batch_size(
    embedder: Any,
) -> None:
    report = evaluate_rag(
        SAMPLES,
        metrics=metrics(embedder),
        embed_cache=None,
        embed_options=EmbedOptions(batch_size=7),
    )
    distinct = set(needed(embedder))
    assert sorted(embedder.texts) == sorted(distinct)  # each once, none missing
    assert all(1 <= len(batch) <= 7 for batch in embedder.batches)
    assert embedder.calls == -(-len(distinct) // 7)
    assert report.extra["embed_calls"] == embedder.calls
    assert report.extra["embed_embedded"] == len(distinct)
    assert report.extra["embed_texts"] == len(needed(embedder))
    assert report.extra["embed_models"] == [{"model": "bow-test", "dim": 32}]


def test_at_most_concurrency_batches_are_in_flight(embedder: Any) -> None:
    embedder.delay = 0.02
    evaluate_rag(
        SAMPLES,
        metrics=metrics(embedder),
        embed_cache=None,
        embed_options=EmbedOptions(batch_size=2, concurrency=3),
    )
    assert embedder.calls > 6
    assert embedder.max_in_flight == 3


def test_a_rerun_with_the_cache_calls_the_model_zero_times(embedder: Any, tmp_path: Path) -> None:
    path = tmp_path / "embed.sqlite"
    first = evaluate_rag(SAMPLES, metrics=metrics(embedder), embed_cache=path)
    calls = embedder.calls
    assert calls > 0 and first.extra["embed_cache_hits"] == 0
    second = evaluate_rag(SAMPLES, metrics=metrics(embedder), embed_cache=path)
    assert embedder.calls == calls  # no new call
    assert second.extra["embed_calls"] == 0
    assert second.extra["embed_cache_hits"] == len(set(needed(embedder)))
    assert second.per_sample == first.per_sample
    assert second.extra["embed_cache"] == str(path)


def test_the_default_cache_lives_in_the_user_cache_dir(embedder: Any) -> None:
    evaluate_rag(SAMPLES[:2], metrics=[SemanticSimilarity(embedder)])
    calls = embedder.calls
    report = evaluate_rag(SAMPLES[:2], metrics=[SemanticSimilarity(embedder)])
    assert embedder.calls == calls and report.extra["embed_calls"] == 0
    assert Path(report.extra["embed_cache"]).name == "embed-cache.sqlite"


def test_a_changed_identity_misses_the_cache(embedder: Any, tmp_path: Path) -> None:
    path = tmp_path / "embed.sqlite"
    evaluate_rag(SAMPLES[:3], metrics=[SemanticSimilarity(embedder)], embed_cache=path)
    calls = embedder.calls
    embedder.model = "bow-test-v2"
    evaluate_rag(SAMPLES[:3], metrics=[SemanticSimilarity(embedder)], embed_cache=path)
    assert embedder.calls == 2 * calls


def test_estimate_counts_texts_and_cache_hits_without_calling_the_model(
    embedder: Any, tmp_path: Path
) -> None:
    coerced = [RagSample.model_validate(s) for s in SAMPLES]
    path = tmp_path / "embed.sqlite"
    options = EmbedOptions(batch_size=10)
    cache = EmbedCache(path)
    before = estimate_embeddings(coerced, metrics(embedder), cache=cache, options=options)
    distinct = len(set(needed(embedder)))
    assert (before.texts, before.distinct, before.cached) == (len(needed(embedder)), distinct, 0)
    assert before.to_embed == distinct and before.calls == -(-distinct // 10)
    assert embedder.calls == 0
    run = run_embeddings(coerced, metrics(embedder), cache=cache, options=options)
    assert run.calls == before.calls and run.embedded == before.to_embed
    after = estimate_embeddings(coerced, metrics(embedder), cache=cache)
    assert (after.cached, after.to_embed, after.calls) == (distinct, 0, 0)
    cache.close()


def test_the_cache_gives_vectors_back_exactly(tmp_path: Path) -> None:
    cache = EmbedCache(tmp_path / "e.sqlite")
    vector = [0.1, -2.5e-300, 1e300, 1 / 3]
    key = embed_key({"model": "m"}, "text")
    assert cache.put_many({key: vector})
    assert cache.get_many([key]) == {key: vector}
    assert cache.get_many([f"{i}" for i in range(1200)]) == {}  # many keys: chunked lookups
    cache.close()


def test_processes_writing_one_cache_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    worker = textwrap.dedent(
        f"""
        import sys, time
        from ragmeter.embed import EmbedCache
        start = float(sys.argv[1])
        while time.time() < start:
            time.sleep(0.001)
        cache = EmbedCache({str(path)!r})
        w = int(sys.argv[2])
        for i in range(25):
            assert cache.put_many({{f"w{{w}}-{{i}}-{{j}}": [float(w), float(i), float(j)]
                                   for j in range(4)}}, model="m")
        cache.close()
        """
    )
    import time

    start = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, "-c", worker, str(start), str(w)]) for w in range(5)]
    assert [p.wait(120) for p in procs] == [0] * 5
    cache = EmbedCache(path)
    assert len(cache) == 5 * 25 * 4
    assert cache.get_many(["w4-24-3"]) == {"w4-24-3": [4.0, 24.0, 3.0]}


def test_a_file_that_is_not_an_embedding_cache_is_refused_by_name(tmp_path: Path) -> None:
    foreign = tmp_path / "app.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(EmbedCacheError, match=r"another application's SQLite database .*users"):
        EmbedCache(foreign)
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all, " * 100)
    with pytest.raises(EmbedCacheError, match="is not an SQLite database"):
        len(EmbedCache(text))
    judge = tmp_path / "judge.sqlite"
    from ragmeter.judge import JudgeCache

    JudgeCache(judge).close()
    with pytest.raises(EmbedCacheError, match="not a ragmeter embedding cache") as info:
        EmbedCache(judge)
    assert not isinstance(info.value, JudgeCacheError)
    assert "--no-embed-cache" in str(info.value)


def test_a_read_only_cache_serves_hits_and_counts_what_it_could_not_store(
    embedder: Any, tmp_path: Path
) -> None:
    path = tmp_path / "embed.sqlite"
    evaluate_rag(SAMPLES[:2], metrics=[SemanticSimilarity(embedder)], embed_cache=path)
    cache = EmbedCache(path, readonly=True)
    report = evaluate_rag(SAMPLES[:4], metrics=[SemanticSimilarity(embedder)], embed_cache=cache)
    assert report.extra["embed_cache_hits"] > 0
    assert report.extra["embed_cache_writes_skipped"] == report.extra["embed_embedded"] > 0
    assert any("were not stored (the cache is read-only)" in w for w in report.warnings)


class Flaky:
    """Fails transiently ``failures`` times, then embeds; or always fails for good."""

    def __init__(self, failures: int, permanent: bool = False) -> None:
        self.failures = failures
        self.permanent = permanent
        self.calls = 0

    @property
    def identity(self) -> dict[str, str]:
        return {"model": "flaky"}

    async def embed(self, texts: Any) -> list[list[float]]:
        self.calls += 1
        if self.permanent:
            raise RuntimeError("quota exceeded for good")
        if self.calls <= self.failures:
            raise TransientJudgeError("rate limited")
        return [[1.0, float(len(t))] for t in texts]


def test_transient_errors_are_retried_and_permanent_ones_leave_none_with_the_reason() -> None:
    fast = EmbedOptions(backoff=0.001, retries=2)
    flaky = Flaky(failures=2)
    report = evaluate_rag(
        SAMPLES[:3], metrics=[SemanticSimilarity(flaky)], embed_cache=None, embed_options=fast
    )
    assert flaky.calls == 3 and report.coverage["semantic_similarity"] == 3
    broken = Flaky(0, permanent=True)
    report = evaluate_rag(
        SAMPLES[:3],
        metrics=["token_f1", SemanticSimilarity(broken)],
        embed_cache=None,
        embed_options=fast,
    )
    assert broken.calls == 1  # not transient: not retried
    assert report.per_sample["q0"]["semantic_similarity"] is None
    assert "semantic_similarity" not in report.metrics
    reason = report.details["q0"]["semantic_similarity"]["reason"]
    assert reason.startswith("embedding model 'flaky' raised RuntimeError('quota exceeded")
    assert report.metrics["token_f1"] >= 0.0  # the other metrics are still there


def test_a_call_that_times_out_is_named() -> None:
    class Slow:
        @property
        def identity(self) -> dict[str, str]:
            return {"model": "slow"}

        async def embed(self, texts: Any) -> list[list[float]]:
            await asyncio.sleep(5)
            return []

    report = evaluate_rag(
        SAMPLES[:1],
        metrics=[SemanticSimilarity(Slow())],
        embed_cache=None,
        embed_options=EmbedOptions(timeout=0.05, retries=0),
    )
    assert report.details["q0"]["semantic_similarity"]["reason"] == (
        "embedding model 'slow' timed out after 1 attempt(s)"
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": 0}, "batch_size must be an int >= 1"),
        ({"concurrency": True}, "concurrency must be an int >= 1"),
        ({"timeout": 0}, "timeout must be > 0 seconds or None"),
        ({"retries": -1}, "retries must be an int >= 0"),
    ],
)
def test_bad_options_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        EmbedOptions(**kwargs)


def test_runs_inside_a_running_event_loop(embedder: Any) -> None:
    async def inside() -> Any:
        return evaluate_rag(SAMPLES[:2], metrics=[SemanticSimilarity(embedder)], embed_cache=None)

    report = asyncio.run(inside())
    assert report.coverage["semantic_similarity"] == 2


def test_progress_counts_distinct_texts_up_to_the_total(embedder: Any, tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    path = tmp_path / "embed.sqlite"
    evaluate_rag(SAMPLES[:5], metrics=[SemanticSimilarity(embedder)], embed_cache=path)
    evaluate_rag(
        SAMPLES,
        metrics=[SemanticSimilarity(embedder)],
        embed_cache=path,
        embed_options=EmbedOptions(batch_size=3),
        progress=lambda done, total: seen.append((done, total)),
    )
    total = len(set(needed_for([SemanticSimilarity(embedder)])))
    assert seen[0][0] > 0  # the cached texts count as done at once
    assert seen[-1] == (total, total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def needed_for(chosen: list[Any]) -> list[str]:
    return [t for s in SAMPLES for m in chosen for t in m.texts(RagSample.model_validate(s))]


def test_one_metric_twice_with_two_embedders_is_refused(embedder: Any) -> None:
    other = FunctionEmbedder(lambda ts: [[1.0, 0.0] for _ in ts], model="other")
    with pytest.raises(InvalidInputError, match="semantic_similarity is asked for twice"):
        evaluate_rag(
            SAMPLES,
            metrics=[SemanticSimilarity(embedder), SemanticSimilarity(other)],
            embed_cache=None,
        )
    assert embedder.calls == 0


def test_a_numpy_matrix_is_one_vector_a_row_and_anything_else_is_named(vec: Any) -> None:
    import numpy as np

    class Matrix:
        @property
        def identity(self) -> dict[str, str]:
            return {"model": "matrix"}

        async def embed(self, texts: Any) -> Any:
            return np.asarray([vec(t) for t in texts])

    class Number(Matrix):
        @property
        def identity(self) -> dict[str, str]:
            return {"model": "number"}

        async def embed(self, texts: Any) -> Any:
            return 3

    lists = evaluate_rag(
        SAMPLES[:3],
        metrics=[
            SemanticSimilarity(FunctionEmbedder(lambda ts: [vec(t) for t in ts], model="lists"))
        ],
        embed_cache=None,
    )
    matrix = evaluate_rag(SAMPLES[:3], metrics=[SemanticSimilarity(Matrix())], embed_cache=None)
    assert matrix.per_sample == lists.per_sample
    with pytest.raises(EmbedderOutputError, match="'number' returned no list of vectors"):
        evaluate_rag(SAMPLES[:3], metrics=[SemanticSimilarity(Number())], embed_cache=None)


_LOOSE_STATE = [1.0]


def test_a_function_embedder_reading_a_mutable_global_is_warned_about_by_its_own_name() -> None:
    def vectors(texts: list[str]) -> list[list[float]]:
        return [[_LOOSE_STATE[0]] for _ in texts]

    with pytest.warns(
        JudgeIdentityWarning, match=r"FunctionEmbedder\(.*vectors\).*embedding cache"
    ):
        identity = FunctionEmbedder(vectors).identity
    assert identity["model"] == "function" and len(identity["code"]) == 16
