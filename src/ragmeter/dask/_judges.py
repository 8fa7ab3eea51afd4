"""Judge metrics inside a Dask evaluation: run where the partition is, merge, report.

Each partition runs :func:`ragmeter.judge.run_judges` on its own samples, on its worker,
with the judge cache opened there (a path every worker can reach: the SQLite file is the
shared cache) and the evaluation's one budget (:mod:`ragmeter.dask._budget`). The
partials keep each sample's judge scores (and reasons) in order when per-sample scores are
kept, else one :class:`~ragmeter.aggregate.Distribution` per judge metric; the means are
``math.fsum`` over the scores / their number either way, as on one machine.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmeter.aggregate import Distribution
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.judged import DEFAULT_CACHE
from ragmeter.judge.cache import JudgeCache
from ragmeter.judge.metrics import JudgeMetric
from ragmeter.judge.protocol import JudgeReply, Message
from ragmeter.judge.runner import JudgeOptions, run_judges
from ragmeter.report import RagEvalReport
from ragmeter.schema import RagSample, sample_keys

__all__ = [
    "JudgePartial",
    "JudgeSpec",
    "add_judges",
    "cache_spec",
    "check_applies",
    "freeze",
    "judge_partition",
    "no_options_budget",
]


class _Frozen:
    """A judge with its identity read once, on the client: every worker keys the cache
    exactly as one machine does, whatever pickling did to the judge's function."""

    def __init__(self, judge: Any, identity: dict[str, Any]) -> None:
        self.judge = judge
        self._identity = identity

    @property
    def identity(self) -> dict[str, Any]:
        return self._identity

    async def complete(self, messages: Sequence[Message]) -> JudgeReply:
        reply: JudgeReply = await self.judge.complete(messages)
        return reply


def freeze(metrics: Sequence[JudgeMetric]) -> list[JudgeMetric]:
    """Copies of the judge metrics whose judges carry the identity read here."""
    frozen: list[JudgeMetric] = []
    for metric in metrics:
        twin = copy.copy(metric)
        twin.judge = _Frozen(metric.judge, dict(metric.judge.identity))
        frozen.append(twin)
    return frozen


@dataclass
class JudgeSpec:
    """What every partition needs to run the judges (pickled once per evaluation)."""

    metrics: list[JudgeMetric]
    cache: str | tuple[str, bool | None] | None
    """``None``, ``"default"`` (each worker's user cache dir) or ``(path, readonly)``."""
    options: JudgeOptions
    budget: Any
    """A ``SchedulerBudget`` or ``LocalBudget`` (see :mod:`ragmeter.dask._budget`)."""

    def open_cache(self) -> JudgeCache | None:
        if self.cache is None:
            return None
        if isinstance(self.cache, str):
            return JudgeCache()
        path, readonly = self.cache
        return JudgeCache(path, readonly=readonly)


def cache_spec(judge_cache: Any) -> str | tuple[str, bool | None] | None:
    """``judge_cache=`` as the workers open it (a JudgeCache is passed by its path)."""
    if judge_cache is None:
        return None
    if isinstance(judge_cache, JudgeCache):
        return (str(judge_cache.path.absolute()), judge_cache.readonly or None)
    if isinstance(judge_cache, str) and judge_cache == DEFAULT_CACHE:
        return DEFAULT_CACHE
    return (str(judge_cache), None)


@dataclass
class JudgePartial:
    """Judge results of some partitions, in sample order; mergeable."""

    keys: list[str]
    better: dict[str, bool]
    applies: dict[str, bool]
    kept: bool
    ids: list[str] = field(default_factory=list)
    values: list[dict[str, float | None]] = field(default_factory=list)
    infos: list[dict[str, dict[str, Any]]] = field(default_factory=list)
    distributions: dict[str, Distribution] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    incomplete: bool = False
    stop_reason: str | None = None
    cache_path: str | None = None
    cache_write_problem: str | None = None

    def merge(self, later: JudgePartial) -> None:
        """Fold in the judge results of the partitions right after these."""
        for key in self.keys:
            self.applies[key] = self.applies[key] or later.applies[key]
            if not self.kept:
                self.distributions[key].merge(later.distributions[key])
        self.ids.extend(later.ids)
        self.values.extend(later.values)
        self.infos.extend(later.infos)
        for name, count in later.counts.items():
            self.counts[name] = self.counts.get(name, 0) + count
        if later.incomplete and not self.incomplete:
            self.incomplete, self.stop_reason = True, later.stop_reason
        if later.cache_write_problem and not self.cache_write_problem:
            self.cache_path = later.cache_path
            self.cache_write_problem = later.cache_write_problem


_COUNTS = (
    ("judge_calls", "calls"),
    ("judge_cache_hits", "cache_hits"),
    ("judge_deduplicated", "deduplicated"),
    ("judge_cache_writes_skipped", "cache_writes_skipped"),
    ("judge_input_tokens", "input_tokens"),
    ("judge_output_tokens", "output_tokens"),
)


def judge_partition(samples: list[RagSample], spec: JudgeSpec, *, kept: bool) -> JudgePartial:
    """Run the judges on one partition's samples (in the task's thread, on its worker)."""
    keys = [m.name for m in spec.metrics]
    part = JudgePartial(
        keys=keys,
        better={m.name: m.higher_is_better for m in spec.metrics},
        applies={m.name: any(m.applies_to(s) for s in samples) for m in spec.metrics},
        kept=kept,
        distributions={} if kept else {key: Distribution() for key in keys},
        counts={name: 0 for name, _ in _COUNTS},
    )
    if not samples:
        return part
    local = sample_keys([s.id for s in samples])  # unique within the partition
    renamed = [
        s if s.id == sid else s.model_copy(update={"id": sid})
        for s, sid in zip(samples, local, strict=True)
    ]
    cache = spec.open_cache()
    try:
        budget = spec.budget.bind()
        run = run_judges(
            renamed, list(spec.metrics), cache=cache, options=spec.options, budget=budget
        )
    finally:
        if cache is not None:
            cache.close()
    for name, attr in _COUNTS:
        part.counts[name] = int(getattr(run, attr))
    scored: dict[str, list[float]] = {key: [] for key in keys}
    part.incomplete, part.stop_reason = run.incomplete, run.stop_reason
    if run.cache_writes_skipped and cache is not None:
        part.cache_path, part.cache_write_problem = str(cache.path), run.cache_write_problem
    for sample, sid in zip(samples, local, strict=True):
        row = {key: run.scores.get(sid, {}).get(key) for key in keys}
        if kept:
            part.ids.append(sample.id)
            part.values.append(row)
            infos: dict[str, dict[str, Any]] = {}
            for key in keys:
                info: dict[str, Any] = {}
                reason = run.reasons.get(sid, {}).get(key)
                if reason:
                    info["reason"] = reason
                spread = run.spread.get(sid, {}).get(key)
                if spread:
                    info["spread"] = spread
                if info:
                    infos[key] = info
            part.infos.append(infos)
        else:
            for key, value in row.items():
                if value is not None:
                    scored[key].append(value)
    if not kept:
        for key, values in scored.items():
            part.distributions[key].add_trusted(values)
    return part


def no_options_budget(options: JudgeOptions | None) -> JudgeOptions:
    """``options`` without its own budget (the evaluation's shared budget applies)."""
    opts = options or JudgeOptions()
    return dataclasses.replace(opts, max_calls=None, max_tokens=None)


def check_applies(judged: JudgePartial, metrics: Sequence[JudgeMetric], n: int) -> None:
    """Refuse a judge metric no sample has the fields for (as on one machine)."""
    for metric in metrics:
        if not judged.applies[metric.name]:
            need = ", ".join(sorted(metric.needs))
            raise InvalidInputError(
                f"{metric.name} needs {need} on a sample; none of the {n} samples has all of "
                "them, so no judge call could score anything"
            )


def add_judges(report: RagEvalReport, judged: JudgePartial, n: int) -> None:
    """Add the judge metrics to ``report`` as :func:`ragmeter.evaluate_rag` does on one
    machine (same keys, order, means, warnings and ``extra``)."""
    sids = sample_keys(judged.ids) if judged.kept else []
    for key in judged.keys:
        if judged.kept:
            values: list[float] = []
            for sid, row, infos in zip(sids, judged.values, judged.infos, strict=True):
                value = row[key]
                report.per_sample.setdefault(sid, {})[key] = value
                if value is not None:
                    values.append(value)
                if key in infos:
                    report.details.setdefault(sid, {})[key] = infos[key]
            count = len(values)
            mean = math.fsum(values) / count if count else 0.0
        else:
            dist = judged.distributions[key]
            count = dist.count
            mean = dist.mean(rule="fsum")
            if count:
                dist.missing = n - count
                report.distributions[key] = dist
        if count:
            report.metrics[key] = mean
            report.coverage[key] = count
            report.higher_is_better[key] = judged.better[key]
        else:
            why = "the judge scored no sample (each sample's reason is in details)"
            report.extra.setdefault("not_computed", {})[key] = why
            report.warnings.append(f"{key}: {why}")
    report.extra.update(judged.counts)
    if judged.cache_write_problem:
        report.warnings.append(
            f"judge cache {judged.cache_path}: {judged.counts['judge_cache_writes_skipped']} new "
            f"verdict(s) were not stored ({judged.cache_write_problem}); a re-run will ask the "
            "judge for them again"
        )
    if judged.incomplete:
        report.extra["incomplete"] = True
        report.extra["stop_reason"] = judged.stop_reason
        report.warnings.append(f"incomplete: {judged.stop_reason}; unscored samples are None")
    report.__dict__.pop("summaries", None)
