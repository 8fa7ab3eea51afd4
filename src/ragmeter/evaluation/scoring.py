"""The one scoring loop of a run: a plan, partial scores that merge, and the report they make.

Every retrieval driver scores through here: :func:`~ragmeter.evaluation.run.evaluate_run`
(a run in memory), :func:`~ragmeter.evaluation.run_file.evaluate_run_file` (a file, query by
query) and :func:`ragmeter.dask.evaluate_run` (partitions on workers). Each builds a
:class:`RunPlan` from the qrels and its checked options, feeds ``(query_id, ranking)``
pairs to :func:`score_pairs` (one or more times: a :class:`RunPartial` per partition,
merged in any order), and turns the result into a report with :func:`finish_report`, which
adds the judged queries no ranking reached and writes the warnings. Every report carries
``judged@k`` at each cut-off (the share of the top ``min(k, n)`` that is judged, computed
by the kernel in the same pass) in ``report.judged``, beside the metrics asked for, and
warns when too few of the top docs are judged; ``judged_only`` scores condensed rankings
(trec_eval ``-J``, see :func:`~ragmeter.evaluation._query.score_condensed`). So the rules of
:mod:`ragmeter.evaluation.retrieval` (which queries count, ids as strings, duplicates, grades,
custom metrics that fail) hold the same way, with the same messages, whatever the source.
When the compiled kernel is built, the usual case (rows kept, built-in metrics) runs in one C
loop (``_ckernel.RunLoop``) that keeps what this loop keeps and hands it every pair it does
not recognise (an int id, a repeated doc, an odd grade ...), so the Python loop stays the one
place where the rules and their messages live.

>>> plan = plan_run({"q1": {"d1": 1}, "q2": {"d2": 1}}, check_options("recall", 1, None, "zero"))
>>> partial = score_pairs([("q1", ["d1", "d3"])], plan)
>>> report = finish_report(partial, plan, WarningLog())
>>> report.metrics, report.missing_queries, report.judged.means
({'recall@1': 0.5}, ['q2'], {'judged@1': 0.5})
"""

from __future__ import annotations

import functools
import itertools
import math
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmeter._gc import paused_gc
from ragmeter.aggregate import BLOCK, Distribution
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation._checks import (
    RunOptions,
    as_ranking,
    check_options,
    id_text,
    judged_cutoff,
    log_read_notes,
    str_keys,
)
from ragmeter.evaluation._judged import judged_share, warn_unjudged
from ragmeter.evaluation._notes import (
    averaging,
    no_ranking_error,
    no_scorable_error,
    note_missing,
    note_unjudged_docs,
)
from ragmeter.evaluation._query import _custom, _score_one, score_condensed, score_ranking
from ragmeter.evaluation._rows import KeptRows, order_keys
from ragmeter.metrics._kernel import (
    c_run_loop,
    c_score_query,
    column_sums,
    doubles,
    kernel_codes,
    positions,
    result_keys,
    score_query,
    zip_dict,
)
from ragmeter.metrics.registry import RetrievalMetric, _Builtin
from ragmeter.report import (
    UNJUDGED_JUDGED_ONLY,
    Conventions,
    DatasetFingerprint,
    RetrievalEvalReport,
    WarningLog,
)

if TYPE_CHECKING:
    from ragmeter.metrics._kernel import RunLoop

__all__ = [
    "JUDGED",
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

JUDGED = "judged"
"""The name of the ``judged@k`` keys every report carries (the kernel's last code)."""

Absent = tuple[int, str, dict[str, float], list[float]]
"""A judged query no ranking reached: qrels position, id, metrics, the kernel's values."""


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
    """The compiled kernel's codes of the built-in metrics, ``judged`` last."""
    keys: list[str]
    """The kernel's result keys, in its order (``ndcg@10``, ..., ``map``, ``judged@1``, ...)."""
    metric_keys: list[str]
    """The first of ``keys``: the metrics asked for (``judged@k`` only if asked for)."""
    judged_keys: list[str]
    """The last of ``keys``: ``judged@k`` at each cut-off."""
    all_keys: list[str]
    """``metric_keys`` then each custom metric at each cut-off: the report's metrics."""
    custom: list[tuple[str, RetrievalMetric]]
    """Registered metrics that are not built in (scored in Python, failures dropped)."""
    keep: bool
    """Keep every query's scores (``report.per_query``) or only mergeable aggregates."""
    judged_at: int = 10
    """The cut-off of :class:`~ragmeter.report.JudgedShare`'s counts and its warning."""
    judged_pos: int = -1
    """Where ``judged@{judged_at}`` sits in ``keys`` (and in the kernel's values)."""

    @property
    def ks(self) -> tuple[int, ...]:
        return self.options.ks

    @property
    def level(self) -> float | None:
        return self.options.level


def plan_run(qrels: Mapping[Any, Any], options: RunOptions, *, keep: bool = True) -> RunPlan:
    """The plan for scoring a run against ``qrels`` (keys made ``str``, checked); the kernel
    adds ``judged@k`` last, whatever the metrics asked for."""
    qrels = str_keys(qrels, "qrels")
    asked = [(n, m) for n, m in options.metrics if n != JUDGED]  # judged@k: always, once
    builtin = [(n, m) for n, m in asked if isinstance(m, _Builtin)]
    custom = [(n, m) for n, m in asked if not isinstance(m, _Builtin)]
    codes = kernel_codes([type(m).name for _, m in builtin] + [JUDGED])
    keys = result_keys([n for n, _ in builtin] + [JUDGED], codes, options.ks)
    judged_keys = keys[-len(options.ks) :]
    metric_keys = keys if len(asked) < len(options.metrics) else keys[: -len(options.ks)]
    judged_at = judged_cutoff(options.ks)
    return RunPlan(
        qrels=qrels,
        index=positions(qrels),
        options=options,
        codes=codes,
        keys=keys,
        metric_keys=metric_keys,
        judged_keys=judged_keys,
        all_keys=metric_keys + [f"{name}@{k}" for name, _ in custom for k in options.ks],
        custom=custom,
        keep=keep,
        judged_at=judged_at,
        judged_pos=keys.index(f"{JUDGED}@{judged_at}"),
    )


@dataclass
class RunPartial:
    """What scoring some rankings of a run leaves; mergeable in any order of partitions."""

    count: int = 0
    """Judged queries with a relevant judgement scored from a ranking."""
    distributions: dict[str, Distribution] = field(default_factory=dict)
    rows: KeptRows | None = None
    """Every scored query's position, id, metrics and kernel values, when they are kept."""
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
    top: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    """At the plan's ``judged_at``: docs in the scored rankings' tops, how many of them are
    unjudged, rankings that hold a doc, rankings with an unjudged doc in their top."""

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
        self.top = [a + b for a, b in zip(self.top, other.top, strict=True)]
        self.examples = [] if self.judged_doc else _prune(self.examples + other.examples)


def merge_partials(*parts: RunPartial) -> RunPartial:
    """Merge partials into a new one (the inputs are left as they were)."""
    first = parts[0]
    merged = RunPartial(
        distributions={key: Distribution() for key in first.distributions},
        rows=None if first.rows is None else KeptRows(first.rows.width),
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
            row = row if row is not None else dict(zip(self.plan.metric_keys, values, strict=False))
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
            for key in self.plan.all_keys[len(self.plan.metric_keys) :]:
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
    The judged share of each ranking's top ``plan.judged_at`` is counted on the way.
    """
    part = RunPartial(
        distributions={} if plan.keep else _distributions(plan),
        rows=KeptRows(len(plan.keys)) if plan.keep else None,
    )
    sink = _Sink(plan, part, writer)  # unused when the rows are kept
    index_of, qrels, keys, custom = plan.index, plan.qrels, plan.metric_keys, plan.custom
    ks, codes, level = plan.ks, plan.codes, plan.level
    rows, run_ids = part.rows, part.run_ids
    ranked_at: list[int] = []
    count = 0
    examples = _EXAMPLES
    judged_doc = False  # part.judged_doc, read once per query
    need_ids = True  # until run_ids holds _EXAMPLES ids
    plain = rows is not None and not custom  # the usual case: rows kept, built-in metrics
    condense = plan.options.judged_only
    loop = _compiled_loop(plan, part, ranked_at) if plain and not condense else None
    if loop is not None:  # it scores and keeps what it can, and hands the rest back
        pairs = _left_to_python(loop, pairs, part)
    if rows is not None:  # four flat lists: no object per query but its metrics dict
        keep_at, keep_id = rows.positions.append, rows.ids.append
        keep_row, keep_values = rows.rows.append, rows.values.extend
    cut, jpos = plan.judged_at, plan.judged_pos
    docs = unjudged = shown = short = 0  # part.top, counted here
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
        top = len(ranked)
        if condense:
            values, ranked, judgements = score_condensed(qid, ranked, judgements, ks, codes, level)
        else:
            try:  # the fast path inline; _score_one handles every exception (ids, grades)
                values = score_query(ranked, judgements, ks, codes, level)
            except Exception:
                values, ranked, judgements = _score_one(qid, ranked, judgements, ks, codes, level)
        if values is None:
            continue
        count += 1
        if top:  # judged@cut = judged / min(cut, n): the unjudged count, exactly
            if top > cut:
                top = cut
            missed = top - round(values[jpos] * top)
            docs += top
            shown += 1
            if missed:
                unjudged += missed
                short += 1
        if not judged_doc and raw:
            _look_for_judged_docs(part, qrels[qid], raw, index)
            judged_doc = part.judged_doc
        if plain:  # zip stops at the metric keys; the judged@k values stay in the flat list
            keep_at(index)
            keep_id(qid)
            keep_row(dict(zip(keys, values, strict=False)))
            keep_values(values)
        elif rows is None and not custom:
            sink.add(qid, values, None)
        else:
            row = dict(zip(keys, values, strict=False))
            if custom:
                _custom(plan, part.failed, qid, index, judgements, ranked, row)
            if rows is not None:
                rows.add(index, qid, row, values)
            else:
                sink.add(qid, values, row)
    sink.flush()
    if loop is not None:
        c_count, c_docs, c_unjudged, c_shown, c_short = loop.counts
        count, docs, unjudged = count + c_count, docs + c_docs, unjudged + c_unjudged
        shown, short = shown + c_shown, short + c_short
    part.count = count
    part.top = [docs, unjudged, shown, short]
    ranked_at.sort()
    if len(set(ranked_at)) != len(ranked_at):  # a query ranked twice (at C speed)
        part.duplicate = next(a for a, b in itertools.pairwise(ranked_at) if a == b)
    part.ranked = ranked_at
    return part


def _compiled_loop(plan: RunPlan, part: RunPartial, ranked_at: list[int]) -> RunLoop | None:
    """The compiled loop (``_ckernel.RunLoop``) that keeps ``part``'s rows as the Python loop
    would, with its values in an ``array('d')``; ``None`` when it is not built, when the
    kernel in use is not the compiled one, or for a relevance level that is not an exact
    ``int`` or ``float`` (a NumPy float: the Python loop hands it to the Python kernel)."""
    rows = part.rows
    if c_run_loop is None or score_query is not c_score_query or rows is None:
        return None  # not built, or the Python kernel chosen (the reference, in tests)
    if type(plan.level) not in (int, float, type(None)):
        return None
    qrels, index = plan.qrels, plan.index
    judgements = list(qrels.values()) if type(qrels) is dict else [qrels[q] for q in index]
    rows.values = array("d")
    return c_run_loop(
        index, judgements, list(plan.ks), plan.codes, plan.level, plan.metric_keys,
        plan.judged_at, plan.judged_pos, _EXAMPLES, part.run_ids, ranked_at, rows.positions,
        rows.ids, rows.rows, rows.values,
    )  # fmt: skip


def _left_to_python(
    loop: RunLoop, pairs: Iterable[tuple[Any, Any]], part: RunPartial
) -> Iterator[tuple[Any, Any]]:
    """The pairs the compiled ``loop`` hands back, in run order: it scores and keeps every
    other pair. While no scored ranking held a judged doc, it hands back every judged query's
    non-empty ranking (the Python loop notes them for the doc-ids message)."""
    it = iter(pairs)
    while (pair := loop.feed(it, not part.judged_doc)) is not None:
        yield pair


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


def _distributions(plan: RunPlan) -> dict[str, Distribution]:
    """An empty distribution per report metric and per ``judged@k``."""
    return {key: Distribution() for key in dict.fromkeys(plan.all_keys + plan.judged_keys)}


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
        with paused_gc():  # no collector walking a million rows (and the run) again and again
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
    if plan.custom:
        names = [name for name, _ in plan.options.metrics if name != JUDGED] + [JUDGED]
        ordered = order_keys(present, names, plan.ks)
    else:
        ordered = present
    n = n_ranked + len(absent)
    per_q: dict[str, dict[str, float]] = {}
    dists: dict[str, Distribution] = {}
    kept = merged.rows
    if kept is not None:
        per_q, means, judged_means = _kept_means(kept, absent, failed, plan, ordered, n)
    else:
        dists = merged.distributions
        cuts = -len(plan.ks)
        full = [
            {**dict(zip(plan.judged_keys, v[cuts:], strict=True)), **row} for *_, row, v in absent
        ]
        for key, dist in dists.items():
            dist.add_trusted([row[key] for row in full if key in row])
        means = {key: dists[key].mean(rule="fsum") for key in ordered}
        judged_means = {key: dists[key].mean(rule="fsum") for key in plan.judged_keys}
        if mode == "skip":
            for key in ordered:
                dists[key].add_missing(len(missing))
        if writer is not None:
            writer.write([(qid, row, None) for _, qid, row, _ in absent])
            writer.drop([k for k in plan.all_keys if k.split("@", 1)[0] in failed])
    kernel_metrics = plan.keys[: -len(plan.ks)]
    all_zero = kernel_metrics and not any(means.get(key) for key in kernel_metrics)
    judged = judged_share(merged.top, plan.judged_at, plan.options, plan.judged_keys)
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
    report = RetrievalEvalReport(
        metrics=means,
        per_query=per_q,
        n_queries=n,
        k_values=plan.ks,
        conventions=Conventions(
            relevance_level=plan.level, ties=ties, averaging=averaging(mode), **unjudged
        ),
        warnings=list(log.entries),
        missing_queries=missing,
        distributions={key: dists[key] for key in ordered} if dists else {},
        judged=judged,
    )
    report.set_dataset_fingerprint(functools.partial(DatasetFingerprint.of_qrels, plan.qrels))
    return report


def _kept_means(
    kept: KeptRows,
    absent: list[Absent],
    failed: set[str],
    plan: RunPlan,
    ordered: list[str],
    n: int,
) -> tuple[dict[str, dict[str, float]], dict[str, float], dict[str, float]]:
    """``report.per_query`` in qrels order (``kept`` and the ``absent`` queries, without the
    custom metrics that ``failed``), each key of ``ordered``'s mean over ``n`` queries and
    each ``judged@k``'s (``math.fsum``: exact, in any order): the kernel's from its flat
    values, a custom metric's from the rows. ``kept`` is consumed."""
    for index, qid, row, values in absent:
        kept.add(index, qid, row, values)
    kept.sort()
    rows = kept.rows
    if failed:
        for row in rows:
            for key in [k for k in row if k.split("@", 1)[0] in failed]:
                del row[key]
    flat = kept.values
    kept.values = packed = flat if isinstance(flat, array) else doubles(flat)
    sums = column_sums(packed, kept.width)
    kernel = dict(zip(plan.keys, [s / n for s in sums], strict=True))
    means = {
        key: kernel[key] if key in kernel else math.fsum(row[key] for row in rows) / n
        for key in ordered
    }
    judged = {key: kernel[key] for key in plan.judged_keys}
    per_q = zip_dict(kept.ids, rows)
    kept.positions, kept.rows = [], []  # the report keeps the ids and values (judged@k)
    return per_q, means, judged


def _missing_queries(merged: RunPartial, plan: RunPlan) -> tuple[list[str], list[Absent]]:
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
