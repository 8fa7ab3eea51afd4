"""The trend page: one metric over saved runs, with CI bands and regressions marked, static.

The plot is inline SVG (no script, no network): runs left to right in time order, evenly
spaced; each run's mean a point linked to that run's own report page, its confidence
interval a vertical bar, and the intervals of consecutive like-for-like runs joined into
a shaded band. A regression (a significant drop against the previous comparable run) is a
red point with a downward mark; where the data or settings changed (the runs are not
like for like) the band and line break, at a dashed rule. Under the plot, a table of the
runs. Every string that came from a user (run names, tags, notes) is escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING

from ragmeter._version import __version__
from ragmeter.html import _sections
from ragmeter.html._page import _asset
from ragmeter.html._svg import nice_range

if TYPE_CHECKING:
    from ragmeter.stats import TrendPoint

__all__ = ["render_trend"]

_W, _H = 960.0, 340.0
_L, _R, _T, _B = 56.0, 24.0, 16.0, 48.0

CSS = """
svg.trend { width: 100%; max-width: 1100px; height: auto; display: block;
  font: 11px system-ui, sans-serif; }
svg.trend .band { stroke: none; }
svg.trend .line { fill: none; stroke-width: 1.6; }
svg.trend .ci { stroke-width: 1.2; }
svg.trend circle.pt { stroke: #fff; stroke-width: 1.5; }
svg.trend .s1 { --c: #bf8700; } svg.trend .s2 { --c: #1a7f37; } svg.trend .s3 { --c: #8250df; }
svg.trend .s4 { --c: #bc4c00; } svg.trend .s5 { --c: #57606a; }
svg.trend .line, svg.trend .ci { stroke: var(--c, #0969da); }
svg.trend .band { fill: var(--c, #0969da); fill-opacity: .18; }
svg.trend circle.pt { fill: var(--c, #0969da); }
svg.trend circle.pt.regression { fill: #cf222e; }
.legend i.sw { display: inline-block; width: 14px; height: 4px; margin-right: 5px;
  vertical-align: middle; background: var(--c, #0969da); }
.legend .s1 { --c: #bf8700; } .legend .s2 { --c: #1a7f37; } .legend .s3 { --c: #8250df; }
.legend .s4 { --c: #bc4c00; } .legend .s5 { --c: #57606a; }
svg.trend circle.pt.pinned { stroke: #1f2328; stroke-width: 2.5; }
svg.trend a:hover circle.pt { stroke: #000; }
svg.trend .mark { fill: #cf222e; text-anchor: middle; font-size: 13px; font-weight: 700; }
svg.trend .break { stroke: #8c959f; stroke-dasharray: 4 3; }
svg.trend .grid-y { stroke: #d0d7de; stroke-width: .6; }
svg.trend .tick.x { text-anchor: end; }
table.runs td, table.runs th { padding: 3px 8px; border-bottom: 1px solid var(--line);
  text-align: right; white-space: nowrap; }
table.runs td.l, table.runs th.l { text-align: left; }
table.runs td.note { text-align: left; white-space: normal; color: var(--muted); }
table.runs tr.regression td { background: #fdecea; }
"""


def _n(x: float) -> str:
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _v(x: float | None) -> str:
    return "–" if x is None else f"{x:.4f}"


def _names(points: Sequence[TrendPoint]) -> list[str]:
    """The run names, in the order they first appear (each gets its own colour)."""
    return list(dict.fromkeys(p.name for p in points))


def _series(points: Sequence[TrendPoint]) -> list[list[int]]:
    """Per run name, its point indices split into like-for-like series (joined by a line
    and a band): a point starts a new series unless it was tested against the point of
    its name just before it."""
    groups: list[list[int]] = []
    last: dict[str, int] = {}
    open_group: dict[str, list[int]] = {}
    for i, p in enumerate(points):
        before = last.get(p.name)
        if before is None or p.baseline_id != points[before].run_id:
            open_group[p.name] = []
            groups.append(open_group[p.name])
        open_group[p.name].append(i)
        last[p.name] = i
    return groups


def _breaks(points: Sequence[TrendPoint]) -> list[int]:
    """The points that start a new series of a name seen before: the data or settings
    changed there."""
    return [
        g[0]
        for g in _series(points)
        if any(points[j].name == points[g[0]].name for j in range(g[0]))
    ]


def _point_title(p: TrendPoint, metric: str) -> str:
    lines = [
        f"{p.name} · run {p.run_id[:12]}",
        p.created.strftime("%Y-%m-%d %H:%M UTC"),
        f"{metric} = {p.mean:.4f}" + (f"  [{p.ci_low:.4f}, {p.ci_high:.4f}]" if p.ci else ""),
        f"n = {p.n}",
    ]
    if p.git_commit:
        lines.append(f"commit {p.git_commit[:12]}")
    if p.diff is not None:
        lines.append(f"vs previous comparable run: {p.diff:+.4f} (p = {p.p_value:.4g})")
    if p.regression:
        lines.append("REGRESSION: a significant drop")
    if p.pinned:
        lines.append("pinned baseline")
    return "\n".join(lines)


def y_range(values: Sequence[float]) -> tuple[float, float]:
    """The y axis of a trend: the values' span padded by a tenth each way (a trend's moves
    are small against a 0-1 axis), never past 0 or 1 for values inside them.

    >>> y_range([0.30, 0.35]), y_range([5.0, 5.0])
    ((0.295, 0.355), (4.5, 5.5))
    """
    lo, hi = min(values), max(values)
    if lo == hi:
        return (
            nice_range([lo, hi]) if not 0 <= lo <= 1 else (max(lo - 0.05, 0.0), min(hi + 0.05, 1.0))
        )
    pad = (hi - lo) / 10
    low, high = lo - pad, hi + pad
    if lo >= 0 and hi <= 1:
        low, high = max(low, 0.0), min(high, 1.0)
    return round(low, 12), round(high, 12)


def _time_format(points: Sequence[TrendPoint]) -> str:
    """Times of day when the runs span under a day, else dates with the time."""
    span = points[-1].created - points[0].created
    return "%H:%M:%S" if span.total_seconds() < 86_400 else "%Y-%m-%d %H:%M"


def _plot(points: Sequence[TrendPoint], metric: str, links: Mapping[str, str]) -> str:
    values = [p.mean for p in points] + [v for p in points for v in (p.ci or ())]
    lo, hi = y_range(values)
    pw, ph = _W - _L - _R, _H - _T - _B
    step = pw / max(len(points) - 1, 1)

    def x(i: int) -> float:
        return _L + (i * step if len(points) > 1 else pw / 2)

    def y(v: float) -> float:
        return _T + ph - (v - lo) / (hi - lo) * ph

    parts = [
        f'<svg class="trend" viewBox="0 0 {_n(_W)} {_n(_H)}" role="img" '
        f'aria-label="{escape(metric)} over {len(points)} saved runs">'
    ]
    for t in (lo, lo + (hi - lo) / 4, (lo + hi) / 2, lo + 3 * (hi - lo) / 4, hi):
        parts.append(
            f'<line class="grid-y" x1="{_n(_L)}" y1="{_n(y(t))}" x2="{_n(_W - _R)}" '
            f'y2="{_n(y(t))}"/><text class="tick y" x="{_n(_L - 6)}" y="{_n(y(t) + 4)}">'
            f"{t:.3g}</text>"
        )
    names = _names(points)
    for group in _series(points):
        colour = f"s{names.index(points[group[0]].name) % 6}"
        with_ci = [i for i in group if points[i].ci is not None]
        if len(with_ci) > 1:
            upper = " ".join(f"{_n(x(i))},{_n(y(points[i].ci_high or 0.0))}" for i in with_ci)
            lower = " ".join(
                f"{_n(x(i))},{_n(y(points[i].ci_low or 0.0))}" for i in reversed(with_ci)
            )
            parts.append(f'<polygon class="band {colour}" points="{upper} {lower}"/>')
        if len(group) > 1:
            line = " ".join(f"{_n(x(i))},{_n(y(points[i].mean))}" for i in group)
            parts.append(f'<polyline class="line {colour}" points="{line}"/>')
    for i in _breaks(points):
        if i:
            xb = (x(i - 1) + x(i)) / 2
            parts.append(
                f'<line class="break" x1="{_n(xb)}" y1="{_n(_T)}" x2="{_n(xb)}" '
                f'y2="{_n(_T + ph)}"><title>{escape(points[i].note or "not like for like")}'
                "</title></line>"
            )
    parts.extend(_marks(points, metric, links, x, y))
    base = _T + ph
    parts.append(
        f'<line class="axis" x1="{_n(_L)}" y1="{_n(base)}" x2="{_n(_W - _R)}" y2="{_n(base)}"/>'
        f'<text class="axis-label" transform="translate(14 {_n(_T + ph / 2)}) rotate(-90)">'
        f"{escape(metric)}</text></svg>"
    )
    return "".join(parts)


def _marks(
    points: Sequence[TrendPoint],
    metric: str,
    links: Mapping[str, str],
    x: Callable[[int], float],
    y: Callable[[float], float],
) -> list[str]:
    """Per run: its interval bar, its linked point, a regression mark and the date tick."""
    label_every = max(1, len(points) // 16)
    when = _time_format(points)
    names = _names(points)
    parts: list[str] = []
    for i, p in enumerate(points):
        cx, cy = x(i), y(p.mean)
        colour = f"s{names.index(p.name) % 6}"
        if p.ci is not None:
            parts.append(
                f'<line class="ci {colour}" x1="{_n(cx)}" y1="{_n(y(p.ci[0]))}" x2="{_n(cx)}" '
                f'y2="{_n(y(p.ci[1]))}"/>'
            )
        classes = f"pt {colour}" + (" regression" if p.regression else "")
        classes += " pinned" if p.pinned else ""
        radius = 5.5 if p.regression else 4.5
        circle = (
            f'<circle class="{classes}" cx="{_n(cx)}" cy="{_n(cy)}" r="{radius}"'
            f' data-run="{escape(p.run_id)}"><title>{escape(_point_title(p, metric))}</title>'
            "</circle>"
        )
        href = links.get(p.run_id)
        parts.append(f'<a href="{escape(href)}">{circle}</a>' if href else circle)
        if p.regression:
            parts.append(f'<text class="mark" x="{_n(cx)}" y="{_n(cy - 10)}">▼</text>')
        if i % label_every == 0:
            parts.append(
                f'<text class="tick x" transform="translate({_n(cx + 3)} {_n(_H - _B + 14)}) '
                f'rotate(-30)">{escape(p.created.strftime(when))}</text>'
            )
    return parts


def _table(points: Sequence[TrendPoint], metric: str, links: Mapping[str, str]) -> str:
    head = (
        '<tr><th class="l">time (UTC)</th><th class="l">run</th><th class="l">name</th>'
        f'<th class="l">commit</th><th>{escape(metric)}</th><th>CI</th><th>n</th>'
        '<th>change</th><th>p</th><th class="l">note</th></tr>'
    )
    rows = []
    for p in reversed(points):  # newest first, as `ragmeter runs list`
        href = links.get(p.run_id)
        run = escape(p.run_id[:12])
        run_cell = f'<a href="{escape(href)}">{run}</a>' if href else run
        note = " ".join(
            part
            for part in (
                "REGRESSION." if p.regression else "",
                "Pinned." if p.pinned else "",
                p.note or "",
            )
            if part
        )
        rows.append(
            f"<tr{' class=regression' if p.regression else ''}>"
            f'<td class="l">{escape(p.created.strftime("%Y-%m-%d %H:%M:%S"))}</td>'
            f'<td class="l">{run_cell}</td><td class="l">{escape(p.name)}</td>'
            f'<td class="l">{escape((p.git_commit or "–")[:10])}</td><td>{_v(p.mean)}</td>'
            f"<td>{f'[{p.ci[0]:.4f}, {p.ci[1]:.4f}]' if p.ci else '–'}</td><td>{p.n}</td>"
            f"<td>{'–' if p.diff is None else f'{p.diff:+.4f}'}</td>"
            f"<td>{'–' if p.p_value is None else f'{p.p_value:.4g}'}</td>"
            f'<td class="note">{escape(note)}</td></tr>'
        )
    return f'<div class="table-wrap"><table class="runs">{head}{"".join(rows)}</table></div>'


def render_trend(
    points: Sequence[TrendPoint],
    *,
    metric: str,
    links: Mapping[str, str],
    title: str | None = None,
    subtitle: str | None = None,
) -> str:
    """The whole trend page as one string; ``links`` maps a run id to its page's URL."""
    heading = title or f"ragmeter trend: {metric}"
    regressions = sum(p.regression for p in points)
    names = _names(points)
    context = subtitle or (
        f"{len(points)} saved runs of {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"
        f"; {regressions} regression{'s' if regressions != 1 else ''} (a significant drop "
        "against the previous like-for-like run)"
    )
    header = _sections.top_header(heading, context)
    legend = (
        "<p class=\"muted\">Each point is a run's mean (click it for that run's report); the "
        "bar and the shaded band are its confidence interval. Red ▼: a regression. A dashed "
        "rule: the data or settings changed, so the runs on either side are not compared. A "
        "regression is judged by a paired test, query by query, against the previous "
        "like-for-like run of its name, so it can show while the two bands overlap.</p>"
    )
    if len(names) > 1:
        swatches = "".join(
            f'<span class="s{i % 6}"><i class="sw"></i>{escape(n)}</span>'
            for i, n in enumerate(names)
        )
        legend = f'<p class="legend">{swatches}</p>' + legend
    body = (
        f'<section class="card" id="trend"><h2>{escape(metric)} over runs</h2>'
        f"{_plot(points, metric, links)}{legend}</section>"
        f'<section class="card" id="runs"><h2>Runs</h2>{_table(points, metric, links)}</section>'
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="ragmeter {escape(__version__)}">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'\">\n"
        f"<title>{escape(heading)}</title>\n<style>\n{_asset('report.css')}\n{CSS}</style>\n"
        f'</head>\n<body class="kind-trend">\n<header class="top">\n{header}\n</header>\n'
        f"<main>\n{body}\n</main>\n"
        f'<footer class="muted">Made by ragmeter {escape(__version__)}: one self-contained '
        "file, no network needed (each run's report is its own file beside it).</footer>\n"
        "</body>\n</html>\n"
    )
