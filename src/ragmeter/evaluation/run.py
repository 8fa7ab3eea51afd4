"""``evaluate_run``: score a run held in memory against qrels, every metric at every cut-off.

Every retrieval number ragmeter reports is computed under trec_eval's conventions (see
:mod:`ragmeter.metrics.ranking`), through the one scoring loop of
:mod:`ragmeter.evaluation.scoring`:

* only queries with at least one relevant judgement are scored and averaged;
* a judged query missing from the run scores 0 on every metric and counts in the mean (a real
  failure; = ``trec_eval -c``), or, with ``missing_queries="skip"``, is left out of the mean
  (trec_eval's default); either way the report lists it in ``missing_queries`` and warns;
* a ranking for an unjudged query is ignored;
* ids are compared as strings: ``1`` and ``"1"`` are the same query (or doc), and two keys
  that become the same string are refused;
* grades must be finite numbers with ``|grade| <= 2**53`` (NaN, infinities and larger
  grades are refused, so no mean can be NaN or infinite);
* a ranking that repeats a doc id for a scored query is refused
  (:class:`~ragmeter.errors.DuplicateDocumentError`);
* a list is scored in list order; a TREC run read by :func:`ragmeter.read_trec_run` is
  already in trec_eval's order (score descending, ties by doc id descending).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from ragmeter._types import DEFAULT_K_VALUES, MissingQueries, Qrels, RunLike
from ragmeter.errors import InvalidInputError, check_k
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
from ragmeter.report import DatasetFingerprint, RetrievalEvalReport, WarningLog

__all__ = ["evaluate_run", "per_query"]


def evaluate_run(
    qrels: Qrels,
    run: RunLike,
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
) -> RetrievalEvalReport:
    """Score a precomputed run against qrels, every metric at every cut-off.

    Result keys are ``f"{metric}@{k}"`` (plus uncut ``"map"`` and ``"mrr"``, trec_eval's
    ``map`` and ``recip_rank``). Means are over queries with at least one relevant
    judgement; rankings for unjudged queries are ignored. A judged query absent from
    ``run`` scores 0 and counts in the mean with ``missing_queries="zero"`` (the default,
    = ``trec_eval -c``), or is left out of the mean with ``"skip"`` (trec_eval's default);
    either way it is listed in the report's ``missing_queries`` and counted in a warning.
    Query and doc ids are compared as strings (``1`` and ``"1"`` are one id). A
    registered custom metric that raises, or returns NaN or an infinity, is left out of
    the results and recorded in ``warnings`` (never reported as 0.0). ``per_query``
    chooses what happens to every query's scores: kept in ``report.per_query`` in qrels
    order (``True``, the default), not kept (``False``: the summaries come from mergeable
    :class:`~ragmeter.aggregate.Distribution` aggregates, see ``report.distributions``), or
    written to a ``.jsonl``/``.jsonl.gz``/``.parquet`` file as they are computed (a path).

    Unjudged docs count as non-relevant, as in trec_eval, so a ranking full of docs nobody
    judged scores low whatever they hold. Every report therefore carries ``judged@k`` at
    each cut-off in ``report.judged`` (ir_measures' ``Judged@k``: the share of the top
    ``min(k, n)`` that has a judgement, any grade; ``0.0`` for a query with no ranking),
    beside the metrics asked for, with the unjudged docs counted, and a warning when under
    ``judged_threshold`` (default 0.9) of the top docs are judged at the cut-off nearest 10
    (10 itself when computed).
    ``judged_only=True`` is trec_eval's ``-J``: each ranking loses its unjudged docs (and
    those graded below 0, which trec_eval reads as unjudged) before scoring, the rest
    moving up (Sakai's condensed lists); ``judged@k`` is still of the full ranking.

    Raises :class:`~ragmeter.errors.UnknownMetricError` for an unregistered name (before
    any scoring), :class:`~ragmeter.errors.InvalidInputError` for a ``k < 1``, a ranking
    that is not a list of doc ids, a grade that is NaN, infinite or beyond ``2**53``, two
    ids that are the same string, or a run in which no judged query has a ranking,
    :class:`~ragmeter.errors.DuplicateDocumentError` for a ranking that repeats a doc id,
    and :class:`~ragmeter.errors.NoScorableQueriesError` when no query has a relevant
    judgement.

    >>> qrels = {"q1": {"c1": 2, "c2": 1, "c3": 0}, "q2": {"c4": 2}}
    >>> run = {"q1": ["c3", "c1", "c5", "c2"], "q2": ["c9", "c4", "c1"]}
    >>> r = evaluate_run(qrels, run, k_values=[1, 3], metrics=["recall", "ndcg"])
    >>> r.metrics
    {'recall@1': 0.0, 'recall@3': 0.75, 'ndcg@1': 0.0, 'ndcg@3': 0.5552773433538603}
    >>> r.judged.means, r.judged.per_query["q2"]
    ({'judged@1': 0.5, 'judged@3': 0.5}, {'judged@1': 0.0, 'judged@3': 0.3333333333333333})
    >>> partial = evaluate_run(qrels, {"q1": run["q1"]}, k_values=[3], metrics=["recall"])
    >>> partial.metrics, partial.missing_queries
    ({'recall@3': 0.25}, ['q2'])
    >>> evaluate_run(qrels, {"q1": run["q1"]}, k_values=[3], metrics=["recall"],
    ...              missing_queries="skip").metrics
    {'recall@3': 0.5}
    >>> evaluate_run(qrels, run, k_values=[1], metrics=["ndcg"], judged_only=True).metrics
    {'ndcg@1': 0.5}

    ``measures`` computes trec_eval's measures instead, by trec_eval's rules (see
    :mod:`ragmeter.evaluation.measures`): trec_eval ``-m`` strings (``"all_trec"``,
    ``"ndcg_cut.10,20"``, ``"P.5"``, ``"bpref"``) or ir_measures names (``"nDCG@10"``,
    ``"Judged@10"``, ``"RBP(p=0.8)"``), keyed as trec_eval prints them; ``k_values`` and
    ``metrics`` are then not used, and ``per_query`` is ``True`` or ``False``. As everywhere,
    ``missing_queries="zero"`` (the default) is trec_eval's ``-c``; pass ``"skip"`` for
    plain ``trec_eval``'s numbers.

    >>> r = evaluate_run(qrels, run, measures=["P.1", "bpref", "Rprec"])
    >>> r.metrics
    {'Rprec': 0.25, 'bpref': 0.5, 'P_1': 0.0}
    """
    if measures is not None:
        return _measures_report(
            qrels, run, measures, relevance_level, missing_queries, warnings, per_query,
            judged_only, judged_threshold,
        )  # fmt: skip
    options = check_options(
        metrics,
        k_values,
        relevance_level,
        missing_queries,
        judged_only=judged_only,
        judged_threshold=judged_threshold,
    )
    log = warnings if warnings is not None else WarningLog()
    log_read_notes(log, qrels, run)
    ordering = ordering_of(run)
    keep, out = check_per_query(per_query)
    plan = plan_run(qrels, options, keep=keep)
    run = _str_ids(run)
    try:
        return score_run(run.items(), plan, log, ties=ordering, out=out)
    except InvalidInputError:
        try:  # two ids that are one string (1 and "1") are worded as such
            str_keys(run, "run")
        except InvalidInputError as clash:
            raise clash from None
        raise


def _str_ids(run: RunLike) -> Mapping[str, Any]:
    """``run`` keyed by ``str`` ids: as it is when its first id is a ``str`` (the usual
    case; the scoring loop makes any later id of another type a ``str``, and a clash of two
    ids is worded after it), else through :func:`str_keys`. Not one more visit to each of
    a million ids."""
    if not isinstance(run, Mapping):
        return str_keys(run, "run")  # words the error
    first = next(iter(run), None)
    if first is None or first.__class__ is str:
        return run
    return str_keys(run, "run")


def _measures_report(
    qrels: Qrels,
    run: RunLike,
    measures: Iterable[str] | str,
    relevance_level: float | None,
    missing_queries: MissingQueries,
    warnings: WarningLog | None,
    per_query: PerQuery,
    judged_only: bool,
    judged_threshold: float,
) -> RetrievalEvalReport:
    options = check_options(  # its metrics and cut-offs stand in: measures= names its own
        "ndcg",
        10,
        relevance_level,
        missing_queries,
        judged_only=judged_only,
        judged_threshold=judged_threshold,
    )
    if not isinstance(per_query, bool):
        raise InvalidInputError(
            f"per_query must be True or False with measures=, got {per_query!r}"
        )
    from ragmeter.evaluation.measures import evaluate_measures  # numpy, when asked for

    log = warnings if warnings is not None else WarningLog()
    log_read_notes(log, qrels, run)
    qrels = str_keys(qrels, "qrels")
    report = evaluate_measures(
        qrels,
        str_keys(run, "run"),
        measures,
        options,
        per_query=per_query,
        warnings=log,
    )
    report.set_dataset_fingerprint(functools.partial(DatasetFingerprint.of_qrels, qrels))
    return report


def per_query(
    qrels: Qrels,
    run: RunLike,
    metric: str,
    k: int,
    *,
    relevance_level: float | None = None,
) -> dict[str, float]:
    """``{query_id: score}`` of one metric at one cut-off, for scored queries only.

    Same rules as :func:`evaluate_run` (the shape :func:`ragmeter.compare` pairs).

    >>> qrels = {"q1": {"c1": 2, "c2": 1, "c3": 0}, "q2": {"c4": 2}}
    >>> run = {"q1": ["c3", "c1", "c5", "c2"], "q2": ["c9", "c4", "c1"]}
    >>> per_query(qrels, run, "recall", 3)
    {'q1': 0.5, 'q2': 1.0}
    """
    check_k(k)
    report = evaluate_run(
        qrels, run, k_values=(k,), metrics=[metric], relevance_level=relevance_level
    )
    return report.scores(f"{metric}@{k}")  # one column: no dict per query is made
