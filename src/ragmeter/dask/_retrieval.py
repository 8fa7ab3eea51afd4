"""``ragmeter.dask.evaluate_run``: :func:`ragmeter.evaluate_run` over the partitions of a run.

The qrels (small next to a run) go to every worker once, as one task of the graph. Each
partition of the run (a bag of ``(query_id, ranking)`` pairs, a dataframe, or one TREC run
file) is scored by one task into a :class:`RunPartial`: per-key
:class:`~ragmeter.aggregate.Distribution` aggregates (or the per-query rows, kept), the
judged queries it ranked, and what the warnings need. Partials merge in a tree; the
client adds the judged queries no partition ranked (``missing_queries``) and finishes the
report with the same rules, messages and ``math.fsum`` means as :func:`ragmeter.evaluate_run`.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dask

from ragmeter._gc import paused_gc
from ragmeter.aggregate import BLOCK, Distribution
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
from ragmeter.evaluation.retrieval import (
    DEFAULT_K_VALUES,
    MissingQueries,
    _as_ranking,
    _averaging,
    _check_ks,
    _check_level,
    _check_missing,
    _id_text,
    _no_ranking_error,
    _no_scorable_error,
    _note_missing,
    _note_unjudged_docs,
    _order_keys,
    _resolve_metrics,
    _score_custom,
    _score_one,
    _str_keys,
)
from ragmeter.metrics._kernel import kernel_codes, result_keys, score_query
from ragmeter.metrics.registry import BUILTIN_METRICS, RetrievalMetric, _Builtin
from ragmeter.report import Conventions, RetrievalEvalReport, WarningLog

__all__ = ["RunPartial", "evaluate_run"]

_EXAMPLES = 4
"""Distinct ids a message shows before its "..." (see :func:`ragmeter.errors.some_ids`)."""


@dataclass
class _Spec:
    """What every partition task needs (one task of the graph, sent once)."""

    qrels: Mapping[str, Mapping[str, float]]
    index: dict[str, int]
    """Each judged query's position in the qrels (the order of per_query and messages)."""
    ks: tuple[int, ...]
    codes: list[int]
    keys: list[str]
    all_keys: list[str]
    custom: list[tuple[str, RetrievalMetric]]
    level: float | None
    keep: bool
    form: str


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


def _custom(
    spec: _Spec,
    failed: dict[str, tuple[int, str]],
    qid: str,
    index: int,
    judgements: Mapping[str, float],
    ranked: Sequence[str],
    row: dict[str, float],
) -> None:
    """evaluate_run's custom metrics on one query, every metric tried (the first failure in
    qrels order is the one reported, wherever the query sits in the run)."""
    fails: set[str] = set()
    log = WarningLog()
    _score_custom(spec.custom, fails, log, qid, judgements, ranked, spec.ks, row)
    names = [name for name, _ in spec.custom if name in fails]
    for name, entry in zip(names, log.entries, strict=True):
        if name not in failed or index < failed[name][0]:
            failed[name] = (index, entry)


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
            return _score_pairs(_pairs(part, spec.form), spec)
    except RagmeterError as exc:
        if hasattr(exc, "add_note"):
            exc.add_note(f"(in partition {number} of the run)")
        raise


def _score_pairs(pairs: Iterable[tuple[Any, Any]], spec: _Spec) -> RunPartial:
    part = RunPartial(
        distributions={} if spec.keep else {key: Distribution() for key in spec.all_keys},
        rows=[] if spec.keep else None,
    )
    pending: list[list[float]] = []  # kernel values, one list per query (spec.keys' order)
    pending_custom: list[dict[str, float]] = []
    custom_keys = spec.all_keys[len(spec.keys) :]

    def flush() -> None:
        if pending:
            import numpy as np

            dists = part.distributions
            matrix = np.array(pending, dtype=np.float64)  # transposed at C speed
            for j, key in enumerate(spec.keys):
                dists[key].add_trusted(matrix[:, j].tolist())
            for key in custom_keys:
                dists[key].add_trusted([row[key] for row in pending_custom if key in row])
        pending.clear()
        pending_custom.clear()

    index_of, qrels, ks, codes, level = spec.index, spec.qrels, spec.ks, spec.codes, spec.level
    keep = part.rows is not None
    ranked_at: list[int] = []
    for raw_qid, raw in pairs:
        qid = raw_qid if raw_qid.__class__ is str else _id_text(raw_qid, "run")
        if len(part.run_ids) < _EXAMPLES and qid not in part.run_ids:
            part.run_ids.append(qid)
        index = index_of.get(qid)
        if index is None:
            continue  # a ranking for an unjudged query is ignored
        ranked_at.append(index)
        judgements = qrels[qid]
        ranked = raw if raw.__class__ is list else _as_ranking(qid, raw)
        original = ranked
        try:
            values = score_query(ranked, judgements, ks, codes, level)
        except Exception:
            values, ranked, judgements = _score_one(qid, ranked, judgements, ks, codes, level)
        if values is None:
            continue
        part.count += 1
        if not part.judged_doc and original:
            ids = [str(d) for d in original]
            if any(d in qrels[qid] for d in ids):
                part.judged_doc = True
                part.examples = []
            else:
                part.retrieved += len(ids)
                part.examples = _prune([*part.examples, (index, list(dict.fromkeys(ids))[:4])])
        if keep or spec.custom:
            row = dict(zip(spec.keys, values, strict=True))
            if spec.custom:
                _custom(spec, part.failed, qid, index, judgements, ranked, row)
            if keep:
                part.rows.append((index, qid, row))  # type: ignore[union-attr]
                continue
            pending_custom.append(row)
        pending.append(values)
        if len(pending) >= BLOCK:
            flush()
    flush()
    ranked_at.sort()
    part.duplicate = next((a for a, b in itertools.pairwise(ranked_at) if a == b), None)
    part.ranked = ranked_at
    return part


def _merge(*parts: RunPartial) -> RunPartial:
    """Merge partials into a new one (a task never changes its inputs)."""
    first = parts[0]
    merged = RunPartial(
        distributions={key: Distribution() for key in first.distributions},
        rows=None if first.rows is None else [],
    )
    for part in parts:
        merged.merge(part)
    return merged


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
    per_query: bool = False,
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
    partitioning. A judged query ranked in two places is refused. ``per_query=False`` (the
    default) keeps no per-query scores: ``summaries`` come from the merged
    :class:`~ragmeter.aggregate.Distribution` aggregates (``report.distributions``; count,
    missing, mean, std, min and max exact; median and percentiles exact up to 2,048
    distinct values, else within a relative error of 0.001); ``per_query=True`` gathers
    them to the client (``report.per_query`` in qrels order, exact summaries).
    ``client`` and ``split_every`` are as in :func:`ragmeter.dask.evaluate_rag`.
    """
    resolved = _resolve_metrics(metrics)
    ks = _check_ks(k_values)
    level = _check_level(relevance_level)
    mode = _check_missing(missing_queries)
    if per_query is not True and per_query is not False:
        raise InvalidInputError(
            f"per_query must be True or False under Dask, got {per_query!r:.80}"
        )
    parts, form, ties = _form(run)
    log = warnings if warnings is not None else WarningLog()
    for note in getattr(qrels, "warnings", None) or ():
        log.add("read", str(getattr(qrels, "source", None) or "input"), str(note))
    qrels = _str_keys(qrels, "qrels")
    builtin = [(n, m) for n, m in resolved if isinstance(m, _Builtin)]
    custom = [(n, m) for n, m in resolved if not isinstance(m, _Builtin)]
    codes = kernel_codes([type(m).name for _, m in builtin])
    keys = result_keys([n for n, _ in builtin], codes, ks)
    all_keys = keys + [f"{name}@{k}" for name, _ in custom for k in ks]
    spec = _Spec(
        qrels=dict(qrels),
        index={qid: i for i, qid in enumerate(qrels)},
        ks=ks,
        codes=codes,
        keys=keys,
        all_keys=all_keys,
        custom=custom,
        level=level,
        keep=per_query,
        form=form,
    )
    prefix = task_prefix("run")
    shared = one_task(spec, prefix)
    tasks = [
        dask.delayed(_score_part, pure=False)(part, shared, i, dask_key_name=f"{prefix}-part-{i}")
        for i, part in enumerate(parts)
    ]
    root = merge_tree(tasks, _merge, split_every=split_every, prefix=prefix)
    merged: RunPartial = compute(root, active_client(client))
    report = _finish(merged, spec, resolved, mode, log)
    report.conventions = Conventions(relevance_level=level, ties=ties, averaging=_averaging(mode))
    if not per_query:
        report.extra["per_query"] = "not kept"
    return report


def _finish(
    merged: RunPartial,
    spec: _Spec,
    resolved: list[tuple[str, RetrievalMetric]],
    mode: MissingQueries,
    log: WarningLog,
) -> RetrievalEvalReport:
    """The report from the merged partial: evaluate_run's end, on the client."""
    qids = list(spec.qrels)
    if merged.duplicate is not None:
        qid = qids[merged.duplicate]
        raise InvalidInputError(
            f"query {qid!r} has more than one ranking in the run (two items, rows or files "
            "rank it); a run ranks each query once: keep one"
        )
    ranked = set(merged.ranked)
    missing: list[str] = []
    absent: list[tuple[int, str, dict[str, float]]] = []
    for index, qid in enumerate(qids):
        if index in ranked:
            continue
        judgements = spec.qrels[qid]
        empty: list[str] = []
        try:
            values = score_query(empty, judgements, spec.ks, spec.codes, spec.level)
        except Exception:
            values, _, judgements = _score_one(
                qid, empty, judgements, spec.ks, spec.codes, spec.level
            )
        if values is None:
            continue
        missing.append(qid)
        if mode == "skip":
            continue
        row = dict(zip(spec.keys, values, strict=True))
        if spec.custom:
            _custom(spec, merged.failed, qid, index, judgements, empty, row)
        absent.append((index, qid, row))
    n_ranked = merged.count
    if not n_ranked and not missing:
        raise _no_scorable_error(spec.level)
    if not n_ranked:
        raise _no_ranking_error(missing, merged.run_ids)
    position = {name: i for i, (name, _) in enumerate(spec.custom)}
    for _, (_, entry) in sorted(
        merged.failed.items(), key=lambda item: (item[1][0], position[item[0]])
    ):
        log.entries.append(entry)
    if missing:
        _note_missing(log, missing, n_ranked, mode)
    failed = set(merged.failed)
    present = [key for key in spec.all_keys if key.split("@", 1)[0] not in failed]
    ordered = _order_keys(present, resolved, spec.ks) if spec.custom else present
    n = n_ranked + len(absent)
    per_q: dict[str, dict[str, float]] = {}
    if merged.rows is not None:
        for _, qid, row in sorted(merged.rows + absent, key=lambda entry: entry[0]):
            for key in [k for k in row if k.split("@", 1)[0] in failed]:
                del row[key]
            per_q[qid] = row
        means = {key: math.fsum(row[key] for row in per_q.values()) / n for key in ordered}
        dists: dict[str, Distribution] = {}
    else:
        dists = merged.distributions
        for key, dist in dists.items():
            dist.add_trusted([row[key] for _, _, row in absent if key in row])
        means = {key: dists[key].mean(rule="fsum") for key in ordered}
        if mode == "skip":
            for key in ordered:
                dists[key].add_missing(len(missing))
    all_zero = spec.keys and not any(means.get(key) for key in spec.keys)
    if all_zero and not merged.judged_doc and merged.retrieved:
        shown = [d for _, ids in sorted(merged.examples) for d in ids]
        _note_unjudged_docs(log, merged.retrieved, shown)
    return RetrievalEvalReport(
        metrics=means,
        per_query=per_q,
        n_queries=n,
        k_values=spec.ks,
        warnings=list(log.entries),
        missing_queries=missing,
        distributions={key: dists[key] for key in ordered} if dists else {},
    )
