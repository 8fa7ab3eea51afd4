"""Retrieval evaluation, one import away: every retrieval driver and its defaults.

* :func:`evaluate_run` (:mod:`~ragmeter.evaluation.run`): a run in memory;
* :func:`evaluate_run_file` (:mod:`~ragmeter.evaluation.run_file`): a TREC run file, query
  by query;
* :func:`evaluate_retrieval` (:mod:`~ragmeter.evaluation.retriever`): a retriever, run over
  the judged queries;
* :func:`ragmeter.dask.evaluate_run`: a run's partitions, on Dask.

All of them score through one loop (:mod:`ragmeter.evaluation.scoring`), take the same
options with the same defaults (``k_values=DEFAULT_K_VALUES``, ``metrics=BUILTIN_METRICS``,
``relevance_level=None``, ``missing_queries="zero"``, ``per_query=True``,
``judged_only=False``, ``judged_threshold=JUDGED_THRESHOLD``) and follow trec_eval's
conventions (see :mod:`ragmeter.evaluation.run`); each report carries ``judged@k``.
"""

from __future__ import annotations

from ragmeter._types import DEFAULT_K_VALUES, MISSING_QUERIES, MissingQueries
from ragmeter.evaluation._checks import JUDGED_THRESHOLD
from ragmeter.evaluation.retriever import dedupe_best_rank, evaluate_retrieval
from ragmeter.evaluation.run import evaluate_run, per_query
from ragmeter.evaluation.run_file import evaluate_run_file
from ragmeter.evaluation.scoring import score_ranking

__all__ = [
    "DEFAULT_K_VALUES",
    "JUDGED_THRESHOLD",
    "MISSING_QUERIES",
    "MissingQueries",
    "dedupe_best_rank",
    "evaluate_retrieval",
    "evaluate_run",
    "evaluate_run_file",
    "per_query",
    "score_ranking",
]
