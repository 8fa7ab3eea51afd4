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

Everything here touches the compiled kernel (its codes, the loops, its column sums); the
plan and the partials it fills are in :mod:`ragmeter.evaluation._partial`, the kernel-free
parts of the report (missing queries, kept keys, streamed means, warnings) in
:mod:`ragmeter.evaluation._finish`. Every name is imported from here.

>>> plan = plan_run({"q1": {"d1": 1}, "q2": {"d2": 1}}, check_options("recall", 1, None, "zero"))
>>> partial = score_pairs([("q1", ["d1", "d3"])], plan)
>>> report = finish_report(partial, plan, WarningLog())
>>> report.metrics, report.missing_queries, report.judged.means
({'recall@1': 0.5}, ['q2'], {'judged@1': 0.5})
"""

from __future__ import annotations

import itertools
import math
import operator
from array import array
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmeter._gc import paused_gc
from ragmeter.aggregate import Distribution
from ragmeter.evaluation._checks import (
    RunOptions,
    as_ranking,
    check_options,
    id_text,
    judged_cutoff,
    log_read_notes,
    str_keys,
)
from ragmeter.evaluation._finish import (
    Absent,
    make_report,
    missing_queries,
    report_keys,
    streamed_means,
)
from ragmeter.evaluation._partial import (
    _EXAMPLES,
    JUDGED,
    RunPartial,
    RunPlan,
    _look_for_judged_docs,
    _Sink,
    merge_partials,
)
from ragmeter.evaluation._partial import (  # re-exported: the column drivers import them here
    _distributions as _distributions,
)
from ragmeter.evaluation._partial import _prune as _prune
from ragmeter.evaluation._query import _custom, _score_one, score_condensed, score_ranking
from ragmeter.evaluation._rows import KeptRows
from ragmeter.metrics._kernel import (
    c_rows_dict,
    c_run_loop,
    c_score_query,
    column_sums,
    doubles,
    kernel_codes,
    positions,
    result_keys,
    score_query,
    str_positions,
    zip_dict,
)
from ragmeter.metrics.registry import _Builtin
from ragmeter.report import RetrievalEvalReport, WarningLog

if TYPE_CHECKING:
    from ragmeter.io.scores import ScoreWriter
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
    "output_noted",
    "plan_run",
    "score_pairs",
    "score_ranking",
    "score_run",
]


def plan_run(qrels: Mapping[Any, Any], options: RunOptions, *, keep: bool = True) -> RunPlan:
    """The plan for scoring a run against ``qrels`` (keys made ``str``, checked); the kernel
    adds ``judged@k`` last, whatever the metrics asked for."""
    index = str_positions(qrels)  # the usual dict of str ids: checked while indexed
    if index is None:
        qrels = str_keys(qrels, "qrels")
        index = positions(qrels)
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
        index=index,
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
        rows=plan.kept_rows() if plan.keep else None,
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
    if rows is not None:  # flat lists and an array: no object per query (rows.keys)
        keep_at, keep_id = rows.positions.append, rows.ids.append
        keep_values = rows.values.extend
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
        if plain:  # the row is the first values: the report reads it from the flat list
            keep_at(index)
            keep_id(qid)
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
    return _closed(part, loop, ranked_at, [count, docs, unjudged, shown, short])


def _closed(
    part: RunPartial, loop: RunLoop | None, ranked_at: list[int], counts: list[int]
) -> RunPartial:
    """``part`` once its pairs are scored: the loop's ``counts`` (scored queries, then
    ``part.top``'s four) with the compiled ``loop``'s added, and the qrels positions it
    ranked, sorted (a position ranked twice is noted in ``part.duplicate``)."""
    if loop is not None:
        counts = [a + b for a, b in zip(counts, loop.counts, strict=True)]
    part.count = counts[0]
    part.top = counts[1:]
    ranked_at.sort()
    # a query ranked twice: two equal neighbours once sorted (one sequential pass at C
    # speed; a set of a million positions would scatter over memory)
    if any(map(operator.eq, ranked_at, itertools.islice(ranked_at, 1, None))):
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
        index, judgements, list(plan.ks), plan.codes, plan.level, plan.judged_at,
        plan.judged_pos, _EXAMPLES, part.run_ids, ranked_at, rows.positions, rows.ids,
        rows.values,
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
    from ragmeter.io.scores import open_score_writer, removed_on_error

    writer = open_score_writer(out, plan.all_keys, details=False) if out is not None else None
    # no collector walking a million rows (and the run) again and again
    with removed_on_error(writer), paused_gc():
        partial = score_pairs(pairs, plan, writer=writer)
        report = finish_report(partial, plan, log, ties=ties, writer=writer)
    return output_noted(report, writer, plan)


def output_noted(
    report: RetrievalEvalReport, writer: ScoreWriter | None, plan: RunPlan
) -> RetrievalEvalReport:
    """``report`` with where its per-query scores went in ``extra``: the finished file's path
    (``per_query_file``, the writer finished here), or ``per_query: "not kept"``."""
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
    missing, absent = missing_queries(merged, plan)
    ordered, failed = report_keys(merged, plan, log, missing)
    n = merged.count + len(absent)
    per_q: Mapping[str, dict[str, float]] = {}
    dists: dict[str, Distribution] = {}
    kept = merged.rows
    if kept is not None:
        per_q, means, judged_means = _kept_means(kept, absent, failed, plan, ordered, n)
    else:
        means, judged_means, dists = streamed_means(
            merged, plan, absent, len(missing), ordered, failed, writer
        )
    return make_report(
        merged,
        plan,
        log,
        means,
        judged_means,
        per_query=per_q,
        distributions={key: dists[key] for key in ordered} if dists else {},
        missing=missing,
        n=n,
        ties=ties,
    )


def _kept_means(
    kept: KeptRows,
    absent: list[Absent],
    failed: set[str],
    plan: RunPlan,
    ordered: list[str],
    n: int,
) -> tuple[Mapping[str, dict[str, float]], dict[str, float], dict[str, float]]:
    """``report.per_query`` in qrels order (``kept`` and the ``absent`` queries, without the
    custom metrics that ``failed``; read from the flat values, a
    :class:`~ragmeter.report.ColumnRows`, when there are only built-in metrics), each key of
    ``ordered``'s mean over ``n`` queries and each ``judged@k``'s (``math.fsum``: exact, in
    any order): the kernel's from its flat values, a custom metric's from the rows. ``kept``
    is consumed."""
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
    per_q = kept.column_rows(c_rows_dict) if kept.keys is not None else zip_dict(kept.ids, rows)
    kept.positions, kept.rows = [], []  # the report keeps the ids and values
    return per_q, means, judged
