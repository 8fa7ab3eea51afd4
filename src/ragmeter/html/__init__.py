"""One self-contained HTML file per report or comparison: plots, a per-item table, drill-down.

The page works offline and alone: its plots are inline SVG written here in Python (no
plotting library, no CDN), its table and drill-down are a small script embedded in the
file, and the data is JSON embedded in the file too. Every string that came from a user
(query texts, answers, doc ids, labels) is escaped, in the static HTML with
:func:`html.escape` and in the script by setting ``textContent``, never ``innerHTML``.

* :func:`write_retrieval_report`: metric summaries and
  histograms, a sortable, filterable, paged per-query table, and per query its text, the
  run's top ``depth`` docs with their grades (relevant ones marked) and the relevant docs
  ranked lower or never retrieved.
* :func:`write_rag_report`: the same per sample, with the
  question, the answer with faithfulness' unsupported claims highlighted, the references
  and the contexts.
* :func:`write_comparison`: means, the difference with its
  confidence interval and p-value, win/tie/loss counts, a per-query scatter, the queries
  that moved most, and both systems' drill-downs side by side.
* :func:`write_stage_report`: every stage of a pipeline scored,
  a bar per stage and the table of what each step gained or lost (static, no script).
* :func:`write_trend`: one metric over saved runs (:func:`ragmeter.stats.trend`), with
  confidence bands and regressions marked, each point linking to that run's own report
  page, written beside it (static, no script).

A page stays under ``max_bytes`` (default 9.5 MB) by cutting long texts, then leaving them
out (a note in the page says so); per-item scores are always complete. ``import ragmeter``
does not import this package.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragmeter._types import Qrels, RunLike
from ragmeter.errors import InvalidInputError, check_k
from ragmeter.html._inputs import beir_texts, load_texts
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.schema import SampleLike

if TYPE_CHECKING:
    from ragmeter.registry import Registry
    from ragmeter.stages import StageReport
    from ragmeter.stats import CompareResult, TrendPoint

__all__ = [
    "DEFAULT_DEPTH",
    "DEFAULT_MAX_BYTES",
    "beir_texts",
    "load_texts",
    "render_comparison",
    "render_rag_report",
    "render_retrieval_report",
    "write_comparison",
    "write_rag_report",
    "write_retrieval_report",
    "write_stage_report",
    "write_trend",
]

DEFAULT_MAX_BYTES = 9_500_000
"""The page's size budget in bytes: long texts are cut, then left out, to stay under it."""
DEFAULT_DEPTH = 10
"""How many ranked documents (or retrieved ids) a drill-down shows."""

PathLike = str | os.PathLike[str]


def _check(depth: object, max_bytes: object) -> None:
    check_k(depth, name="depth")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise InvalidInputError(f"max_bytes must be an int >= 1 (bytes), got {max_bytes!r}")


def _write(path: PathLike, page: str) -> Path:
    target = Path(path)
    target.write_text(page, encoding="utf-8")
    return target


def render_retrieval_report(
    report: RetrievalEvalReport,
    *,
    run: RunLike | None = None,
    qrels: Qrels | None = None,
    queries: Mapping[str, str] | None = None,
    corpus: Mapping[str, str] | None = None,
    title: str | None = None,
    dataset: str | None = None,
    system: str | None = None,
    depth: int = DEFAULT_DEPTH,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> str:
    """The HTML page of a retrieval report, as a string (see :func:`write_retrieval_report`)."""
    from ragmeter.html._reports import render_retrieval

    if not isinstance(report, RetrievalEvalReport):
        raise InvalidInputError(
            f"report must be a RetrievalEvalReport, got {type(report).__name__}"
        )
    _check(depth, max_bytes)
    return render_retrieval(
        report,
        run=run,
        qrels=qrels,
        queries=queries,
        corpus=corpus,
        title=title,
        dataset=dataset,
        system=system,
        depth=depth,
        max_bytes=max_bytes,
    )


def write_retrieval_report(
    report: RetrievalEvalReport,
    path: PathLike,
    *,
    run: RunLike | None = None,
    qrels: Qrels | None = None,
    queries: Mapping[str, str] | None = None,
    corpus: Mapping[str, str] | None = None,
    title: str | None = None,
    dataset: str | None = None,
    system: str | None = None,
    depth: int = DEFAULT_DEPTH,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Path:
    """Write ``report`` as one self-contained HTML file at ``path``; return the path.

    The drill-down shows what the inputs allow: ``run`` (``{query_id: [doc_id, ...]}``,
    best first) gives each query's top ``depth`` docs; ``qrels`` their grades (relevant
    ones marked, by the report's relevance level) and the relevant docs ranked lower or
    never; ``queries`` (``{query_id: text}``) the query texts, searchable in the filter;
    ``corpus`` (``{doc_id: text}``) a snippet per doc. ``dataset`` and ``system`` name
    them in the header. Raises :class:`~ragmeter.errors.InvalidInputError` for ``depth <
    1``, a bad ``max_bytes``, or a ``run`` holding none of the report's queries.
    """
    page = render_retrieval_report(
        report,
        run=run,
        qrels=qrels,
        queries=queries,
        corpus=corpus,
        title=title,
        dataset=dataset,
        system=system,
        depth=depth,
        max_bytes=max_bytes,
    )
    return _write(path, page)


def render_rag_report(
    report: RagEvalReport,
    *,
    samples: Iterable[SampleLike] | None = None,
    title: str | None = None,
    dataset: str | None = None,
    system: str | None = None,
    depth: int = DEFAULT_DEPTH,
    max_bytes: int = DEFAULT_MAX_BYTES,
    stages: StageReport | None = None,
) -> str:
    """The HTML page of a RAG report, as a string (see :func:`write_rag_report`)."""
    from ragmeter.html._reports import render_rag

    if not isinstance(report, RagEvalReport):
        raise InvalidInputError(f"report must be a RagEvalReport, got {type(report).__name__}")
    _check(depth, max_bytes)
    return render_rag(
        report,
        samples=samples,
        title=title,
        dataset=dataset,
        system=system,
        depth=depth,
        max_bytes=max_bytes,
        stages=stages,
    )


def write_rag_report(
    report: RagEvalReport,
    path: PathLike,
    *,
    samples: Iterable[SampleLike] | None = None,
    title: str | None = None,
    dataset: str | None = None,
    system: str | None = None,
    depth: int = DEFAULT_DEPTH,
    max_bytes: int = DEFAULT_MAX_BYTES,
    stages: StageReport | None = None,
) -> Path:
    """Write ``report`` as one self-contained HTML file at ``path``; return the path.

    ``samples`` (the ``RagSample`` s or mappings the report was computed from) give each
    drill-down its question, answer, references, contexts and retrieved ids; they are
    matched to ``report.per_sample`` by id (a repeated id as ``"<id>#2"``, as
    ``evaluate_rag`` keys it), or by position for samples without an id. Without them the
    drill-down still shows the scores and faithfulness' claims (``report.details``).
    ``stages`` (a :class:`~ragmeter.stages.StageReport` of the same samples) adds the stage
    table. Raises :class:`~ragmeter.errors.InvalidInputError` when no sample matches the
    report.
    """
    page = render_rag_report(
        report,
        samples=samples,
        title=title,
        dataset=dataset,
        system=system,
        depth=depth,
        max_bytes=max_bytes,
        stages=stages,
    )
    return _write(path, page)


def render_comparison(
    result: CompareResult,
    *,
    a: object,
    b: object,
    run_a: RunLike | None = None,
    run_b: RunLike | None = None,
    qrels: Qrels | None = None,
    queries: Mapping[str, str] | None = None,
    corpus: Mapping[str, str] | None = None,
    samples_a: Iterable[SampleLike] | None = None,
    samples_b: Iterable[SampleLike] | None = None,
    title: str | None = None,
    dataset: str | None = None,
    note: str | None = None,
    depth: int = DEFAULT_DEPTH,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> str:
    """The HTML page of a comparison, as a string (see :func:`write_comparison`)."""
    from ragmeter.html._compare import render_comparison as render

    _check(depth, max_bytes)
    return render(
        result,
        a=a,
        b=b,
        run_a=run_a,
        run_b=run_b,
        qrels=qrels,
        queries=queries,
        corpus=corpus,
        samples_a=samples_a,
        samples_b=samples_b,
        title=title,
        dataset=dataset,
        note=note,
        depth=depth,
        max_bytes=max_bytes,
    )


def write_comparison(
    result: CompareResult,
    path: PathLike,
    *,
    a: object,
    b: object,
    run_a: RunLike | None = None,
    run_b: RunLike | None = None,
    qrels: Qrels | None = None,
    queries: Mapping[str, str] | None = None,
    corpus: Mapping[str, str] | None = None,
    samples_a: Iterable[SampleLike] | None = None,
    samples_b: Iterable[SampleLike] | None = None,
    title: str | None = None,
    dataset: str | None = None,
    note: str | None = None,
    depth: int = DEFAULT_DEPTH,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Path:
    """Write the comparison ``result`` of ``a`` (baseline) and ``b`` as one HTML file.

    ``a`` and ``b`` are what :func:`ragmeter.stats.compare` was given (two reports or two
    ``{query_id: score}`` mappings): the page plots every paired query's scores. For the
    side-by-side drill-downs pass ``run_a``/``run_b`` (+ ``qrels``, ``queries``,
    ``corpus``) for retrieval, or ``samples_a``/``samples_b`` for RAG reports. ``note`` is
    a sentence shown first (the gate's decision, say). Raises
    :class:`~ragmeter.errors.InvalidInputError` when ``a`` and ``b`` do not pair the same
    number of queries as ``result``.
    """
    page = render_comparison(
        result,
        a=a,
        b=b,
        run_a=run_a,
        run_b=run_b,
        qrels=qrels,
        queries=queries,
        corpus=corpus,
        samples_a=samples_a,
        samples_b=samples_b,
        title=title,
        dataset=dataset,
        note=note,
        depth=depth,
        max_bytes=max_bytes,
    )
    return _write(path, page)


def write_stage_report(report: StageReport, path: PathLike, *, title: str | None = None) -> Path:
    """Write a :class:`~ragmeter.stages.StageReport` as one self-contained HTML file at
    ``path``; return the path. The page holds a bar per stage (its mean on the comparison
    metric) and the stage table: every stage's metrics and what each step gained or lost
    against the stage(s) it consumed, with the confidence interval and p-value; rows whose
    change is significant are marked. Raises :class:`~ragmeter.errors.InvalidInputError`
    for anything but a stage report.
    """
    from ragmeter.html._stages import render_stages
    from ragmeter.stages import StageReport

    if not isinstance(report, StageReport):
        raise InvalidInputError(f"report must be a StageReport, got {type(report).__name__}")
    return _write(path, render_stages(report, title=title))


def write_trend(
    points: Sequence[TrendPoint],
    path: PathLike,
    *,
    metric: str,
    registry: Registry | PathLike | None = None,
    title: str | None = None,
    run_pages: bool = True,
) -> Path:
    """Write the trend ``points`` of ``metric`` (:func:`ragmeter.stats.trend`) as one
    self-contained HTML file at ``path``; return its path.

    The page plots the metric over the runs in time order: each run's mean, its
    confidence interval as a bar and, joined over consecutive like-for-like runs, a shaded
    band; regressions in red with a mark; a dashed rule where the data or settings changed.
    With ``run_pages`` (default) each run's report is read back from ``registry`` (a
    :class:`~ragmeter.registry.Registry` or its path; default: the default registry) and
    written as its own report page in the folder ``<stem>_runs`` beside ``path``
    (``out.html`` and ``out_runs/<run id>.html``), and each point and table row links to
    it. Raises :class:`~ragmeter.errors.InvalidInputError` when there are no points.
    """
    from urllib.parse import quote

    from ragmeter.html._trend import render_trend
    from ragmeter.registry import Registry as Opened

    if not points:
        raise InvalidInputError(f"no saved runs have {metric!r}: nothing to draw")
    target = Path(path)
    links: dict[str, str] = {}
    if run_pages:
        reg = registry if isinstance(registry, Opened) else Opened(registry, read_only=True)
        folder = target.with_name(f"{target.stem}_runs")
        folder.mkdir(parents=True, exist_ok=True)
        for point in points:
            report = reg.load_report(point.run_id)
            page = folder / f"{point.run_id}.html"
            heading = f"{point.name} · run {point.run_id[:12]}"
            if isinstance(report, RetrievalEvalReport):
                write_retrieval_report(report, page, title=heading, system=point.name)
            else:
                write_rag_report(report, page, title=heading, system=point.name)
            links[point.run_id] = f"{quote(folder.name)}/{quote(page.name)}"
    return _write(target, render_trend(points, metric=metric, links=links, title=title))
