"""What a paired comparison found (:class:`CompareResult`), and one query's move
(:class:`QueryChange`): the numbers, the verdict, the text and JSON forms."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragmeter.stats._base import _TEST_LABELS

if TYPE_CHECKING:
    import os
    from pathlib import Path

__all__ = ["CompareResult", "QueryChange"]


@dataclass(frozen=True)
class QueryChange:
    """One query's scores under both systems; ``diff`` is ``b - a``."""

    query_id: str
    a: float
    b: float

    @property
    def diff(self) -> float:
        """``b - a`` for this query."""
        return self.b - self.a

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return {"query_id": self.query_id, "a": self.a, "b": self.b, "diff": self.diff}


def _json_float(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _f(value: float, digits: int = 4) -> str:
    return f"{value:+.{digits}f}"


@dataclass(frozen=True)
class CompareResult:
    """The outcome of :func:`compare`: is ``b`` really different from ``a``?

    ``mean_diff`` is the mean of ``b - a`` over the ``n`` paired queries (positive: ``b``
    scored higher, whatever the metric's direction). ``ci_low``/``ci_high`` bound it with
    ``confidence`` (paired bootstrap, percentile method). ``p_value`` (two-sided) is the
    chance of a mean difference at least this large if the two systems were
    interchangeable; ``exact`` says it came from all ``2**n`` sign flips rather than a
    random sample of them. ``effect_size`` is Cohen's d_z, ``mean_diff`` over the standard
    deviation of the differences (``±inf`` when every query moved by the same amount).
    ``wins``/``ties``/``losses`` count queries where ``b`` is better/equal/worse under
    ``higher_is_better``; ``improved``/``regressed`` list the queries that moved most.
    ``warnings`` say when the two sides do not score the same queries the same way: a judged
    query one run has no ranking for, which its report scored 0 (``missing_queries="zero"``,
    = trec_eval -c) and which is therefore paired as a 0, or queries left out of the pairing
    (``on_missing="intersect"``); each gives the counts per side and the convention applied.
    """

    metric: str | None
    test: str
    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    ci_low: float
    ci_high: float
    p_value: float
    effect_size: float
    wins: int
    ties: int
    losses: int
    higher_is_better: bool = True
    confidence: float = 0.95
    alpha: float = 0.05
    n_resamples: int = 10_000
    seed: int | None = 0
    exact: bool = False
    improved: tuple[QueryChange, ...] = ()
    regressed: tuple[QueryChange, ...] = ()
    only_in_a: int = 0
    only_in_b: int = 0
    label_a: str = "a"
    label_b: str = "b"
    warnings: tuple[str, ...] = ()

    @property
    def significant(self) -> bool:
        """``p_value < alpha``."""
        return self.p_value < self.alpha

    @property
    def b_is_better(self) -> bool:
        """Whether ``b``'s mean is better than ``a``'s under the metric's direction."""
        return self.mean_diff > 0 if self.higher_is_better else self.mean_diff < 0

    def verdict(self) -> str:
        """One plain sentence: which system is better, and whether that is significant."""
        a, b = self.label_a, self.label_b
        p = _p_text(self.p_value)
        if self.mean_diff == 0 or not self.significant:
            return (
                f"no significant difference between {b} and {a} "
                f"(p = {p} >= alpha {self.alpha:g}); the gap may be noise"
            )
        word = "better" if self.b_is_better else "worse"
        return f"{b} is significantly {word} than {a} (p = {p} < alpha {self.alpha:g})"

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready; a non-finite effect size becomes ``None``)."""
        return {
            "metric": self.metric,
            "test": self.test,
            "n": self.n,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "mean_diff": self.mean_diff,
            "diff_direction": f"{self.label_b} - {self.label_a}",
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "p_value": self.p_value,
            "alpha": self.alpha,
            "significant": self.significant,
            "exact": self.exact,
            "effect_size": _json_float(self.effect_size),
            "wins": self.wins,
            "ties": self.ties,
            "losses": self.losses,
            "higher_is_better": self.higher_is_better,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "improved": [c.to_dict() for c in self.improved],
            "regressed": [c.to_dict() for c in self.regressed],
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "label_a": self.label_a,
            "label_b": self.label_b,
            "verdict": self.verdict(),
            "warnings": list(self.warnings),
        }

    def __str__(self) -> str:
        a, b = self.label_a, self.label_b
        metric = self.metric or "score"
        direction = "higher" if self.higher_is_better else "lower"
        width = max(len(a), len(b), 12)
        pct = f"{self.confidence * 100:g}%"
        resamples = (
            f"all {2**self.n} sign flips (exact)"
            if self.exact
            else ("t distribution" if self.test == "t-test" else f"{self.n_resamples} resamples")
        )
        if self.test != "t-test" and not self.exact and self.p_value <= 1 / (self.n_resamples + 1):
            resamples += "; the smallest p this many resamples can show"
        lines = [
            f"{metric}: {b} vs {a} over {self.n} paired queries ({direction} is better)",
            f"  {a:<{width}}  {self.mean_a:.4f}",
            f"  {b:<{width}}  {self.mean_b:.4f}",
            f"  {'difference':<{width}}  {_f(self.mean_diff)}  ({b} - {a}; {pct} CI "
            f"[{_f(self.ci_low)}, {_f(self.ci_high)}], paired bootstrap)",
            f"  {'p-value':<{width}}  {_p_text(self.p_value)}  "
            f"({_TEST_LABELS.get(self.test, self.test)}, two-sided, {resamples})",
            f"  {'effect size':<{width}}  d_z = {self.effect_size:+.2f}",
            f"  {'per query':<{width}}  {b} better {self.wins} · tied {self.ties} · "
            f"{b} worse {self.losses}",
            f"  {'verdict':<{width}}  {self.verdict()}",
        ]
        lines.extend(f"  warning: {w}" for w in self.warnings)
        for title, changes in (
            ("improved most", self.improved),
            ("regressed most", self.regressed),
        ):
            if changes:
                lines.append(f"  {title} ({b} - {a}):")
                w = max(len(c.query_id) for c in changes)
                lines.extend(
                    f"    {c.query_id:<{w}}  {c.a:.4f} -> {c.b:.4f}  ({_f(c.diff)})"
                    for c in changes
                )
        return "\n".join(lines)

    def to_html(self, path: str | os.PathLike[str], *, a: Any, b: Any, **options: Any) -> Path:
        """Deprecated: :func:`ragmeter.html.write_comparison` (same options).

        Writes this comparison as one self-contained, offline HTML page; returns its path.

        ``a`` and ``b`` are what was compared (two reports or two ``{query_id: score}``
        mappings): the page shows the per-query scatter of ``b`` against ``a``, the win,
        tie and loss counts, the interval and p-value, and the queries that moved most,
        each opening both drill-downs side by side. ``options``: ``run_a``, ``run_b``,
        ``qrels``, ``queries``, ``corpus`` (retrieval), ``samples_a``, ``samples_b`` (RAG),
        ``title``, ``dataset``, ``note``, ``depth``, ``max_bytes``; see
        :func:`ragmeter.html.write_comparison`.
        """
        warnings.warn(
            "CompareResult.to_html is deprecated: pages are written by ragmeter.html; call "
            "ragmeter.html.write_comparison(result, path, a=..., b=..., ...) (same options; "
            "to_html will be "
            "removed in a future release)",
            DeprecationWarning,
            stacklevel=2,
        )
        from ragmeter.html import write_comparison

        return write_comparison(self, path, a=a, b=b, **options)


def _p_text(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"
