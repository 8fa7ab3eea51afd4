"""The stage report: every step of a pipeline scored, and what each step gained or lost.

A captured :class:`~ragmeter.schema.RagSample` keeps every step that produced a ranking
(its ``stages``: each retriever call, a fusion, a reranker, and ``context``, what reached
the generator). :func:`evaluate_stages` scores each stage with the one scoring loop behind
:func:`ragmeter.evaluate_run` (trec_eval's conventions, the capture rules of
:meth:`~ragmeter.capture.SampleStore.evaluate_retrieval`), and compares each step with the
stage(s) it consumed, query by query, with :func:`ragmeter.stats.compare` (a paired test and
a bootstrap confidence interval): e.g. ``reranker: NDCG@10 +0.041 [0.02, 0.06]``.

>>> samples = [
...     {"id": f"q{i}", "relevance": {f"d{i}": 1},
...      "stages": [{"name": "bm25", "ids": ["x", f"d{i}"]},
...                 {"name": "rerank", "kind": "reranker", "ids": [f"d{i}", "x"],
...                  "inputs": ["bm25"]},
...                 {"name": "context", "kind": "context", "ids": [f"d{i}", "x"],
...                  "same_as": "rerank"}]}
...     for i in range(8)]
>>> report = evaluate_stages(samples, k_values=(10,), metrics=["ndcg"])
>>> [(row.stage, round(row.metrics["ndcg@10"], 4)) for row in report.rows]
[('bm25', 0.6309), ('rerank', 1.0), ('context', 1.0)]
>>> round(report["rerank"].comparison.mean_diff, 4), report["rerank"].against
(0.3691, 'bm25')
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmeter._types import FailedQueries, MissingQueries
from ragmeter.errors import InvalidInputError, RagmeterError
from ragmeter.schema import CONTEXT, RagSample, SampleLike, coerce_sample

if TYPE_CHECKING:
    from ragmeter.evaluation.captured import CapturedSamples
    from ragmeter.report import RetrievalEvalReport
    from ragmeter.stats import CompareResult, TestName

__all__ = ["StageReport", "StageRow", "evaluate_stages", "stage_order"]

DEFAULT_STAGE_K = (10, 100)
"""Cut-offs of a stage report unless ``k_values`` is given (NDCG@10 of what reached the model,
recall@100 of the retrievers)."""

DEFAULT_STAGE_METRICS = ("ndcg", "recall")


@dataclass
class StageRow:
    """One stage of a :class:`StageReport`.

    ``samples`` is how many samples have the stage (a sample without it scores 0 there under
    ``missing_queries="zero"``); ``inputs`` the stages it consumed (where the framework
    shows it); ``same_as`` (for ``context``) the stage whose ranking reached the generator;
    ``against`` the stage it is compared with (its best input on the comparison metric; for a
    step whose inputs the framework does not show, the best stage before it), and
    ``comparison`` that paired comparison (``None`` for a retriever without inputs, where
    rankings start, a context equal to a stage, or when it could not be made: ``note`` says
    why).
    """

    stage: str
    kind: str
    samples: int
    inputs: list[str]
    report: RetrievalEvalReport
    same_as: str | None = None
    against: str | None = None
    comparison: CompareResult | None = None
    note: str | None = None

    @property
    def metrics(self) -> dict[str, float]:
        """The stage's mean scores (the report's ``metrics``)."""
        return self.report.metrics

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        out: dict[str, Any] = {
            "stage": self.stage,
            "kind": self.kind,
            "samples": self.samples,
            "inputs": self.inputs,
            "same_as": self.same_as,
            "metrics": dict(self.report.metrics),
            "n_queries": self.report.n_queries,
            "against": self.against,
            "comparison": None if self.comparison is None else self.comparison.to_dict(),
        }
        if self.note is not None:
            out["note"] = self.note
        return out


@dataclass
class StageReport:
    """The outcome of :func:`evaluate_stages` (and of ``evaluate_retrieval(qrels,
    stages=True)`` in every adapter): one :class:`StageRow` per stage, in pipeline order
    (the order the stages finished), ``context`` last.

    ``metric`` is the key each step is compared on (default ``ndcg@10``), ``test`` the
    paired test; ``warnings`` gathers the warnings of every stage's scoring (each once).
    ``report["bm25"]`` is one row; :meth:`to_text`, :meth:`to_markdown`, :meth:`to_dict`,
    :meth:`to_json` and :meth:`to_html` render it.
    """

    rows: list[StageRow]
    metric: str
    test: str
    confidence: float
    alpha: float
    warnings: list[str] = field(default_factory=list)

    def __getitem__(self, stage: str) -> StageRow:
        for row in self.rows:
            if row.stage == stage:
                return row
        names = ", ".join(repr(r.stage) for r in self.rows)
        raise KeyError(f"no stage {stage!r} in this report (stages: {names})")

    def __contains__(self, stage: object) -> bool:
        return any(row.stage == stage for row in self.rows)

    @property
    def stages(self) -> list[str]:
        """The stage names, in pipeline order."""
        return [row.stage for row in self.rows]

    @property
    def reports(self) -> dict[str, RetrievalEvalReport]:
        """``{stage: RetrievalEvalReport}``."""
        return {row.stage: row.report for row in self.rows}

    def keys(self) -> list[str]:
        """The metric keys every stage was scored on (``ndcg@10``, ``recall@100``...)."""
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.update(dict.fromkeys(row.report.metrics))
        return list(seen)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return {
            "kind": "stages",
            "metric": self.metric,
            "test": self.test,
            "confidence": self.confidence,
            "alpha": self.alpha,
            "stages": [row.to_dict() for row in self.rows],
            "warnings": list(self.warnings),
        }

    def to_json(self, fp: str | os.PathLike[str] | None = None, **kwargs: Any) -> str | None:
        """The report as JSON: a string, or written to the path ``fp``."""
        kwargs.setdefault("indent", 2)
        kwargs.setdefault("allow_nan", False)
        text = json.dumps(self.to_dict(), **kwargs)
        if fp is None:
            return text
        Path(fp).write_text(text + "\n", encoding="utf-8")
        return None

    def cells(self) -> list[list[str]]:
        """The table as strings: a header row, then one row per stage (text, markdown, HTML)."""
        keys = self.keys()
        pct = f"{self.confidence * 100:g}% CI"
        header = ["stage", "kind", "samples", *keys, "vs", f"Δ {self.metric}", pct, "p"]
        out = [header]
        for row in self.rows:
            values = [_num(row.report.metrics.get(k)) for k in keys]
            c = row.comparison
            if row.same_as is not None:  # the context is that stage's very ranking
                tail = [f"= {row.same_as}", "", "", ""]
            elif c is None:
                tail = [row.against or "", "", "", ""]
            else:
                star = " *" if c.significant else ""
                tail = [
                    row.against or "",
                    f"{c.mean_diff:+.4f}",
                    f"[{c.ci_low:+.4f}, {c.ci_high:+.4f}]",
                    _p(c.p_value) + star,
                ]
            out.append([row.stage, row.kind, str(row.samples), *values, *tail])
        return out

    def _title(self) -> str:
        n = max((row.report.n_queries for row in self.rows), default=0)
        return (
            f"Stages over {n} judged queries: each step against the stage(s) it consumed on "
            f"{self.metric} ({self.test} test, paired by query; * = significant at alpha "
            f"{self.alpha:g})"
        )

    def to_text(self, *, warnings: bool = True) -> str:
        """The stage table as aligned text, then (``warnings=True``) the warnings."""
        cells = self.cells()
        widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
        lines = [self._title()]
        for j, r in enumerate(cells):
            lines.append(
                "  ".join(
                    c.ljust(w) if i in (0, 1, len(r) - 4) else c.rjust(w)
                    for i, (c, w) in enumerate(zip(r, widths, strict=True))
                ).rstrip()
            )
            if j == 0:
                lines.append("  ".join("-" * w for w in widths))
        for row in self.rows:
            if row.note is not None:
                lines.append(f"note ({row.stage}): {row.note}")
        if warnings:
            lines.extend(self.warnings)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def to_markdown(self) -> str:
        """The stage table as markdown."""
        cells = self.cells()
        n = len(cells[0])
        lines = [
            "| " + " | ".join(cells[0]) + " |",
            "|---|---|" + "---:|" * (n - 6) + "---|---:|---:|---:|",
        ]
        lines.extend("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in cells[1:])
        return "\n".join(lines)

    def to_html(self, path: str | os.PathLike[str], **options: Any) -> Path:
        """Deprecated: :func:`ragmeter.html.write_stage_report` (writes the stage table as one
        self-contained, offline HTML page and returns its path)."""
        warnings.warn(
            "StageReport.to_html is deprecated: pages are written by ragmeter.html; call "
            "ragmeter.html.write_stage_report(report, path, ...) (same options; to_html will be "
            "removed in a future release)",
            DeprecationWarning,
            stacklevel=2,
        )
        from ragmeter.html import write_stage_report

        return write_stage_report(self, path, **options)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _p(p: float) -> str:
    return f"{p:.3g}" if p >= 1e-3 else f"{p:.1e}"


def stage_order(samples: Iterable[RagSample]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Every stage name the samples hold, in pipeline order, and per name what the samples
    say of it (``kind``, ``inputs``, ``same_as``, ``samples``).

    Each sample lists its stages in the order they finished; a name not seen before is
    placed right after the stage that preceded it in the first sample that has it, so the
    order follows the pipeline even when some samples skip a stage. ``context`` goes last.
    """
    order: list[str] = []
    info: dict[str, dict[str, Any]] = {}
    for sample in samples:
        previous: str | None = None
        for stage in sample.stages or ():
            name = stage.name
            seen = info.get(name)
            if seen is None:
                seen = info[name] = {
                    "kind": stage.kind,
                    "inputs": [],
                    "same_as": set(),
                    "samples": 0,
                }
                if name != CONTEXT:
                    order.insert(order.index(previous) + 1 if previous is not None else 0, name)
            seen["samples"] += 1
            for name_in in stage.inputs or ():
                if name_in not in seen["inputs"]:
                    seen["inputs"].append(name_in)
            if stage.same_as is not None:
                seen["same_as"].add(stage.same_as)
            if name != CONTEXT:
                previous = name
    if CONTEXT in info:
        order.append(CONTEXT)
    return order, info


def evaluate_stages(
    source: CapturedSamples | Iterable[SampleLike],
    qrels: Mapping[str, Mapping[str, float]] | None = None,
    *,
    stages: Sequence[str] | None = None,
    metric: str | None = None,
    k_values: Iterable[int] | int = DEFAULT_STAGE_K,
    metrics: Iterable[str] | str = DEFAULT_STAGE_METRICS,
    relevance_level: float | None = None,
    missing_queries: MissingQueries | None = None,
    only_captured: bool = False,
    failed_queries: FailedQueries = "zero",
    test: TestName = "randomization",
    n: int = 10_000,
    seed: int | None = 0,
    confidence: float = 0.95,
    alpha: float = 0.05,
) -> StageReport:
    """Score every stage of the samples and what each step gained or lost (a :class:`StageReport`).

    ``source`` is an adapter's store (``handler.store``, or anything
    :class:`~ragmeter.evaluation.captured.CapturedSamples`) or samples (``RagSample`` s or
    dicts, e.g. read from JSONL) that carry ``stages``. ``qrels`` default to the relevance
    the samples carry. Each stage is scored by ``evaluate_retrieval(qrels, stage=name)``
    (trec_eval's conventions; a sample without that stage scores 0 unless
    ``missing_queries="skip"``) on ``metrics`` x ``k_values`` (default NDCG and recall at
    10 and 100); ``stages`` limits the table to those names (``context`` included when it
    is there). Each step is compared, per query, with the stage it consumed (of several,
    the best on ``metric``; when the framework does not say, the best stage before it; a
    retriever without inputs is where rankings start and is not compared) on
    ``metric`` (default ``ndcg@10``, else the first key): the mean difference, its
    bootstrap confidence interval and a paired ``test`` (:func:`ragmeter.stats.compare`,
    ``n`` resamples, ``seed``). A ``context`` that is another stage's ranking shows ``=
    <stage>``.

    Raises :class:`~ragmeter.errors.InvalidInputError` when no sample carries stages, or a
    name in ``stages`` is not among them.
    """
    from ragmeter.evaluation.capture_rules import missing_rule
    from ragmeter.evaluation.captured import evaluate_captured

    samples, kept = _captured(source)
    order, info = stage_order(samples)
    if not order:
        raise InvalidInputError(
            f"none of the {len(samples)} samples carries stages (rankings of the steps of a "
            "pipeline), so there is no stage to score; capture them with a ragmeter adapter, "
            "or give each sample a 'stages' list"
        )
    if stages is not None:
        unknown = [s for s in stages if s not in info]
        if unknown:
            raise InvalidInputError(
                f"stages {unknown} are not stages of these samples (stages: {order})"
            )
        order = [s for s in order if s in set(stages)]
    ks = tuple(k_values) if not isinstance(k_values, int) else (k_values,)
    wanted = [metrics] if isinstance(metrics, str) else list(metrics)
    warnings: dict[str, None] = {}
    rows: list[StageRow] = []
    missing_queries = missing_rule(only_captured, missing_queries, stacklevel=2)
    for name in order:
        report = evaluate_captured(
            samples,
            qrels,
            stage=name,
            k_values=ks,
            metrics=wanted,
            relevance_level=relevance_level,
            missing_queries=missing_queries,
            failed_queries=failed_queries,
            **kept,
        )
        warnings.update(dict.fromkeys(report.warnings))
        same = info[name]["same_as"]
        rows.append(
            StageRow(
                stage=name,
                kind=str(info[name]["kind"]),
                samples=int(info[name]["samples"]),
                inputs=list(info[name]["inputs"]),
                report=report,
                same_as=next(iter(same)) if len(same) == 1 else None,
            )
        )
    key = metric if metric is not None else _default_key(rows)
    zero = (missing_queries or "zero") == "zero"
    options = {"test": test, "n": n, "seed": seed, "confidence": confidence, "alpha": alpha}
    _compare_steps(rows, key, zero, **options)
    return StageReport(rows, key, test, confidence, alpha, list(warnings))


def _captured(
    source: CapturedSamples | Iterable[SampleLike],
) -> tuple[list[RagSample], dict[str, Any]]:
    """The samples to score and, for a store, how it kept them (``evaluate_captured``'s
    ``hints``, ``dropped`` and ``max_samples``)."""
    from ragmeter.evaluation.captured import CapturedSamples

    if isinstance(source, CapturedSamples):
        kept = {
            "hints": source.hints,
            "dropped": source.dropped,
            "max_samples": source.max_samples,
        }
        return list(source.samples), kept
    return [coerce_sample(s, index=i) for i, s in enumerate(source)], {}


def _compare_steps(rows: Sequence[StageRow], key: str, zero: bool, **options: Any) -> None:
    """Compare each step with the stage it consumed on ``key`` (sets ``against``,
    ``comparison`` and ``note`` of each row that has something to be compared with)."""
    by_name = {row.stage: row for row in rows}
    for i, row in enumerate(rows):
        if row.same_as is not None and row.same_as in by_name:
            continue
        candidates = [by_name[s] for s in row.inputs if s in by_name]
        if not candidates and row.kind != "retriever":  # a step whose inputs are not known
            candidates = list(rows[:i])
        if not candidates:  # a retriever: where rankings start, nothing to gain against
            continue
        base = max(candidates, key=lambda r: r.report.metrics.get(key, float("-inf")))
        row.against = base.stage
        row.comparison, row.note = _compare(base, row, key, zero, **options)


def _default_key(rows: Sequence[StageRow]) -> str:
    keys = [k for row in rows for k in row.report.metrics]
    return "ndcg@10" if "ndcg@10" in keys else keys[0]


def _scores(report: RetrievalEvalReport, key: str, zero: bool) -> dict[str, float]:
    scores = report.scores(key)
    if zero:
        for qid in report.missing_queries:
            scores.setdefault(qid, 0.0)
    return scores


def _compare(
    base: StageRow, row: StageRow, key: str, zero: bool, **options: Any
) -> tuple[CompareResult | None, str | None]:
    from ragmeter.stats import compare

    a = _scores(base.report, key, zero)
    b = _scores(row.report, key, zero)
    if not a or not b:
        return None, f"no {key} scores to pair with {base.stage!r}"
    try:
        return (
            compare(
                a,
                b,
                metric=key,
                on_missing="intersect",
                label_a=base.stage,
                label_b=row.stage,
                **options,
            ),
            None,
        )
    except RagmeterError as exc:
        return None, f"not compared with {base.stage!r}: {exc}"
