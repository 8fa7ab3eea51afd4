"""What the model-scored metrics (judges, embeddings) share under Dask: mergeable partials.

A partition's judge or embedding run becomes a :class:`ModelPartial`: each sample's scores
(and details) in order when per-sample scores are kept, else one
:class:`~ragmeter.aggregate.Distribution` per metric, plus counts that add up over
partitions (calls, cache hits). :func:`add_scores` puts the merged scores in the report as
one machine does (means by ``math.fsum`` over the scores / their number either way).
:func:`cache_spec` is how a cache argument travels to the workers, which open the same
SQLite file (WAL: safe for many processes), so a path every worker can reach is one shared
cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ragmeter.aggregate import Distribution
from ragmeter.evaluation.judged import DEFAULT_CACHE
from ragmeter.report import RagEvalReport
from ragmeter.schema import RagSample, sample_keys

__all__ = [
    "CacheSpec",
    "ModelPartial",
    "add_scores",
    "cache_spec",
    "local_ids",
    "open_spec",
]

CacheSpec = str | tuple[str, bool | None] | None
"""A cache as the workers open it: ``None``, :data:`DEFAULT_CACHE` or ``(path, readonly)``."""


def cache_spec(cache: Any, cache_type: type[Any]) -> CacheSpec:
    """``cache`` (``None``, ``"default"``, a path, or an open ``cache_type``) as the workers
    open it: an open cache travels as its absolute path (and its read-only flag).

    >>> from ragmeter.embed import EmbedCache
    >>> cache_spec("default", EmbedCache), cache_spec(None, EmbedCache)
    ('default', None)
    >>> from pathlib import Path
    >>> cache_spec(Path("shared") / "e.sqlite", EmbedCache) == (str(Path("shared/e.sqlite")), None)
    True
    """
    if cache is None:
        return None
    if isinstance(cache, cache_type):
        return (str(cache.path.absolute()), cache.readonly or None)
    if isinstance(cache, str) and cache == DEFAULT_CACHE:
        return DEFAULT_CACHE
    return (str(cache), None)


def open_spec(spec: CacheSpec, cache_type: type[Any]) -> Any:
    """Open the cache :func:`cache_spec` described (on the worker), or ``None``."""
    if spec is None:
        return None
    if isinstance(spec, str):
        return cache_type()
    path, readonly = spec
    return cache_type(path, readonly=readonly)


def local_ids(samples: Sequence[RagSample]) -> tuple[list[str], list[RagSample]]:
    """The partition's samples under ids unique within it (a repeated id is ``"<id>#2"``),
    as the runners need them; the list of those ids and the renamed samples."""
    local = sample_keys([s.id for s in samples])
    renamed = [
        s if s.id == sid else s.model_copy(update={"id": sid})
        for s, sid in zip(samples, local, strict=True)
    ]
    return local, renamed


_P = TypeVar("_P", bound="ModelPartial")


@dataclass
class ModelPartial:
    """Scores of model-scored metrics over some partitions, in sample order; mergeable."""

    keys: list[str]
    better: dict[str, bool]
    applies: dict[str, bool]
    kept: bool
    ids: list[str] = field(default_factory=list)
    values: list[dict[str, float | None]] = field(default_factory=list)
    infos: list[dict[str, dict[str, Any]]] = field(default_factory=list)
    distributions: dict[str, Distribution] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    cache_path: str | None = None
    cache_write_problem: str | None = None

    def __post_init__(self) -> None:
        if not self.kept and not self.distributions:
            self.distributions = {key: Distribution() for key in self.keys}

    @classmethod
    def start(
        cls: type[_P],
        metrics: Sequence[Any],
        samples: Sequence[RagSample],
        *,
        kept: bool,
        counts: Sequence[str],
    ) -> _P:
        """The partial of ``samples`` before anything is scored: each metric's key, its
        direction and whether any sample applies to it, each of ``counts`` (names) at 0."""
        return cls(
            keys=[m.name for m in metrics],
            better={m.name: m.higher_is_better for m in metrics},
            applies={m.name: any(m.applies_to(s) for s in samples) for m in metrics},
            kept=kept,
            counts=dict.fromkeys(counts, 0),
        )

    def empty_like(self) -> ModelPartial:
        """A partial of no sample with this one's metrics (the start of a merge); fields
        subclasses add start at their defaults."""
        return type(self)(
            keys=list(self.keys),
            better=dict(self.better),
            applies=dict.fromkeys(self.keys, False),
            kept=self.kept,
        )

    def add_rows(self, rows: Sequence[tuple[str, dict[str, float | None], dict[str, Any]]]) -> None:
        """Samples' ``(id, scores by metric, details by metric)``, in order: kept as they
        are, or folded into the distributions."""
        if self.kept:
            for sample_id, row, info in rows:
                self.ids.append(sample_id)
                self.values.append(row)
                self.infos.append(info)
            return
        for key in self.keys:
            scored = [v for _, row, _ in rows if (v := row.get(key)) is not None]
            self.distributions[key].add_trusted(scored)

    def merge(self, later: ModelPartial) -> None:
        """Fold in the results of the partitions right after these."""
        for key in self.keys:
            self.applies[key] = self.applies[key] or later.applies[key]
            if not self.kept:
                self.distributions[key].merge(later.distributions[key])
        self.ids.extend(later.ids)
        self.values.extend(later.values)
        self.infos.extend(later.infos)
        for name, count in later.counts.items():
            self.counts[name] = self.counts.get(name, 0) + count
        if later.cache_write_problem and not self.cache_write_problem:
            self.cache_path = later.cache_path
            self.cache_write_problem = later.cache_write_problem


def add_scores(report: RagEvalReport, partial: ModelPartial, n: int, none_scored: str) -> None:
    """Put each metric's scores (per sample when kept, with details) and mean in ``report``
    as one machine does; a metric with no score is left out of ``metrics``, with
    ``none_scored`` as the reason in ``extra["not_computed"]`` and ``warnings``."""
    sids = sample_keys(partial.ids) if partial.kept else []
    for key in partial.keys:
        if partial.kept:
            values: list[float] = []
            for sid, row, infos in zip(sids, partial.values, partial.infos, strict=True):
                value = row[key]
                report.per_sample.setdefault(sid, {})[key] = value
                if value is not None:
                    values.append(value)
                if key in infos:
                    report.details.setdefault(sid, {})[key] = infos[key]
            count = len(values)
            mean = math.fsum(values) / count if count else 0.0
        else:
            dist = partial.distributions[key]
            count = dist.count
            mean = dist.mean(rule="fsum")
            if count:
                dist.missing = n - count
                report.distributions[key] = dist
        if count:
            report.metrics[key] = mean
            report.coverage[key] = count
            report.higher_is_better[key] = partial.better[key]
        else:
            report.extra.setdefault("not_computed", {})[key] = none_scored
            report.warnings.append(f"{key}: {none_scored}")
