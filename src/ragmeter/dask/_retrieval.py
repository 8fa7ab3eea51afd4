"""``ragmeter.dask.evaluate_run``: :func:`ragmeter.evaluate_run` over the partitions of a run.

The qrels (small next to a run) go to every worker once, as one task of the graph. Each
partition of the run (a bag of ``(query_id, ranking)`` pairs, a dataframe, or one TREC run
file) is scored by one task into a :class:`~ragmeter.evaluation.scoring.RunPartial` (the
scoring loop every driver shares, :mod:`ragmeter.evaluation.scoring`): per-key
:class:`~ragmeter.aggregate.Distribution` aggregates (or the per-query rows, kept), the
judged queries it ranked, and what the warnings need. Partials merge in a tree; the
client adds the judged queries no partition ranked (``missing_queries``) and finishes the
report with the same rules, messages and ``math.fsum`` means as :func:`ragmeter.evaluate_run`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask

from ragmeter._gc import paused_gc
from ragmeter._types import DEFAULT_K_VALUES, MissingQueries
from ragmeter.dask._collections import (
    active_client,
    check_not_strings,
    compute,
    is_bag,
    is_dataframe,
    merge_tree,
    one_task,
    partitions,
    task_prefix,
)
from ragmeter.errors import InvalidInputError, RagmeterError
from ragmeter.evaluation.retrieval import JUDGED_THRESHOLD
from ragmeter.evaluation.scoring import (
    RunPartial,
    RunPlan,
    check_options,
    finish_report,
    log_read_notes,
    merge_partials,
    plan_run,
    score_pairs,
)
from ragmeter.metrics.registry import BUILTIN_METRICS
from ragmeter.report import RetrievalEvalReport, WarningLog

__all__ = ["RunPartial", "evaluate_run"]


@dataclass
class _Spec:
    """What every partition task needs (one task of the graph, sent once)."""

    plan: RunPlan
    form: str
    """How a partition holds its rankings: pairs, ranked, scored (dataframes) or files."""


def _pair(item: Any) -> tuple[Any, Any]:
    if isinstance(item, (str, bytes, Mapping)) or not isinstance(item, Sequence) or len(item) != 2:
        raise InvalidInputError(
            "each item of the run bag must be a (query_id, ranking) pair, ranking = doc ids "
            f"best first; got {type(item).__name__} {item!r:.80}"
        )
    return item[0], item[1]


def _pairs(part: Any, form: str) -> Iterator[tuple[Any, Any]]:
    """A partition's rankings, whatever the run's form."""
    if form == "files":
        from ragmeter.io.trec import read_trec_run

        yield from read_trec_run(part).items()
    elif form == "scored":
        import pyarrow as pa

        from ragmeter.io.arrow import run_from_arrow

        table = pa.Table.from_pandas(part[["query_id", "doc_id", "score"]], preserve_index=False)
        yield from run_from_arrow(table).items()
    elif form == "ranked":
        for qid, ranking in zip(part["query_id"], part["ranking"], strict=True):
            yield qid, ranking.tolist() if hasattr(ranking, "tolist") else ranking
    else:
        for item in part:
            yield _pair(item)


def _score_part(part: Any, spec: _Spec, number: int) -> RunPartial:
    """One partition's partial (the task)."""
    try:
        with paused_gc():  # as evaluate_run: many small objects, no cycles
            return score_pairs(_pairs(part, spec.form), spec.plan)
    except RagmeterError as exc:
        if hasattr(exc, "add_note"):
            exc.add_note(f"(in partition {number} of the run)")
        raise


def _form(run: Any) -> tuple[list[Any], str, str]:
    """``(partitions, form, ties)`` of a run given as a bag, a dataframe or TREC files."""
    from ragmeter.io.trec import TREC_ORDERING

    if is_bag(run):
        return partitions(run, "evaluate_run run"), "pairs", "list order"
    if is_dataframe(run):
        columns = set(run.columns)
        if {"query_id", "ranking"} <= columns:
            check_not_strings(run, ["ranking"], "run")
            return partitions(run, "evaluate_run run"), "ranked", "list order"
        if {"query_id", "doc_id", "score"} <= columns:
            return partitions(run, "evaluate_run run"), "scored", TREC_ORDERING
        raise InvalidInputError(
            "a run dataframe needs the columns query_id and ranking (doc ids, best first) or "
            f"query_id, doc_id and score (one row per doc, TREC style); it has {sorted(columns)}"
        )
    files = isinstance(run, (list, tuple)) and bool(run)
    if files and all(isinstance(p, (str, os.PathLike)) for p in run):
        return [os.fspath(p) for p in run], "files", TREC_ORDERING
    raise InvalidInputError(
        "run must be a dask.bag.Bag of (query_id, ranking) pairs, a dask.dataframe.DataFrame "
        "(query_id + ranking, or query_id + doc_id + score), or a list of TREC run files; "
        f"got {type(run).__name__}. For a run in memory use ragmeter.evaluate_run"
    )


def evaluate_run(
    qrels: Mapping[str, Mapping[str, float]],
    run: Any,
    *,
    k_values: Iterable[int] | int = DEFAULT_K_VALUES,
    metrics: Iterable[str] | str = BUILTIN_METRICS,
    relevance_level: float | None = None,
    missing_queries: MissingQueries = "zero",
    warnings: WarningLog | None = None,
    per_query: bool = True,
    judged_only: bool = False,
    judged_threshold: float = JUDGED_THRESHOLD,
    client: Any = None,
    split_every: int = 8,
) -> RetrievalEvalReport:
    """:func:`ragmeter.evaluate_run` over the partitions of a run, on Dask.

    ``qrels`` is ``{query_id: {doc_id: grade}}`` in memory (sent once to every worker).
    ``run`` is one of:

    * a ``dask.bag.Bag`` of ``(query_id, ranking)`` pairs, ranking = doc ids best first
      (ties: list order);
    * a ``dask.dataframe.DataFrame`` with columns ``query_id`` and ``ranking`` (lists, list
      order), or ``query_id``, ``doc_id`` and ``score`` (one row per doc, each query ranked
      as :func:`ragmeter.read_trec_run` ranks a file: score descending, ties by doc id
      descending); every row of a query must be in one partition (e.g.
      ``df.shuffle("query_id")``);
    * a list of TREC run files, one partition each (read on the workers with
      :func:`ragmeter.read_trec_run`; each query's lines in one file).

    Options, rules, warnings and errors are :func:`ragmeter.evaluate_run`'s; the means are
    the same floats (``math.fsum`` over the queries / their number) whatever the
    partitioning. A judged query ranked in two places is refused. ``per_query=True`` (the
    default, as everywhere) gathers every query's scores to the client
    (``report.per_query`` in qrels order, exact summaries); ``per_query=False`` keeps none,
    for runs whose per-query rows would not fit the client: ``summaries`` then come from
    the merged :class:`~ragmeter.aggregate.Distribution` aggregates
    (``report.distributions``; count, missing, mean, std, min and max exact; median and
    percentiles exact up to 2,048 distinct values, else within a relative error of 0.001).
    ``client`` and ``split_every`` are as in :func:`ragmeter.dask.evaluate_rag`.
    """
    options = check_options(
        metrics,
        k_values,
        relevance_level,
        missing_queries,
        judged_only=judged_only,
        judged_threshold=judged_threshold,
    )
    if per_query is not True and per_query is not False:
        raise InvalidInputError(
            f"per_query must be True or False under Dask, got {per_query!r:.80}"
        )
    parts, form, ties = _form(run)
    log = warnings if warnings is not None else WarningLog()
    log_read_notes(log, qrels)
    plan = plan_run(qrels, options, keep=per_query)
    plan.qrels = dict(plan.qrels)
    prefix = task_prefix("run")
    shared = one_task(_Spec(plan, form), prefix)
    tasks = [
        dask.delayed(_score_part, pure=False)(part, shared, i, dask_key_name=f"{prefix}-part-{i}")
        for i, part in enumerate(parts)
    ]
    root = merge_tree(tasks, merge_partials, split_every=split_every, prefix=prefix)
    merged: RunPartial = compute(root, active_client(client))
    report = finish_report(merged, plan, log, ties=ties)
    if not per_query:
        report.extra["per_query"] = "not kept"
    return report
