"""The report of a RAG evaluation (:class:`RagEvalReport`): answer and context metrics over
samples, their coverage, per-sample scores and details."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ragmeter.aggregate import Distribution
from ragmeter.errors import MissingDependencyError
from ragmeter.report import _html
from ragmeter.report._base import _finite, _fmt, _ReportBase
from ragmeter.report._fingerprint import METRIC_DEFINITIONS
from ragmeter.report._json import _Rows
from ragmeter.report._summary import DistributionSummary, _loaded_summaries, _Summaries

__all__ = ["RagEvalReport"]


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
    distributions: dict[str, Distribution] = field(default_factory=dict, repr=False, compare=False)
    """Mergeable per-metric aggregates (:class:`~ragmeter.aggregate.Distribution`); the
    summaries come from them when ``per_sample`` was not kept (a streamed evaluation)."""
    _loaded: dict[str, DistributionSummary] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

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
    def summaries(self) -> Mapping[str, DistributionSummary]:
        """A :class:`DistributionSummary` per metric over the samples (``None`` = missing).

        Exact from ``per_sample`` when it was kept; otherwise from the streamed aggregates
        in ``distributions`` (see :attr:`DistributionSummary.exact`). Each key's summary is
        computed the first time it is asked for.
        """
        return _Summaries(self.metrics, self._summarize)

    def _summarize(self, key: str) -> DistributionSummary:
        if not self.per_sample:
            if key in self.distributions:
                return DistributionSummary.of_distribution(self.distributions[key])
            if key in self._loaded:
                return self._loaded[key]
        return DistributionSummary.of([row.get(key) for row in self.per_sample.values()])

    def summary(self, key: str) -> DistributionSummary:
        """The :class:`DistributionSummary` of one metric."""
        return self.summaries[key]

    def scores(self, key: str) -> dict[str, float]:
        """``{sample_id: score}`` for one metric, skipping samples it did not apply to."""
        return {sid: v for sid, row in self.per_sample.items() if (v := row.get(key)) is not None}

    def _summary_rows(self) -> list[tuple[str, DistributionSummary]]:
        return list(self.summaries.items())

    def _items(self) -> Iterator[tuple[str, Any]]:
        yield "kind", "rag"
        yield "metrics", dict(self.metrics)
        yield "coverage", dict(self.coverage)
        yield "n_samples", self.n_samples
        yield "higher_is_better", dict(self.higher_is_better)
        yield "summaries", {k: s.to_dict() for k, s in self.summaries.items()}
        yield "per_sample", _Rows(self.per_sample)
        yield "details", self.details
        yield "skipped_lines", self.skipped_lines
        yield "warnings", list(self.warnings)
        yield "extra", dict(self.extra)
        yield "fingerprints", self._fingerprints()

    def _config_settings(self) -> dict[str, Any]:
        """The metric keys, their cut-offs, the judges' and embedders' identities (as the
        drivers record them in ``extra``) and the metric-definition version."""
        settings: dict[str, Any] = {"kind": "rag", "metrics": sorted(self.metrics)}
        for key in ("k", "judges", "embed_models"):
            if self.extra.get(key) is not None:
                settings[key] = self.extra[key]
        settings["metric_definitions"] = METRIC_DEFINITIONS
        return settings

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RagEvalReport:
        """Rebuild a report from :meth:`to_dict` output."""
        report = cls(
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
        if not report.per_sample:
            report._loaded = _loaded_summaries(data)
        report._load_fingerprints(data)
        return report

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

    def to_html(
        self,
        path: str | os.PathLike[str],
        *,
        samples: Iterable[Any] | None = None,
        **options: Any,
    ) -> Path:
        """Deprecated: :func:`ragmeter.html.write_rag_report` (same options).

        Writes the report as one self-contained, offline HTML page and returns its path.
        Metric summaries and histograms, a sortable, filterable per-sample table, and a
        drill-down per sample: with ``samples`` (those the report was computed from) the
        question, the answer with faithfulness' unsupported claims highlighted, the
        references and the contexts. ``options``: ``title``, ``dataset``, ``system``,
        ``depth``, ``max_bytes``; see :func:`ragmeter.html.write_rag_report`.
        """
        warnings.warn(
            "RagEvalReport.to_html is deprecated: pages are written by ragmeter.html; call "
            "ragmeter.html.write_rag_report(report, path, ...) (same options; to_html will be "
            "removed in a future release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return _html.write_rag(self, path, samples=samples, **options)
