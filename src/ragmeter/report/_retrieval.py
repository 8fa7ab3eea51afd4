"""The report of a retrieval evaluation (:class:`RetrievalEvalReport`): means, per-query
scores, their summaries, and the conventions they were computed under."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ragmeter._types import Qrels, RunLike
from ragmeter.aggregate import Distribution
from ragmeter.errors import MissingDependencyError
from ragmeter.report import _html
from ragmeter.report._base import _finite, _fmt, _ReportBase
from ragmeter.report._columns import ColumnRows
from ragmeter.report._fingerprint import METRIC_DEFINITIONS
from ragmeter.report._json import _Rows
from ragmeter.report._records import Conventions, JudgedShare
from ragmeter.report._summary import DistributionSummary, _loaded_summaries, _Summaries

__all__ = ["RetrievalEvalReport"]


_KEY = re.compile(r"^(?P<name>[^@]+)(?:@(?P<k>\d+))?$")


def _split_key(key: str) -> tuple[str, int | None]:
    m = _KEY.match(key)
    if not m:
        return key, None
    k = m.group("k")
    return m.group("name"), int(k) if k is not None else None


@dataclass
class RetrievalEvalReport(_ReportBase):
    """The outcome of :func:`ragmeter.evaluate_run` / :func:`ragmeter.evaluate_retrieval`.

    ``metrics`` maps a result key (``"ndcg@10"``, and uncut ``"map"``/``"mrr"``) to its mean
    over every scored query; ``per_query`` keeps ``{query_id: {key: score}}`` for drill-down
    (from :func:`~ragmeter.evaluate_run` with built-in metrics it is made from the kernel's
    flat array the first time it is read, see :meth:`defer_per_query`: scoring builds no
    dict per query, and ``summary``, ``scores`` and ``to_json`` read the array);
    ``n_queries`` is how many queries were averaged (those with at least one relevant
    judgement, less the ones missing from the run under ``missing_queries="skip"``);
    ``missing_queries`` lists the judged queries that had no ranking in the run (scored 0
    under ``"zero"``, left out under ``"skip"``; a warning counts them too);
    ``conventions`` records how the numbers were computed; ``judged`` how much of the
    rankings' top docs is judged (:class:`~ragmeter.report.JudgedShare`: ``judged@k`` per
    query and on average, beside the metrics asked for, and the counts of unjudged docs a
    warning cites when too few are judged); ``extra`` holds anything else a driver or
    adapter reports (JSON-ready, e.g. failed captured runs).

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
    judged: JudgedShare | None = None
    """``judged@k`` per query and on average, and the unjudged docs counted (``None`` in a
    report made by hand)."""
    distributions: dict[str, Distribution] = field(default_factory=dict, repr=False, compare=False)
    """Mergeable per-key aggregates of a streamed evaluation that kept no per-query scores
    (:func:`ragmeter.evaluate_run_file` with ``per_query=False`` or a path); the summaries
    come from them when ``per_query`` is empty."""
    _loaded: dict[str, DistributionSummary] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _columns: ColumnRows | None = field(default=None, init=False, repr=False, compare=False)
    """The per-query scores as the kernel left them, until ``per_query`` is first read."""

    def defer_per_query(self, rows: ColumnRows) -> None:
        """Keep the per-query scores as ``rows`` (a flat array read as rows): ``per_query``
        is the plain dict of them from the first time it is read; the summaries, ``scores``
        and the JSON writer read the array without making that dict."""
        self.__dict__.pop("per_query", None)
        self.__dict__.pop("summaries", None)
        self._columns = rows

    def __getattr__(self, name: str) -> Any:
        """``per_query`` made from the deferred rows on its first read (see
        :meth:`defer_per_query`); any other missing attribute is an ``AttributeError``."""
        columns = self.__dict__.get("_columns")
        if name == "per_query" and columns is not None:
            rows = self.__dict__["per_query"] = columns.to_dict()
            return rows
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _rows(self) -> Mapping[str, Mapping[str, float]]:
        """The per-query scores, without making ``per_query``'s dict if it was deferred."""
        if "per_query" in self.__dict__ or self._columns is None:
            return self.per_query
        return self._columns

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
    def summaries(self) -> Mapping[str, DistributionSummary]:
        """A :class:`DistributionSummary` per metric key over the scored queries.

        Each key's summary is computed the first time it is asked for (``summary("ndcg@10")``
        does not compute the other keys'). A judged query left out of the mean because the
        run has no ranking for it (``missing_queries="skip"``) counts as ``missing``. The
        ``mean`` is the report's metric (``math.fsum`` over the queries / their number).
        """
        return _Summaries(self.metrics, self._summarize)

    def _summarize(self, key: str) -> DistributionSummary:
        rows = self._rows()
        if not rows:
            if key in self.distributions:
                return DistributionSummary.of_distribution(self.distributions[key], mean="fsum")
            if key in self._loaded:
                return self._loaded[key]
        absent = sum(q not in rows for q in self.missing_queries)
        values: list[float | None]
        if isinstance(rows, ColumnRows) and key in rows.keys_in_order:
            values = [*rows.column(key)]
        else:
            values = [row.get(key) for row in rows.values()]
        values.extend([None] * absent)
        return DistributionSummary.of(values, mean="fsum")

    def summary(self, key: str) -> DistributionSummary:
        """The :class:`DistributionSummary` of one metric key, e.g. ``"ndcg@10"``."""
        return self.summaries[key]

    def scores(self, key: str) -> dict[str, float]:
        """``{query_id: score}`` for one metric key (the shape :func:`compare` pairs)."""
        rows = self._rows()
        if isinstance(rows, ColumnRows):
            if key not in rows.keys_in_order:
                return {}
            return dict(zip(rows, rows.column(key), strict=True))
        return {q: row[key] for q, row in rows.items() if key in row}

    def _summary_rows(self) -> list[tuple[str, DistributionSummary]]:
        return list(self.summaries.items())

    def _items(self) -> Iterator[tuple[str, Any]]:
        """Plain-dict form: metrics, per-query scores, summaries and conventions."""
        yield "kind", "retrieval"
        yield "metrics", dict(self.metrics)
        yield "n_queries", self.n_queries
        yield "k_values", list(self.k_values)
        yield "primary", self.primary
        yield "summaries", {k: s.to_dict() for k, s in self.summaries.items()}
        yield "per_query", _Rows(self._rows())
        yield "conventions", self.conventions.to_dict()
        yield "warnings", list(self.warnings)
        yield "missing_queries", list(self.missing_queries)
        yield "judged", None if self.judged is None else self.judged.to_dict()
        yield "judged_per_query", _Rows(self.judged.per_query if self.judged else {})
        yield "extra", dict(self.extra)
        yield "fingerprints", self._fingerprints()

    def _config_settings(self) -> dict[str, Any]:
        conventions = self.conventions.to_dict()
        conventions.pop("ragmeter_version", None)
        measures = self.extra.get("measures")
        return {
            "kind": "retrieval",
            "metrics": sorted(self.metrics),
            "k_values": sorted(self.k_values),
            **conventions,
            **({"measures": measures} if measures is not None else {}),
            "metric_definitions": METRIC_DEFINITIONS,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalEvalReport:
        """Rebuild a report from :meth:`to_dict` output (e.g. a saved JSON file)."""
        known = set(Conventions.__dataclass_fields__)
        conv = {k: v for k, v in (data.get("conventions") or {}).items() if k in known}
        report = cls(
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
            judged=JudgedShare.from_dict(data["judged"], data.get("judged_per_query"))
            if data.get("judged")
            else None,
        )
        if not report.per_query:
            report._loaded = _loaded_summaries(data)
        report._load_fingerprints(data)
        return report

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

    def to_html(
        self,
        path: str | os.PathLike[str],
        *,
        run: RunLike | None = None,
        qrels: Qrels | None = None,
        queries: Mapping[str, str] | None = None,
        corpus: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Path:
        """Deprecated: :func:`ragmeter.html.write_retrieval_report` (same options).

        Writes the report as one self-contained, offline HTML page and returns its path.
        Metric summaries and histograms, a sortable, filterable per-query table, and a
        drill-down per query: its text (``queries``), the run's top docs (``run``) with their
        grades (``qrels``; relevant ones marked) and snippets (``corpus``). ``options``:
        ``title``, ``dataset``, ``system``, ``depth`` (docs shown, default 10),
        ``max_bytes``; see :func:`ragmeter.html.write_retrieval_report`.
        """
        warnings.warn(
            "RetrievalEvalReport.to_html is deprecated: pages are written by ragmeter.html; "
            "call ragmeter.html.write_retrieval_report(report, path, ...) (same options; "
            "to_html will be removed in a future release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return _html.write_retrieval(
            self, path, run=run, qrels=qrels, queries=queries, corpus=corpus, **options
        )
