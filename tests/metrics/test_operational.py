"""Operational metrics: latency, tokens and dollar cost (lower is better)."""

from __future__ import annotations

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
