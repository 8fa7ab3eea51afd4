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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.dask._model_parts import (
    CacheSpec,
    ModelPartial,
    add_scores,
    local_ids,
    open_spec,
)
from ragmeter.dask._model_parts import cache_spec as model_cache_spec
from ragmeter.errors import InvalidInputError
from ragmeter.judge.cache import JudgeCache
from ragmeter.judge.metrics import JudgeMetric
from ragmeter.judge.protocol import JudgeReply, Message
from ragmeter.judge.runner import JudgeOptions, run_judges
from ragmeter.report import RagEvalReport
from ragmeter.schema import RagSample

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
    cache: CacheSpec
    """``None``, ``"default"`` (each worker's user cache dir) or ``(path, readonly)``."""
    options: JudgeOptions
    budget: Any
    """A ``SchedulerBudget`` or ``LocalBudget`` (see :mod:`ragmeter.dask._budget`)."""

    def open_cache(self) -> JudgeCache | None:
        opened: JudgeCache | None = open_spec(self.cache, JudgeCache)
        return opened


def cache_spec(judge_cache: Any) -> CacheSpec:
    """``judge_cache=`` as the workers open it (a JudgeCache is passed by its path)."""
    return model_cache_spec(judge_cache, JudgeCache)


@dataclass
class JudgePartial(ModelPartial):
    """Judge results of some partitions, in sample order; mergeable."""

    incomplete: bool = False
    stop_reason: str | None = None

    def merge(self, later: ModelPartial) -> None:
        """Fold in the judge results of the partitions right after these."""
        super().merge(later)
        assert isinstance(later, JudgePartial)
        if later.incomplete and not self.incomplete:
            self.incomplete, self.stop_reason = True, later.stop_reason


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
    part = JudgePartial.start(spec.metrics, samples, kept=kept, counts=[n for n, _ in _COUNTS])
    keys = part.keys
    if not samples:
        return part
    local, renamed = local_ids(samples)
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
    part.incomplete, part.stop_reason = run.incomplete, run.stop_reason
    if run.cache_writes_skipped and cache is not None:
        part.cache_path, part.cache_write_problem = str(cache.path), run.cache_write_problem
    rows = []
    for sample, sid in zip(samples, local, strict=True):
        row = {key: run.scores.get(sid, {}).get(key) for key in keys}
        infos: dict[str, dict[str, Any]] = {}
        for key in keys if kept else ():
            info: dict[str, Any] = {}
            reason = run.reasons.get(sid, {}).get(key)
            if reason:
                info["reason"] = reason
            spread = run.spread.get(sid, {}).get(key)
            if spread:
                info["spread"] = spread
            if info:
                infos[key] = info
        rows.append((sample.id, row, infos))
    part.add_rows(rows)
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
    add_scores(report, judged, n, "the judge scored no sample (each sample's reason is in details)")
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
