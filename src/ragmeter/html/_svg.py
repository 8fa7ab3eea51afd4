"""Inline SVG plots for the HTML report, written as text: no plotting library, no script.

Each function returns one ``<svg>`` element sized by its ``viewBox`` (CSS sets the width),
so a plot renders the moment the HTML is parsed, prints, and needs no JavaScript. Every
label that could come from a user (a metric name, a system label) goes through
:func:`html.escape`. Coordinates are rounded to 0.1 px to keep a 10,000-point scatter small.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

__all__ = ["finite", "histogram", "nice_range", "outcome_bar", "scatter"]

_W, _H = 280.0, 150.0
_L, _R, _T, _B = 34.0, 8.0, 8.0, 22.0  # plot margins: left, right, top, bottom


def _n(x: float) -> str:
    """A coordinate with at most one decimal, without a trailing ``.0``."""
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _tick(x: float) -> str:
    """An axis label: short, exact for round numbers."""
    if x == 0:
        return "0"
    if abs(x) >= 1000 or abs(x) < 0.01:
        return f"{x:.2g}"
    return f"{x:.3g}"


def nice_range(values: Sequence[float]) -> tuple[float, float]:
    """The axis range for ``values``: ``[0, 1]`` when they all lie in it, else their
    min and max (widened by one unit when all values are equal).

    >>> nice_range([0.2, 1.0]), nice_range([3.0, 250.0]), nice_range([5.0, 5.0])
    ((0.0, 1.0), (3.0, 250.0), (4.5, 5.5))
    """
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if lo >= 0.0 and hi <= 1.0:
        return 0.0, 1.0
    if lo == hi:
        pad = abs(lo) * 0.1 or 0.5
        return lo - pad, hi + pad
    return lo, hi


def _bins(values: Sequence[float], lo: float, hi: float, n: int) -> list[int]:
    counts = [0] * n
    width = (hi - lo) / n
    for v in values:
        i = int((v - lo) / width) if width > 0 else 0
        counts[min(max(i, 0), n - 1)] += 1
    return counts


def histogram(
    values: Sequence[float],
    *,
    label: str,
    mean: float | None = None,
    median: float | None = None,
    bins: int = 20,
    symmetric: bool = False,
    band: tuple[float, float] | None = None,
) -> str:
    """A histogram of ``values`` with the mean (solid) and median (dashed) marked.

    ``symmetric`` centres the range on 0 (for differences); ``band`` shades an interval
    (a confidence interval). Bins are half-open ``[lo, hi)``, the last one closed.
    """
    if symmetric:
        m = max((abs(v) for v in values), default=0.0) or 1.0
        lo, hi = -m, m
    else:
        lo, hi = nice_range(values)
    counts = _bins(values, lo, hi, bins)
    top = max(counts, default=0) or 1
    pw, ph = _W - _L - _R, _H - _T - _B
    bw = pw / bins

    def x(v: float) -> float:
        return _L + (v - lo) / (hi - lo) * pw

    parts = [
        f'<svg class="plot hist" viewBox="0 0 {_n(_W)} {_n(_H)}" role="img" '
        f'aria-label="{escape(label)}: distribution of {len(values)} values">'
    ]
    if band is not None:
        b0, b1 = (min(max(v, lo), hi) for v in band)
        parts.append(
            f'<rect class="band" x="{_n(x(b0))}" y="{_n(_T)}" width="{_n(max(x(b1) - x(b0), 1))}"'
            f' height="{_n(ph)}"><title>interval [{b0:.4f}, {b1:.4f}]</title></rect>'
        )
    step = (hi - lo) / bins
    for i, c in enumerate(counts):
        if not c:
            continue
        h = c / top * ph
        left, right = lo + i * step, lo + (i + 1) * step
        close = "]" if i == bins - 1 else ")"
        parts.append(
            f'<rect class="bar" x="{_n(_L + i * bw + 0.5)}" y="{_n(_T + ph - h)}" '
            f'width="{_n(max(bw - 1, 0.5))}" height="{_n(h)}"><title>[{_tick(left)}, '
            f"{_tick(right)}{close}: {c}</title></rect>"
        )
    base = _T + ph
    parts.append(
        f'<line class="axis" x1="{_n(_L)}" y1="{_n(base)}" x2="{_n(_W - _R)}" y2="{_n(base)}"/>'
    )
    for v in (lo, (lo + hi) / 2, hi):
        parts.append(f'<text class="tick" x="{_n(x(v))}" y="{_n(_H - 6)}">{_tick(v)}</text>')
    parts.append(f'<text class="tick y" x="{_n(_L - 4)}" y="{_n(_T + 8)}">{top}</text>')
    if symmetric:
        parts.append(
            f'<line class="zero" x1="{_n(x(0))}" y1="{_n(_T)}" x2="{_n(x(0))}" y2="{_n(base)}"/>'
        )
    marks: tuple[tuple[str, float | None], ...] = (("mean", mean), ("median", median))
    for cls, at in marks:
        if at is not None and lo <= at <= hi:
            parts.append(
                f'<line class="{cls}" x1="{_n(x(at))}" y1="{_n(_T)}" x2="{_n(x(at))}" '
                f'y2="{_n(base)}"><title>{cls} {at:.4f}</title></line>'
            )
    parts.append("</svg>")
    return "".join(parts)


def scatter(
    a: Sequence[float],
    b: Sequence[float],
    outcomes: Sequence[str],
    *,
    label_a: str,
    label_b: str,
    metric: str,
) -> str:
    """Per-query scatter of ``b`` (y) against ``a`` (x) with the diagonal ``y = x``.

    ``outcomes`` holds ``"w"``, ``"t"`` or ``"l"`` per point (b better, tied, worse); point
    ``i`` carries ``data-i="i"`` so the page can open that query's drill-down.
    """
    size, pad = 360.0, 40.0
    lo, hi = nice_range([*a, *b])
    span = size - pad - 10.0

    def px(v: float) -> float:
        return pad + (v - lo) / (hi - lo) * span

    def py(v: float) -> float:
        return size - pad - (v - lo) / (hi - lo) * span

    parts = [
        f'<svg class="plot scatter" viewBox="0 0 {_n(size)} {_n(size)}" role="img" '
        f'aria-label="{escape(metric)} per query: {escape(label_b)} against {escape(label_a)}">',
        f'<rect class="frame" x="{_n(pad)}" y="10" width="{_n(span)}" height="{_n(span)}"/>',
        f'<line class="diag" x1="{_n(px(lo))}" y1="{_n(py(lo))}" '
        f'x2="{_n(px(hi))}" y2="{_n(py(hi))}"/>',
    ]
    for t in (lo, (lo + hi) / 2, hi):
        parts.append(
            f'<text class="tick" x="{_n(px(t))}" y="{_n(size - pad + 14)}">{_tick(t)}</text>'
        )
        parts.append(
            f'<text class="tick y" x="{_n(pad - 4)}" y="{_n(py(t) + 3)}">{_tick(t)}</text>'
        )
    parts.append(
        f'<text class="axis-label" x="{_n(pad + span / 2)}" y="{_n(size - 6)}">'
        f"{escape(label_a)} ({escape(metric)})</text>"
        f'<text class="axis-label" transform="translate(11 {_n(10 + span / 2)}) rotate(-90)">'
        f'{escape(label_b)}</text><g class="points">'
    )
    parts.extend(
        f'<circle class="{o}" cx="{_n(px(x))}" cy="{_n(py(y))}" r="3" data-i="{i}"/>'
        for i, (x, y, o) in enumerate(zip(a, b, outcomes, strict=True))
    )
    parts.append("</g></svg>")
    return "".join(parts)


def outcome_bar(wins: int, ties: int, losses: int, *, label_b: str) -> str:
    """One stacked bar: queries where ``b`` was better, tied, worse."""
    total = wins + ties + losses
    width, height = 360.0, 28.0
    parts = [
        f'<svg class="plot wtl" viewBox="0 0 {_n(width)} {_n(height)}" role="img" '
        f'aria-label="{escape(label_b)} better on {wins}, tied on {ties}, worse on {losses} '
        'queries">'
    ]
    x = 0.0
    for cls, count, word in (("w", wins, "better"), ("t", ties, "tied"), ("l", losses, "worse")):
        if not count:
            continue
        w = width * count / total if total else 0.0
        parts.append(
            f'<rect class="{cls}" x="{_n(x)}" y="0" width="{_n(w)}" height="{_n(height)}">'
            f"<title>{escape(label_b)} {word}: {count}</title></rect>"
        )
        if w > 24:
            parts.append(f'<text x="{_n(x + w / 2)}" y="18">{count}</text>')
        x += w
    parts.append("</svg>")
    return "".join(parts)


def finite(values: Sequence[float | None]) -> list[float]:
    """The finite numbers of ``values`` (``None``, NaN and infinities left out)."""
    return [v for v in values if v is not None and math.isfinite(v)]
