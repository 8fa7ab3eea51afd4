"""``evaluate_retrieval``: run a retriever over the judged queries and score what it returns.

The retriever is any callable ``query_text -> results``; each result becomes a doc id (see
:func:`evaluate_retrieval`), each query's ids are de-duplicated to their best rank, and the
run is scored by :func:`~ragmeter.evaluation.run.evaluate_run`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from ragmeter._types import DEFAULT_K_VALUES, MissingQueries, Qrels
from ragmeter.errors import InvalidInputError, NoScorableQueriesError, check_k
from ragmeter.evaluation._checks import (
    JUDGED_THRESHOLD,
    PerQuery,
    check_flag,
    check_ks,
    check_level,
    check_missing,
    check_threshold,
    is_judged_relevant,
    resolve_metrics,
    str_keys,
)
from ragmeter.evaluation.run import evaluate_run
from ragmeter.metrics.registry import BUILTIN_METRICS
from ragmeter.report import DatasetFingerprint, RetrievalEvalReport, WarningLog
from ragmeter.schema import RagSample

__all__ = ["dedupe_best_rank", "evaluate_retrieval"]


def _doc_id_of(result: Any) -> str:
    """Map one retrieval result to a doc id (see :func:`evaluate_retrieval`)."""
    if isinstance(result, str):
        return result
    if isinstance(result, tuple) and len(result) == 2:
        if isinstance(result[0], str):
            return result[0]
        if isinstance(result[1], (int, float)):  # (document object, score)
            return _doc_id_of(result[0])
    if isinstance(result, Mapping):
        for key in ("doc_id", "id"):
            if result.get(key) is not None:
                return str(result[key])
        meta = result.get("metadata") or result.get("meta") or {}
        if isinstance(meta, Mapping) and meta.get("doc_id") is not None:
            return str(meta["doc_id"])
    else:
        for attr in ("doc_id", "id"):
            value = getattr(result, attr, None)
            if value is not None:
                return str(value)
        meta = getattr(result, "metadata", None) or getattr(result, "meta", None)
        if isinstance(meta, Mapping) and meta.get("doc_id") is not None:
            return str(meta["doc_id"])
    raise InvalidInputError(
        f"cannot tell which document this result is: {result!r:.120}. Return doc id strings, "
        "(doc_id, score) pairs, or objects with doc_id / id / metadata['doc_id'], or pass "
        "doc_id=<function result -> id> to evaluate_retrieval"
    )


def _accepts_limit(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "limit" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def dedupe_best_rank(doc_ids: Iterable[str]) -> list[str]:
    """Keep each doc id at its first (best) rank: several chunks of one source are normal.

    >>> dedupe_best_rank(["a", "b", "a", "c", "b"])
    ['a', 'b', 'c']
    """
    return list(dict.fromkeys(doc_ids))


def _not_for_samples() -> InvalidInputError:
    return InvalidInputError(
        "queries=, limit= and doc_id= are for a retriever callable; samples carry their "
        "rankings already"
    )


def _score_samples(
    samples: Any, qrels: Qrels | None, options: dict[str, Any]
) -> RetrievalEvalReport:
    """Samples that hold their rankings, scored with the capture rules; an adapter's or
    traces' store through its own method (its counts and warnings too)."""
    if hasattr(samples, "evaluate_retrieval") and hasattr(samples, "store"):
        report: RetrievalEvalReport = samples.evaluate_retrieval(qrels, **options)
        return report
    from ragmeter.evaluation.captured import evaluate_captured

    return evaluate_captured(samples, qrels, **options)


def evaluate_retrieval(
    retriever: Callable[..., Iterable[Any]] | Iterable[RagSample] | Any,
    qrels: Qrels | None = None,
    queries: Mapping[str, str] | None = None,
    *,
    k_values: Iterable[int] | int = DEFAULT_K_VALUES,
    metrics: Iterable[str] | str = BUILTIN_METRICS,
    limit: int | None = None,
    doc_id: Callable[[Any], str] | None = None,
    relevance_level: float | None = None,
    missing_queries: MissingQueries = "zero",
    warnings: WarningLog | None = None,
    per_query: PerQuery = True,
    judged_only: bool = False,
    judged_threshold: float = JUDGED_THRESHOLD,
) -> RetrievalEvalReport:
    """Run ``retriever`` over the judged queries and score it exactly as :func:`evaluate_run`;
    or score samples that already hold their rankings.

    ``retriever`` is any callable ``query_text -> results``; it is called with
    ``limit=`` (``None`` means ``max(k_values)``) when it accepts that keyword. Each result
    becomes a doc id: a ``str`` as is; a ``(doc_id, score)`` pair; an object or mapping's
    ``doc_id``, ``id`` or ``metadata["doc_id"]`` (also inside a ``(document, score)`` pair);
    or whatever ``doc_id(result)`` returns.
    Ids are de-duplicated to each doc's best rank (several chunks of one source), so raise
    ``limit`` when sources are chunked finely. A judged query with no text in ``queries``
    cannot be run: it is left out with a warning, whatever ``missing_queries`` says (as
    BEIR's evaluation does); every query that is run is in the run, so
    ``missing_queries`` (passed on to :func:`evaluate_run`, as ``per_query``,
    ``judged_only`` and ``judged_threshold`` are) only matters to code that passes one
    option set to both functions.

    Given samples instead of a callable (:class:`~ragmeter.schema.RagSample` objects, an
    adapter's handler or store, or what :func:`ragmeter.traces.read` returns),
    ``evaluate_retrieval(samples, qrels)`` scores their rankings with the capture rules of
    :func:`ragmeter.evaluation.captured.evaluate_captured` (``qrels`` default to the samples'
    own relevance).

    >>> qrels = {'q1': {'d1': 1.0, 'd2': 1.0}, 'q2': {'d3': 1.0}}
    >>> queries = {'q1': 'first query', 'q2': 'second query'}
    >>> rankings = {'first query': ['d1', 'd9', 'd2'], 'second query': ['d9', 'd3']}
    >>> def retriever(query, *, limit=10):
    ...     return rankings[query][:limit]
    >>> report = evaluate_retrieval(retriever, qrels, queries, k_values=(1, 3))
    >>> report.metrics['recall@3']
    1.0
    >>> round(report.primary_at(1), 3)  # NDCG@1, averaged over the two queries
    0.5
    """
    if not callable(retriever):  # samples (read from traces, captured, or from JSONL)
        if queries is not None or limit is not None or doc_id is not None:
            raise _not_for_samples()
        options = {
            "k_values": k_values,
            "metrics": metrics,
            "relevance_level": relevance_level,
            "missing_queries": missing_queries,
            "warnings": warnings,
            "per_query": per_query,
            "judged_only": judged_only,
            "judged_threshold": judged_threshold,
        }
        return _score_samples(retriever, qrels, options)
    if qrels is None or queries is None:
        raise InvalidInputError(
            "evaluate_retrieval(retriever, qrels, queries): a retriever needs the qrels and "
            "the queries' texts to run"
        )
    ks = check_ks(k_values)
    resolve_metrics(metrics)
    check_level(relevance_level)
    check_missing(missing_queries)
    check_flag(judged_only, "judged_only")
    check_threshold(judged_threshold)
    qrels = str_keys(qrels, "qrels")
    queries = str_keys(queries, "queries")
    if limit is not None:
        check_k(limit, name="limit")
    depth = limit if limit is not None else max(ks)
    to_id = doc_id if doc_id is not None else _doc_id_of
    pass_limit = _accepts_limit(retriever)
    log = warnings if warnings is not None else WarningLog()
    run: dict[str, list[str]] = {}
    judged: dict[str, Mapping[str, float]] = {}
    for qid, judgements in qrels.items():
        if not is_judged_relevant(judgements, relevance_level):
            continue
        text = queries.get(qid)
        if text is None:
            log.add(
                "retrieve", str(qid), f"query {qid!r} is judged but has no text in queries; skipped"
            )
            continue
        results = retriever(text, limit=depth) if pass_limit else retriever(text)
        ids: list[str] = []
        for i, result in enumerate(results):
            try:
                ids.append(to_id(result))
            except InvalidInputError as exc:
                raise InvalidInputError(f"query {qid!r}, result {i}: {exc}") from None
        run[qid] = dedupe_best_rank(ids)
        judged[qid] = judgements
    if not judged:
        raise NoScorableQueriesError(
            "no judged query could be run: none has both a relevant judgement in qrels and a "
            "text in queries (are the ids the same strings in both?)"
        )
    report = evaluate_run(
        judged,
        run,
        k_values=ks,
        metrics=metrics,
        relevance_level=relevance_level,
        missing_queries=missing_queries,
        warnings=log,
        per_query=per_query,
        judged_only=judged_only,
        judged_threshold=judged_threshold,
    )
    report.set_dataset_fingerprint(partial(DatasetFingerprint.of_qrels, qrels, queries))
    return report
