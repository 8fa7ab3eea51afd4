"""A run's report from its merged partial: the queries no ranking reached, means, warnings.

The pieces of :func:`~ragmeter.evaluation.scoring.finish_report` that do not touch the
compiled kernel: which judged queries no ranking reached (and their rows of zeros), which
metrics the report keeps (a custom metric that failed is dropped, with its warning), the
means of a run whose rows were not kept (from its mergeable distributions), and the report
itself with its ``judged@k`` share and the warnings about unjudged docs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ragmeter.aggregate import Distribution
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation._checks import str_keys
from ragmeter.evaluation._judged import judged_share, warn_unjudged
from ragmeter.evaluation._notes import (
    averaging,
    no_ranking_error,
    no_scorable_error,
    note_missing,
    note_unjudged_docs,
)
from ragmeter.evaluation._partial import JUDGED, RunPartial, RunPlan
from ragmeter.evaluation._query import _custom, score_ranking
from ragmeter.evaluation._rows import order_keys
from ragmeter.report import (
    UNJUDGED_JUDGED_ONLY,
    ColumnRows,
    Conventions,
    DatasetFingerprint,
    RetrievalEvalReport,
    WarningLog,
)

__all__ = ["Absent", "make_report", "missing_queries", "report_keys", "streamed_means"]

Absent = tuple[int, str, dict[str, float], list[float]]
"""A judged query no ranking reached: qrels position, id, metrics, the kernel's values."""


def missing_queries(merged: RunPartial, plan: RunPlan) -> tuple[list[str], list[Absent]]:
    """The judged queries no ranking reached, and the rows of those that score 0: their
    position, id, metrics and kernel values."""
    qids = list(plan.qrels)
    if merged.duplicate is not None:
        raise InvalidInputError(
            f"query {qids[merged.duplicate]!r} has more than one ranking in the run (two "
            "items, rows or files rank it); a run ranks each query once: keep one"
        )
    if len(merged.ranked) == len(qids):
        return [], []
    ranked = set(merged.ranked)
    missing: list[str] = []
    absent: list[Absent] = []
    for index, qid in enumerate(qids):
        if index in ranked:
            continue
        judgements = plan.qrels[qid]
        empty: list[str] = []
        values = score_ranking(qid, empty, judgements, plan.ks, plan.codes, plan.level)
        if values is None:
            continue
        missing.append(qid)
        if plan.options.mode == "skip":
            continue
        row = dict(zip(plan.metric_keys, values, strict=False))
        if plan.custom:
            judgements = str_keys(judgements, f"qrels[{qid!r}]")
            _custom(plan, merged.failed, qid, index, judgements, empty, row)
        absent.append((index, qid, row, values))
    return missing, absent


def report_keys(
    merged: RunPartial, plan: RunPlan, log: WarningLog, missing: list[str]
) -> tuple[list[str], set[str]]:
    """The report's metric keys in their order, and the custom metrics that failed (their
    keys dropped); an error when no query could be scored. The warnings of the failed
    metrics (in qrels then metric order) and of the missing queries go to ``log``."""
    n_ranked = merged.count
    if not n_ranked and not missing:
        raise no_scorable_error(plan.level)
    if not n_ranked:
        raise no_ranking_error(missing, merged.run_ids)
    position = {name: i for i, (name, _) in enumerate(plan.custom)}
    for _, (_, entry) in sorted(
        merged.failed.items(), key=lambda item: (item[1][0], position[item[0]])
    ):
        log.entries.append(entry)
    if missing:
        note_missing(log, missing, n_ranked, plan.options.mode)
    failed = set(merged.failed)
    present = [key for key in plan.all_keys if key.split("@", 1)[0] not in failed]
    if not plan.custom:
        return present, failed
    names = [name for name, _ in plan.options.metrics if name != JUDGED] + [JUDGED]
    return order_keys(present, names, plan.ks), failed


def streamed_means(
    merged: RunPartial,
    plan: RunPlan,
    absent: list[Absent],
    n_missing: int,
    ordered: list[str],
    failed: set[str],
    writer: Any,
) -> tuple[dict[str, float], dict[str, float], dict[str, Distribution]]:
    """Each key of ``ordered``'s mean and each ``judged@k``'s, from the merged distributions
    of a run whose rows were not kept (the ``absent`` queries added, ``math.fsum``), and the
    distributions; the absent queries' rows go to the per-query ``writer`` when one is open,
    and the failed metrics' columns are dropped from it."""
    dists = merged.distributions
    cuts = -len(plan.ks)
    full = [{**dict(zip(plan.judged_keys, v[cuts:], strict=True)), **row} for *_, row, v in absent]
    for key, dist in dists.items():
        dist.add_trusted([row[key] for row in full if key in row])
    means = {key: dists[key].mean(rule="fsum") for key in ordered}
    judged_means = {key: dists[key].mean(rule="fsum") for key in plan.judged_keys}
    if plan.options.mode == "skip":
        for key in ordered:
            dists[key].add_missing(n_missing)
    if writer is not None:
        writer.write([(qid, row, None) for _, qid, row, _ in absent])
        writer.drop([k for k in plan.all_keys if k.split("@", 1)[0] in failed])
    return means, judged_means, dists


def make_report(
    merged: RunPartial,
    plan: RunPlan,
    log: WarningLog,
    means: dict[str, float],
    judged_means: dict[str, float],
    *,
    per_query: Mapping[str, dict[str, float]],
    distributions: dict[str, Distribution],
    missing: list[str],
    n: int,
    ties: str,
) -> RetrievalEvalReport:
    """The report of ``n`` queries with its ``judged@k`` share (the per-query values from
    the kept rows, when they are kept) and the warning about unjudged docs: that no scored
    ranking holds a judged doc when every metric is 0, else that too few of the top docs are
    judged. ``merged.rows`` are kept rows already consumed (ids and judged@k values left)."""
    kernel_metrics = plan.keys[: -len(plan.ks)]
    all_zero = kernel_metrics and not any(means.get(key) for key in kernel_metrics)
    judged = judged_share(merged.top, plan.judged_at, plan.options, plan.judged_keys)
    kept = merged.rows
    if kept is not None:
        judged.set_rows(kept.ids, kept.columns(kept.width - len(plan.ks), kept.width), n)
    else:
        judged.set_rows([], [], n)
    judged.set_means(judged_means)
    if all_zero and not merged.judged_doc and merged.retrieved:
        shown = [d for _, ids in sorted(merged.examples) for d in ids]
        note_unjudged_docs(log, merged.retrieved, shown)
    else:
        warn_unjudged(log, judged, plan.qrels, plan.level)
    unjudged = {"unjudged": UNJUDGED_JUDGED_ONLY} if plan.options.judged_only else {}
    mode = plan.options.mode
    report = RetrievalEvalReport(
        metrics=means,
        per_query=per_query if isinstance(per_query, dict) else {},
        n_queries=n,
        k_values=plan.ks,
        conventions=Conventions(
            relevance_level=plan.level, ties=ties, averaging=averaging(mode), **unjudged
        ),
        warnings=list(log.entries),
        missing_queries=missing,
        distributions=distributions,
        judged=judged,
    )
    if isinstance(per_query, ColumnRows):
        report.defer_per_query(per_query)
    report.set_dataset_fingerprint(functools.partial(DatasetFingerprint.of_qrels, plan.qrels))
    return report
