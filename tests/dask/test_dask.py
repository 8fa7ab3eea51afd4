"""ragmeter.dask on Dask's synchronous scheduler: no partitioning changes a number.

The oracles are :func:`ragmeter.evaluate_run` and :func:`ragmeter.evaluate_rag` on one
machine (themselves checked against trec_eval, pytrec_eval and the seed packages). Every
partitioning is tried: one partition, even ones, uneven ones with empty partitions, and
random cuts. The LocalCluster tests (two worker processes, a worker killed mid-run) are in
test_dask_cluster.py.
"""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dask
import dask.bag as db
import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragmeter
import ragmeter.dask as rdask
from ragmeter.aggregate import IdRoots, id_root
from ragmeter.dask._budget import LocalBudget, refusal
from ragmeter.errors import (
    DuplicateDocumentError,
    InvalidInputError,
    NoSamplesError,
    NoScorableQueriesError,
)
from ragmeter.evaluation.rag import rag_partial, rag_report
from ragmeter.io import read_qrels
from ragmeter.io.arrow import run_to_arrow
from ragmeter.io.trec import TREC_ORDERING, read_trec_run, write_trec_run
from ragmeter.judge import Faithfulness, FunctionJudge, JudgeOptions
from ragmeter.judge.runner import run_judges
from ragmeter.metrics.base import RagMetric
from ragmeter.metrics.registry import METRICS
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.schema import RagSample, sample_keys

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(autouse=True)
def _synchronous() -> Iterator[None]:
    with dask.config.set(scheduler="sync"):
        yield


def _bag(items: Sequence[Any], bounds: Sequence[int]) -> db.Bag:
    """A bag whose partitions are ``items[a:b]`` for consecutive ``bounds`` (some empty)."""
    cuts = [0, *bounds, len(items)]
    return db.from_delayed(
        [dask.delayed(list)(list(items[a:b])) for a, b in itertools.pairwise(cuts)]
    )


def _partitionings(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [
        [],  # one partition
        [n * i // 7 for i in range(1, 7)],  # seven even ones
        [0, 0, 1, n // 2, n // 2, n - 1, n],  # empty, tiny and uneven ones
        sorted(rng.randrange(n + 1) for _ in range(rng.randint(2, 20))),
    ]


def _collection(name: str) -> tuple[Any, Any]:
    if name == "cranfield":
        _, _, qrels = ragmeter.load_cranfield()
        return qrels, ragmeter.load_cranfield_bm25_run()
    if name == "vaswani":
        return read_qrels(DATA / "vaswani/qrels.tsv"), read_trec_run(DATA / "vaswani/bm25.run")
    return read_qrels(DATA / "trec_eval/qrels.rel_level"), read_trec_run(
        DATA / "trec_eval/results.test"
    )


def _same_run_report(got: RetrievalEvalReport, expected: RetrievalEvalReport) -> None:
    """Equal numbers, warnings and conventions; summaries exactly equal when exact."""
    assert got.metrics == expected.metrics  # float ==: bit for bit
    assert list(got.metrics) == list(expected.metrics)
    assert (got.n_queries, got.missing_queries, got.warnings, got.conventions) == (
        expected.n_queries,
        expected.missing_queries,
        expected.warnings,
        expected.conventions,
    )
    for key in expected.metrics:
        summary = got.summary(key)
        assert summary.exact  # at most 2,048 distinct values
        assert summary == expected.summary(key)


# --------------------------------------------------------------------------- evaluate_run


@pytest.mark.parametrize("name", ["cranfield", "vaswani", "trec_eval"])
def test_run_means_are_bit_identical_whatever_the_partitioning(name: str) -> None:
    qrels, run = _collection(name)
    level = 2 if name == "trec_eval" else None
    expected = ragmeter.evaluate_run(qrels, dict(run), relevance_level=level)
    items = list(run.items())
    random.Random(7).shuffle(items)  # the run's order changes nothing
    for bounds in _partitionings(len(items), seed=len(items)):
        got = rdask.evaluate_run(qrels, _bag(items, bounds), relevance_level=level, per_query=False)
        _same_run_report(got, expected)
        assert got.per_query == {} and got.extra == {"per_query": "not kept"}
        assert set(got.distributions) == set(expected.metrics)
        kept = rdask.evaluate_run(qrels, _bag(items, bounds), relevance_level=level, per_query=True)
        assert kept == expected
        assert list(kept.per_query) == list(expected.per_query)  # qrels order
        assert kept.to_json() == expected.to_json()


def test_run_from_files_and_dataframes_is_evaluate_run(tmp_path: Path) -> None:
    qrels, run = _collection("cranfield")
    expected = ragmeter.evaluate_run(qrels, run)
    assert expected.conventions.ties == TREC_ORDERING
    qids = list(run)
    paths = []
    for i, (a, b) in enumerate([(0, 50), (50, 51), (51, 51), (51, len(qids))]):
        path = tmp_path / f"part{i}.run"
        write_trec_run({q: run[q] for q in qids[a:b]}, path, scores=run.scores)
        paths.append(path)
    _same_run_report(rdask.evaluate_run(qrels, paths), expected)

    scored = run_to_arrow(run).to_pandas().set_index("query_id").sort_index()
    frame = dd.from_pandas(scored, npartitions=5).reset_index()
    _same_run_report(rdask.evaluate_run(qrels, frame), expected)

    listed = pd.DataFrame({"query_id": qids, "ranking": [run[q] for q in qids]})
    with pytest.raises(InvalidInputError, match="'ranking' of the run dataframe holds strings"):
        rdask.evaluate_run(qrels, dd.from_pandas(listed.iloc[1:], npartitions=3))  # reprs
    with dask.config.set({"dataframe.convert-string": False}):
        objects = dd.from_pandas(listed, npartitions=3)
    arrow = listed.astype({"ranking": pd.ArrowDtype(pa.list_(pa.string()))})
    for frame in (objects, dd.from_pandas(arrow, npartitions=4)):
        got = rdask.evaluate_run(qrels, frame, per_query=True)
        assert got == ragmeter.evaluate_run(qrels, dict(run))  # ties: list order


def test_missing_queries_custom_metrics_and_levels_as_one_machine() -> None:
    qrels, run = _collection("trec_eval")
    qids = list(qrels)
    partial = {q: run[q] for q in reversed(list(run)) if q != qids[1]}  # one query missing
    first, last = qids[0], qids[-1]

    def shaky(judgements: Any, ranked: Sequence[str], k: int) -> float:
        # fails on the last judged query, which the bag ranks first, and on the first
        # judged query, which it ranks last: the warning names the first in qrels order
        if k == 10 and ranked and ranked[0] in (run[first][0], run[last][0]):
            raise RuntimeError("no")
        return float(len(ranked[:k]))

    METRICS.register("dask_shaky", shaky)
    METRICS.register("dask_depth", lambda j, r, k: float(len(r[:k])))
    try:
        for mode in ("zero", "skip"):
            for level in (None, 2):
                options: dict[str, Any] = {
                    "metrics": ["ndcg", "dask_shaky", "map", "dask_depth"],
                    "k_values": (5, 10),
                    "missing_queries": mode,
                    "relevance_level": level,
                }
                expected = ragmeter.evaluate_run(qrels, partial, **options)
                assert any("dask_shaky" in w for w in expected.warnings)
                assert expected.missing_queries == [qids[1]]
                for bounds in ([], [1], [0, 0, 2]):
                    items = list(partial.items())
                    got = rdask.evaluate_run(qrels, _bag(items, bounds), **options)
                    _same_run_report(got, expected)
                    kept = rdask.evaluate_run(qrels, _bag(items, bounds), per_query=True, **options)
                    assert kept == expected
    finally:
        METRICS.unregister("dask_shaky")
        METRICS.unregister("dask_depth")


def test_the_doc_ids_warning_names_the_same_examples() -> None:
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(6)}
    run = {f"q{i}": ["x9", f"x{i}"] for i in range(6)}  # no doc is judged
    expected = ragmeter.evaluate_run(qrels, run, k_values=(3,))
    assert "none of the 12 retrieved doc ids (e.g. 'x9', 'x0', 'x1', ...)" in expected.warnings[0]
    items = list(run.items())[::-1]  # qrels order, not the run's, picks the examples
    for bounds in ([], [2, 2, 3], [5]):
        got = rdask.evaluate_run(qrels, _bag(items, bounds), k_values=(3,))
        assert got.warnings == expected.warnings
    judged = {**run, "q5": ["d5"]}
    got = rdask.evaluate_run(qrels, _bag(list(judged.items()), [3]), k_values=(3,))
    assert got.warnings == ragmeter.evaluate_run(qrels, judged, k_values=(3,)).warnings == []


def test_bad_runs_are_refused_like_one_machine() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 0}}
    twice = [("q1", ["d1"]), ("q2", ["d2"]), ("q1", ["d9"])]
    with pytest.raises(InvalidInputError, match="query 'q1' has more than one ranking"):
        rdask.evaluate_run(qrels, _bag(twice, [2]))  # in two partitions
    with pytest.raises(InvalidInputError, match="query 'q1' has more than one ranking"):
        rdask.evaluate_run(qrels, _bag(twice, []))  # twice in one
    unjudged = [("u1", ["d1"]), ("u2", ["d2"])]
    with pytest.raises(InvalidInputError) as one:
        ragmeter.evaluate_run(qrels, dict(unjudged))
    with pytest.raises(InvalidInputError) as many:
        rdask.evaluate_run(qrels, _bag(unjudged, [1]))
    assert str(many.value) == str(one.value)
    with pytest.raises(NoScorableQueriesError):
        rdask.evaluate_run({"q3": {"d3": 0}}, _bag([("q3", ["d3"])], []))
    with pytest.raises(DuplicateDocumentError, match="'q2'") as dup:
        rdask.evaluate_run(qrels, _bag([("q1", ["d1"]), ("q2", ["d2", "d2"])], [1]))
    assert "partition 1" in " ".join(getattr(dup.value, "__notes__", ["partition 1"]))
    with pytest.raises(InvalidInputError, match=r"\(query_id, ranking\) pair"):
        rdask.evaluate_run(qrels, db.from_sequence([{"q1": ["d1"]}]))
    with pytest.raises(InvalidInputError, match=r"ragmeter\.evaluate_run"):
        rdask.evaluate_run(qrels, {"q1": ["d1"]})
    frame = dd.from_pandas(pd.DataFrame({"qid": ["q1"], "docs": ["d1"]}), npartitions=1)
    with pytest.raises(InvalidInputError, match="columns query_id and ranking"):
        rdask.evaluate_run(qrels, frame)
    with pytest.raises(InvalidInputError, match="per_query must be True or False"):
        rdask.evaluate_run(qrels, _bag(unjudged, []), per_query="q.jsonl")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="split_every must be an int >= 2"):
        rdask.evaluate_run(qrels, _bag(unjudged, [1]), split_every=1)


# --------------------------------------------------------------------------- evaluate_rag

WORDS = ["paris", "france", "capital", "river", "city", "the", "a", "of", "big", "north"]


def _samples(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Samples with repeated ids (also across partitions), ids with ``#2`` suffixes, a
    look-alike key, missing fields and continuous scores."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        roll = rng.random()
        sid = f"s{i}" if roll > 0.1 else ("s1#2" if roll < 0.02 else f"s{rng.randrange(5)}")
        sample: dict[str, Any] = {
            "id": sid,
            "user_input": "q",
            "response": " ".join(rng.choices(WORDS, k=rng.randint(1, 6))),
            "retrieved_contexts": [
                " ".join(rng.choices(WORDS, k=rng.randint(3, 9))) for _ in range(rng.randint(0, 3))
            ],
            "latency_ms": rng.random() * 1000,
        }
        if rng.random() < 0.8:
            sample["reference"] = " ".join(rng.choices(WORDS, k=rng.randint(1, 4)))
        if rng.random() < 0.05:
            sample["respones"] = "typo"  # a look-alike key: counted in a warning
        if rng.random() < 0.7:
            sample["retrieved_ids"] = [f"d{d}" for d in rng.sample(range(30), rng.randint(1, 8))]
            sample["relevance"] = {f"d{d}": rng.randint(0, 2) for d in rng.sample(range(30), 4)}
        out.append(sample)
    return out


METRICS_RAG = ["exact_match", "token_f1", "faithfulness", "latency_ms", "ndcg", "precision"]


def test_rag_is_bit_identical_whatever_the_partitioning() -> None:
    samples = _samples(3000)
    kept = ragmeter.evaluate_rag(samples, metrics=METRICS_RAG, k_values=3)
    streamed = ragmeter.evaluate_rag(iter(samples), metrics=METRICS_RAG, k_values=3)
    assert kept.warnings[0].startswith("302 sample id(s) repeat")  # also across partitions
    assert any("Did you mean 'response'" in w for w in kept.warnings)
    for bounds in _partitionings(len(samples), seed=3):
        got = rdask.evaluate_rag(_bag(samples, bounds), metrics=METRICS_RAG, k_values=3)
        assert got.metrics == kept.metrics
        assert list(got.metrics) == list(kept.metrics)
        assert (got.coverage, got.n_samples, got.warnings, got.extra) == (
            kept.coverage,
            kept.n_samples,
            kept.warnings,
            streamed.extra,
        )
        for key in kept.metrics:
            approx, exact = got.summary(key), kept.summary(key)
            assert approx == streamed.summary(key)  # the same mergeable sketches
            assert (approx.count, approx.missing, approx.mean, approx.std) == (
                exact.count,
                exact.missing,
                exact.mean,
                exact.std,
            )
            assert (approx.min, approx.max) == (exact.min, exact.max)
            if approx.exact:
                assert approx == exact
            else:  # continuous: log buckets, each order statistic within 0.1 %
                assert approx.relative_error == 0.001
                for name, value in exact.percentiles.items():
                    assert approx.percentiles[name] == pytest.approx(value, rel=0.002, abs=1e-12)
        assert not got.summary("latency_ms").exact and got.summary("exact_match").exact
        whole = rdask.evaluate_rag(
            _bag(samples, bounds), metrics=METRICS_RAG, k_values=3, per_sample=True
        )
        assert whole == kept
        assert whole.to_json() == kept.to_json()  # per-sample keys, details, order


def test_rag_defaults_and_a_dataframe_are_one_machine() -> None:
    samples = _samples(400, seed=1)
    for sample in samples:
        sample.pop("respones", None)  # not a column: it would be a NaN field elsewhere
    expected = ragmeter.evaluate_rag(samples)
    got = rdask.evaluate_rag(_bag(samples, [0, 100, 100, 399]), per_sample=True)
    assert got == expected and got.to_json() == expected.to_json()
    frame = pd.DataFrame(samples)  # missing fields become NaN: absent again
    with pytest.raises(InvalidInputError, match="'retrieved_contexts' of the samples dataframe"):
        rdask.evaluate_rag(dd.from_pandas(frame.iloc[1:], npartitions=2))  # lists -> reprs
    dask.config.set({"dataframe.convert-string": False})  # undone by the autouse fixture
    for parts in (1, 4):
        report = rdask.evaluate_rag(dd.from_pandas(frame, npartitions=parts), per_sample=True)
        assert report == expected
    empty = dd.from_delayed(
        [
            dask.delayed(frame.iloc[:0].copy)(),
            dask.delayed(frame.iloc[:250].copy)(),
            dask.delayed(frame.iloc[250:].copy)(),
        ],
        meta=frame.iloc[:0],
    )
    assert rdask.evaluate_rag(empty).metrics == expected.metrics


class _Flaky(RagMetric):
    """Raises on two samples (in different partitions): the first is the one reported."""

    name = "dask_flaky"
    needs = frozenset({"response"})

    def score(self, sample: RagSample) -> float | None:
        if sample.id in ("s40", "s7"):
            raise RuntimeError(f"cannot score {sample.id}")
        return 1.0


def test_rag_failures_and_refusals_are_one_machines() -> None:
    samples = _samples(60, seed=2)
    metrics: list[Any] = ["token_f1", _Flaky()]
    expected = ragmeter.evaluate_rag(samples, metrics=metrics)
    assert any(
        "'dask_flaky' metric raised RuntimeError('cannot score s7')" in w for w in expected.warnings
    )
    for bounds in ([30], [5, 8, 8], [59]):
        got = rdask.evaluate_rag(_bag(samples, bounds), metrics=metrics, per_sample=True)
        assert got == expected
    with pytest.raises(InvalidInputError) as one:
        ragmeter.evaluate_rag(samples, metrics=["token_f1", "character_f1"])
    with pytest.raises(InvalidInputError) as many:
        rdask.evaluate_rag(_bag(samples, [20]), metrics=["token_f1", "character_f1"])
    assert str(many.value) == str(one.value)
    with pytest.raises(NoSamplesError):
        rdask.evaluate_rag(_bag([], [0, 0]))
    bad = [*samples[:10], {"id": "x", "latency_ms": -1.0}]
    with pytest.raises(InvalidInputError, match=r"sample 0 \(id 'x'\): field 'latency_ms'") as err:
        rdask.evaluate_rag(_bag(bad, [10]), metrics=["token_f1"])
    if sys.version_info >= (3, 11):
        assert "partition 1" in err.value.__notes__[0]
    with pytest.raises(InvalidInputError, match="per_sample must be True"):
        rdask.evaluate_rag(_bag(samples, []), per_sample="s.jsonl")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"dask\.bag\.Bag or a dask\.dataframe\.DataFrame"):
        rdask.evaluate_rag(samples)


@settings(max_examples=25, deadline=None)
@given(
    ids=st.lists(
        st.sampled_from(["a", "b", "a#2", "a#2#2", "c#3", "b#0"]), min_size=1, max_size=30
    ),
    cuts=st.lists(st.integers(0, 30), max_size=6),
)
def test_repeated_ids_across_partitions_are_counted_as_in_one_pass(
    ids: list[str], cuts: list[int]
) -> None:
    samples = [{"id": sid, "response": "x", "reference": "x y"} for sid in ids]
    bounds = sorted(min(c, len(ids)) for c in cuts)
    expected = ragmeter.evaluate_rag(samples, metrics=["token_f1"])
    got = rdask.evaluate_rag(_bag(samples, bounds), metrics=["token_f1"])
    assert (got.metrics, got.warnings) == (expected.metrics, expected.warnings)
    whole = rdask.evaluate_rag(_bag(samples, bounds), metrics=["token_f1"], per_sample=True)
    assert list(whole.per_sample) == sample_keys(ids) == list(expected.per_sample)


# --------------------------------------------------------------------------- the hooks


def test_id_roots_find_every_id_the_rule_can_rename() -> None:
    assert [id_root(i) for i in ["q", "q#2", "q#2#10", "q#x", "#3", "q#"]] == [
        "q",
        "q",
        "q",
        "q#x",
        "",
        "q#",
    ]
    parts = [IdRoots() for _ in range(3)]
    parts[0].resolve(["a", "b"])
    parts[1].resolve(["c"])
    parts[2].resolve(["a#2", "d", "d"])
    merged = IdRoots()
    for part in parts:
        merged.merge(part)
    assert merged.matches(["a", "a#5", "b", "c", "d", "e"]) == [
        True,
        True,
        False,
        False,
        True,
        False,
    ]
    final = merged.repeated_only()
    assert final.matches(["a", "d", "b"]) == [True, True, False]
    import pickle

    assert pickle.loads(pickle.dumps(final)).matches(["d", "c"]) == [True, False]


def test_an_empty_part_merges_into_a_bucketed_distribution() -> None:
    from ragmeter.aggregate import Distribution

    bucketed = Distribution(max_distinct=2)
    bucketed.add([0.5, 1.5, 2.5])
    before = bucketed.stats()
    bucketed.merge(Distribution())  # what an empty partition contributes
    assert not bucketed.exact and bucketed.stats() == before


def test_the_rag_doc_ids_warning_is_one_machines_over_any_partitioning() -> None:
    # the message's first distinct ids ('a', 'b', 'c', then '...' for 'd') span samples
    rankings = [["a"], ["a", "b"], ["b", "c"], ["a", "c", "d", "e"], ["f"], ["g", "h"]]
    samples = [
        {"id": f"s{i}", "retrieved_ids": ids, "reference_ids": [f"doc-{i}"]}
        for i, ids in enumerate(rankings)
    ]
    metrics = ["recall", "mrr"]
    expected = ragmeter.evaluate_rag(samples, metrics=metrics, k_values=2)
    (warning,) = expected.warnings
    assert "of the 6 sample(s) scored on retrieved_ids is 0" in warning
    assert "none of the 12 retrieved doc ids (e.g. 'a', 'b', 'c', ...)" in warning
    for bounds in ([], [1, 2, 3, 4, 5], [0, 0, 2, 2, 6], [3], [5]):
        got = rdask.evaluate_rag(_bag(samples, bounds), metrics=metrics, k_values=2)
        assert (got.metrics, got.warnings) == (expected.metrics, expected.warnings)
        kept = rdask.evaluate_rag(
            _bag(samples, bounds), metrics=metrics, k_values=2, per_sample=True
        )
        assert kept.warnings == expected.warnings
    # one sample of one partition retrieves a judged doc: no warning, however split
    hit = [*samples, {"id": "s9", "retrieved_ids": ["z", "doc-9"], "reference_ids": ["doc-9"]}]
    for bounds in ([], [3], [6]):
        got = rdask.evaluate_rag(_bag(hit, bounds), metrics=metrics, k_values=2)
        assert (
            got.warnings == ragmeter.evaluate_rag(hit, metrics=metrics, k_values=2).warnings == []
        )


def test_rag_k_values_are_one_machines_and_k_is_deprecated() -> None:
    samples = _samples(300, seed=5)
    metrics = ["ndcg", "recall", "token_f1"]
    expected = ragmeter.evaluate_rag(samples, metrics=metrics, k_values=(1, 3, 10))
    assert list(expected.metrics) == [
        *(f"{name}@{k}" for name in ("ndcg", "recall") for k in (1, 3, 10)),
        "token_f1",
    ]
    for bounds in ([], [0, 50, 50, 299]):
        got = rdask.evaluate_rag(_bag(samples, bounds), metrics=metrics, k_values=[10, 3, 1])
        assert (got.metrics, got.coverage, got.warnings, got.extra["k"]) == (
            expected.metrics,
            expected.coverage,
            expected.warnings,
            [1, 3, 10],
        )
        kept = rdask.evaluate_rag(
            _bag(samples, bounds), metrics=metrics, k_values=(1, 3, 10), per_sample=True
        )
        assert kept == expected
    single = rdask.evaluate_rag(_bag(samples, [100]), metrics=metrics, k_values=3)
    with pytest.warns(DeprecationWarning, match=r"ragmeter\.dask\.evaluate_rag\(k=\.\.\.\)"):
        old = rdask.evaluate_rag(_bag(samples, [100]), metrics=metrics, k=3)
    assert old == single and single.extra["k"] == 3
    assert (
        single.metrics == ragmeter.evaluate_rag(iter(samples), metrics=metrics, k_values=3).metrics
    )
    with (
        pytest.warns(DeprecationWarning, match="k_values"),
        pytest.raises(InvalidInputError, match="k_values only"),
    ):
        rdask.evaluate_rag(_bag(samples, []), metrics=metrics, k_values=3, k=3)
    with pytest.raises(InvalidInputError, match="every k in k_values must be an int >= 1"):
        rdask.evaluate_rag(_bag(samples, []), metrics=metrics, k_values=(3, -1))


def test_rag_partials_merge_in_order_into_one_machines_report() -> None:
    samples = _samples(500, seed=4)
    metrics = ["token_f1", "latency_ms", "ndcg"]
    for keep in (False, True):
        parts = [samples[:100], samples[100:100], samples[100:]]
        partial = rag_partial(parts[0], metrics=metrics, keep=keep)
        for part in parts[1:]:
            partial.merge(rag_partial(part, metrics=metrics, keep=keep))
        if keep:
            report = rag_report(partial, metrics=metrics)
            assert report == ragmeter.evaluate_rag(samples, metrics=metrics)
        else:
            with pytest.raises(InvalidInputError, match="pass repeats="):
                rag_report(partial, metrics=metrics)
            expected = ragmeter.evaluate_rag(iter(samples), metrics=metrics)
            repeats = int(expected.warnings[0].split()[0])
            report = rag_report(partial, metrics=metrics, repeats=repeats)
            assert (report.metrics, report.warnings) == (expected.metrics, expected.warnings)
    with pytest.raises(InvalidInputError, match="cannot merge partials"):
        rag_partial(samples, metrics=["token_f1"]).merge(rag_partial(samples, metrics=["ndcg"]))
    with pytest.raises(InvalidInputError, match="the partial holds the metrics"):
        rag_report(rag_partial(samples, metrics=["token_f1"], keep=True), metrics=["ndcg"])


class _Refusing:
    """A shared budget that grants ``left`` calls and records the tokens."""

    def __init__(self, left: int) -> None:
        self.left = left
        self.tokens = 0

    def spend_call(self) -> str | None:
        if self.left <= 0:
            return "the shared budget is spent"
        self.left -= 1
        return None

    def spend_tokens(self, tokens: int) -> None:
        self.tokens += tokens


def test_the_runner_asks_a_shared_budget_before_every_call() -> None:
    from ragmeter.judge.protocol import JudgeReply

    samples = [RagSample(id=f"s{i}", response=f"a{i}", retrieved_contexts=["c"]) for i in range(6)]
    judge = FunctionJudge(lambda m: JudgeReply('{"score": 1}', 3, 2), model="fixed")
    budget = _Refusing(4)
    run = run_judges(samples, [Faithfulness(judge=judge)], budget=budget)
    assert run.calls == 4 and budget.left == 0 and budget.tokens == 20
    assert run.incomplete and run.stop_reason == "the shared budget is spent"
    assert sum(v is None for row in run.scores.values() for v in row.values()) == 2


def test_a_local_budget_grants_exactly_its_calls_to_many_threads() -> None:
    budget = LocalBudget(max_calls=100, max_tokens=None)
    granted: list[int] = []

    def spend() -> None:
        granted.append(sum(budget.spend_call() is None for _ in range(50)))

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) == 100 == budget.calls
    assert budget.spend_call() == refusal(100, 0, 100, None) == "call budget of 100 reached"
    tokens = LocalBudget(max_calls=None, max_tokens=10)
    tokens.spend_tokens(12)
    assert tokens.spend_call() == "token budget of 10 reached (12 used)"


def _verdict(messages: Sequence[Any]) -> str:
    return '{"score": %s}' % (len(messages[-1].content) % 11 / 10)


def test_judges_without_a_cluster_share_the_cache_and_one_budget(tmp_path: Path) -> None:
    samples = [s for s in _samples(80, seed=5) if s["retrieved_contexts"]]
    assert len({s["response"] + str(s["retrieved_contexts"]) for s in samples}) == len(samples)
    metric = Faithfulness(judge=FunctionJudge(_verdict, model="dask-test"))
    metrics: list[Any] = ["token_f1", metric]
    expected = ragmeter.evaluate_rag(samples, metrics=metrics, judge_cache=None)
    cache = tmp_path / "judge.sqlite"
    bag = _bag(samples, [10, 10, 40])
    with dask.config.set(scheduler="threads"):
        got = rdask.evaluate_rag(bag, metrics=metrics, judge_cache=cache, per_sample=True)
    assert (got.metrics, got.per_sample, got.details) == (
        expected.metrics,
        expected.per_sample,
        expected.details,
    )
    assert got.extra["judge_calls"] == len(samples) == got.extra["judge_budget"]["calls"]
    again = rdask.evaluate_rag(bag, metrics=metrics, judge_cache=cache)
    assert again.metrics == expected.metrics
    assert (again.extra["judge_calls"], again.extra["judge_cache_hits"]) == (0, len(samples))
    assert again.summary("judge_faithfulness").count == len(samples)
    capped = rdask.evaluate_rag(
        bag, metrics=[metric], judge_cache=None, judge_options=JudgeOptions(max_calls=7)
    )
    assert capped.extra["judge_calls"] == 7 == capped.coverage["judge_faithfulness"]
    assert capped.incomplete and capped.extra["stop_reason"] == "call budget of 7 reached"
    assert capped.warnings[-1] == "incomplete: call budget of 7 reached; unscored samples are None"


def test_import_ragmeter_does_not_import_dask() -> None:
    code = (
        "import sys, ragmeter; "
        "print(','.join(m for m in ('dask', 'distributed') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_reports_are_the_public_types() -> None:
    bag = db.from_sequence([{"id": "a", "response": "x", "reference": "x"}])
    assert type(rdask.evaluate_rag(bag, metrics=["exact_match"])) is RagEvalReport
    assert type(rdask.evaluate_run({"q": {"d": 1}}, db.from_sequence([("q", ["d"])]))) is (
        RetrievalEvalReport
    )
    assert rdask.__all__ == ["evaluate_rag", "evaluate_run"]


def test_the_docs_quick_start_runs_and_prints_what_it_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "dask.md").read_text(encoding="utf-8")
    block = re.findall(r"```python\n(.*?)```", doc, re.S)[0]
    namespace: dict[str, Any] = {}
    exec(compile(block, "dask.md:quick-start", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    said = ["0.3457976728968338", "{'exact_match': 0.5, 'token_f1': 0.5, 'faithfulness': 1.0}"]
    assert printed == [*said, "1000"]
    assert all(f"# {text}" in block for text in [*said, "1000"])
    assert printed[0] == repr(ragmeter.evaluate_run(*_collection("cranfield")).primary)
    metrics = ["exact_match", "token_f1", "faithfulness"]
    assert (
        namespace["rag"].metrics
        == ragmeter.evaluate_rag(namespace["samples"], metrics=metrics).metrics
    )
