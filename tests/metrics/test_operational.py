"""Operational metrics: latency, tokens and dollar cost (lower is better)."""

from __future__ import annotations

import json
import math
import statistics
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.metrics.operational import CostUSD, LatencyMs, TotalTokens, check_prices, cost_usd
from ragmeter.schema import RagSample


def test_scores_and_direction() -> None:
    s = RagSample(latency_ms=120.5, input_tokens=1000, output_tokens=200)
    assert LatencyMs().score(s) == 120.5
    assert TotalTokens().score(s) == 1200.0
    # prices are per million tokens: (1000 * 3 + 200 * 15) / 1e6
    assert CostUSD(input_price=3.0, output_price=15.0).score(s) == pytest.approx(0.006)
    for name in ("latency_ms", "total_tokens", "cost_usd"):
        assert RAG_METRICS[name].higher_is_better is False


def test_missing_inputs_are_not_scored() -> None:
    half = RagSample(input_tokens=10)
    assert LatencyMs().score(half) is None
    assert TotalTokens().score(half) is None
    assert CostUSD(input_price=1, output_price=1).score(half) is None
    assert CostUSD().score(RagSample(input_tokens=1, output_tokens=1)) is None
    assert TotalTokens().score(RagSample(input_tokens=0, output_tokens=0)) == 0.0


def test_cost_function() -> None:
    assert cost_usd(1_000_000, 500_000, input_price=0.15, output_price=0.6) == pytest.approx(0.45)
    assert cost_usd(0, 0, input_price=0, output_price=0) == 0.0


def test_errors() -> None:
    with pytest.raises(InvalidInputError, match="input_price must be a finite number >= 0"):
        CostUSD(input_price=-1, output_price=1)
    with pytest.raises(InvalidInputError, match="give both input_price and output_price"):
        CostUSD(input_price=1)
    with pytest.raises(InvalidInputError, match="exactly the keys 'input' and 'output'"):
        check_prices({"in": 1, "out": 2})
    with pytest.raises(InvalidInputError, match=r"prices\['output'\] must be a finite number"):
        check_prices({"input": 1, "output": float("nan")})
    with pytest.raises(InvalidInputError, match="output_tokens must be an int >= 0"):
        cost_usd(1, -2, input_price=1, output_price=1)


def test_through_evaluate_rag() -> None:
    samples = [
        RagSample(id="a", latency_ms=100, input_tokens=1000, output_tokens=0),
        RagSample(id="b", latency_ms=300),
    ]
    with pytest.raises(InvalidInputError, match="cost_usd needs token prices"):
        evaluate_rag(samples, metrics=["cost_usd"])
    report = evaluate_rag(
        samples,
        metrics=["latency_ms", "total_tokens", "cost_usd"],
        prices={"input": 2.0, "output": 8.0},
    )
    assert report.metrics == {"latency_ms": 200.0, "total_tokens": 1000.0, "cost_usd": 0.002}
    assert report.coverage == {"latency_ms": 2, "total_tokens": 1, "cost_usd": 1}
    assert report.higher_is_better == {
        "latency_ms": False,
        "total_tokens": False,
        "cost_usd": False,
    }
    assert report.per_sample["b"]["total_tokens"] is None
    priced = evaluate_rag(samples, metrics=[CostUSD(input_price=1, output_price=1)])
    assert priced.metrics == {"cost_usd": 0.001}
    with pytest.raises(InvalidInputError, match="total_tokens needs input_tokens, output_tokens"):
        evaluate_rag([RagSample(latency_ms=1)], metrics=["total_tokens"])


# --------------------------------------------------------------------------- huge values
# Issue 12: a valid but huge number must give a correct result or a clear error, never an
# OverflowError, a traceback, a 500, or a report holding inf/NaN.

FLOAT_MAX = sys.float_info.max


def _assert_finite(value: Any) -> None:
    """Every float anywhere in ``value`` is finite."""
    if isinstance(value, float):
        assert math.isfinite(value), value
    elif isinstance(value, dict):
        for item in value.values():
            _assert_finite(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _assert_finite(item)


@pytest.mark.parametrize(
    "latencies",
    [[1e308, 1e308], [1e308, 1.0], [FLOAT_MAX, FLOAT_MAX, 0.0], [1e308] * 3 + [1.0] * 10],
)
def test_huge_latencies_give_exact_finite_reports(latencies: list[float]) -> None:
    samples = [RagSample(id=f"s{i}", latency_ms=v) for i, v in enumerate(latencies)]
    report = evaluate_rag(samples, metrics=["latency_ms"])
    assert report.metrics["latency_ms"] == statistics.mean(latencies)  # exact, no overflow
    data = report.to_dict()
    _assert_finite(data)
    summary = data["summaries"]["latency_ms"]
    assert summary["min"] == min(latencies) and summary["max"] == max(latencies)
    assert min(latencies) <= summary["median"] <= max(latencies)
    assert json.loads(report.to_json(allow_nan=False))["metrics"] == report.metrics


def test_huge_latencies_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragmeter import cli

    data = tmp_path / "huge.jsonl"
    data.write_text('{"id": "a", "latency_ms": 1e308}\n{"id": "b", "latency_ms": 1e308}\n')
    assert cli.run(["eval", str(data), "--metrics", "latency_ms", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics"] == {"latency_ms": 1e308}
    _assert_finite(out)
    assert cli.run(["eval", str(data), "--metrics", "latency_ms"]) == 0
    assert "latency_ms" in capsys.readouterr().out


def test_cost_beyond_the_float_range_is_a_clear_error() -> None:
    # 10**15 tokens x 1e300 USD per million tokens = 1e309 USD
    sample = RagSample(id="big", input_tokens=10**15, output_tokens=0)
    metric = CostUSD(input_price=1e300, output_price=1.0)
    with pytest.raises(InvalidInputError, match=r"sample 'big': cost_usd .* largest float"):
        metric.score(sample)
    with pytest.raises(InvalidInputError, match=r"sample 'big': cost_usd .* largest float"):
        evaluate_rag([sample], metrics=[metric])
    with pytest.raises(InvalidInputError, match=r"cost_usd .* largest float"):
        cost_usd(10**15, 0, input_price=1e300, output_price=0)
    with pytest.raises(InvalidInputError, match=r"cost_usd .* largest float"):
        cost_usd(10**400, 0, input_price=1.0, output_price=0)


def test_cost_whose_product_overflows_but_whose_value_fits_is_exact() -> None:
    # 1e10 tokens x 1e300 USD per million tokens = 1e304 USD: the product overflows, the
    # cost does not; and 10**400 tokens at price 0 cost exactly 0.
    sample = RagSample(id="big", input_tokens=10**10, output_tokens=1)
    value = CostUSD(input_price=1e300, output_price=1e300).score(sample)
    expected = (Fraction(10**10) * Fraction(1e300) + Fraction(1e300)) / 1_000_000
    assert value == float(expected)
    assert cost_usd(10**400, 0, input_price=0, output_price=1) == 0.0
    report = evaluate_rag(
        [sample, RagSample(id="b", input_tokens=10**10, output_tokens=10**10)],
        metrics=["cost_usd"],
        prices={"input": 1e300, "output": 1e300},
    )
    _assert_finite(report.to_dict())
    assert report.metrics["cost_usd"] == float(
        (expected + Fraction(2 * 10**10) * Fraction(1e300) / 1_000_000) / 2
    )
    # ordinary numbers keep their usual rounding
    assert cost_usd(1_000_000, 500_000, input_price=0.15, output_price=0.6) == 0.45


def test_total_tokens_beyond_the_float_range_is_a_clear_error() -> None:
    sample = RagSample(id="t", input_tokens=10**400, output_tokens=1)
    with pytest.raises(InvalidInputError, match=r"sample 't': total_tokens .* largest float"):
        TotalTokens().score(sample)
    with pytest.raises(InvalidInputError, match=r"sample 't': total_tokens .* largest float"):
        evaluate_rag([sample], metrics=["total_tokens"])
    near = RagSample(id="n", input_tokens=10**308, output_tokens=7 * 10**307)
    assert TotalTokens().score(near) == float(17 * 10**307)
