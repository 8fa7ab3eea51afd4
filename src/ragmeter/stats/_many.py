"""Several systems against one baseline, Holm-Bonferroni adjusted (``compare_many``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragmeter.errors import InvalidInputError
from ragmeter.stats._base import _TEST_LABELS, Comparable, OnMissing, TestName
from ragmeter.stats._compare import compare
from ragmeter.stats._result import CompareResult, _f, _p_text

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------- many systems


def holm_bonferroni(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order.

    Sort the ``m`` p-values ascending; the ``i``-th smallest (1-based) is multiplied by
    ``m - i + 1``, capped at 1, and made non-decreasing along the sorted order. Rejecting
    every hypothesis whose adjusted p-value is below ``alpha`` controls the family-wise
    error rate at ``alpha`` (Holm 1979), and is never less powerful than Bonferroni.

    >>> holm_bonferroni([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    ps = [float(p) for p in p_values]
    for i, p in enumerate(ps):
        if not 0.0 <= p <= 1.0:
            raise InvalidInputError(f"p_values[{i}] must be in [0, 1], got {p!r}")
    m = len(ps)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: ps[j])):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class ComparisonRow:
    """One system against the baseline: its :class:`CompareResult` and Holm-adjusted p."""

    name: str
    result: CompareResult
    p_adjusted: float

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return {"name": self.name, "p_adjusted": self.p_adjusted, **self.result.to_dict()}


@dataclass(frozen=True)
class ComparisonTable:
    """The outcome of :func:`compare_many`: every system against one baseline.

    ``p_adjusted`` on each row is Holm–Bonferroni over the ``len(rows)`` comparisons; a
    row is significant when ``p_adjusted < alpha``.
    """

    baseline: str
    metric: str | None
    test: str
    alpha: float
    rows: tuple[ComparisonRow, ...]

    def significant(self) -> list[str]:
        """Names of the systems that differ significantly from the baseline (adjusted)."""
        return [r.name for r in self.rows if r.p_adjusted < self.alpha]

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return {
            "baseline": self.baseline,
            "metric": self.metric,
            "test": self.test,
            "alpha": self.alpha,
            "correction": "holm-bonferroni",
            "rows": [r.to_dict() for r in self.rows],
        }

    def _cells(self) -> list[list[str]]:
        first = self.rows[0].result
        pct = f"{first.confidence * 100:g}% CI"
        cells = [["system", "mean", "diff", pct, "p", "p (Holm)", "W/T/L", ""]]
        cells.append([f"{self.baseline} (baseline)", f"{first.mean_a:.4f}", "", "", "", "", "", ""])
        for row in self.rows:
            r = row.result
            cells.append(
                [
                    row.name,
                    f"{r.mean_b:.4f}",
                    _f(r.mean_diff),
                    f"[{_f(r.ci_low)}, {_f(r.ci_high)}]",
                    _p_text(r.p_value),
                    _p_text(row.p_adjusted),
                    f"{r.wins}/{r.ties}/{r.losses}",
                    ("better" if r.b_is_better else "worse") + " *"
                    if row.p_adjusted < self.alpha
                    else "",
                ]
            )
        return cells

    def _title(self) -> str:
        first = self.rows[0].result
        return (
            f"{self.metric or 'score'} against {self.baseline!r} over {first.n} paired queries "
            f"({_TEST_LABELS[self.test]}; Holm–Bonferroni over {len(self.rows)} comparisons; "
            f"* = significant at alpha {self.alpha:g})"
        )

    def to_markdown(self) -> str:
        """The table as markdown."""
        cells = self._cells()
        lines = ["| " + " | ".join(cells[0]) + " |", "|---" + "|---:" * 6 + "|---|"]
        lines.extend("| " + " | ".join(c) + " |" for c in cells[1:])
        return "\n".join(lines)

    def __str__(self) -> str:
        cells = self._cells()
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        out = [self._title()]
        for j, row in enumerate(cells):
            out.append(
                "  ".join(
                    c.ljust(w) if i in (0, 7) else c.rjust(w)
                    for i, (c, w) in enumerate(zip(row, widths, strict=True))
                ).rstrip()
            )
            if j == 0:
                out.append("  ".join("-" * w for w in widths[:-1]))
        out.extend(f"warning: {row.name}: {w}" for row in self.rows for w in row.result.warnings)
        return "\n".join(out)


def compare_many(
    systems: Mapping[str, Comparable],
    *,
    baseline: str | None = None,
    metric: str | None = None,
    test: TestName = "randomization",
    n: int = 10_000,
    seed: int | None = 0,
    confidence: float = 0.95,
    alpha: float = 0.05,
    on_missing: OnMissing = "error",
    higher_is_better: bool | None = None,
    top: int = 5,
) -> ComparisonTable:
    """Compare every system in ``systems`` against ``baseline`` (default: the first one).

    Each pair is a :func:`compare` with the same options and seed; the p-values are then
    adjusted with :func:`holm_bonferroni` so that "any of these differs" keeps its
    ``alpha`` however many systems are compared.

    >>> base = {"q1": 0.2, "q2": 0.5, "q3": 0.4, "q4": 0.1}
    >>> same = dict(base)
    >>> table = compare_many({"bm25": base, "copy": same}, test="t-test")
    >>> table.rows[0].p_adjusted, table.significant()
    (1.0, [])
    """
    if len(systems) < 2:
        raise InvalidInputError(
            f"compare_many needs at least 2 systems (a baseline and one to compare), got "
            f"{len(systems)}"
        )
    names = list(systems)
    if baseline is None:
        baseline = names[0]
    elif baseline not in systems:
        raise InvalidInputError(
            f"baseline {baseline!r} is not one of the systems: {', '.join(map(repr, names))}"
        )
    results = [
        compare(
            systems[baseline],
            systems[name],
            metric=metric,
            test=test,
            n=n,
            seed=seed,
            confidence=confidence,
            alpha=alpha,
            on_missing=on_missing,
            higher_is_better=higher_is_better,
            top=top,
            label_a=baseline,
            label_b=name,
        )
        for name in names
        if name != baseline
    ]
    adjusted = holm_bonferroni([r.p_value for r in results])
    rows = tuple(ComparisonRow(r.label_b, r, p) for r, p in zip(results, adjusted, strict=True))
    return ComparisonTable(
        baseline=baseline, metric=results[0].metric, test=test, alpha=alpha, rows=rows
    )
