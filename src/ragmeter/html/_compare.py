"""The page of a paired comparison: statistics, scatter, most-moved queries, drill-downs
side by side."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any

from ragmeter._types import Qrels, RunLike
from ragmeter.errors import InvalidInputError
from ragmeter.html import _page, _sections, _svg
from ragmeter.html._payload import (
    DocTable,
    Limits,
    cut,
    match_samples,
    num,
    order_keys,
    rag_detail,
    ranking_detail,
)
from ragmeter.html._reports import texts_or_none
from ragmeter.report import DistributionSummary, RagEvalReport, RetrievalEvalReport
from ragmeter.schema import RagSample, SampleLike

if TYPE_CHECKING:
    from ragmeter.stats import CompareResult, QueryChange

__all__ = ["render_comparison"]

TIE = 1e-12  # as ragmeter.stats.TIE_TOLERANCE


def _rows(x: object, key: str) -> tuple[dict[str, dict[str, float | None]], list[str]]:
    """``{item: {metric: score}}`` and the metric keys of one side of a comparison."""
    if isinstance(x, RetrievalEvalReport):
        return {q: dict(row) for q, row in x.per_query.items()}, order_keys(x.metrics)
    if isinstance(x, RagEvalReport):
        return dict(x.per_sample), list(x.metrics)
    if isinstance(x, Mapping):
        return {str(q): {key: float(v)} for q, v in x.items()}, [key]
    raise InvalidInputError(
        "a and b must be what was compared: two reports or two {query_id: score} mappings, "
        f"got {type(x).__name__}"
    )


def _better(x: object, keys: Sequence[str], default: bool) -> dict[str, bool]:
    if isinstance(x, RagEvalReport):
        return {k: x.higher_is_better.get(k, True) for k in keys}
    if isinstance(x, RetrievalEvalReport):
        return dict.fromkeys(keys, True)
    return dict.fromkeys(keys, default)


def _changes(title: str, changes: Sequence[QueryChange]) -> str:
    if not changes:
        return f"<div><h3>{escape(title)}</h3><p class='muted'>none</p></div>"
    items = "".join(
        f'<li><button class="item-link" type="button" data-item="{escape(c.query_id)}">'
        f"{escape(c.query_id)}</button> {c.a:.4f} → {c.b:.4f} ({c.diff:+.4f})</li>"
        for c in changes
    )
    return f"<div><h3>{escape(title)}</h3><ol>{items}</ol></div>"


def _p(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


@dataclass(frozen=True)
class _Paired:
    """What the two sides of a comparison hold for the items it paired."""

    key: str
    ids: list[str]
    xa: list[float]
    xb: list[float]
    outcomes: str
    rag: bool
    level: float | None
    matched: list[dict[str, RagSample]]
    sides: tuple[tuple[str, dict[str, dict[str, float | None]], list[str], object], ...]
    """``(label, rows, keys, report)`` of ``a`` then ``b``."""


def _paired(
    result: CompareResult,
    a: object,
    b: object,
    samples_a: Iterable[SampleLike] | None,
    samples_b: Iterable[SampleLike] | None,
) -> _Paired:
    """The items ``result`` paired, their scores and outcomes, refused when ``a`` and ``b``
    are not what was compared."""
    key = result.metric or "score"
    rows_a, keys_a = _rows(a, key)
    rows_b, keys_b = _rows(b, key)
    ids = [
        q
        for q, row in rows_a.items()
        if row.get(key) is not None and rows_b.get(q, {}).get(key) is not None
    ]
    if len(ids) != result.n:
        raise InvalidInputError(
            f"a and b pair {len(ids)} queries on {key!r}, but the comparison paired "
            f"{result.n}: pass the two reports (or mappings) that were compared"
        )
    xa = [float(rows_a[q][key] or 0.0) for q in ids]
    xb = [float(rows_b[q][key] or 0.0) for q in ids]
    sign = 1.0 if result.higher_is_better else -1.0
    outcomes = "".join(
        "w" if sign * (y - x) > TIE else "l" if sign * (y - x) < -TIE else "t"
        for x, y in zip(xa, xb, strict=True)
    )
    matched: list[dict[str, RagSample]] = []
    for side, samples in ((rows_a, samples_a), (rows_b, samples_b)):
        matched.append(match_samples(list(side), samples) if samples is not None else {})
    level = None
    for x in (a, b):
        if isinstance(x, RetrievalEvalReport):
            level = x.conventions.relevance_level
            break
    return _Paired(
        key=key,
        ids=ids,
        xa=xa,
        xb=xb,
        outcomes=outcomes,
        rag=isinstance(a, RagEvalReport) or isinstance(b, RagEvalReport),
        level=level,
        matched=matched,
        sides=((result.label_a, rows_a, keys_a, a), (result.label_b, rows_b, keys_b, b)),
    )


def _fixed(
    result: CompareResult,
    p: _Paired,
    runs: tuple[RunLike | None, RunLike | None],
    qrels: Qrels | None,
    depth: int,
    docs: DocTable,
) -> dict[str, Any]:
    """The page data that no size limit cuts: ids, both systems' scores, the rankings."""
    systems = []
    rankings: list[list[Any] | None] = []
    for (label, rows, keys, x), run in zip(p.sides, runs, strict=True):
        if not p.rag and run is not None:
            rankings.append(
                [
                    ranking_detail(
                        run.get(q), (qrels or {}).get(q, {}), depth=depth, level=p.level, docs=docs
                    )
                    for q in p.ids
                ]
            )
        else:
            rankings.append(None)
        better = _better(x, keys, result.higher_is_better)
        systems.append(
            {
                "label": label,
                "keys": keys,
                "better": [better[k] for k in keys],
                "scores": {k: [num(rows[q].get(k)) for q in p.ids] for k in keys},
            }
        )
    fixed: dict[str, Any] = {
        "kind": "compare",
        "mode": "rag" if p.rag else "retrieval",
        "ids": p.ids,
        "docs": docs.ids,
        "level": p.level,
        "hasQrels": qrels is not None,
        "systems": systems,
        "cmp": {"metric": p.key, "hib": result.higher_is_better, "o": p.outcomes},
    }
    if not p.rag:
        fixed["detail"] = rankings
    return fixed


def _texts(
    p: _Paired,
    docs: DocTable,
    queries: Mapping[str, str] | None,
    corpus: Mapping[str, str] | None,
    depth: int,
) -> Callable[[Limits], dict[str, Any]]:
    """The page data a size limit cuts: query texts, snippets, RAG drill-downs."""

    def texts(limits: Limits) -> dict[str, Any]:
        found: list[str | None] = []
        for q in p.ids:
            text = queries.get(q) if queries is not None else None
            for m in p.matched:
                if text is None and q in m:
                    text = m[q].user_input
            found.append(cut(text, limits.text))
        out: dict[str, Any] = {"texts": texts_or_none(found), "snips": None}
        if corpus is not None and limits.snippet and not p.rag:
            out["snips"] = [cut(corpus.get(d), limits.snippet) for d in docs.ids]
        if p.rag:
            out["detail"] = []
            for s, (_, _, _, x) in enumerate(p.sides):
                details = x.details if isinstance(x, RagEvalReport) else {}
                found_detail = [
                    rag_detail(p.matched[s].get(q), details.get(q), limits=limits, depth=depth)
                    for q in p.ids
                ]
                has_any = any(d is not None for d in found_detail)
                out["detail"].append(found_detail if has_any else None)
        return out

    return texts


def _header(
    result: CompareResult, key: str, title: str | None, dataset: str | None, note: str | None
) -> Callable[[Sequence[str]], str]:
    """The page's header: facts, the means and the difference, the verdict, the notes."""
    la, lb = result.label_a, result.label_b
    pct = f"{result.confidence * 100:g}%"
    facts = _sections.facts(
        [
            ("dataset", dataset),
            ("metric", f"{key} ({'higher' if result.higher_is_better else 'lower'} is better)"),
            ("baseline (a)", la),
            ("candidate (b)", lb),
            ("paired queries", result.n),
            (
                "left out (only in a / only in b)",
                f"{result.only_in_a} / {result.only_in_b}"
                if result.only_in_a or result.only_in_b
                else None,
            ),
            ("test", f"{result.test}{' (exact)' if result.exact else ''}, two-sided"),
            ("resamples, seed", f"{result.n_resamples}, {result.seed}"),
        ]
    )

    def header(notes: Sequence[str]) -> str:
        lead = f'<p class="verdict"><b>{escape(note)}</b></p>' if note else ""
        return _sections.top_header(
            title or f"{lb} vs {la}: {key}",
            "ragmeter paired comparison: is the difference real?",
            facts,
            lead,
            _sections.headline(
                [
                    (la, result.mean_a),
                    (lb, result.mean_b),
                    (f"Δ = {lb} − {la}", result.mean_diff),
                    (f"{pct} CI low", result.ci_low),
                    (f"{pct} CI high", result.ci_high),
                    ("p-value", result.p_value),
                ]
            ),
            f'<p class="verdict">{escape(result.verdict())}</p>',
            _sections.notes_block([*result.warnings, *notes]),
        )

    return header


def _differences(result: CompareResult, p: _Paired) -> str:
    """The card of per-query differences: wins and losses, the test, the most moved, the
    scatter and the histograms."""
    la, lb, key, xa, xb = result.label_a, result.label_b, p.key, p.xa, p.xb
    pct = f"{result.confidence * 100:g}%"
    diffs = [y - x for x, y in zip(xa, xb, strict=True)]
    diff_svg = _svg.histogram(
        diffs,
        label=f"{lb} - {la}",
        mean=result.mean_diff,
        symmetric=True,
        band=(result.ci_low, result.ci_high),
    )
    effect = f"{result.effect_size:+.2f}" if abs(result.effect_size) != float("inf") else "±inf"
    return (
        '<section id="comparison" class="card"><h2>Per-query differences</h2>'
        '<div class="cmp-stats"><div>'
        + _svg.outcome_bar(result.wins, result.ties, result.losses, label_b=lb)
        + f'<p class="legend"><span><i class="dot w"></i>{escape(lb)} better: {result.wins}</span>'
        f'<span><i class="dot t"></i>tied: {result.ties}</span>'
        f'<span><i class="dot l"></i>{escape(lb)} worse: {result.losses}</span></p>'
        f"<p>mean Δ {result.mean_diff:+.4f}, {pct} CI [{result.ci_low:+.4f}, "
        f"{result.ci_high:+.4f}] (paired bootstrap), p = {_p(result.p_value)} "
        f"({escape(result.test)}), effect size d_z = {effect}</p>"
        f'<div class="moved">{_changes("Improved most", result.improved)}'
        f"{_changes('Regressed most', result.regressed)}</div></div>"
        "<figure><figcaption>Per query: "
        f"{escape(lb)} against {escape(la)}<small>above the diagonal: {escape(lb)} scored "
        "higher; click a point to open both drill-downs</small></figcaption>"
        + _svg.scatter(xa, xb, p.outcomes, label_a=la, label_b=lb, metric=key)
        + '</figure></div><div class="grid">'
        f"<figure><figcaption>Δ per query ({escape(lb)} − {escape(la)})<small>shaded: the {pct} "
        f"CI of the mean Δ; solid: the mean</small></figcaption>{diff_svg}</figure>"
        + _side_hists(key, la, xa, lb, xb)
        + "</div></section>"
    )


def render_comparison(
    result: CompareResult,
    *,
    a: object,
    b: object,
    run_a: RunLike | None,
    run_b: RunLike | None,
    qrels: Qrels | None,
    queries: Mapping[str, str] | None,
    corpus: Mapping[str, str] | None,
    samples_a: Iterable[SampleLike] | None,
    samples_b: Iterable[SampleLike] | None,
    title: str | None,
    dataset: str | None,
    note: str | None,
    depth: int,
    max_bytes: int,
) -> str:
    """The comparison page (see :func:`ragmeter.html.write_comparison`)."""
    p = _paired(result, a, b, samples_a, samples_b)
    docs = DocTable()
    fixed = _fixed(result, p, (run_a, run_b), qrels, depth, docs)
    return _page.render(
        kind="compare",
        title=title or f"ragmeter comparison: {result.label_b} vs {result.label_a}",
        header=_header(result, p.key, title, dataset, note),
        body=_differences(result, p),
        items_title="Per query (most moved first)",
        filter_hint="query id or text, or e.g. diff < -0.1",
        fixed=fixed,
        texts=_texts(p, docs, queries, corpus, depth),
        parts=("texts", "contexts") if p.rag else ("texts", "snippets"),
        max_bytes=max_bytes,
    )


def _side_hists(key: str, la: str, xa: Sequence[float], lb: str, xb: Sequence[float]) -> str:
    out = []
    for label, values in ((la, xa), (lb, xb)):
        s = DistributionSummary.of(values)
        out.append(
            f"<figure><figcaption>{escape(label)}: {escape(key)}<small>mean {s.mean:.4f} · "
            f"median {s.median:.4f} · n {s.count}</small></figcaption>"
            + _svg.histogram(values, label=f"{label} {key}", mean=s.mean, median=s.median)
            + "</figure>"
        )
    return "".join(out)
