"""Streaming evaluate_rag: exact mergeable aggregates, the same numbers in constant memory.

Oracles: ``statistics.mean``/``statistics.pstdev`` (correctly rounded), ``math.fsum``, NumPy's
percentiles, ``SampleKeys``, and the in-memory evaluate_rag itself.
"""

from __future__ import annotations

import gc
import itertools
import json
import math
import random
import statistics
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.aggregate import Distribution, ExactSum, StreamKeys, summarize_values
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation._rag_rules import _exact_mean
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.io.jsonl import read_jsonl, write_jsonl
from ragmeter.io.scores import read_scores
from ragmeter.report import DistributionSummary, RagEvalReport
from ragmeter.schema import SampleKeys

finite = st.floats(allow_nan=False, allow_infinity=False)
scores = st.one_of(
    st.floats(min_value=0.0, max_value=1.0),
    st.sampled_from([0.0, 1.0, 0.5, 1 / 3]),
    finite,
    st.floats(min_value=-1e-300, max_value=1e-300),
)


def _split(values: list[float], cuts: list[int]) -> list[list[float]]:
    bounds = sorted({min(c, len(values)) for c in cuts} | {0, len(values)})
    return [values[a:b] for a, b in itertools.pairwise(bounds)]


def _merged(parts: list[list[float]], **options: Any) -> Distribution:
    dists = []
    for part in parts:
        d = Distribution(**options)
        d.add(part)
        dists.append(d)
    total = Distribution(**options)
    for d in dists:
        total.merge(d)
    return total


# --------------------------------------------------------------------------- ExactSum


@settings(max_examples=300, deadline=None)
@given(st.lists(finite, min_size=1, max_size=60), st.lists(st.integers(0, 60), max_size=5))
def test_exact_sum_is_math_fsum_and_statistics_mean_whatever_the_partition(
    values: list[float], cuts: list[int]
) -> None:
    whole = ExactSum()
    whole.add(values)
    parts = ExactSum()
    for part in _split(values, cuts):
        piece = ExactSum()
        piece.add(part)
        parts.merge(piece)
    assert whole.scaled() == parts.scaled()
    try:
        expected_sum = math.fsum(values)
    except OverflowError:
        expected_sum = None
    if expected_sum is not None and math.isfinite(expected_sum):
        assert whole.fsum() == parts.fsum() == expected_sum
    assert whole.mean(len(values)) == parts.mean(len(values)) == statistics.mean(values)
    assert whole.mean(len(values)) == _exact_mean(values)


def test_exact_sum_survives_sums_beyond_the_float_range() -> None:
    s = ExactSum()
    s.add([1e308, 1e308, 1e308])
    s.add([-1e308, -1e308])
    assert s.fsum() == 1e308
    assert s.mean(5) == statistics.mean([1e308, 1e308, 1e308, -1e308, -1e308])
    tiny = ExactSum()
    tiny.add([5e-324, 5e-324, -1e-320])
    assert tiny.fsum() == math.fsum([5e-324, 5e-324, -1e-320])


# --------------------------------------------------------------------------- Distribution


@settings(max_examples=200, deadline=None)
@given(
    st.lists(scores, min_size=1, max_size=80),
    st.lists(st.integers(0, 80), max_size=6),
    st.sampled_from([0, 3, 2048]),
)
def test_merging_any_partition_gives_bit_identical_statistics(
    values: list[float], cuts: list[int], max_distinct: int
) -> None:
    one = Distribution(max_distinct=max_distinct)
    one.add(values)
    parts = _split(values, cuts)
    merged = _merged(parts, max_distinct=max_distinct)
    shuffled = _merged(list(reversed(parts)), max_distinct=max_distinct)
    assert one.stats() == merged.stats() == shuffled.stats()
    assert one.stats(mean="fsum") == merged.stats(mean="fsum")
    stats = one.stats()
    assert stats["count"] == len(values)
    assert stats["mean"] == statistics.mean(values)
    assert stats["std"] == statistics.pstdev(values)
    assert (stats["min"], stats["max"]) == (min(values) + 0.0, max(values) + 0.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(scores, min_size=1, max_size=80))
def test_exact_mode_equals_the_in_memory_summary(values: list[float]) -> None:
    d = Distribution()
    d.add(values)
    assert d.exact
    assert d.stats() == summarize_values(values)
    expected = np.percentile(np.array(values), [5, 25, 50, 75, 95])
    got = [d.stats()["percentiles"][f"p{p}"] for p in (5, 25, 50, 75, 95)]
    tol = 1e-9 * max(1.0, max(abs(v) for v in values))
    assert got == pytest.approx(expected.tolist(), abs=tol)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(finite, st.floats(0.0, 1.0)), min_size=2, max_size=300))
def test_bucketed_percentiles_are_within_the_stated_relative_error(values: list[float]) -> None:
    d = Distribution(max_distinct=0)
    d.add(values)
    stats = d.stats()
    assert not stats["exact"] and stats["relative_error"] == 0.001
    ordered = sorted(values)
    n = len(values)
    for p in (5, 25, 50, 75, 95):
        pos = (n - 1) * p / 100
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        exact = summarize_values(values)["percentiles"][f"p{p}"]
        bound = 0.001 * max(abs(ordered[lo]), abs(ordered[hi]))
        assert abs(stats["percentiles"][f"p{p}"] - exact) <= bound * (1 + 1e-9) + 1e-300


def test_distribution_memory_does_not_grow_with_the_values() -> None:
    rng = random.Random(7)
    d = Distribution()
    d.add([rng.uniform(0.01, 1.0) for _ in range(50_000)])
    size_small = d._pos.counts.nbytes
    d.add([rng.uniform(0.01, 1.0) for _ in range(200_000)])
    assert not d.exact and d.count == 250_000
    # buckets span the values' log range only: log2(100) binades x ~500 buckets
    assert d._pos.counts.nbytes <= max(size_small, 8 * 500 * 7) + 8 * 50


def test_distribution_refuses_non_finite_values_and_mismatched_merges() -> None:
    with pytest.raises(ValueError, match="finite floats only, got nan"):
        Distribution().add([0.5, math.nan])
    with pytest.raises(ValueError, match="relative_accuracy must be in"):
        Distribution(relative_accuracy=0.0)
    with pytest.raises(ValueError, match="different relative accuracy"):
        Distribution().merge(Distribution(relative_accuracy=0.01))


# --------------------------------------------------------------------------- StreamKeys


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "a#2", "a#3", "c", "b#2", "x"]), max_size=60),
    st.lists(st.integers(1, 20), min_size=1, max_size=8),
)
def test_stream_keys_follow_sample_keys_rule(ids: list[str], sizes: list[int]) -> None:
    reference = SampleKeys()
    expected = [reference(i) for i in ids]
    keys = StreamKeys()
    got: list[str] = []
    i = 0
    for size in sizes * 10:
        if i >= len(ids):
            break
        got += keys.resolve(ids[i : i + size])
        i += size
    got += keys.resolve(ids[i:])
    assert got == expected
    assert keys.repeats == reference.repeats


# --------------------------------------------------------------------------- evaluate_rag


def _samples(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    words = [
        "paris",
        "france",
        "capital",
        "river",
        "city",
        "the",
        "a",
        "of",
        "big",
        "small",
        "north",
    ]
    out = []
    for i in range(n):
        ctx = [" ".join(rng.choices(words, k=rng.randint(3, 9))) for _ in range(rng.randint(0, 3))]
        sample: dict[str, Any] = {
            "id": f"s{i % (n - 3)}" if n > 3 else f"s{i}",  # a few repeated ids
            "user_input": "q",
            "response": " ".join(rng.choices(words, k=rng.randint(1, 6))),
            "reference": " ".join(rng.choices(words, k=rng.randint(1, 4))),
            "retrieved_contexts": ctx,
            "latency_ms": rng.random() * 1000,
        }
        if rng.random() < 0.7:
            docs = rng.sample(range(30), rng.randint(1, 8))
            sample["retrieved_ids"] = [f"d{d}" for d in docs]
            sample["relevance"] = {f"d{d}": rng.randint(0, 2) for d in rng.sample(range(30), 4)}
        out.append(sample)
    return out


METRICS = ["exact_match", "token_f1", "faithfulness", "latency_ms", "ndcg", "precision", "map"]


def test_a_stream_gives_the_list_numbers_and_no_per_sample_scores() -> None:
    samples = _samples(3000)
    kept = evaluate_rag(samples, metrics=METRICS, k_values=3)
    streamed = evaluate_rag(iter(samples), metrics=METRICS, k_values=3)
    assert streamed.metrics == kept.metrics
    assert streamed.coverage == kept.coverage
    assert streamed.n_samples == kept.n_samples == 3000
    assert streamed.warnings == kept.warnings  # the repeated ids are counted alike
    assert streamed.per_sample == {} and streamed.details == {}
    assert streamed.extra["per_sample"] == "not kept" and "per_sample" not in kept.extra
    for key, value in kept.metrics.items():
        values = [v for v in kept.scores(key).values()]
        assert value == statistics.mean(values)
        exact = kept.summary(key)
        approx = streamed.summary(key)
        assert exact.exact
        assert (approx.count, approx.missing, approx.mean, approx.std, approx.min, approx.max) == (
            exact.count,
            exact.missing,
            exact.mean,
            exact.std,
            exact.min,
            exact.max,
        )
        if approx.exact:
            assert approx == exact
        else:
            assert approx.relative_error == 0.001
            assert approx.median == pytest.approx(exact.median, rel=0.0011, abs=1e-12)
    assert not streamed.summary("latency_ms").exact  # continuous: bucketed
    assert streamed.summary("exact_match").exact  # 0/1: exact counts


def test_per_sample_true_keeps_a_stream_and_false_drops_a_list() -> None:
    samples = _samples(50)
    assert evaluate_rag(iter(samples), metrics=["token_f1"], per_sample=True).per_sample
    dropped = evaluate_rag(samples, metrics=["token_f1"], per_sample=False)
    assert dropped.per_sample == {} and dropped.summary("token_f1").count == 50
    with pytest.raises(InvalidInputError, match=r"score file 'scores\.csv'.*end it with \.jsonl"):
        evaluate_rag(samples, per_sample="scores.csv")
    with pytest.raises(InvalidInputError, match="per_sample must be"):
        evaluate_rag(samples, per_sample=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".parquet"])
def test_per_sample_file_holds_what_per_sample_would(tmp_path: Path, suffix: str) -> None:
    samples = _samples(5000)
    kept = evaluate_rag(samples, metrics=METRICS, k_values=3)
    path = tmp_path / f"scores{suffix}"
    written = evaluate_rag(iter(samples), metrics=METRICS, k_values=3, per_sample=path)
    assert written.metrics == kept.metrics
    assert written.extra["per_sample_file"] == str(path)
    assert read_scores(path) == kept.per_sample
    assert not list(tmp_path.glob(".*partial"))
    if suffix == ".jsonl":
        with open(path, encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        claims = {r["id"]: r["details"] for r in rows if "details" in r}
        assert claims == kept.details


def test_a_metric_dropped_at_the_end_is_dropped_from_the_file(tmp_path: Path) -> None:
    class Flaky:
        calls = 0

    from typing import ClassVar

    from ragmeter.metrics.base import RagMetric
    from ragmeter.schema import RagSample

    class Breaks(RagMetric):
        name: ClassVar[str] = "breaks_late"

        def score(self, sample: RagSample) -> float | None:
            Flaky.calls += 1
            if Flaky.calls > 4500:
                raise RuntimeError("boom")
            return 1.0

    path = tmp_path / "scores.jsonl"
    report = evaluate_rag(iter(_samples(5000)), metrics=["token_f1", Breaks()], per_sample=path)
    assert "breaks_late" not in report.metrics
    assert any("breaks_late" in w for w in report.warnings)
    rows = read_scores(path)
    assert len(rows) == 5000 and all(set(r) == {"token_f1"} for r in rows.values())


def test_a_failed_evaluation_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "scores.jsonl"

    def broken() -> Iterator[dict[str, Any]]:
        yield from _samples(5000)
        yield {"id": "bad", "latency_ms": "slow"}

    with pytest.raises(InvalidInputError, match="latency_ms"):
        evaluate_rag(broken(), metrics=["token_f1"], per_sample=path)
    assert list(tmp_path.iterdir()) == []


def test_jsonl_reader_streams_and_the_report_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    write_jsonl(_samples(3000), path)
    report = evaluate_rag(read_jsonl(path), metrics=METRICS, k_values=3)
    assert report.per_sample == {}
    again = RagEvalReport.from_dict(json.loads(report.to_json()))
    assert again.metrics == report.metrics
    assert dict(again.summaries) == dict(report.summaries)
    assert again.summary("latency_ms").exact is False
    text = report.to_markdown()
    assert "latency_ms are approximate (each within a relative error of 0.001" in text


def test_summary_flags_travel_in_to_dict() -> None:
    s = DistributionSummary.of([0.5, 1.0])
    assert s.to_dict()["exact"] is True and s.to_dict()["relative_error"] == 0.0
    assert DistributionSummary.from_stats(s.to_dict()) == s


@pytest.mark.slow
def test_streaming_memory_does_not_grow_with_the_samples() -> None:
    """tracemalloc peak at 2k vs 20k samples: flat (the id digests are 16 bytes a sample)."""

    def stream(n: int) -> Iterator[dict[str, Any]]:
        base = _samples(200, seed=3)
        for i in range(n):
            sample = dict(base[i % 200])
            sample["id"] = f"sample-{i}"
            yield sample

    def peak(n: int) -> int:
        gc.collect()
        tracemalloc.start()
        evaluate_rag(stream(n), metrics=METRICS, k_values=3)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(2_000), peak(20_000)
    slope = (large - small) / 18_000
    assert slope < 200, f"{slope:.0f} bytes per sample"


@settings(max_examples=150, deadline=None)
@given(st.lists(scores, max_size=80))
def test_plain_python_and_numpy_summaries_are_the_same_floats(values: list[float]) -> None:
    import sys

    from ragmeter import aggregate

    with_numpy = summarize_values(values)
    saved = sys.modules.pop("numpy")
    try:
        plain = aggregate.summarize_values(values)
    finally:
        sys.modules["numpy"] = saved
    assert plain == with_numpy
    if values:
        assert plain["std"] == statistics.pstdev(values)
