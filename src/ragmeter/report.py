"""Report types: where results are assembled, summarised and rendered.

:class:`DistributionSummary` describes one metric's per-query (or per-sample) scores
without collapsing them to a mean. :class:`RetrievalEvalReport` and :class:`RagEvalReport`
carry means, per-item scores for drill-down, and the :class:`Conventions` they were
computed under, and render as text, markdown, JSON or a pandas frame.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, Any, overload

from ragmeter._types import Qrels, RunLike
from ragmeter._version import __version__
from ragmeter.aggregate import PERCENTILES as PERCENTILES  # re-exported (was defined here)
from ragmeter.aggregate import Distribution, MeanRule, summarize_values
from ragmeter.errors import InvalidInputError, MissingDependencyError

__all__ = [
    "Conventions",
    "DistributionSummary",
    "RagEvalReport",
    "RetrievalEvalReport",
    "WarningLog",
]


@dataclass(frozen=True)
class DistributionSummary:
    """One metric's scores over a run, never collapsed to a single mean.

    ``missing`` counts ``None`` scores (not measurable for that item); they are dropped
    before ``mean``/``median``/``std`` (population, ddof=0)/``min``/``max`` and the
    ``percentiles`` (``p5 p25 p50 p75 p95``, linear interpolation) are computed over the
    rest. An empty or all-``None`` input gives ``count=0`` and zeros, never a
    ``ZeroDivisionError``. ``mean`` and ``std`` are correctly rounded (``statistics.mean``
    and ``statistics.pstdev``; a retrieval report's ``mean`` is its metric, ``math.fsum``
    over the queries divided by their number, as trec_eval sums).

    ``exact`` is False when the summary comes from a streamed evaluation that kept no
    per-item scores and the metric took more than
    :data:`~ragmeter.aggregate.MAX_DISTINCT` distinct values: ``count``, ``missing``,
    ``mean``, ``std``, ``min`` and ``max`` are still exact, and each order statistic behind
    ``median`` and ``percentiles`` is within ``relative_error`` (0.001) of the exact one
    (see :mod:`ragmeter.aggregate`); ``relative_error`` is 0.0 when exact.

    >>> s = DistributionSummary.of([1.0, 0.0, None, 0.5])
    >>> s.count, s.missing, s.mean, s.median, s.exact
    (3, 1, 0.5, 0.5, True)
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
    exact: bool = True
    relative_error: float = 0.0

    @classmethod
    def of(cls, scores: Iterable[float | None], *, mean: MeanRule = "exact") -> DistributionSummary:
        """Summarise raw per-item scores (``None`` = missing); ``mean="fsum"`` gives
        ``math.fsum(values) / n`` instead of the correctly rounded mean."""
        values: list[float] = []
        missing = 0
        for s in scores:
            if s is None:
                missing += 1
            else:
                values.append(float(s))
        return cls.from_stats(summarize_values(values, missing, mean=mean))

    @classmethod
    def of_distribution(
        cls, distribution: Distribution, *, mean: MeanRule = "exact"
    ) -> DistributionSummary:
        """Summarise a mergeable :class:`~ragmeter.aggregate.Distribution`."""
        return cls.from_stats(distribution.stats(mean=mean))

    @classmethod
    def from_stats(cls, stats: Mapping[str, Any]) -> DistributionSummary:
        """Build from a statistics mapping (:meth:`to_dict` output or an aggregate's)."""
        return cls(
            count=int(stats["count"]),
            missing=int(stats["missing"]),
            mean=float(stats["mean"]),
            median=float(stats["median"]),
            std=float(stats["std"]),
            min=float(stats["min"]),
            max=float(stats["max"]),
            percentiles={str(k): float(v) for k, v in dict(stats.get("percentiles", {})).items()},
            exact=bool(stats.get("exact", True)),
            relative_error=float(stats.get("relative_error", 0.0)),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return asdict(self)


class _Summaries(Mapping[str, DistributionSummary]):
    """Summaries per metric key, each computed the first time it is asked for."""

    def __init__(self, keys: Iterable[str], make: Callable[[str], DistributionSummary]) -> None:
        self._keys = list(dict.fromkeys(keys))
        self._known = set(self._keys)
        self._make = make
        self._done: dict[str, DistributionSummary] = {}

    def __getitem__(self, key: str) -> DistributionSummary:
        done = self._done.get(key)
        if done is None:
            if key not in self._known:
                raise KeyError(key)
            done = self._done[key] = self._make(key)
        return done

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"<summaries of {len(self)} metric keys>"


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


def _loaded_summaries(data: Mapping[str, Any]) -> dict[str, DistributionSummary]:
    """The saved summaries of a report that kept no per-item scores (a streamed one)."""
    loaded: dict[str, DistributionSummary] = {}
    for key, stats in dict(data.get("summaries") or {}).items():
        try:
            loaded[str(key)] = DistributionSummary.from_stats(stats)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"report summaries[{key!r}] cannot be read: {exc!r}") from None
    return loaded


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


_ROWS_KEYS = frozenset({"per_query", "per_sample"})
"""Top-level keys whose rows :meth:`_ReportBase.to_json` writes one at a time."""


class _Rows:
    """Marks a ``{id: {key: value}}`` mapping that the JSON writer streams row by row."""

    __slots__ = ("rows",)

    def __init__(self, rows: Mapping[str, Mapping[str, Any]]) -> None:
        self.rows = rows


def _json_value(value: Any) -> str:
    """One row value as ``json.dumps(value, allow_nan=False)`` writes it, fast for floats."""
    if type(value) is float:
        if value - value == 0.0:  # finite
            return repr(value)
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return json.dumps(value, allow_nan=False)


def _write_json(items: Iterable[tuple[str, Any]], fh: IO[str]) -> None:
    """Write ``dict(items)`` as ``json.dumps(..., indent=2, allow_nan=False)`` would, but in
    pieces: a :class:`_Rows` value is written one row at a time, never as one string."""
    parts: list[str] = []
    size = 0

    def out(text: str) -> None:
        nonlocal size
        parts.append(text)
        size += len(text)
        if size >= 1 << 20:
            fh.write("".join(parts))
            parts.clear()
            size = 0

    out("{")
    first = True
    for key, value in items:
        out(("\n" if first else ",\n") + "  " + json.dumps(key) + ": ")
        first = False
        if not isinstance(value, _Rows):
            out(json.dumps(value, indent=2, allow_nan=False).replace("\n", "\n  "))
            continue
        if not value.rows:
            out("{}")
            continue
        out("{")
        sep = "\n"
        names: dict[str, str] = {}
        for rid, row in value.rows.items():
            out(sep + "    " + json.dumps(rid) + ": ")
            sep = ",\n"
            if not row:
                out("{}")
                continue
            fields = []
            for name, cell in row.items():
                label = names.get(name)
                if label is None:
                    label = names[name] = "      " + json.dumps(name) + ": "
                fields.append(label + _json_value(cell))
            out("{\n" + ",\n".join(fields) + "\n    }")
        out("\n  }")
    out("\n}" if not first else "}")
    fh.write("".join(parts))


class _ReportBase:
    """Rendering shared by both report types; subclasses provide the rows."""

    def _summary_rows(self) -> list[tuple[str, DistributionSummary]]:
        raise NotImplementedError

    def _items(self) -> Iterator[tuple[str, Any]]:
        """``to_dict()``'s items, with the per-item rows wrapped in :class:`_Rows`."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return {k: (v.rows if isinstance(v, _Rows) else v) for k, v in self._items()}

    @overload
    def to_json(self, fp: None = None, **kwargs: Any) -> str: ...

    @overload
    def to_json(self, fp: str | os.PathLike[str] | IO[str], **kwargs: Any) -> None: ...

    def to_json(
        self, fp: str | os.PathLike[str] | IO[str] | None = None, **kwargs: Any
    ) -> str | None:
        """The report as JSON: a string, or written to ``fp`` (a path or a text stream).

        With ``fp`` the JSON is written in pieces, one per-query (or per-sample) row at a
        time, so a 100k-query report never becomes one giant string; the text is the same
        as ``json.dumps(report.to_dict(), indent=2)``. ``kwargs`` other than those defaults
        go to :func:`json.dumps`. Always standard JSON: a report holds no NaN or infinity
        (the drivers refuse them), and ``allow_nan=False`` makes sure of it.
        """
        kwargs.setdefault("indent", 2)
        kwargs.setdefault("allow_nan", False)
        plain = kwargs == {"indent": 2, "allow_nan": False}
        if fp is None:
            if not plain:
                return json.dumps(self.to_dict(), **kwargs)
            buffer = io.StringIO()
            _write_json(self._items(), buffer)
            return buffer.getvalue()
        if isinstance(fp, (str, os.PathLike)):
            target = Path(fp)
            with open(target, "w", encoding="utf-8") as fh:
                self._dump(fh, plain, kwargs)
            return None
        self._dump(fp, plain, kwargs)
        return None

    def _dump(self, fh: IO[str], plain: bool, kwargs: dict[str, Any]) -> None:
        if plain:
            _write_json(self._items(), fh)
        else:
            json.dump(self.to_dict(), fh, **kwargs)

    def to_markdown(self) -> str:
        """A markdown table: one row per metric key, mean and spread."""
        lines = [
            "| metric | mean | median | std | min | max | n | missing |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        approximate: list[tuple[str, DistributionSummary]] = []
        for key, s in self._summary_rows():
            lines.append(
                f"| {key} | {s.mean:.4f} | {s.median:.4f} | {s.std:.4f} | {s.min:.4f} | "
                f"{s.max:.4f} | {s.count} | {s.missing} |"
            )
            if not s.exact:
                approximate.append((key, s))
        if approximate:
            lines.append("")
            lines.append(_approximate_note(approximate))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def to_text(self) -> str:
        raise NotImplementedError


def _approximate_note(rows: list[tuple[str, DistributionSummary]]) -> str:
    error = max(s.relative_error for _, s in rows)
    keys = ", ".join(k for k, _ in rows)
    return (
        f"median and percentiles of {keys} are approximate (each within a relative error of "
        f"{error:g}; per-item scores were not kept); mean, std, min and max are exact"
    )


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
    distributions: dict[str, Distribution] = field(default_factory=dict, repr=False, compare=False)
    """Mergeable per-key aggregates of a streamed evaluation that kept no per-query scores
    (:func:`ragmeter.evaluate_run_file` with ``per_query=False`` or a path); the summaries
    come from them when ``per_query`` is empty."""
    _loaded: dict[str, DistributionSummary] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

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
        if not self.per_query:
            if key in self.distributions:
                return DistributionSummary.of_distribution(self.distributions[key], mean="fsum")
            if key in self._loaded:
                return self._loaded[key]
        absent = sum(q not in self.per_query for q in self.missing_queries)
        values = [row.get(key) for row in self.per_query.values()]
        values.extend([None] * absent)
        return DistributionSummary.of(values, mean="fsum")

    def summary(self, key: str) -> DistributionSummary:
        """The :class:`DistributionSummary` of one metric key, e.g. ``"ndcg@10"``."""
        return self.summaries[key]

    def scores(self, key: str) -> dict[str, float]:
        """``{query_id: score}`` for one metric key (the shape :func:`compare` pairs)."""
        return {q: row[key] for q, row in self.per_query.items() if key in row}

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
        yield "per_query", _Rows(self.per_query)
        yield "conventions", self.conventions.to_dict()
        yield "warnings", list(self.warnings)
        yield "missing_queries", list(self.missing_queries)
        yield "extra", dict(self.extra)

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
        )
        if not report.per_query:
            report._loaded = _loaded_summaries(data)
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
        from ragmeter.html import write_retrieval_report

        return write_retrieval_report(
            self, path, run=run, qrels=qrels, queries=queries, corpus=corpus, **options
        )


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
        from ragmeter.html import write_rag_report

        return write_rag_report(self, path, samples=samples, **options)
