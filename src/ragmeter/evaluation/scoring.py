"""The one scoring loop of a run: a plan, partial scores that merge, and the report they make.

Every retrieval driver scores through here: :func:`~ragmeter.evaluation.run.evaluate_run`
(a run in memory), :func:`~ragmeter.evaluation.run_file.evaluate_run_file` (a file, query by
query) and :func:`ragmeter.dask.evaluate_run` (partitions on workers). Each builds a
:class:`RunPlan` from the qrels and its checked options, feeds ``(query_id, ranking)``
pairs to :func:`score_pairs` (one or more times: a :class:`RunPartial` per partition,
merged in any order), and turns the result into a report with :func:`finish_report`, which
adds the judged queries no ranking reached and writes the warnings. So the rules of
:mod:`ragmeter.evaluation.retrieval` (which queries count, ids as strings, duplicates, grades,
custom metrics that fail) hold the same way, with the same messages, whatever the source.

>>> plan = plan_run({"q1": {"d1": 1}, "q2": {"d2": 1}}, check_options("recall", 1, None, "zero"))
>>> partial = score_pairs([("q1", ["d1", "d3"])], plan)
>>> report = finish_report(partial, plan, WarningLog())
>>> report.metrics, report.missing_queries
({'recall@1': 0.5}, ['q2'])
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from ragmeter._gc import paused_gc
from ragmeter.aggregate import BLOCK, Distribution
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation._checks import (
    RunOptions,
    as_ranking,
    check_options,
    id_text,
    log_read_notes,
    str_keys,
)
from ragmeter.evaluation._notes import (
    averaging,
    no_ranking_error,
    no_scorable_error,
    note_missing,
    note_unjudged_docs,
)
from ragmeter.evaluation._query import _custom, _score_one, score_ranking
from ragmeter.metrics._kernel import kernel_codes, result_keys, score_query
from ragmeter.metrics.registry import RetrievalMetric, _Builtin
from ragmeter.report import Conventions, RetrievalEvalReport, WarningLog

__all__ = [
    "RunOptions",
    "RunPartial",
    "RunPlan",
    "check_options",
    "finish_report",
    "log_read_notes",
    "merge_partials",
    "plan_run",
    "score_pairs",
    "score_ranking",
    "score_run",
]

_EXAMPLES = 4
"""Distinct ids a message shows before its "..." (see :func:`ragmeter.errors.some_ids`)."""


@dataclass
class RunPlan:
    """What scoring a run needs, fixed before the first ranking: qrels, cut-offs, metrics.

    Picklable and sent once to every Dask worker.
    """

    qrels: Mapping[str, Mapping[str, float]]
    """The qrels, keyed by ``str`` ids."""
    index: dict[str, int]
    """Each judged query's position in the qrels (the order of per_query and messages)."""
    options: RunOptions
    codes: list[int]
    """The compiled kernel's codes of the built-in metrics."""
    keys: list[str]
    """The kernel's result keys, in its order (``ndcg@10``, ..., ``map``)."""
    all_keys: list[str]
    """``keys`` then each custom metric at each cut-off."""
    custom: list[tuple[str, RetrievalMetric]]
    """Registered metrics that are not built in (scored in Python, failures dropped)."""
    keep: bool
    """Keep every query's scores (``report.per_query``) or only mergeable aggregates."""

    @property
    def ks(self) -> tuple[int, ...]:
        return self.options.ks

    @property
    def level(self) -> float | None:
        return self.options.level


def plan_run(qrels: Mapping[Any, Any], options: RunOptions, *, keep: bool = True) -> RunPlan:
    """The plan for scoring a run against ``qrels`` (keys made ``str``, checked)."""
    qrels = str_keys(qrels, "qrels")
    builtin = [(n, m) for n, m in options.metrics if isinstance(m, _Builtin)]
    custom = [(n, m) for n, m in options.metrics if not isinstance(m, _Builtin)]
    codes = kernel_codes([type(m).name for _, m in builtin])
    keys = result_keys([n for n, _ in builtin], codes, options.ks)
    return RunPlan(
        qrels=qrels,
        index=dict(zip(qrels, range(len(qrels)), strict=True)),
        options=options,
        codes=codes,
        keys=keys,
        all_keys=keys + [f"{name}@{k}" for name, _ in custom for k in options.ks],
        custom=custom,
        keep=keep,
    )


@dataclass
class RunPartial:
    """What scoring some rankings of a run leaves; mergeable in any order of partitions."""

    count: int = 0
    """Judged queries with a relevant judgement scored from a ranking."""
    distributions: dict[str, Distribution] = field(default_factory=dict)
    rows: list[tuple[int, str, dict[str, float]]] | None = None
    """``(qrels position, query id, scores)`` when per-query scores are kept."""
    ranked: list[int] = field(default_factory=list)
    """Qrels positions of the judged queries that had a ranking (sorted, distinct)."""
    duplicate: int | None = None
    """A qrels position ranked twice (refused when the report is made)."""
    failed: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Custom metric -> (qrels position of its first failure, the warning)."""
    run_ids: list[str] = field(default_factory=list)
    """The first few query ids of the run (judged or not), for a message."""
    judged_doc: bool = False
    """Whether some scored ranking holds a judged doc."""
    retrieved: int = 0
    """How many doc ids the scored rankings hold."""
    examples: list[tuple[int, list[str]]] = field(default_factory=list)
    """The first rankings in qrels order (enough distinct ids for the doc-ids message)."""

    def merge(self, other: RunPartial) -> None:
        """Fold in ``other`` (the rankings of other partitions)."""
        self.count += other.count
        for key, dist in other.distributions.items():
            self.distributions[key].merge(dist)
        if self.rows is not None and other.rows is not None:
            self.rows.extend(other.rows)
        both = sorted(self.ranked + other.ranked)
        if self.duplicate is None:
            self.duplicate = other.duplicate
        if self.duplicate is None:
            self.duplicate = next((a for a, b in itertools.pairwise(both) if a == b), None)
        self.ranked = both
        for name, (index, entry) in other.failed.items():
            if name not in self.failed or index < self.failed[name][0]:
                self.failed[name] = (index, entry)
        for qid in other.run_ids:
            if len(self.run_ids) < _EXAMPLES and qid not in self.run_ids:
                self.run_ids.append(qid)
        self.judged_doc = self.judged_doc or other.judged_doc
        self.retrieved += other.retrieved
        self.examples = [] if self.judged_doc else _prune(self.examples + other.examples)


def merge_partials(*parts: RunPartial) -> RunPartial:
    """Merge partials into a new one (the inputs are left as they were)."""
    first = parts[0]
    merged = RunPartial(
        distributions={key: Distribution() for key in first.distributions},
        rows=None if first.rows is None else [],
    )
    for part in parts:
        merged.merge(part)
    return merged


def _prune(examples: list[tuple[int, list[str]]]) -> list[tuple[int, list[str]]]:
    """The first rankings in qrels order until :data:`_EXAMPLES` distinct ids are seen:
    all a message showing the first distinct ids of every ranking needs."""
    kept: list[tuple[int, list[str]]] = []
    seen: set[str] = set()
    for entry in sorted(examples):
        if len(seen) >= _EXAMPLES:
            break
        kept.append(entry)
        seen.update(entry[1])
    return kept


class _Sink:
    """Where a partial's scores go while it is scored: kept rows, or blocks of values folded
    into the partial's distributions (and written to a per-query file when one is open)."""

    def __init__(self, plan: RunPlan, part: RunPartial, writer: Any) -> None:
        self.plan, self.part, self.writer = plan, part, writer
        self.values: list[list[float]] = []  # kernel values, one list per query
        self.custom: list[dict[str, float]] = []
        self.written: list[tuple[str, dict[str, float], None]] = []

    def add(self, qid: str, values: list[float], row: dict[str, float] | None) -> None:
        self.values.append(values)
        if self.plan.custom:
            self.custom.append(row or {})
        if self.writer is not None:
            row = row if row is not None else dict(zip(self.plan.keys, values, strict=True))
            self.written.append((qid, row, None))
        if len(self.values) >= BLOCK:
            self.flush()

    def flush(self) -> None:
        if self.values:
            import numpy as np

            dists = self.part.distributions
            matrix = np.array(self.values, dtype=np.float64)  # transposed at C speed
            for j, key in enumerate(self.plan.keys):
                dists[key].add_trusted(matrix[:, j].tolist())
            for key in self.plan.all_keys[len(self.plan.keys) :]:
                dists[key].add_trusted([row[key] for row in self.custom if key in row])
        if self.writer is not None and self.written:
            self.writer.write(self.written)
        self.values.clear()
        self.custom.clear()
        self.written.clear()


def score_pairs(
    pairs: Iterable[tuple[Any, Any]], plan: RunPlan, *, writer: Any = None
) -> RunPartial:
    """Score ``(query_id, ranking)`` pairs into a :class:`RunPartial` (rankings of unjudged
    queries are ignored). Without ``plan.keep``, scores go to mergeable distributions and,
    given a per-query ``writer`` (:func:`ragmeter.io.scores.open_score_writer`), to it.
    """
    part = RunPartial(
        distributions={} if plan.keep else {key: Distribution() for key in plan.all_keys},
        rows=[] if plan.keep else None,
    )
    sink = _Sink(plan, part, writer)  # unused when the rows are kept
    index_of, qrels, keys, custom = plan.index, plan.qrels, plan.keys, plan.custom
    ks, codes, level = plan.ks, plan.codes, plan.level
    rows, run_ids = part.rows, part.run_ids
    ranked_at: list[int] = []
    count = 0
    examples = _EXAMPLES
    judged_doc = False  # part.judged_doc, read once per query
    need_ids = True  # until run_ids holds _EXAMPLES ids
    plain = rows is not None and not custom  # the usual case: rows kept, built-in metrics
    for raw_qid, raw in pairs:
        qid = raw_qid if raw_qid.__class__ is str else id_text(raw_qid, "run")
        if need_ids and qid not in run_ids:
            run_ids.append(qid)
            need_ids = len(run_ids) < examples
        index = index_of.get(qid)
        if index is None:
            continue  # a ranking for an unjudged query is ignored
        ranked_at.append(index)
        judgements = qrels[qid]
        ranked = raw if raw.__class__ is list else as_ranking(qid, raw)
        try:  # the fast path inline; _score_one handles every exception (ids, grades)
            values = score_query(ranked, judgements, ks, codes, level)
        except Exception:
            values, ranked, judgements = _score_one(qid, ranked, judgements, ks, codes, level)
        if values is None:
            continue
        count += 1
        if not judged_doc and raw:
            _look_for_judged_docs(part, qrels[qid], raw, index)
            judged_doc = part.judged_doc
        if plain:
            rows.append((index, qid, dict(zip(keys, values, strict=True))))  # type: ignore[union-attr]
        elif rows is None and not custom:
            sink.add(qid, values, None)
        else:
            row = dict(zip(keys, values, strict=True))
            if custom:
                _custom(plan, part.failed, qid, index, judgements, ranked, row)
            if rows is not None:
                rows.append((index, qid, row))
            else:
                sink.add(qid, values, row)
    sink.flush()
    part.count = count
    ranked_at.sort()
    if len(set(ranked_at)) != len(ranked_at):  # a query ranked twice (at C speed)
        part.duplicate = next(a for a, b in itertools.pairwise(ranked_at) if a == b)
    part.ranked = ranked_at
    return part


def _look_for_judged_docs(
    part: RunPartial, judgements: Mapping[str, float], ranked: Sequence[Any], index: int
) -> None:
    """Note whether a scored ranking holds a judged doc (else count it for the message)."""
    ids = [str(d) for d in ranked]
    if any(d in judgements for d in ids):
        part.judged_doc = True
        part.examples = []
    else:
        part.retrieved += len(ids)
        part.examples = _prune([*part.examples, (index, list(dict.fromkeys(ids))[:4])])


def order_keys(
    keys: Sequence[str], resolved: Sequence[tuple[str, RetrievalMetric]], ks: Sequence[int]
) -> list[str]:
    """``keys`` in the order of the metrics asked for, each at its cut-offs then uncut."""
    present = set(keys)
    ordered: list[str] = []
    for name, _ in resolved:
        for k in ks:
            key = f"{name}@{k}"
            if key in present:
                ordered.append(key)
        if name in present:
            ordered.append(name)
    return ordered


def score_run(
    pairs: Iterable[tuple[Any, Any]],
    plan: RunPlan,
    log: WarningLog,
    *,
    ties: str,
    out: Path | None = None,
) -> RetrievalEvalReport:
    """Score a whole run in this process: :func:`score_pairs` then :func:`finish_report`,
    the per-query scores written to ``out`` as they are computed when it is given (the
    file is removed again if scoring fails)."""
    from ragmeter.io.scores import open_score_writer

    writer = open_score_writer(out, plan.all_keys, details=False) if out is not None else None
    try:
        with paused_gc():  # 100k rows: no collector walking them again and again
            partial = score_pairs(pairs, plan, writer=writer)
        report = finish_report(partial, plan, log, ties=ties, writer=writer)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if writer is not None:
        report.extra["per_query_file"] = str(writer.finish())
    elif not plan.keep:
        report.extra["per_query"] = "not kept"
    return report


def finish_report(
    merged: RunPartial,
    plan: RunPlan,
    log: WarningLog,
    *,
    ties: str = "list order",
    writer: Any = None,
) -> RetrievalEvalReport:
    """The report from the merged partial of a whole run: the judged queries no ranking
    reached are added (``missing_queries``), the means taken (``math.fsum`` over the
    queries / their number) and the warnings written to ``log`` and the report."""
    mode = plan.options.mode
    missing, absent = _missing_queries(merged, plan)
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
        note_missing(log, missing, n_ranked, mode)
    failed = set(merged.failed)
    present = [key for key in plan.all_keys if key.split("@", 1)[0] not in failed]
    ordered = order_keys(present, plan.options.metrics, plan.ks) if plan.custom else present
    n = n_ranked + len(absent)
    per_q: dict[str, dict[str, float]] = {}
    dists: dict[str, Distribution] = {}
    if merged.rows is not None:
        per_q = _kept_rows(merged.rows, absent, failed)
        means = _column_means(per_q, ordered, plan, n)
    else:
        dists = merged.distributions
        for key, dist in dists.items():
            dist.add_trusted([row[key] for _, _, row in absent if key in row])
        means = {key: dists[key].mean(rule="fsum") for key in ordered}
        if mode == "skip":
            for key in ordered:
                dists[key].add_missing(len(missing))
        if writer is not None:
            writer.write([(qid, row, None) for _, qid, row in absent])
            writer.drop([k for k in plan.all_keys if k.split("@", 1)[0] in failed])
    all_zero = plan.keys and not any(means.get(key) for key in plan.keys)
    if all_zero and not merged.judged_doc and merged.retrieved:
        shown = [d for _, ids in sorted(merged.examples) for d in ids]
        note_unjudged_docs(log, merged.retrieved, shown)
    return RetrievalEvalReport(
        metrics=means,
        per_query=per_q,
        n_queries=n,
        k_values=plan.ks,
        conventions=Conventions(relevance_level=plan.level, ties=ties, averaging=averaging(mode)),
        warnings=list(log.entries),
        missing_queries=missing,
        distributions={key: dists[key] for key in ordered} if dists else {},
    )


def _missing_queries(
    merged: RunPartial, plan: RunPlan
) -> tuple[list[str], list[tuple[int, str, dict[str, float]]]]:
    """The judged queries no ranking reached, and the rows of those that score 0."""
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
    absent: list[tuple[int, str, dict[str, float]]] = []
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
        row = dict(zip(plan.keys, values, strict=True))
        if plan.custom:
            judgements = str_keys(judgements, f"qrels[{qid!r}]")
            _custom(plan, merged.failed, qid, index, judgements, empty, row)
        absent.append((index, qid, row))
    return missing, absent


def _kept_rows(
    rows: list[tuple[int, str, dict[str, float]]],
    absent: list[tuple[int, str, dict[str, float]]],
    failed: set[str],
) -> dict[str, dict[str, float]]:
    """The per-query rows in qrels order, without the custom metrics that failed."""
    entries = rows + absent if absent else rows
    entries.sort(key=itemgetter(0))
    if not failed:
        return {qid: row for _, qid, row in entries}
    per_q: dict[str, dict[str, float]] = {}
    for _, qid, row in entries:
        for key in [k for k in row if k.split("@", 1)[0] in failed]:
            del row[key]
        per_q[qid] = row
    return per_q


def _column_means(
    per_q: dict[str, dict[str, float]], ordered: list[str], plan: RunPlan, n: int
) -> dict[str, float]:
    """Each key's mean over the kept rows (``math.fsum``: exact, in any order)."""
    if plan.custom:
        return {key: math.fsum(row[key] for row in per_q.values()) / n for key in ordered}
    # every row holds exactly ``keys``, in order: its values are one column entry each
    columns = zip(*(row.values() for row in per_q.values()), strict=True)
    return {key: math.fsum(col) / n for key, col in zip(plan.keys, columns, strict=True)}
