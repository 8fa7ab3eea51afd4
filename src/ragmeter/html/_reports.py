"""Pages for one system: a :class:`RetrievalEvalReport` or a :class:`RagEvalReport`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragmeter._types import Qrels, RunLike
from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.html import _page, _sections
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
from ragmeter.report import DistributionSummary, RagEvalReport, RetrievalEvalReport
from ragmeter.schema import SampleLike

if TYPE_CHECKING:
    from ragmeter.stages import StageReport

__all__ = ["colsets", "render_rag", "render_retrieval", "texts_or_none"]

_K = re.compile(r"@(\d+)$")


def colsets(keys: Sequence[str]) -> tuple[list[list[Any]], int]:
    """The table's column sets, one per cut-off (its keys plus the uncut ones), and the
    default: ``@10`` when there is one, else the largest cut-off.

    >>> colsets(["ndcg@5", "ndcg@10", "map"])
    ([['@5', ['ndcg@5', 'map']], ['@10', ['ndcg@10', 'map']]], 1)
    """
    ks: list[int] = []
    for key in keys:
        m = _K.search(key)
        if m and int(m.group(1)) not in ks:
            ks.append(int(m.group(1)))
    ks.sort()
    uncut = [key for key in keys if not _K.search(key)]
    if not ks:
        return [["all", list(keys)]], 0
    sets = [[f"@{k}", [key for key in keys if key.endswith(f"@{k}")] + uncut] for k in ks]
    return sets, ks.index(10) if 10 in ks else len(ks) - 1


def texts_or_none(texts: list[str | None]) -> list[str | None] | None:
    """``texts``, or ``None`` when it holds no text at all (the page then has no column)."""
    return texts if any(t is not None for t in texts) else None


def _no_items(ids: Sequence[str], keys: Sequence[str], word: str) -> list[str]:
    if ids or not keys:
        return []
    return [
        f"This report holds no per-{word} scores (an evaluation that kept only summaries): "
        "the summaries are complete, but the histograms, the table and the drill-down are empty."
    ]


def _check_run(run: RunLike, ids: Sequence[str]) -> None:
    if ids and not any(q in run for q in ids):
        raise InvalidInputError(
            f"run: none of its {len(run)} query ids is a query of the report (report: "
            f"{some_ids(ids)}; run: {some_ids(run)}); pass the run the report was computed from"
        )


def render_retrieval(
    report: RetrievalEvalReport,
    *,
    run: RunLike | None,
    qrels: Qrels | None,
    queries: Mapping[str, str] | None,
    corpus: Mapping[str, str] | None,
    title: str | None,
    dataset: str | None,
    system: str | None,
    depth: int,
    max_bytes: int,
) -> str:
    """The page of one retrieval report (see :func:`ragmeter.html.write_retrieval_report`)."""
    ids = list(report.per_query)
    keys = order_keys(report.metrics)
    raw = {k: [row.get(k) for row in report.per_query.values()] for k in keys}
    if run is not None:
        _check_run(run, ids)
    level = report.conventions.relevance_level
    sets, default = colsets(keys)
    first = sets[default][1]
    docs = DocTable()
    detail = None
    if run is not None:
        detail = [
            ranking_detail(
                run.get(q), (qrels or {}).get(q, {}), depth=depth, level=level, docs=docs
            )
            for q in ids
        ]
    fixed = {
        "kind": "retrieval",
        "mode": "retrieval",
        "ids": ids,
        "docs": docs.ids,
        "level": level,
        "hasQrels": qrels is not None,
        "systems": [_system(system or "run", keys, raw)],
        "detail": [detail],
        "colsets": sets,
        "col": default,
    }

    def texts(limits: Limits) -> dict[str, Any]:
        snips = None
        if corpus is not None and limits.snippet:
            snips = [cut(corpus.get(d), limits.snippet) for d in docs.ids]
        found = [cut(queries.get(q), limits.text) for q in ids] if queries is not None else []
        return {"texts": texts_or_none(found), "snips": snips}

    summaries = {k: report.summary(k) for k in keys}
    body = _metrics_card(
        [(k, summaries[k], True) for k in keys], raw, summaries, first, count_label="queries"
    )
    return _page.render(
        kind="retrieval",
        title=title or f"ragmeter retrieval report{f': {system}' if system else ''}",
        header=_retrieval_header(report, ids, first, run, qrels, depth, title, dataset, system),
        body=body,
        items_title="Per query",
        filter_hint="query id or text, or e.g. ndcg@10 < 0.2",
        fixed=fixed,
        texts=texts,
        parts=("texts", "snippets"),
        max_bytes=max_bytes,
    )


def _system(label: str, keys: list[str], raw: Mapping[str, list[float | None]]) -> dict[str, Any]:
    """One system's entry in the page data: its label, metric keys and per-item scores."""
    return {
        "label": label,
        "keys": keys,
        "scores": {k: [num(v) for v in values] for k, values in raw.items()},
    }


def _retrieval_header(
    report: RetrievalEvalReport,
    ids: Sequence[str],
    first: Sequence[str],
    run: RunLike | None,
    qrels: Qrels | None,
    depth: int,
    title: str | None,
    dataset: str | None,
    system: str | None,
) -> Callable[[Sequence[str]], str]:
    """The retrieval page's header: facts, the headline metrics, warnings and conventions."""
    missing = list(report.missing_queries)
    unjudged = None
    if run is not None and qrels is not None:
        unjudged = sum(1 for q in run if q not in qrels)
    level = report.conventions.relevance_level
    relevant = "grade > 0" if level is None else f"grade >= {level:g}"
    facts = _sections.facts(
        [
            ("dataset", dataset),
            ("system", system),
            ("queries scored", report.n_queries),
            (
                "judged queries missing from the run",
                f"{len(missing)} ({some_ids(missing)})" if missing else 0,
            ),
            ("run queries without judgements (ignored)", unjudged),
            ("cut-offs", ", ".join(str(k) for k in report.k_values)),
            ("relevant", relevant),
            *judged_facts(report),
            ("ranking shown", f"top {depth}" if run is not None else "no run given"),
        ]
    )
    keys = order_keys(report.metrics)

    def header(notes: Sequence[str]) -> str:
        return _sections.top_header(
            title or (f"Retrieval report: {system}" if system else "Retrieval report"),
            "ragmeter retrieval evaluation (trec_eval conventions)",
            facts,
            _sections.headline((k, report.metrics.get(k)) for k in first[:8]),
            _sections.notes_block(
                [*report.warnings, *_no_items(ids, keys, "query"), *notes],
                conventions=report.conventions.to_dict(),
                extra=report.extra,
            ),
        )

    return header


def judged_facts(report: RetrievalEvalReport) -> list[tuple[str, str]]:
    """The page's facts on unjudged docs: the judged share of the rankings' top-k docs,
    how many are unjudged in how many queries, and what was done with them.

    >>> from ragmeter.report import JudgedShare
    >>> r = RetrievalEvalReport(metrics={}, per_query={}, n_queries=2, k_values=(10,),
    ...     judged=JudgedShare(k=10, documents=20, unjudged=5, queries=2,
    ...                        queries_with_unjudged=1, threshold=0.9))
    >>> judged_facts(r)[0]
    ('judged@10', '75.0% of the 20 top-10 docs: 5 unjudged, in 1 of 2 queries')
    """
    j = report.judged
    if j is None or not j.documents:
        return []
    if j.judged_only:
        done = "removed before scoring (judged_only, trec_eval -J)"
    elif j.relevant_only:
        done = "counted non-relevant (the qrels list relevant docs only: judged@k is precision@k)"
    else:
        done = "counted non-relevant: scores are lower bounds"
    return [
        (
            f"judged@{j.k}",
            f"{j.share:.1%} of the {j.documents:,} top-{j.k} docs: {j.unjudged:,} unjudged, "
            f"in {j.queries_with_unjudged:,} of {j.queries:,} queries",
        ),
        ("unjudged docs", done),
    ]


def _metrics_card(
    rows: Sequence[tuple[str, DistributionSummary, bool]],
    raw: Mapping[str, Sequence[float | None]],
    summaries: Mapping[str, DistributionSummary],
    first: Sequence[str],
    *,
    count_label: str,
) -> str:
    shown = [row for row in rows if row[0] in first]
    table = _sections.summary_table(shown, count_label=count_label)
    if len(shown) < len(rows):
        table += (
            f"<details><summary>Summary of all {len(rows)} metric keys</summary>"
            + _sections.summary_table(rows, count_label=count_label)
            + "</details>"
        )
    return (
        '<section id="metrics" class="card"><h2>Metrics: distribution over items</h2>'
        + table
        + _sections.histogram_grid(raw, summaries, first=first)
        + "</section>"
    )


_RAG_EXTRA_SHOWN = frozenset({"judge_calls", "judge_cache_hits", "incomplete", "k", "not_computed"})


def render_rag(
    report: RagEvalReport,
    *,
    samples: Iterable[SampleLike] | None,
    title: str | None,
    dataset: str | None,
    system: str | None,
    depth: int,
    max_bytes: int,
    stages: StageReport | None = None,
) -> str:
    """The page of one RAG report (see :func:`ragmeter.html.write_rag_report`)."""
    ids = list(report.per_sample)
    keys = list(report.metrics)
    raw = {k: [row.get(k) for row in report.per_sample.values()] for k in keys}
    matched = match_samples(ids, samples) if samples is not None else {}
    fixed = {
        "kind": "rag",
        "mode": "rag",
        "ids": ids,
        "level": None,
        "hasQrels": True,
        "systems": [_system(system or "samples", keys, raw)],
        "colsets": [["all", keys]],
        "col": 0,
    }

    def texts(limits: Limits) -> dict[str, Any]:
        detail = [
            rag_detail(matched.get(s), report.details.get(s), limits=limits, depth=depth)
            for s in ids
        ]
        found = [cut(matched[s].user_input, limits.text) if s in matched else None for s in ids]
        return {
            "texts": texts_or_none(found),
            "detail": [detail if any(d is not None for d in detail) else None],
        }

    summaries = {k: report.summary(k) for k in keys}
    rows = [(k, summaries[k], report.higher_is_better.get(k, True)) for k in keys]
    body = _metrics_card(rows, raw, summaries, keys, count_label="scored")
    if stages is not None:
        from ragmeter.html._stages import CSS, stage_section

        body += f"<style>{CSS}</style>" + stage_section(stages)
    shown = f"{len(matched)} of {len(ids)}" if samples is not None else None
    return _page.render(
        kind="rag",
        title=title or f"ragmeter RAG report{f': {system}' if system else ''}",
        header=_rag_header(report, ids, shown, title, dataset, system),
        body=body,
        items_title="Per sample",
        filter_hint="sample id or question, or e.g. faithfulness < 1",
        fixed=fixed,
        texts=texts,
        parts=("texts", "contexts"),
        max_bytes=max_bytes,
    )


def _rag_header(
    report: RagEvalReport,
    ids: Sequence[str],
    with_text: str | None,
    title: str | None,
    dataset: str | None,
    system: str | None,
) -> Callable[[Sequence[str]], str]:
    """The RAG page's header: facts (judge calls among them), the headline metrics, warnings
    and what was not computed. ``with_text``: how many samples matched a given text."""
    extra = report.extra
    keys = list(report.metrics)
    judged = "judge_calls" in extra or "judge_cache_hits" in extra
    facts = _sections.facts(
        [
            ("dataset", dataset),
            ("system", system),
            ("samples", report.n_samples),
            ("malformed lines skipped", report.skipped_lines or None),
            ("retrieval cut-off k", extra.get("k")),
            ("samples with text", with_text),
            ("judge calls", report.judge_calls if judged else "none (no judged metric)"),
            ("judge cache hits", report.judge_cache_hits if judged else None),
            ("incomplete (judge budget)", "yes" if report.incomplete else None),
        ]
    )
    not_computed = [
        f"not computed: {why}" for why in dict(extra.get("not_computed") or {}).values()
    ]

    def header(notes: Sequence[str]) -> str:
        return _sections.top_header(
            title or (f"RAG report: {system}" if system else "RAG report"),
            "ragmeter answer and context evaluation (no LLM unless a judge metric is listed)",
            facts,
            _sections.headline((k, report.metrics.get(k)) for k in keys[:8]),
            _sections.notes_block(
                [*report.warnings, *not_computed, *_no_items(ids, keys, "sample"), *notes],
                extra=extra,
                skip_extra=_RAG_EXTRA_SHOWN,
            ),
        )

    return header
