"""Embedding metrics under ragmeter.dask: one machine's scores, one shared on-disk cache.

The oracles are :func:`ragmeter.evaluate_rag` on one machine (the same samples, the same
embedder) and scipy's cosine distance over the offline default model's vectors. The
LocalCluster test runs two worker processes: they load the default model from their own
installation (it pickles as its name) and write one SQLite cache; after a restart (new
processes, only the file left), a re-run makes no model call, counted by the report's cache
hits and by a file every model call appends to (processes share no Python counter).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import random
import re
import sys
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import cloudpickle
import dask
import dask.bag as db
import dask.dataframe as dd
import pandas as pd
import pytest
from scipy.spatial.distance import cosine as cosine_distance

import ragmeter
import ragmeter.dask as rdask
from ragmeter.dask._embeds import _Frozen
from ragmeter.embed import (
    EmbedCache,
    FunctionEmbedder,
    SemanticContextPrecision,
    SemanticSimilarity,
)
from ragmeter.embed import default as default_module
from ragmeter.embed.default import default_embedder
from ragmeter.errors import InvalidInputError, MissingDependencyError, NoSamplesError, RagmeterError
from ragmeter.judge import Faithfulness, FunctionJudge

# LocalCluster workers cannot import this test module: its functions travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

NAMES = ["semantic_similarity", "semantic_context_recall", "semantic_context_precision"]
WORDS = ["paris", "france", "capital", "river", "city", "the", "a", "of", "big", "seine", "is"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: Any) -> Iterator[None]:
    # "default" caches go to a fresh directory, never the user's; Dask runs in this thread
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    with dask.config.set(scheduler="sync"):
        yield


def _bag(items: Sequence[Any], bounds: Sequence[int]) -> db.Bag:
    """A bag whose partitions are ``items[a:b]`` for consecutive ``bounds`` (some empty)."""
    cuts = [0, *bounds, len(items)]
    return db.from_delayed(
        [dask.delayed(list)(list(items[a:b])) for a, b in itertools.pairwise(cuts)]
    )


def _samples(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Samples with repeated ids and texts (also across partitions), blank answers, no
    reference, no contexts, multi-sentence contexts."""
    rng = random.Random(seed)

    def text(lo: int, hi: int) -> str:
        return " ".join(rng.choices(WORDS, k=rng.randint(lo, hi)))

    out: list[dict[str, Any]] = []
    for i in range(n):
        sample: dict[str, Any] = {
            "id": f"s{i}" if rng.random() > 0.1 else f"s{rng.randrange(5)}",
            "user_input": "q",
            "response": "" if rng.random() < 0.05 else text(1, 6),
            "retrieved_contexts": [
                f"{text(2, 7)}. {text(2, 7)}." for _ in range(rng.randint(0, 3))
            ],
        }
        if rng.random() < 0.85:
            sample["reference"] = text(1, 5)
        out.append(sample)
    return out


def _bow(texts: Sequence[str], dim: int = 16) -> list[list[float]]:
    """Hashed bag-of-words vectors: word ``w`` adds 1 at ``md5(w) % dim``."""
    out = []
    for t in texts:
        vector = [0.0] * dim
        for word in re.findall(r"\w+", t.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
        out.append(vector)
    return out


def _logged_bow(log: str, texts: Sequence[str]) -> list[list[float]]:
    """:func:`_bow`, appending ``<pid> <batch size>`` to ``log`` (one line per call)."""
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()} {len(texts)}\n")
    return _bow(texts)


def _same(got: ragmeter.RagEvalReport, expected: ragmeter.RagEvalReport) -> None:
    assert got.metrics == expected.metrics  # float ==: bit for bit
    assert list(got.metrics) == list(expected.metrics)
    assert (got.per_sample, got.details, got.coverage, got.warnings) == (
        expected.per_sample,
        expected.details,
        expected.coverage,
        expected.warnings,
    )
    assert got.extra["embed_models"] == expected.extra["embed_models"]
    assert got.extra["embed_texts"] == expected.extra["embed_texts"]
    assert got.extra["embed_notes"] == expected.extra["embed_notes"]


# --------------------------------------------------------------------------- one machine's


def test_the_names_and_objects_score_as_one_machine_whatever_the_partitioning() -> None:
    samples = _samples(120, seed=1)
    bow = FunctionEmbedder(_bow, model="bow-16")
    metrics: list[Any] = ["token_f1", *NAMES[1:], SemanticSimilarity(bow, threshold=0.5)]
    expected = ragmeter.evaluate_rag(samples, metrics=metrics, embed_cache=None)
    assert expected.extra["embed_notes"]  # blank answers are noted
    assert len(expected.extra["embed_models"]) == 2  # the default model and bow-16
    for bounds in ([], [0, 0, 1, 60, 60, 119, 120], [17, 40, 41, 99]):
        got = rdask.evaluate_rag(
            _bag(samples, bounds), metrics=metrics, embed_cache=None, per_sample=True
        )
        _same(got, expected)
        lean = rdask.evaluate_rag(_bag(samples, bounds), metrics=metrics, embed_cache=None)
        assert (lean.metrics, lean.coverage, lean.warnings) == (
            expected.metrics,
            expected.coverage,
            expected.warnings,
        )
        assert lean.extra["per_sample"] == "not kept"
        for key in NAMES[1:]:
            assert lean.summary(key) == expected.summary(key)


def test_semantic_similarity_is_scipy_cosine_of_the_default_models_vectors() -> None:
    samples = [s for s in _samples(40, seed=2) if s["response"] and s.get("reference")]
    ids = [f"x{i}" for i in range(len(samples))]
    for sid, sample in zip(ids, samples, strict=True):
        sample["id"] = sid
    got = rdask.evaluate_rag(
        _bag(samples, [10, 25]), metrics="semantic_similarity", embed_cache=None, per_sample=True
    )
    model = default_embedder()
    for sid, sample in zip(ids, samples, strict=True):
        answer, reference = model.embed_sync([sample["response"], sample["reference"]])
        oracle = 1.0 - cosine_distance(answer, reference)
        assert got.per_sample[sid]["semantic_similarity"] == pytest.approx(oracle, abs=1e-12)


def test_mixed_with_judges_the_keys_and_counts_are_one_machines(tmp_path: Path) -> None:
    samples = [s for s in _samples(50, seed=3) if s["retrieved_contexts"]]

    def verdict(messages: Sequence[Any]) -> str:
        return '{"score": %s}' % (len(messages[-1].content) % 11 / 10)

    judge = Faithfulness(judge=FunctionJudge(verdict, model="dask-embed-test"))
    metrics: list[Any] = ["token_f1", judge, "semantic_context_precision"]
    expected = ragmeter.evaluate_rag(samples, metrics=metrics, judge_cache=None, embed_cache=None)
    got = rdask.evaluate_rag(
        _bag(samples, [7, 30]), metrics=metrics, judge_cache=None, embed_cache=None, per_sample=True
    )
    _same(got, expected)
    assert list(got.metrics) == ["token_f1", "judge_faithfulness", "semantic_context_precision"]
    assert got.extra["judge_calls"] == expected.extra["judge_calls"]


def test_a_dataframe_of_samples_is_one_machines() -> None:
    samples = [s for s in _samples(60, seed=4) if s.get("reference")]
    expected = ragmeter.evaluate_rag(samples, metrics=NAMES, embed_cache=None)
    with dask.config.set({"dataframe.convert-string": False}):
        frame = dd.from_pandas(pd.DataFrame(samples), npartitions=4)
        got = rdask.evaluate_rag(frame, metrics=NAMES, embed_cache=None, per_sample=True)
    _same(got, expected)


# --------------------------------------------------------------------------- the cache


def test_partitions_share_one_cache_and_a_rerun_embeds_nothing(tmp_path: Path) -> None:
    samples = _samples(90, seed=5)
    log = tmp_path / "calls.log"
    metric = SemanticContextPrecision(FunctionEmbedder(partial(_logged_bow, str(log)), model="b"))
    cache = tmp_path / "shared" / "embed.sqlite"
    cache.parent.mkdir()
    bag = _bag(samples, [30, 60])
    expected = ragmeter.evaluate_rag(samples, metrics=[metric], embed_cache=None)
    log.unlink()
    with dask.config.set(scheduler="threads"):
        first = rdask.evaluate_rag(bag, metrics=[metric], embed_cache=cache, per_sample=True)
    _same(first, expected)
    calls = log.read_text().splitlines()
    assert first.extra["embed_calls"] == len(calls) > 0
    assert first.extra["embed_embedded"] == sum(int(line.split()[1]) for line in calls)
    assert first.extra["embed_cache"] == str(cache)
    opened = EmbedCache(cache)  # an open cache travels to the workers as its path
    again = rdask.evaluate_rag(bag, metrics=[metric], embed_cache=opened, per_sample=True)
    opened.close()
    _same(again, expected)
    assert again.extra["embed_cache"] == str(cache.absolute())
    assert (again.extra["embed_calls"], again.extra["embed_embedded"]) == (0, 0)
    # each partition's distinct texts: embedded or read the first time, all read now
    distinct = first.extra["embed_embedded"] + first.extra["embed_cache_hits"]
    assert again.extra["embed_cache_hits"] == distinct
    assert len(log.read_text().splitlines()) == len(calls)  # no model call at all


def test_the_default_cache_is_each_workers_user_cache(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path))
    samples = [s for s in _samples(30, seed=6) if s.get("reference")]
    first = rdask.evaluate_rag(_bag(samples, [15]), metrics=["semantic_similarity"])
    assert first.extra["embed_cache"] == str(tmp_path / "embed-cache.sqlite")
    again = rdask.evaluate_rag(_bag(samples, [15]), metrics=["semantic_similarity"])
    assert again.extra["embed_calls"] == 0 < again.extra["embed_cache_hits"]
    assert again.metrics == first.metrics


# --------------------------------------------------------------------------- refusals


def test_refusals_are_one_machines() -> None:
    samples = _samples(20, seed=7)
    bow = FunctionEmbedder(_bow, model="bow-16")
    twice: list[Any] = ["semantic_similarity", SemanticSimilarity(bow)]
    no_contexts = [{"response": "a", "reference": "b"}] * 3
    for metrics, items in ((twice, samples), (["semantic_context_recall"], no_contexts)):
        with pytest.raises(InvalidInputError) as one:
            ragmeter.evaluate_rag(items, metrics=metrics, embed_cache=None)
        with pytest.raises(InvalidInputError) as got:
            rdask.evaluate_rag(_bag(items, [1]), metrics=metrics, embed_cache=None)
        assert str(got.value) == str(one.value)
    with pytest.raises(NoSamplesError):
        rdask.evaluate_rag(_bag([], []), metrics=NAMES, embed_cache=None)


def test_without_the_extra_the_client_names_it_before_any_task(monkeypatch: Any) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)  # import wordllama fails
    monkeypatch.setattr(default_module, "_LOADED", {})
    ran: list[int] = []
    bag = db.from_sequence([{"response": "a", "reference": "b"}]).map(lambda s: ran.append(1) or s)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ragmeter\[semantic\]'"):
        rdask.evaluate_rag(bag, metrics=["semantic_similarity"], embed_cache=None)
    assert ran == []


def test_a_worker_with_other_weights_is_refused() -> None:
    model = default_embedder()
    _Frozen(model, dict(model.identity)).check()  # the same model: fine
    other = {**model.identity, "weights_sha256": "0" * 64}
    with pytest.raises(RagmeterError, match="install the same ragmeter\\[semantic\\]"):
        _Frozen(model, other).check()


# --------------------------------------------------------------------------- a real cluster


def _default_models_loaded() -> list[str]:
    return sorted(default_module._LOADED)


@pytest.mark.slow
def test_two_worker_processes_share_the_cache_and_rerun_with_no_model_call(
    tmp_path: Path,
) -> None:
    from distributed import Client, LocalCluster

    samples = _samples(240, seed=8)
    log = tmp_path / "calls.log"
    bow = FunctionEmbedder(partial(_logged_bow, str(log)), model="bow-logged")
    metrics: list[Any] = ["token_f1", "semantic_similarity", SemanticContextPrecision(bow)]
    expected = ragmeter.evaluate_rag(samples, metrics=metrics, embed_cache=None)
    log.unlink()
    cache = tmp_path / "shared" / "embed.sqlite"
    cache.parent.mkdir()
    bag = db.from_sequence(samples, npartitions=8)
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            scheduler_port=0,
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": ":0"},
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        client.wait_for_workers(2, timeout=60)
        before = set(client.run(os.getpid).values())
        first = rdask.evaluate_rag(
            bag, metrics=metrics, embed_cache=cache, client=client, per_sample=True
        )
        _same(first, expected)
        # the model was loaded in the worker processes that scored, from their installation
        loaded = [m for m in client.run(_default_models_loaded).values() if m]
        assert loaded and all(m == ["wordllama-l2_supercat-256"] for m in loaded)
        callers = {int(line.split()[0]) for line in log.read_text().splitlines()}
        assert callers and callers <= before and os.getpid() not in callers
        calls = len(log.read_text().splitlines())
        assert first.extra["embed_calls"] > calls  # the default model's calls too
        client.restart()  # new worker processes: nothing left in memory, only the file
        client.wait_for_workers(2, timeout=60)
        assert not set(client.run(os.getpid).values()) & before
        again = rdask.evaluate_rag(
            bag, metrics=metrics, embed_cache=cache, client=client, per_sample=True
        )
    _same(again, expected)
    assert (again.extra["embed_calls"], again.extra["embed_embedded"]) == (0, 0)
    distinct = first.extra["embed_embedded"] + first.extra["embed_cache_hits"]
    assert again.extra["embed_cache_hits"] == distinct > 0
    assert len(log.read_text().splitlines()) == calls  # no call on the re-run
