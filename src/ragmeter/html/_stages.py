"""The stage report's page: the stage table and a bar per stage, static HTML (no script).

Every string that came from a user or a framework (stage names, warnings) is escaped.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from ragmeter._version import __version__
from ragmeter.html import _sections
from ragmeter.html._page import _asset

if TYPE_CHECKING:
    from ragmeter.stages import StageReport

__all__ = ["render_stages", "stage_section"]

_ROW_H = 22.0
_LABEL_W = 150.0
_BAR_W = 300.0


def _bars(report: StageReport) -> str:
    """One horizontal bar per stage: its mean on the comparison metric, 0 to 1."""
    key = report.metric
    rows = report.rows
    height = _ROW_H * len(rows) + 24
    parts = [
        f'<svg class="stage-bars" viewBox="0 0 {_LABEL_W + _BAR_W + 70:.0f} {height:.0f}" '
        f'role="img" aria-label="{escape(key)} per stage">'
    ]
    for i, row in enumerate(rows):
        y = 8 + i * _ROW_H
        value = row.report.metrics.get(key)
        width = 0.0 if value is None else max(0.0, min(1.0, value)) * _BAR_W
        label = row.stage if row.same_as is None else f"{row.stage} (= {row.same_as})"
        parts.append(
            f'<text x="{_LABEL_W - 6:.0f}" y="{y + 14:.1f}" text-anchor="end">'
            f"{escape(label)}</text>"
            f'<rect x="{_LABEL_W:.0f}" y="{y + 3:.1f}" width="{width:.1f}" height="14" '
            f'class="bar kind-{escape(row.kind)}"><title>{escape(row.stage)}: '
            f"{'-' if value is None else f'{value:.4f}'}</title></rect>"
            f'<text x="{_LABEL_W + width + 4:.1f}" y="{y + 14:.1f}">'
            f"{'-' if value is None else f'{value:.4f}'}</text>"
        )
    parts.append(
        f'<text x="{_LABEL_W:.0f}" y="{height - 4:.0f}" class="muted">0</text>'
        f'<text x="{_LABEL_W + _BAR_W:.0f}" y="{height - 4:.0f}" text-anchor="end" '
        f'class="muted">1</text></svg>'
    )
    return "".join(parts)


def _table(report: StageReport) -> str:
    cells = report.cells()
    head = "".join(f"<th>{escape(c)}</th>" for c in cells[0])
    body = []
    for row, values in zip(report.rows, cells[1:], strict=True):
        klass = ""
        c = row.comparison
        if c is not None and c.significant:
            klass = ' class="gain"' if c.mean_diff > 0 else ' class="loss"'
        tds = "".join(f"<td>{escape(v)}</td>" for v in values)
        body.append(f"<tr{klass}>{tds}</tr>")
    return (
        f'<div class="table-wrap"><table class="summary stages"><tr>{head}</tr>'
        f"{''.join(body)}</table></div>"
    )


CSS = """
.stage-bars { max-width: 640px; width: 100%; font-size: 11px; }
.stage-bars .bar { fill: #4c78a8; }
.stage-bars .bar.kind-fusion { fill: #72b7b2; }
.stage-bars .bar.kind-reranker { fill: #f58518; }
.stage-bars .bar.kind-context { fill: #54a24b; }
table.stages tr.gain td { background: #e8f5e9; }
table.stages tr.loss td { background: #fdecea; }
"""


def stage_section(report: StageReport) -> str:
    """The stage cards (bars and table), for the stage page and a RAG report's page."""
    return (
        f'<section class="card" id="stages"><h2>Stages: {escape(report.metric)} per stage</h2>'
        f"{_bars(report)}{_table(report)}"
        '<p class="muted">A row marked green gained, red lost, significantly against the '
        "stage in its <i>vs</i> column; <i>= name</i>: the context is that stage's ranking."
        "</p></section>"
    )


def render_stages(report: StageReport, *, title: str | None = None) -> str:
    """The whole page as one string."""
    n = max((row.report.n_queries for row in report.rows), default=0)
    heading = title or "ragmeter stage report"
    subtitle = (
        f"{len(report.rows)} stages over {n} judged queries; each step against the stage(s) "
        f"it consumed on {report.metric} ({report.test} test, paired by query, "
        f"{report.confidence * 100:g}% CI)"
    )
    notes = [f"{row.stage}: {row.note}" for row in report.rows if row.note is not None]
    header = _sections.top_header(
        heading,
        subtitle,
        _sections.notes_block([*report.warnings, *notes]),
    )
    body = stage_section(report)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="ragmeter {escape(__version__)}">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'\">\n"
        f"<title>{escape(heading)}</title>\n<style>\n{_asset('report.css')}\n{CSS}</style>\n"
        f'</head>\n<body class="kind-stages">\n<header class="top">\n{header}\n</header>\n'
        f"<main>\n{body}\n</main>\n"
        f'<footer class="muted">Made by ragmeter {escape(__version__)}: one self-contained '
        "file, no network needed.</footer>\n</body>\n</html>\n"
    )
