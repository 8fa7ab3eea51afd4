"""Report types: where results are assembled, summarised and rendered.

:class:`DistributionSummary` describes one metric's per-query (or per-sample) scores
without collapsing them to a mean. :class:`RetrievalEvalReport` and :class:`RagEvalReport`
carry means, per-item scores for drill-down, and the :class:`Conventions` they were
computed under, and render as text, markdown, JSON or a pandas frame.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from ragmeter._version import __version__
from ragmeter.errors import InvalidInputError, MissingDependencyError

__all__ = [
    "Conventions",
    "DistributionSummary",
    "RagEvalReport",
    "RetrievalEvalReport",
    "WarningLog",
]

PERCENTILES: tuple[int, ...] = (5, 25, 50, 75, 95)


@dataclass(frozen=True)
class DistributionSummary:
    """One metric's scores over a run, never collapsed to a single mean.

    ``missing`` counts ``None`` scores (not measurable for that item); they are dropped
    before ``mean``/``median``/``std`` (population, ddof=0)/``min``/``max`` and the
    ``percentiles`` (``p5 p25 p50 p75 p95``, linear interpolation) are computed over the
    rest. An empty or all-``None`` input gives ``count=0`` and zeros, never a
    ``ZeroDivisionError``.

    >>> s = DistributionSummary.of([1.0, 0.0, None, 0.5])
    >>> s.count, s.missing, s.mean, s.median
    (3, 1, 0.5, 0.5)
    >>> DistributionSummary.of([]).mean
    0.0
    """

    count: int
    missing: int
    mean: float
    median: float
    std: float
    min: float
    max: float
    percentiles: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, scores: Iterable[float | None]) -> DistributionSummary:
        """Summarise raw per-item scores (``None`` = missing)."""
        items = list(scores)
        values = sorted(float(s) for s in items if s is not None)
        missing = len(items) - len(values)
        n = len(values)
        if n == 0:
            return cls(0, missing, 0.0, 0.0, 0.0, 0.0, 0.0, {f"p{p}": 0.0 for p in PERCENTILES})
        try:
            mean = math.fsum(values) / n
            std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)
        except OverflowError:  # huge values (a latency of 1e308 ms): scale them first
            scale = max(abs(values[0]), abs(values[-1]))
            scaled = [v / scale for v in values]
            mean_scaled = math.fsum(scaled) / n
            mean = mean_scaled * scale
            std = math.sqrt(math.fsum((v - mean_scaled) ** 2 for v in scaled) / n) * scale
        return cls(
            count=n,
            missing=missing,
            mean=mean,
            median=_quantile(values, 0.5),
            std=std,
            min=values[0],
            max=values[-1],
            percentiles={f"p{p}": _quantile(values, p / 100) for p in PERCENTILES},
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return asdict(self)


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    low, high = sorted_values[lo], sorted_values[hi]
    value = low + (high - low) * frac
    if math.isfinite(value):
        return value
    return low * (1 - frac) + high * frac  # high - low overflowed (values near +-1.8e308)


@dataclass(frozen=True)
class Conventions:
    """The rules a report's numbers were computed under, so two numbers compare honestly."""

    relevance_level: float | None = None
    """``None``: a doc is relevant when its grade > 0; else grade >= this (trec_eval -l)."""
    ties: str = "list order"
    """How equal scores were ordered: ``"list order"`` or trec_eval's order."""
    duplicates: str = "rejected"
    """What a repeated doc id in a ranking does."""
    cutoff: str = (
        "trec_eval: P@k divides by k; recall@k by all relevant; map@k by all relevant; "
        "ndcg@k linear gain, ideal from all judged positive grades cut at k"
    )
    averaging: str = (
        "mean over queries with >= 1 relevant judgement; a judged query missing from the "
        "run scores 0 and counts in the mean (= trec_eval -c)"
    )
    """Which queries the means are over (``missing_queries="zero"`` or ``"skip"``); runs
    for unjudged queries are always ignored."""
    ragmeter_version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return asdict(self)


class WarningLog:
    """Collects plain-English warnings raised during an evaluation (seed 004's WarningLog).

    >>> log = WarningLog()
    >>> log.add("score", "broken", "the 'broken' metric raised")
    >>> print(log.entries[0])
    CAUTION [score] (broken): the 'broken' metric raised
    """

    def __init__(self) -> None:
        self.entries: list[str] = []

    def add(self, stage: str, source: str, message: str) -> None:
        """Record one warning."""
        self.entries.append(f"CAUTION [{stage}] ({source}): {message}")

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Any:
        return iter(self.entries)


_KEY = re.compile(r"^(?P<name>[^@]+)(?:@(?P<k>\d+))?$")


def _split_key(key: str) -> tuple[str, int | None]:
    m = _KEY.match(key)
    if not m:
        return key, None
    k = m.group("k")
    return m.group("name"), int(k) if k is not None else None


def _finite(value: Any, where: str) -> float:
    """``value`` as a finite float, or :class:`InvalidInputError` naming ``where``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise InvalidInputError(f"report {where} must be a finite number, got {value!r}")
    return number


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


class _ReportBase:
    """Rendering shared by both report types; subclasses provide the rows."""

    def _summary_rows(self) -> list[tuple[str, DistributionSummary]]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self, **kwargs: Any) -> str:
        """The report as a JSON string (``kwargs`` go to :func:`json.dumps`).

        Always standard JSON: a report holds no NaN or infinity (the drivers refuse them),
        and ``allow_nan=False`` makes sure of it.
        """
        kwargs.setdefault("indent", 2)
        kwargs.setdefault("allow_nan", False)
        return json.dumps(self.to_dict(), **kwargs)

    def to_markdown(self) -> str:
        """A markdown table: one row per metric key, mean and spread."""
        lines = [
            "| metric | mean | median | std | min | max | n | missing |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for key, s in self._summary_rows():
            lines.append(
                f"| {key} | {s.mean:.4f} | {s.median:.4f} | {s.std:.4f} | {s.min:.4f} | "
                f"{s.max:.4f} | {s.count} | {s.missing} |"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def to_text(self) -> str:
        raise NotImplementedError


@dataclass
class RetrievalEvalReport(_ReportBase):
    """The outcome of :func:`ragmeter.evaluate_run` / :func:`ragmeter.evaluate_retrieval`.

    ``metrics`` maps a result key (``"ndcg@10"``, and uncut ``"map"``/``"mrr"``) to its mean
    over every scored query; ``per_query`` keeps ``{query_id: {key: score}}`` for drill-down;
    ``n_queries`` is how many queries were averaged (those with at least one relevant
    judgement, less the ones missing from the run under ``missing_queries="skip"``);
    ``missing_queries`` lists the judged queries that had no ranking in the run (scored 0
    under ``"zero"``, left out under ``"skip"``; a warning counts them too);
    ``conventions`` records how the numbers were computed; ``extra`` holds anything else a
    driver or adapter reports (JSON-ready, e.g. failed captured runs).

    >>> report = RetrievalEvalReport(
    ...     metrics={'ndcg@10': 0.83}, per_query={}, n_queries=12, k_values=(10,))
    >>> report.primary
    0.83
    """

    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]
    n_queries: int
    k_values: tuple[int, ...]
    conventions: Conventions = field(default_factory=Conventions)
    warnings: list[str] = field(default_factory=list)
    missing_queries: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_missing(self) -> int:
        """How many judged queries had no ranking in the run (see ``missing_queries``)."""
        return len(self.missing_queries)

    @property
    def primary(self) -> float | None:
        """The headline number: mean NDCG@10, or ``None`` if it was not computed."""
        return self.primary_at(10)

    def primary_at(self, k: int) -> float | None:
        """Mean NDCG at cut-off ``k``; ``None`` if ``ndcg@k`` was not computed."""
        return self.metrics.get(f"ndcg@{k}")

    @cached_property
    def summaries(self) -> dict[str, DistributionSummary]:
        """A :class:`DistributionSummary` per metric key over the scored queries.

        A judged query left out of the mean because the run has no ranking for it
        (``missing_queries="skip"``) counts as ``missing``.
        """
        absent = sum(q not in self.per_query for q in self.missing_queries)
        return {
            key: DistributionSummary.of(
                [row.get(key) for row in self.per_query.values()] + [None] * absent
            )
            for key in self.metrics
        }

    def summary(self, key: str) -> DistributionSummary:
        """The :class:`DistributionSummary` of one metric key, e.g. ``"ndcg@10"``."""
        return self.summaries[key]

    def scores(self, key: str) -> dict[str, float]:
        """``{query_id: score}`` for one metric key (the shape :func:`compare` pairs)."""
        return {q: row[key] for q, row in self.per_query.items() if key in row}

    def _summary_rows(self) -> list[tuple[str, DistributionSummary]]:
        return list(self.summaries.items())

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form: metrics, per-query scores, summaries and conventions."""
        return {
            "kind": "retrieval",
            "metrics": dict(self.metrics),
            "n_queries": self.n_queries,
            "k_values": list(self.k_values),
            "primary": self.primary,
            "summaries": {k: s.to_dict() for k, s in self.summaries.items()},
            "per_query": self.per_query,
            "conventions": self.conventions.to_dict(),
            "warnings": list(self.warnings),
            "missing_queries": list(self.missing_queries),
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalEvalReport:
        """Rebuild a report from :meth:`to_dict` output (e.g. a saved JSON file)."""
        known = set(Conventions.__dataclass_fields__)
        conv = {k: v for k, v in (data.get("conventions") or {}).items() if k in known}
        return cls(
            metrics={str(k): _finite(v, f"metrics[{k!r}]") for k, v in data["metrics"].items()},
            per_query={
                str(q): {str(k): _finite(v, f"per_query[{q!r}][{k!r}]") for k, v in row.items()}
                for q, row in (data.get("per_query") or {}).items()
            },
            n_queries=int(data["n_queries"]),
            k_values=tuple(int(k) for k in data.get("k_values", ())),
            conventions=Conventions(**conv),
            warnings=list(data.get("warnings", [])),
            missing_queries=[str(q) for q in data.get("missing_queries", [])],
            extra=dict(data.get("extra", {})),
        )

    def to_pandas(self) -> Any:
        """Per-query scores as a ``pandas.DataFrame`` (one row per query, one column per key)."""
        try:
            import pandas as pd
        except ImportError:
            raise MissingDependencyError("pandas", "pandas") from None
        return pd.DataFrame.from_dict(self.per_query, orient="index").sort_index(axis=1)

    def to_text(self) -> str:
        """A readable table: one row per metric, one column per cut-off."""
        names: list[str] = []
        cells: dict[tuple[str, int | None], float] = {}
        ks: list[int] = []
        has_uncut = False
        for key, value in self.metrics.items():
            name, k = _split_key(key)
            if name not in names:
                names.append(name)
            cells[(name, k)] = value
            if k is None:
                has_uncut = True
            elif k not in ks:
                ks.append(k)
        ks.sort()
        header = ["metric", *(f"@{k}" for k in ks)] + (["all"] if has_uncut else [])
        rows = [header]
        for name in names:
            row = [name, *(_fmt(cells.get((name, k))) for k in ks)]
            if has_uncut:
                row.append(_fmt(cells.get((name, None))))
            rows.append(row)
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        level = self.conventions.relevance_level
        relevant = "> 0" if level is None else f">= {level}"
        out = [
            f"Retrieval evaluation: {self.n_queries} queries scored "
            f"(relevant: grade {relevant}; ties: {self.conventions.ties})"
        ]
        for i, r in enumerate(rows):
            cols = enumerate(zip(r, widths, strict=True))
            out.append("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in cols))
            if i == 0:
                out.append("  ".join("-" * w for w in widths))
        out.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(out)


@dataclass
class RagEvalReport(_ReportBase):
    """The outcome of :func:`ragmeter.evaluate_rag`: answer/context metrics over samples.

    ``metrics`` maps each metric to its mean over the samples it applied to; ``coverage``
    records how many samples that was (a metric needing a ``reference`` skips samples
    without one); ``n_samples`` is the total; ``per_sample`` keeps ``{sample_id: {metric:
    score or None}}`` for drill-down.

    >>> report = RagEvalReport(
    ...     metrics={'exact_match': 0.5}, coverage={'exact_match': 4}, n_samples=4)
    >>> report.metrics['exact_match']
    0.5
    """

    metrics: dict[str, float]
    coverage: dict[str, int]
    n_samples: int
    per_sample: dict[str, dict[str, float | None]] = field(default_factory=dict)
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    skipped_lines: int = 0
    warnings: list[str] = field(default_factory=list)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Extra per-sample detail, e.g. faithfulness' unsupported claims: ``{sample_id: {...}}``."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else a driver reports (e.g. judge call counts); JSON-ready values."""

    @property
    def judge_calls(self) -> int:
        """LLM judge calls actually sent for this report (0 when no judge metric ran)."""
        return int(self.extra.get("judge_calls", 0))

    @property
    def judge_cache_hits(self) -> int:
        """Judge verdicts served from the cache instead of a call."""
        return int(self.extra.get("judge_cache_hits", 0))

    @property
    def incomplete(self) -> bool:
        """True when a judge budget stopped the run before every sample was scored."""
        return bool(self.extra.get("incomplete", False))

    @cached_property
    def summaries(self) -> dict[str, DistributionSummary]:
        """A :class:`DistributionSummary` per metric over the samples (``None`` = missing)."""
        return {
            key: DistributionSummary.of([row.get(key) for row in self.per_sample.values()])
            for key in self.metrics
        }

    def summary(self, key: str) -> DistributionSummary:
        """The :class:`DistributionSummary` of one metric."""
        return self.summaries[key]

    def scores(self, key: str) -> dict[str, float]:
        """``{sample_id: score}`` for one metric, skipping samples it did not apply to."""
        return {sid: v for sid, row in self.per_sample.items() if (v := row.get(key)) is not None}

    def _summary_rows(self) -> list[tuple[str, DistributionSummary]]:
        return list(self.summaries.items())

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return {
            "kind": "rag",
            "metrics": dict(self.metrics),
            "coverage": dict(self.coverage),
            "n_samples": self.n_samples,
            "higher_is_better": dict(self.higher_is_better),
            "summaries": {k: s.to_dict() for k, s in self.summaries.items()},
            "per_sample": self.per_sample,
            "details": self.details,
            "skipped_lines": self.skipped_lines,
            "warnings": list(self.warnings),
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RagEvalReport:
        """Rebuild a report from :meth:`to_dict` output."""
        return cls(
            metrics={str(k): _finite(v, f"metrics[{k!r}]") for k, v in data["metrics"].items()},
            coverage={str(k): int(v) for k, v in data.get("coverage", {}).items()},
            n_samples=int(data["n_samples"]),
            per_sample={
                str(s): {
                    str(k): (None if v is None else _finite(v, f"per_sample[{s!r}][{k!r}]"))
                    for k, v in row.items()
                }
                for s, row in (data.get("per_sample") or {}).items()
            },
            higher_is_better=dict(data.get("higher_is_better", {})),
            skipped_lines=int(data.get("skipped_lines", 0)),
            warnings=list(data.get("warnings", [])),
            details=dict(data.get("details", {})),
            extra=dict(data.get("extra", {})),
        )

    def to_pandas(self) -> Any:
        """Per-sample scores as a ``pandas.DataFrame``."""
        try:
            import pandas as pd
        except ImportError:
            raise MissingDependencyError("pandas", "pandas") from None
        return pd.DataFrame.from_dict(self.per_sample, orient="index")

    def to_text(self) -> str:
        """A readable table: metric, mean, coverage, direction."""
        rows = [["metric", "mean", "coverage", "better"]]
        for key, value in self.metrics.items():
            better = "higher" if self.higher_is_better.get(key, True) else "lower"
            rows.append([key, _fmt(value), f"{self.coverage.get(key, 0)}/{self.n_samples}", better])
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        out = [f"RAG evaluation: {self.n_samples} samples"]
        if self.skipped_lines:
            out[0] += f" ({self.skipped_lines} malformed lines skipped)"
        for i, r in enumerate(rows):
            out.append(
                "  ".join(
                    c.ljust(w) if j == 0 else c.rjust(w)
                    for j, (c, w) in enumerate(zip(r, widths, strict=True))
                )
            )
            if i == 0:
                out.append("  ".join("-" * w for w in widths))
        out.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(out)
