"""One metric over saved runs, oldest first, each run tested against the previous
like-for-like one (``trend``, ``TrendPoint``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ragmeter.errors import InvalidInputError
from ragmeter.registry import Registry, RunRecord
from ragmeter.stats._base import TestName
from ragmeter.stats._compare import compare
from ragmeter.stats._runs import RegistryLike, Report, _on_metric, open_registry, run_label

__all__ = ["TrendPoint", "trend"]


@dataclass(frozen=True)
class TrendPoint:
    """One saved run's mean of a metric, in a :func:`trend`.

    ``ci_low``/``ci_high`` is the run's own confidence interval of the mean, as the
    registry stored it; ``n`` the queries (samples) it averages. ``baseline_id`` is the
    previous comparable run of the same name the point was tested against (``None``:
    none before it),
    ``diff`` its mean minus that run's, ``p_value`` the paired test's. ``regression`` is
    ``True`` when the mean got worse (in the metric's direction) by more than the trend's
    ``max_drop`` and the paired test finds it significant (``p_value < alpha``): the rule
    of :func:`ragmeter.stats.gate`. ``note`` says why a point was not tested against the
    run just before it (not like for like, and what differs).
    """

    run_id: str
    name: str
    created: datetime
    mean: float
    ci_low: float | None
    ci_high: float | None
    n: int
    git_commit: str | None = None
    pinned: bool = False
    regression: bool = False
    baseline_id: str | None = None
    diff: float | None = None
    p_value: float | None = None
    note: str | None = None

    @property
    def ci(self) -> tuple[float, float] | None:
        """``(ci_low, ci_high)``, or ``None`` when the run has no interval."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return self.ci_low, self.ci_high

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready; ``created`` in ISO 8601, UTC)."""
        return {
            "run_id": self.run_id,
            "name": self.name,
            "created": self.created.isoformat(),
            "mean": _finite(self.mean),
            "ci_low": _finite(self.ci_low),
            "ci_high": _finite(self.ci_high),
            "n": self.n,
            "git_commit": self.git_commit,
            "pinned": self.pinned,
            "regression": self.regression,
            "baseline_id": self.baseline_id,
            "diff": _finite(self.diff),
            "p_value": _finite(self.p_value),
            "note": self.note,
        }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _with_metric(records: list[RunRecord], metric: str) -> list[RunRecord]:
    kept = [r for r in records if metric in r.metrics]
    if records and not kept:
        have = sorted({k for r in records for k in r.metrics})
        raise InvalidInputError(
            f"no saved run has the metric {metric!r}; the runs have: "
            f"{', '.join(have[:20]) or 'none'}{', ...' if len(have) > 20 else ''}"
        )
    return kept


def trend(
    registry: RegistryLike,
    metric: str,
    *,
    name: str | None = None,
    tag: str | None = None,
    max_drop: float = 0.0,
    alpha: float = 0.05,
    test: TestName = "randomization",
    n: int = 10_000,
    seed: int | None = 0,
) -> list[TrendPoint]:
    """``metric`` over the saved runs, oldest first, each tested against the run before it.

    The runs are the registry's (only those named ``name`` or tagged ``tag``, when given)
    that have ``metric``. Each point is paired, query by query, with the nearest earlier
    run *of the same name* it is like for like with (same dataset and config
    fingerprints; runs of other names are other systems, not an earlier state of this
    one); a significant drop by more than ``max_drop`` marks it a ``regression`` (see
    :class:`TrendPoint`). A run that is like for like with no earlier run of its name
    starts a new series and is not tested; its ``note`` says what differs from the run of
    its name before it.
    """
    if not isinstance(metric, str) or not metric:
        raise InvalidInputError(f"metric must be a metric key such as 'ndcg@10', got {metric!r}")
    reg = open_registry(registry)
    records = _with_metric(list(reversed(reg.runs(name=name, tag=tag))), metric)
    loaded: dict[str, Report] = {}

    def report_of(record: RunRecord) -> Report:
        if record.id not in loaded:
            loaded[record.id] = reg.load_report(record)
        return loaded[record.id]

    points: list[TrendPoint] = []
    for i, record in enumerate(records):
        row = record.metrics[metric]
        point = TrendPoint(
            run_id=record.id,
            name=record.name,
            created=record.created,
            mean=row.mean,
            ci_low=row.ci_low,
            ci_high=row.ci_high,
            n=row.n,
            git_commit=record.git_commit,
            pinned=record.pinned,
        )
        same_name = [r for r in records[:i] if r.name == record.name]
        before, note = _previous_comparable(reg, same_name, record, metric)
        if before is not None:
            result = compare(
                report_of(before),
                report_of(record),
                metric=metric,
                test=test,
                n=n,
                seed=seed,
                alpha=alpha,
                label_a=run_label(before),
                label_b=run_label(record),
            )
            drop = -result.mean_diff if result.higher_is_better else result.mean_diff
            point = replace(
                point,
                regression=drop > max_drop and result.significant,
                baseline_id=before.id,
                diff=result.mean_diff,
                p_value=result.p_value,
            )
        points.append(replace(point, note=note))
    return points


def _previous_comparable(
    reg: Registry, earlier: list[RunRecord], record: RunRecord, metric: str
) -> tuple[RunRecord | None, str | None]:
    """The nearest earlier run like for like with ``record``, and a note when that is not
    the run just before it."""
    note: str | None = None
    for j, candidate in enumerate(reversed(earlier)):
        verdict = _on_metric(reg.comparability(candidate, record), candidate, record, metric)
        if verdict.comparable:
            return candidate, note
        if j == 0:
            note = (
                f"not like for like with the run before it, {run_label(candidate)}: "
                f"{'; '.join(verdict.reasons)}"
            )
    if earlier:
        note = (note or "") + "; no earlier run is like for like, so it is not tested"
    return None, note
