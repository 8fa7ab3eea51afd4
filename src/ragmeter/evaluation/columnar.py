"""``evaluate_run_columns``: score a run held as columns (Arrow, Parquet, pandas, polars).

A run is a table with one row per retrieved doc, ``query_id, doc_id, score`` (the names of
ir_datasets and ir_measures; ranx's ``q_id`` style names are one keyword away), and qrels a
table ``query_id, doc_id, relevance`` or the usual ``{query_id: {doc_id: grade}}`` mapping.
The compiled kernel (:mod:`ragmeter.metrics.columns`) reads Arrow's string buffers directly,
matching each query's docs to its judgements through a small hash table per query, so no
Python string or list is made per retrieved doc; a Parquet run is streamed about a million
rows at a time, whole row groups (a query cut at a block end is carried over), so memory is
bounded by a few blocks and the qrels. Row groups are decoded by two worker threads ahead of
the scoring (Arrow decodes, and the kernel scores, without the GIL). Query ids stored as
Parquet dictionary pages are scored by their dictionary indices, and qrels grouped by query
are used as they are, in their Arrow chunks, without a hash table over their rows
(:mod:`ragmeter.evaluation._columns_qrels`). ``benchmarks/bench_columnar.py``: 1M queries x
100 docs from Parquet in about 10 s of CPU, of which Arrow's decoding of the Parquet pages is
6 s and the kernel 2.3 s (on a loaded 2-core machine, where the threads did not shorten the
wall time); 100k in 0.9 s; 900 MB at peak at 1M (the qrels' columns, a few blocks and a
million queries' values).

The report is the one :func:`ragmeter.evaluate_run` makes, bit for bit (every per-query value,
mean, warning and convention), for the run ``{query_id: [doc_id, ...]}`` the table stands for:
each query's rows ranked as :func:`ragmeter.read_trec_run` ranks a run file, score descending,
ties by doc id descending (trec_eval's order; a query's rows need not be contiguous). Its rules
hold unchanged: only judged queries with a relevant judgement are scored, rows of unjudged
queries are ignored, a judged query without rows scores 0 (``missing_queries="zero"``) or is
skipped, ids are strings (an int column is read as its digits), a doc listed twice for a scored
query raises :class:`~ragmeter.errors.DuplicateDocumentError`. A null id or a missing, NaN or
infinite score raises :class:`~ragmeter.errors.InvalidInputError` naming the row and column.

Options the columnar kernel does not compute (a registered custom metric, ``judged_only``,
``measures=``) are scored the ordinary way, the table turned into dicts first: the same
report, at dict speed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragmeter._gc import paused_gc
from ragmeter._types import DEFAULT_K_VALUES, MissingQueries
from ragmeter.evaluation._checks import (
    JUDGED_THRESHOLD,
    PerQuery,
    check_options,
    check_per_query,
    log_read_notes,
)
from ragmeter.evaluation.run import evaluate_run
from ragmeter.evaluation.scoring import plan_run
from ragmeter.io.arrow import run_from_arrow
from ragmeter.metrics.registry import BUILTIN_METRICS
from ragmeter.report import RetrievalEvalReport, WarningLog

__all__ = ["evaluate_run_columns"]

Columnar = Any
"""A ``pyarrow.Table``/``RecordBatch``, a pandas or polars ``DataFrame``, or a Parquet path."""


def evaluate_run_columns(
    qrels: Columnar | Mapping[Any, Mapping[Any, float]],
    run: Columnar,
    *,
    k_values: Iterable[int] | int = DEFAULT_K_VALUES,
    metrics: Iterable[str] | str = BUILTIN_METRICS,
    relevance_level: float | None = None,
    missing_queries: MissingQueries = "zero",
    warnings: WarningLog | None = None,
    per_query: PerQuery = True,
    judged_only: bool = False,
    judged_threshold: float = JUDGED_THRESHOLD,
    measures: Iterable[str] | str | None = None,
    query_id: str = "query_id",
    doc_id: str = "doc_id",
    score: str = "score",
    relevance: str = "relevance",
) -> RetrievalEvalReport:
    """Score a columnar run against qrels: :func:`ragmeter.evaluate_run`'s report, from columns.

    ``run`` is a ``pyarrow.Table`` or ``RecordBatch``, a pandas or polars ``DataFrame``, or
    the path of a Parquet file, with one row per ``(query_id, doc_id, score)``; ``qrels`` is
    the same kind of table with ``(query_id, doc_id, relevance)`` rows, or a ``{query_id:
    {doc_id: grade}}`` mapping (such as :func:`ragmeter.read_trec_qrels` returns). The
    ``query_id``, ``doc_id``, ``score`` and ``relevance`` keywords name other columns (ranx's
    frames: ``query_id="q_id"``). Every other keyword is :func:`ragmeter.evaluate_run`'s, and
    so is the report (see the module docstring): scores rank each query's rows, highest
    first, ties by doc id descending.

    >>> import pyarrow as pa
    >>> run = pa.table({"query_id": ["q1", "q1", "q1", "q2"], "doc_id": ["c3", "c1", "c2", "c4"],
    ...                 "score": [0.9, 0.8, 0.8, 0.5]})
    >>> qrels = pa.table({"query_id": ["q1", "q1", "q2"], "doc_id": ["c1", "c2", "c4"],
    ...                   "relevance": [2, 1, 1]})
    >>> r = evaluate_run_columns(qrels, run, k_values=[1, 3], metrics=["recall", "ndcg"])
    >>> r.metrics["recall@1"], r.conventions.ties
    (0.5, 'trec_eval: score descending, ties by doc id descending')
    >>> same = evaluate_run({"q1": {"c1": 2, "c2": 1}, "q2": {"c4": 1}},  # c2 first on the tie
    ...                     {"q1": ["c3", "c2", "c1"], "q2": ["c4"]}, k_values=[1, 3],
    ...                     metrics=["recall", "ndcg"])
    >>> r.metrics == same.metrics and r.per_query == same.per_query
    True
    """
    names = {"query_id": query_id, "doc_id": doc_id, "score": score}
    options = check_options(
        metrics,
        k_values,
        relevance_level,
        missing_queries,
        judged_only=judged_only,
        judged_threshold=judged_threshold,
    )
    log = warnings if warnings is not None else WarningLog()
    qrels = _qrels_mapping(qrels, query_id, doc_id, relevance)
    from ragmeter.evaluation._columns_in import as_table, check_parquet, is_path, run_columns

    table: Any = None  # a Parquet file is read later, a batch at a time
    if is_path(run):
        check_parquet(run, names, "the run")
    else:
        table = as_table(run, names, "the run")
    keep, out = check_per_query(per_query)
    plan = plan_run(qrels, options, keep=keep)
    if measures is not None or judged_only or plan.custom:  # not in the columnar kernel
        table = as_table(run, names, "the run") if table is None else table
        dict_run = run_from_arrow(table, query_id=query_id, doc_id=doc_id, score=score)
        return evaluate_run(
            qrels, dict_run, k_values=k_values, metrics=metrics,
            relevance_level=relevance_level, missing_queries=missing_queries, warnings=log,
            per_query=per_query, judged_only=judged_only, judged_threshold=judged_threshold,
            measures=measures,
        )  # fmt: skip
    log_read_notes(log, qrels)
    from ragmeter.evaluation._columns_out import column_report, column_scores  # numpy
    from ragmeter.evaluation._columns_stream import stream_scores

    with paused_gc():
        if table is None:  # a Parquet file: read a batch at a time
            scores, rows = stream_scores(run, names, plan)
            return column_report(rows, scores, plan, log, out)
        columns = run_columns(table, names)
        del table
        return column_report(columns, column_scores(columns, plan), plan, log, out)


def _qrels_mapping(
    qrels: Any, query_id: str, doc_id: str, relevance: str
) -> Mapping[Any, Mapping[Any, float]]:
    """Qrels as a mapping: a mapping as is, a table read as
    :func:`ragmeter.io.arrow.qrels_from_arrow` reads it (its notes kept, for the report)."""
    if isinstance(qrels, Mapping):
        return qrels
    from ragmeter.evaluation._columns_in import as_table
    from ragmeter.evaluation._columns_qrels import qrels_columns

    names = {"query_id": query_id, "doc_id": doc_id, "relevance": relevance}
    return qrels_columns(as_table(qrels, names, "the qrels"), names)
