"""``evaluate_run_file``: score a TREC run file query by query, never holding the run.

The same scoring loop as :func:`~ragmeter.evaluation.run.evaluate_run`
(:mod:`ragmeter.evaluation.scoring`), fed one query's lines at a time, so a run larger than
memory gets :func:`evaluate_run`'s numbers, rules, warnings and errors.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from ragmeter._types import DEFAULT_K_VALUES, MissingQueries, Qrels
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation._checks import (
    JUDGED_THRESHOLD,
    PerQuery,
    check_options,
    check_per_query,
    log_read_notes,
    ordering_of,
    str_keys,
)
from ragmeter.evaluation.scoring import plan_run, score_run
from ragmeter.metrics.registry import BUILTIN_METRICS
from ragmeter.report import RetrievalEvalReport, WarningLog

__all__ = ["evaluate_run_file"]


def evaluate_run_file(
    qrels: Qrels,
    path: str | os.PathLike[str],
    *,
    k_values: Iterable[int] | int = DEFAULT_K_VALUES,
    metrics: Iterable[str] | str = BUILTIN_METRICS,
    relevance_level: float | None = None,
    missing_queries: MissingQueries = "zero",
    warnings: WarningLog | None = None,
    per_query: PerQuery = True,
    judged_only: bool = False,
    judged_threshold: float = JUDGED_THRESHOLD,
    ungrouped: Literal["error", "read_whole"] = "error",
) -> RetrievalEvalReport:
    """Score a TREC run file query by query, never holding the run: :func:`evaluate_run`'s
    numbers for a run larger than memory.

    The file is read with :func:`ragmeter.io.trec.iter_trec_run`, so **each query's lines
    must be together** (a file sorted by query id, e.g. ``sort -s -k1,1``); a query that
    comes back after another's lines is a :class:`~ragmeter.errors.DataFormatError` naming
    the line, unless ``ungrouped="read_whole"``: then such a file is read whole instead
    (:func:`ragmeter.read_trec_run`; the same report, in the memory the run takes). Every
    other rule, option, error and number is :func:`evaluate_run`'s on
    ``read_trec_run(path)`` (the means are ``math.fsum`` over the queries / their number,
    the same floats). ``per_query`` chooses what happens to the per-query scores: kept in
    ``report.per_query`` (``True``, the default: 38 floats a query, small next to the run),
    not kept (``False``: the summaries come from mergeable
    :class:`~ragmeter.aggregate.Distribution` aggregates, see ``report.distributions``), or
    written to a ``.jsonl``/``.jsonl.gz``/``.parquet`` file as they are computed (a path;
    the run's queries in file order, then the judged queries missing from it).

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.txt"
    >>> _ = path.write_text("q1 Q0 c3 1 3 t\\nq1 Q0 c1 2 2 t\\nq2 Q0 c4 1 1 t\\n")
    >>> qrels = {"q1": {"c1": 2, "c3": 0}, "q2": {"c4": 1}}
    >>> evaluate_run_file(qrels, path, k_values=[1], metrics=["recall"]).metrics
    {'recall@1': 0.5}
    """
    from ragmeter.io.trec import TREC_ORDERING, UngroupedRunError, read_trec_run

    if ungrouped not in ("error", "read_whole"):
        raise InvalidInputError(f"ungrouped must be 'error' or 'read_whole', got {ungrouped!r}")
    options = check_options(
        metrics,
        k_values,
        relevance_level,
        missing_queries,
        judged_only=judged_only,
        judged_threshold=judged_threshold,
    )
    keep, out = check_per_query(per_query)
    if not Path(path).is_file():
        raise FileNotFoundError(2, "run file not found", str(path))
    log = warnings if warnings is not None else WarningLog()
    log_read_notes(log, qrels)
    plan = plan_run(qrels, options, keep=keep)
    try:
        return score_run(_rankings(path), plan, log, ties=TREC_ORDERING, out=out)
    except UngroupedRunError:
        if ungrouped == "error":
            raise
    run = read_trec_run(path)  # a query's lines are spread over the file: read it whole
    log_read_notes(log, run)
    return score_run(str_keys(run, "run").items(), plan, log, ties=ordering_of(run), out=out)


def _rankings(path: str | os.PathLike[str]) -> Iterator[tuple[str, Any]]:
    """The file's ``(query_id, ranking)`` pairs, one query's lines at a time."""
    from ragmeter.io.trec import iter_trec_run

    for query in iter_trec_run(path):
        yield query.query_id, query.doc_ids
