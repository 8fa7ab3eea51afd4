"""Operational metrics (seed 003): what running the pipeline cost, not how good it was.

All three are lower-is-better (``higher_is_better = False``) and skip samples that did not
report what they need (counted in ``coverage``, never scored as 0):

================ =================================================== ==========================
metric           per sample                                          needs
================ =================================================== ==========================
``latency_ms``   wall-clock latency in milliseconds                  ``latency_ms``
``total_tokens`` ``input_tokens + output_tokens``                    both token counts
``cost_usd``     ``(input_tokens * input_price + output_tokens *     both token counts, and
                 output_price) / 1_000_000`` (prices in USD per      prices
                 million tokens)
================ =================================================== ==========================

Scores are finite floats. A cost whose intermediate product overflows the float range but
whose value fits (``1e10`` tokens at ``1e300`` USD per million) is computed exactly; a total
or a cost beyond the largest float (~1.8e308) raises
:class:`~ragmeter.errors.InvalidInputError` naming the sample, rather than scoring ``inf``.

``cost_usd`` has no default prices: pass ``CostUSD(input_price=..., output_price=...)`` as a
metric, or ``prices={"input": ..., "output": ...}`` to
:func:`ragmeter.evaluation.rag.evaluate_rag`.

>>> s = RagSample(latency_ms=120.5, input_tokens=1000, output_tokens=200)
>>> LatencyMs().score(s), TotalTokens().score(s)
(120.5, 1200.0)
>>> CostUSD(input_price=3.0, output_price=15.0).score(s)
0.006
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import ClassVar

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.base import RagMetric
from ragmeter.metrics.lexical import _register
from ragmeter.schema import RagSample

__all__ = ["CostUSD", "LatencyMs", "TotalTokens", "check_prices", "cost_usd"]


def _check_price(value: object, name: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidInputError(
            f"{name} must be a finite number >= 0 (USD per million tokens), got {value!r}"
        )
    return float(value)


def _sample(sample: RagSample) -> str:
    return f"sample {sample.id!r}: "


def _magnitude(value: int) -> str:
    """A huge int's order of magnitude, without printing its digits (or converting it)."""
    return f"about 10^{int(value.bit_length() * math.log10(2))}"


def _cost(
    input_tokens: int, output_tokens: int, input_price: float, output_price: float, where: str
) -> float:
    """``(input_tokens * input_price + output_tokens * output_price) / 1e6`` as a finite float.

    Computed in floats (the usual rounding); when that overflows, exactly with fractions, so
    a cost that fits the float range is correct; one that does not raises.
    """
    try:
        value = (input_tokens * input_price + output_tokens * output_price) / 1_000_000
        if math.isfinite(value):
            return value
    except OverflowError:  # a token count beyond the float range
        pass
    exact = (
        Fraction(input_tokens) * Fraction(input_price)
        + Fraction(output_tokens) * Fraction(output_price)
    ) / 1_000_000
    try:
        return float(exact)
    except OverflowError:
        raise InvalidInputError(
            f"{where}cost_usd is {_magnitude(int(exact))} USD, beyond the largest float "
            f"(~1.8e308); check input_tokens, output_tokens and the prices (USD per million "
            "tokens)"
        ) from None


def check_prices(prices: Mapping[str, float]) -> tuple[float, float]:
    """``(input_price, output_price)`` from ``{"input": ..., "output": ...}`` (USD per 1M tokens).

    >>> check_prices({"input": 3, "output": 15})
    (3.0, 15.0)
    >>> check_prices({"input": 3})
    Traceback (most recent call last):
    ...
    ragmeter.errors.InvalidInputError: prices must be a mapping with exactly the keys ...
    """
    if not isinstance(prices, Mapping) or set(prices) != {"input", "output"}:
        raise InvalidInputError(
            "prices must be a mapping with exactly the keys 'input' and 'output' "
            f"(USD per million tokens), got {prices!r}"
        )
    return _check_price(prices["input"], "prices['input']"), _check_price(
        prices["output"], "prices['output']"
    )


def cost_usd(
    input_tokens: int, output_tokens: int, *, input_price: float, output_price: float
) -> float:
    """Dollar cost of one call: token counts times prices given in USD per **million** tokens.

    Raises :class:`~ragmeter.errors.InvalidInputError` for a negative or non-int count, a
    negative or non-finite price, or a cost beyond the largest float.

    >>> cost_usd(1_000_000, 500_000, input_price=0.15, output_price=0.6)
    0.45
    """
    for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{name} must be an int >= 0, got {value!r}")
    ip = _check_price(input_price, "input_price")
    op = _check_price(output_price, "output_price")
    return _cost(input_tokens, output_tokens, ip, op, "")


class LatencyMs(RagMetric):
    """The sample's wall-clock latency in milliseconds (lower is better)."""

    name: ClassVar[str] = "latency_ms"
    needs: ClassVar[frozenset[str]] = frozenset({"latency_ms"})
    higher_is_better: ClassVar[bool] = False

    def score(self, sample: RagSample) -> float | None:
        return None if sample.latency_ms is None else float(sample.latency_ms)


class TotalTokens(RagMetric):
    """Input plus output tokens; ``None`` when either count is missing (lower is better).

    A total beyond the largest float raises :class:`~ragmeter.errors.InvalidInputError`.
    """

    name: ClassVar[str] = "total_tokens"
    needs: ClassVar[frozenset[str]] = frozenset({"input_tokens", "output_tokens"})
    higher_is_better: ClassVar[bool] = False

    def score(self, sample: RagSample) -> float | None:
        if sample.input_tokens is None or sample.output_tokens is None:
            return None
        total = sample.input_tokens + sample.output_tokens
        try:
            return float(total)
        except OverflowError:
            raise InvalidInputError(
                f"{_sample(sample)}total_tokens is {_magnitude(total)}, beyond the largest "
                "float (~1.8e308); check input_tokens and output_tokens"
            ) from None


class CostUSD(RagMetric):
    """Dollar cost of the sample's generation from its token counts (lower is better).

    ``input_price`` and ``output_price`` are USD per million tokens; a cost beyond the largest
    float raises :class:`~ragmeter.errors.InvalidInputError` naming the sample. The registered
    ``cost_usd`` instance has no prices; :func:`ragmeter.evaluation.rag.evaluate_rag` refuses
    it unless ``prices=`` is given.
    """

    name: ClassVar[str] = "cost_usd"
    needs: ClassVar[frozenset[str]] = frozenset({"input_tokens", "output_tokens"})
    higher_is_better: ClassVar[bool] = False

    def __init__(
        self, *, input_price: float | None = None, output_price: float | None = None
    ) -> None:
        if (input_price is None) != (output_price is None):
            raise InvalidInputError(
                "give both input_price and output_price (USD per million tokens), or neither"
            )
        self.input_price = None if input_price is None else _check_price(input_price, "input_price")
        self.output_price = (
            None if output_price is None else _check_price(output_price, "output_price")
        )

    @property
    def has_prices(self) -> bool:
        """Whether prices were configured (the registered instance has none)."""
        return self.input_price is not None and self.output_price is not None

    def with_prices(self, prices: Mapping[str, float]) -> CostUSD:
        """A copy priced by ``{"input": ..., "output": ...}`` (USD per million tokens)."""
        ip, op = check_prices(prices)
        return CostUSD(input_price=ip, output_price=op)

    def score(self, sample: RagSample) -> float | None:
        if (
            self.input_price is None
            or self.output_price is None
            or sample.input_tokens is None
            or sample.output_tokens is None
        ):
            return None
        return _cost(
            sample.input_tokens,
            sample.output_tokens,
            self.input_price,
            self.output_price,
            _sample(sample),
        )

    def __repr__(self) -> str:
        if not self.has_prices:
            return "CostUSD()"
        return f"CostUSD(input_price={self.input_price}, output_price={self.output_price})"


for _metric in (LatencyMs(), TotalTokens(), CostUSD()):
    _register(_metric)
