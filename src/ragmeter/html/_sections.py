"""Static parts of the page, rendered in Python: header facts, warnings, conventions,
summary tables, the histogram grid and the comparison's statistics.

Every value is passed through :func:`html.escape`; nothing here needs the script.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from ragmeter.html import _svg
from ragmeter.report import DistributionSummary

__all__ = [
    "facts",
    "headline",
    "histogram_grid",
    "notes_block",
    "summary_table",
    "top_header",
]


def _f(value: float | None) -> str:
    if value is None:
        return "–"
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.3g}"
    return f"{value:.1f}" if abs(value) >= 1000 else f"{value:.4f}"


def facts(pairs: Iterable[tuple[str, object]]) -> str:
    """A row of labelled values (``None`` values are left out)."""
    cells = "".join(
        f"<div><dt>{escape(label)}</dt><dd>{escape(str(value))}</dd></div>"
        for label, value in pairs
        if value is not None
    )
    return f'<dl class="facts">{cells}</dl>'


def headline(pairs: Iterable[tuple[str, float | None]]) -> str:
    """The few numbers a reader looks at first, large."""
    cells = "".join(
        f'<div class="num"><span class="muted">{escape(label)}</span><b>{_f(value)}</b></div>'
        for label, value in pairs
    )
    return f'<div class="headline">{cells}</div>'


def _short(value: Any, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def notes_block(
    warnings: Sequence[str],
    *,
    conventions: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    skip_extra: Iterable[str] = (),
) -> str:
    """Warnings (always shown), then the conventions and any other reported extras, folded."""
    parts = []
    if warnings:
        items = "".join(f"<li>{escape(str(w))}</li>" for w in warnings)
        parts.append(
            f'<h2 class="warn-title">Warnings ({len(warnings)})</h2>'
            f'<ul class="warnings">{items}</ul>'
        )
    if conventions:
        rows = "".join(
            f"<dt>{escape(str(k))}</dt><dd>{escape(_short(v))}</dd>" for k, v in conventions.items()
        )
        parts.append(
            '<details class="conventions"><summary>Conventions</summary>'
            f'<dl class="conv">{rows}</dl></details>'
        )
    skip = set(skip_extra)
    shown = {k: v for k, v in (extra or {}).items() if k not in skip}
    if shown:
        rows = "".join(
            f"<dt>{escape(str(k))}</dt><dd>{escape(_short(v))}</dd>" for k, v in shown.items()
        )
        parts.append(
            f'<details class="extra"><summary>Other report fields ({len(shown)})</summary>'
            f'<dl class="conv">{rows}</dl></details>'
        )
    return "".join(parts)


def top_header(title: str, subtitle: str, *blocks: str) -> str:
    """The page header: title, one line of context, then the given blocks."""
    return f'<h1>{escape(title)}</h1><p class="muted">{escape(subtitle)}</p>' + "".join(blocks)


def summary_table(
    rows: Sequence[tuple[str, DistributionSummary, bool]], *, count_label: str = "n"
) -> str:
    """One row per metric key: direction, mean, spread and how many items it covers."""
    head = (
        "<tr><th>metric</th><th>better</th><th>mean</th><th>median</th><th>std</th><th>min</th>"
        f"<th>p25</th><th>p75</th><th>max</th><th>{escape(count_label)}</th><th>missing</th></tr>"
    )
    body = "".join(
        f"<tr><td>{escape(key)}</td><td>{'higher' if higher else 'lower'}</td>"
        f"<td>{_f(s.mean)}</td><td>{_f(s.median)}</td><td>{_f(s.std)}</td><td>{_f(s.min)}</td>"
        f"<td>{_f(s.percentiles.get('p25'))}</td><td>{_f(s.percentiles.get('p75'))}</td>"
        f"<td>{_f(s.max)}</td><td>{s.count}</td><td>{s.missing}</td></tr>"
        for key, s, higher in rows
    )
    return f'<div class="table-wrap"><table class="summary">{head}{body}</table></div>'


def _figure(key: str, values: Sequence[float], summary: DistributionSummary) -> str:
    svg = _svg.histogram(values, label=key, mean=summary.mean, median=summary.median)
    caption = f"mean {_f(summary.mean)} · median {_f(summary.median)} · n {summary.count}" + (
        f" · missing {summary.missing}" if summary.missing else ""
    )
    return (
        f'<figure data-key="{escape(key)}"><figcaption>{escape(key)}<small>{caption}</small>'
        f"</figcaption>{svg}</figure>"
    )


def histogram_grid(
    scores: Mapping[str, Sequence[float | None]],
    summaries: Mapping[str, DistributionSummary],
    *,
    first: Sequence[str],
) -> str:
    """A histogram per key: the keys in ``first`` shown, the others in a folded block."""
    rest = [k for k in scores if k not in first]
    shown = "".join(_figure(k, _svg.finite(scores[k]), summaries[k]) for k in first)
    out = f'<div class="grid">{shown}</div>'
    if rest:
        more = "".join(_figure(k, _svg.finite(scores[k]), summaries[k]) for k in rest)
        out += (
            f"<details><summary>{len(rest)} more metric keys (other cut-offs)</summary>"
            f'<div class="grid">{more}</div></details>'
        )
    return out
