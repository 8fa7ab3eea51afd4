"""What the registry keeps of a run (:class:`RunRecord`, a :class:`MetricRow` per metric) and
what it says about two runs (:class:`Comparability`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from ragmeter.report import ConfigFingerprint, DatasetFingerprint

__all__ = ["Comparability", "MetricRow", "RunRecord", "t_interval"]

CONFIDENCE = 0.95
"""The level of every stored interval."""


@dataclass(frozen=True)
class MetricRow:
    """One metric of a run: its ``mean`` (the report's), the 95% Student-t interval of the
    mean over the ``n`` scored items (``ci_low``/``ci_high``; ``None`` when ``n < 2``).

    The interval is ``mean ± t(0.975, n - 1) · s / √n`` with ``s`` the sample standard
    deviation of the per-item scores (from the report's summary, so it needs no per-item
    scores kept).
    """

    mean: float
    ci_low: float | None
    ci_high: float | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return {"mean": self.mean, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


def t_interval(mean: float, pstd: float, n: int) -> tuple[float | None, float | None]:
    """The 95% Student-t interval of a mean over ``n`` items whose population standard
    deviation (ddof=0) is ``pstd``; ``(None, None)`` when ``n < 2``.

    >>> t_interval(0.5, 0.0, 1)
    (None, None)
    """
    if n < 2:
        return None, None
    sample_std = pstd * math.sqrt(n / (n - 1))
    half = _t_quantile(n - 1) * sample_std / math.sqrt(n)
    return mean - half, mean + half


@lru_cache(maxsize=256)
def _t_quantile(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (bisection on
    its CDF; the CDF from the regularized incomplete beta function)."""
    low, high = 0.0, 1.0
    while _t_upper(high, df) > (1 - CONFIDENCE) / 2:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if _t_upper(mid, df) > (1 - CONFIDENCE) / 2:
            low = mid
        else:
            high = mid
        if high - low < 1e-13 * high:
            break
    return (low + high) / 2


def _t_upper(t: float, df: int) -> float:
    """``P(T > t)`` for ``t >= 0``: ``I_x(df/2, 1/2) / 2`` with ``x = df / (df + t²)``."""
    return _beta_inc(df / 2, 0.5, df / (df + t * t)) / 2


def _beta_inc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` (continued fraction,
    modified Lentz; the symmetry relation where it converges slowly)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _beta_inc(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * result / a


@dataclass(frozen=True)
class RunRecord:
    """One saved run: who (``name``, ``tags``, ``note``), when (``created``, UTC), where in
    the code (``git_commit``, ``git_dirty``: ``None`` outside a git repository), on what
    (``dataset``) and under what (``config``, ``ragmeter_version``,
    ``metric_definitions``, the judge), what it cost (``tokens``, ``cost``), its numbers
    (``metrics``: a :class:`MetricRow` per key) and where its per-query (per-sample)
    scores are (``scores_path``, checked against ``scores_sha256`` when read)."""

    id: str
    name: str
    tags: dict[str, str]
    created: datetime
    kind: Literal["retrieval", "rag"]
    git_commit: str | None
    git_dirty: bool | None
    dataset: DatasetFingerprint | None
    config: ConfigFingerprint
    ragmeter_version: str
    metric_definitions: str
    judge_model: str | None
    judge_prompt_hash: str | None
    tokens: int | None
    cost: float | None
    metrics: dict[str, MetricRow]
    scores_path: Path
    scores_sha256: str
    pinned: bool
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready; the dataset fingerprint without ``per_item``)."""
        return {
            "id": self.id,
            "name": self.name,
            "tags": dict(self.tags),
            "created": self.created.isoformat(),
            "kind": self.kind,
            "git_commit": self.git_commit,
            "git_dirty": self.git_dirty,
            "dataset": None if self.dataset is None else self.dataset.to_dict(),
            "config": self.config.to_dict(),
            "ragmeter_version": self.ragmeter_version,
            "metric_definitions": self.metric_definitions,
            "judge_model": self.judge_model,
            "judge_prompt_hash": self.judge_prompt_hash,
            "tokens": self.tokens,
            "cost": self.cost,
            "metrics": {k: row.to_dict() for k, row in self.metrics.items()},
            "scores_path": str(self.scores_path),
            "scores_sha256": self.scores_sha256,
            "pinned": self.pinned,
            "note": self.note,
        }


@dataclass(frozen=True)
class Comparability:
    """Whether two runs compare like for like: the same kind, dataset digest and config
    digest (``comparable``); else ``reasons`` lists every difference in words. ``common``
    holds the ids both runs scored (in a's order), ``only_a``/``only_b`` the others."""

    comparable: bool
    reasons: list[str] = field(default_factory=list)
    common: list[str] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
