"""Retrieval evaluation drivers: ``evaluate_run``, ``per_query``, ``evaluate_retrieval``.

Every retrieval number ragmeter reports is computed here from a run
(``{query_id: [doc_id, ...]}``, best first) and qrels (``{query_id: {doc_id: grade}}``),
under trec_eval's conventions (see :mod:`ragmeter.metrics.ranking`):

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

import inspect
import itertools
import math
import numbers
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ragmeter._gc import paused_gc
from ragmeter._types import MISSING_QUERIES, MissingQueries, Qrels, RunLike
from ragmeter.aggregate import BLOCK, Distribution
from ragmeter.errors import (
    DuplicateDocumentError,
    InvalidInputError,
    NoScorableQueriesError,
    check_k,
    some_ids,
)
from ragmeter.metrics._kernel import (
    MAX_GRADE,
    BadGradeError,
    NonStrIdsError,
    RepeatedDocsError,
    duplicates_in,
    kernel_codes,
    py_score_query,
    result_keys,
    score_query,
)
from ragmeter.metrics.registry import BUILTIN_METRICS, METRICS, RetrievalMetric, _Builtin
from ragmeter.report import Conventions, RetrievalEvalReport, WarningLog

__all__ = [
    "DEFAULT_K_VALUES",
    "MISSING_QUERIES",
    "MissingQueries",
    "evaluate_retrieval",
    "evaluate_run",
    "evaluate_run_file",
    "per_query",
]

V = TypeVar("V")

_ABSENT: Sequence[str] = ("<absent>",)
"""What ``run.get`` answers for a query the run has no entry for (never scored itself)."""

_STR = frozenset({str})


DEFAULT_K_VALUES: tuple[int, ...] = (1, 3, 5, 10, 20, 100)


def _resolve_metrics(metrics: Iterable[str] | str) -> list[tuple[str, RetrievalMetric]]:
    if isinstance(metrics, str):
        metrics = [metrics]
    resolved: list[tuple[str, RetrievalMetric]] = []
    seen: set[str] = set()
    for name in metrics:
        metric = METRICS.get_metric(name)
        if name not in seen:
            seen.add(name)
            resolved.append((name, metric))
    if not resolved:
        raise InvalidInputError("metrics is empty: name at least one metric, e.g. ['ndcg']")
    return resolved


def _check_ks(k_values: Iterable[int] | int) -> tuple[int, ...]:
    if isinstance(k_values, int):
        k_values = (k_values,)
    ks = tuple(sorted({check_k(k, name="every k in k_values") for k in k_values}))
    if not ks:
        raise InvalidInputError("k_values is empty: give at least one cut-off, e.g. (10,)")
    return ks


def _is_judged_relevant(judgements: Mapping[str, float], level: float | None) -> bool:
    if level is None:
        return any(g > 0 for g in judgements.values())
    return any(g >= level for g in judgements.values())


def _ordering(run: Any) -> str:
    return str(getattr(run, "ordering", "list order"))


def _check_level(level: object) -> float | None:
    if level is None:
        return None
    if (
        isinstance(level, bool)
        or not isinstance(level, (int, float))
        or not -MAX_GRADE <= level <= MAX_GRADE
    ):
        raise InvalidInputError(
            f"relevance_level must be a finite number (a doc is relevant when its grade >= "
            f"it, like trec_eval -l) or None (grade > 0), got {level!r}"
        )
    return level


def _check_missing(value: object) -> MissingQueries:
    if value == "zero":
        return "zero"
    if value == "skip":
        return "skip"
    choices = "; ".join(f"{k!r}: {v}" for k, v in MISSING_QUERIES.items())
    raise InvalidInputError(f"missing_queries must be 'zero' or 'skip', got {value!r} ({choices})")


def _str_keys(mapping: Mapping[Any, V], what: str) -> Mapping[str, V]:
    """``mapping`` with its keys as ``str`` (the same object when they already are).

    Raises :class:`InvalidInputError` when two keys become the same string (``1`` and
    ``"1"``): keeping one would silently drop the other.
    """
    if not isinstance(mapping, Mapping):
        raise InvalidInputError(
            f"{what} must be a mapping {{id: ...}}, got {type(mapping).__name__}"
        )
    if _STR.issuperset(map(type, mapping)):  # the usual case, checked at C speed
        return mapping
    out: dict[str, V] = {}
    original: dict[str, Any] = {}
    for key, value in mapping.items():
        text = _id_text(key, what)
        if text in out:
            raise InvalidInputError(
                f"{what} has both {original[text]!r} ({type(original[text]).__name__}) and "
                f"{key!r} ({type(key).__name__}) as ids; ids are compared as strings, so they "
                "are the same id: merge them"
            )
        out[text] = value
        original[text] = key
    return out


def _id_text(value: object, where: str) -> str:
    """An id as the string it is compared as: a ``str`` as is, an int as its digits.

    Anything else (a float such as ``1.0``, ``None``, a bool, a list) is refused: its
    string would not match the id the user meant.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    raise InvalidInputError(
        f"{where}: id {value!r} is a {type(value).__name__}; ids must be strings (ints are "
        "read as their digits, so 1 and '1' are the same id)"
    )


def _as_ranking(qid: object, ranked: object) -> Sequence[str]:
    """Accept any sequence of doc ids; refuse a string or a ``{doc: score}`` mapping."""
    if isinstance(ranked, (str, bytes)) or not isinstance(ranked, Sequence):
        hint = (
            " (a {doc_id: score} mapping has no rank order: sort it, or write it as a TREC run "
            "and read it with read_trec_run, which orders it the way trec_eval does)"
            if isinstance(ranked, Mapping)
            else ""
        )
        raise InvalidInputError(
            f"the run for query {qid!r} must be a list of doc ids, best first; got "
            f"{type(ranked).__name__} {ranked!r:.80}{hint}"
        )
    return ranked


def _score_one(
    qid: str,
    ranked: Sequence[str],
    judgements: Mapping[str, float],
    ks: Sequence[int],
    codes: Sequence[int],
    level: float | None,
) -> tuple[list[float] | None, Sequence[str], Mapping[str, float]]:
    """One query's kernel values, with the ranking and judgements as scored (ids as str)."""
    try:
        try:
            return score_query(ranked, judgements, ks, codes, level), ranked, judgements
        except NonStrIdsError:
            ranked = [_id_text(d, f"run[{qid!r}]") for d in ranked]
            judgements = _str_keys(judgements, f"qrels[{qid!r}]")
            return py_score_query(ranked, judgements, ks, codes, level), ranked, judgements
    except RepeatedDocsError:
        raise DuplicateDocumentError(qid, duplicates_in(ranked)) from None
    except BadGradeError as exc:
        doc, grade = exc.args
        raise InvalidInputError(
            f"qrels[{qid!r}][{doc!r}] is {grade!r}: a grade must be a finite number with "
            "|grade| <= 2**53 (NaN or infinity would make every mean NaN)"
        ) from None
    except (TypeError, AttributeError) as exc:
        raise InvalidInputError(
            f"cannot score query {qid!r}: {exc}. qrels must be {{query_id: {{doc_id: "
            "numeric grade}}}} and run {query_id: [doc_id, ...]}"
        ) from None


def score_ranking(
    qid: str,
    ranked: list[str],
    judgements: Mapping[str, float],
    ks: Sequence[int],
    codes: Sequence[int],
    level: float | None,
) -> list[float] | None:
    """One query's values in :func:`~ragmeter.metrics._kernel.result_keys` order, or ``None``
    when it has no relevant judgement; the checks and errors of :func:`evaluate_run`
    (``ks`` sorted and distinct, ``codes`` from ``kernel_codes``: trusted)."""
    try:
        return score_query(ranked, judgements, ks, codes, level)
    except Exception:
        return _score_one(qid, ranked, judgements, ks, codes, level)[0]


def evaluate_run(
    qrels: Qrels,
    run: RunLike,
    *,
    k_values: Iterable[int] | int = DEFAULT_K_VALUES,
    metrics: Iterable[str] | str = BUILTIN_METRICS,
    relevance_level: float | None = None,
    missing_queries: MissingQueries = "zero",
    warnings: WarningLog | None = None,
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
    the results and recorded in ``warnings`` (never reported as 0.0).

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
    >>> partial = evaluate_run(qrels, {"q1": run["q1"]}, k_values=[3], metrics=["recall"])
    >>> partial.metrics, partial.missing_queries
    ({'recall@3': 0.25}, ['q2'])
    >>> evaluate_run(qrels, {"q1": run["q1"]}, k_values=[3], metrics=["recall"],
    ...              missing_queries="skip").metrics
    {'recall@3': 0.5}
    """
    resolved = _resolve_metrics(metrics)
    ks = _check_ks(k_values)
    level = _check_level(relevance_level)
    mode = _check_missing(missing_queries)
    ordering = _ordering(run)
    log = warnings if warnings is not None else WarningLog()
    for source in (qrels, run):
        for note in getattr(source, "warnings", None) or ():
            log.add("read", str(getattr(source, "source", None) or "input"), str(note))
    qrels = _str_keys(qrels, "qrels")
    run = _str_keys(run, "run")
    builtin = [(n, m) for n, m in resolved if isinstance(m, _Builtin)]
    custom = [(n, m) for n, m in resolved if not isinstance(m, _Builtin)]
    codes = kernel_codes([type(m).name for _, m in builtin])
    keys = result_keys([n for n, _ in builtin], codes, ks)
    failed: set[str] = set()

    per_q: dict[str, dict[str, float]] = {}
    missing: list[str] = []
    with paused_gc():  # 100k rows: no collector walking them again and again
        _score_all(qrels, run, ks, codes, level, keys, custom, failed, log, mode, per_q, missing)

    n_ranked = len(per_q) - (len(missing) if mode == "zero" else 0)
    if not per_q and not missing:
        raise _no_scorable_error(level)
    if not n_ranked:
        # not one judged query has a ranking: the ids cannot be the same kind
        raise _no_ranking_error(missing, run)
    if missing:
        _note_missing(log, missing, n_ranked, mode)
    n = len(per_q)
    if custom:
        for row in per_q.values():
            for key in [k for k in row if k.split("@", 1)[0] in failed]:
                del row[key]
        present = list(next(iter(per_q.values())).keys())
        means = {
            key: math.fsum(row[key] for row in per_q.values()) / n
            for key in _order_keys(present, resolved, ks)
        }
    else:
        # every row holds exactly ``keys``, in order: its values are one column entry each
        columns = zip(*(row.values() for row in per_q.values()), strict=True)
        means = {key: math.fsum(col) / n for key, col in zip(keys, columns, strict=True)}
    if keys and not any(means.get(key) for key in keys):
        _warn_if_no_doc_is_judged(qrels, run, per_q, log)
    return RetrievalEvalReport(
        metrics=means,
        per_query=per_q,
        n_queries=n,
        k_values=ks,
        conventions=Conventions(relevance_level=level, ties=ordering, averaging=_averaging(mode)),
        warnings=list(log.entries),
        missing_queries=missing,
    )


def _score_all(
    qrels: Qrels,
    run: RunLike,
    ks: Sequence[int],
    codes: Sequence[int],
    level: float | None,
    keys: Sequence[str],
    custom: Sequence[tuple[str, RetrievalMetric]],
    failed: set[str],
    log: WarningLog,
    mode: MissingQueries,
    per_q: dict[str, dict[str, float]],
    missing: list[str],
) -> None:
    """Score every judged query into ``per_q`` (and ``missing``): evaluate_run's loop."""
    empty: list[str] = []
    for qid, judgements in qrels.items():
        ranked = run.get(qid, _ABSENT)
        absent = ranked is _ABSENT
        if absent:
            ranked = empty
        elif ranked.__class__ is not list:
            ranked = _as_ranking(qid, ranked)
        try:  # the fast path inline; _score_one handles every exception (ids, grades)
            values = score_query(ranked, judgements, ks, codes, level)
        except Exception:
            values, ranked, judgements = _score_one(qid, ranked, judgements, ks, codes, level)
        if values is None:
            continue
        if absent:
            missing.append(qid)
            if mode == "skip":
                continue
        row = dict(zip(keys, values, strict=True))
        if custom:
            _score_custom(custom, failed, log, qid, judgements, ranked, ks, row)
        per_q[qid] = row


def evaluate_run_file(
    qrels: Qrels,
    path: str | os.PathLike[str],
    *,
    k_values: Iterable[int] | int = DEFAULT_K_VALUES,
    metrics: Iterable[str] | str = BUILTIN_METRICS,
    relevance_level: float | None = None,
    missing_queries: MissingQueries = "zero",
    warnings: WarningLog | None = None,
    per_query: bool | str | os.PathLike[str] = True,
) -> RetrievalEvalReport:
    """Score a TREC run file query by query, never holding the run: :func:`evaluate_run`'s
    numbers for a run larger than memory.

    The file is read with :func:`ragmeter.io.trec.iter_trec_run`, so **each query's lines
    must be together** (a file sorted by query id, e.g. ``sort -s -k1,1``); a query that
    comes back after another's lines is a :class:`~ragmeter.errors.DataFormatError` naming
    the line. Every other rule, option, error and number is :func:`evaluate_run`'s on
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
    from ragmeter.io.scores import open_score_writer, score_format
    from ragmeter.io.trec import TREC_ORDERING, iter_trec_run

    resolved = _resolve_metrics(metrics)
    ks = _check_ks(k_values)
    level = _check_level(relevance_level)
    mode = _check_missing(missing_queries)
    if per_query is True or per_query is False:
        keep, out = per_query, None
    elif isinstance(per_query, (str, os.PathLike)):
        score_format(per_query)
        keep, out = False, Path(per_query)
    else:
        raise InvalidInputError(
            "per_query must be True, False or a file path ending in .jsonl, .jsonl.gz or "
            f".parquet; got {per_query!r:.80}"
        )
    if not Path(path).is_file():
        raise FileNotFoundError(2, "run file not found", str(path))
    log = warnings if warnings is not None else WarningLog()
    for note in getattr(qrels, "warnings", None) or ():
        log.add("read", str(getattr(qrels, "source", None) or "input"), str(note))
    qrels = _str_keys(qrels, "qrels")
    builtin = [(n, m) for n, m in resolved if isinstance(m, _Builtin)]
    custom = [(n, m) for n, m in resolved if not isinstance(m, _Builtin)]
    codes = kernel_codes([type(m).name for _, m in builtin])
    keys = result_keys([n for n, _ in builtin], codes, ks)
    all_keys = keys + [f"{name}@{k}" for name, _ in custom for k in ks]
    writer = open_score_writer(out, all_keys, details=False) if out is not None else None
    try:
        report = _stream_file(
            qrels,
            path,
            ks,
            codes,
            level,
            keys,
            all_keys,
            resolved,
            custom,
            mode,
            log,
            keep,
            writer,
            iter_trec_run,
        )
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    report.conventions = Conventions(
        relevance_level=level, ties=TREC_ORDERING, averaging=_averaging(mode)
    )
    if writer is not None:
        report.extra["per_query_file"] = str(writer.finish())
    elif not keep:
        report.extra["per_query"] = "not kept"
    return report


def _stream_file(
    qrels: Qrels,
    path: str | os.PathLike[str],
    ks: tuple[int, ...],
    codes: list[int],
    level: float | None,
    keys: list[str],
    all_keys: list[str],
    resolved: list[tuple[str, RetrievalMetric]],
    custom: list[tuple[str, RetrievalMetric]],
    mode: MissingQueries,
    log: WarningLog,
    keep: bool,
    writer: Any,
    iter_trec_run: Callable[[str | os.PathLike[str]], Iterable[Any]],
) -> RetrievalEvalReport:
    """evaluate_run's loop over a streamed file (see :func:`evaluate_run_file`)."""
    per_q: dict[str, dict[str, float]] = {}
    dists = {key: Distribution() for key in all_keys}
    pending: list[tuple[str, dict[str, float], None]] = []
    failed: set[str] = set()
    seen: set[str] = set()
    run_ids: list[str] = []  # a few of the run's query ids, for a message
    judged_doc = False
    retrieved = 0
    retrieved_ids: list[str] = []
    count = 0

    def emit(qid: str, row: dict[str, float]) -> None:
        nonlocal count
        count += 1
        if keep:
            per_q[qid] = row
        else:
            pending.append((qid, row, None))
            if len(pending) >= BLOCK:
                flush()

    def flush() -> None:
        if not pending:
            return
        for key, dist in dists.items():
            dist.add_trusted([row[key] for _, row, _ in pending if key in row])
        if writer is not None:
            writer.write(pending)
        pending.clear()

    for query in iter_trec_run(path):
        qid, ranked = query.query_id, query.doc_ids
        if len(run_ids) < 4 and qid not in run_ids:
            run_ids.append(qid)
        judgements = qrels.get(qid)
        if judgements is None or qid in seen:
            continue
        seen.add(qid)
        values = score_ranking(qid, ranked, judgements, ks, codes, level)
        if values is None:
            continue
        if not judged_doc:
            if any(d in judgements for d in ranked):
                judged_doc = True
            else:
                retrieved += len(ranked)
                for d in ranked:
                    if len(retrieved_ids) >= 4:
                        break
                    if d not in retrieved_ids:
                        retrieved_ids.append(d)
        row = dict(zip(keys, values, strict=True))
        if custom:
            _score_custom(custom, failed, log, qid, judgements, ranked, ks, row)
        emit(qid, row)
    n_ranked = count
    missing: list[str] = []
    for qid, judgements in qrels.items():
        if qid in seen:
            continue
        values = score_ranking(qid, [], judgements, ks, codes, level)
        if values is None:
            continue
        missing.append(qid)
        if mode == "zero":
            row = dict(zip(keys, values, strict=True))
            if custom:
                _score_custom(custom, failed, log, qid, judgements, [], ks, row)
            emit(qid, row)
    flush()
    if not count and not missing:
        raise _no_scorable_error(level)
    if not n_ranked:
        raise _no_ranking_error(missing, run_ids)
    if missing:
        _note_missing(log, missing, n_ranked, mode)
    gone = [k for k in all_keys if k.split("@", 1)[0] in failed]
    if keep:
        order = {q: i for i, q in enumerate(qrels)}
        per_q = dict(sorted(per_q.items(), key=lambda item: order[item[0]]))
        for row in per_q.values():
            for key in gone:
                row.pop(key, None)
    if writer is not None:
        writer.drop(gone)
    present = [k for k in all_keys if k not in gone]
    ordered = _order_keys(present, resolved, ks) if custom else present
    if keep:
        columns = {key: [row[key] for row in per_q.values()] for key in ordered}
        means = {key: math.fsum(col) / count for key, col in columns.items()}
    else:
        means = {key: dists[key].mean(rule="fsum") for key in ordered}
        if mode == "skip":
            for key in ordered:
                dists[key].add_missing(len(missing))
    if keys and not any(means.get(key) for key in keys) and not judged_doc and retrieved:
        _note_unjudged_docs(log, retrieved, retrieved_ids)
    return RetrievalEvalReport(
        metrics=means,
        per_query=per_q,
        n_queries=count,
        k_values=ks,
        warnings=list(log.entries),
        missing_queries=missing,
        distributions={} if keep else {key: dists[key] for key in ordered},
    )


def _averaging(mode: MissingQueries) -> str:
    return "mean over queries with >= 1 relevant judgement; " + MISSING_QUERIES[mode]


def _warn_if_no_doc_is_judged(
    qrels: Qrels, run: RunLike, scored: Iterable[str], log: WarningLog
) -> None:
    """Every score is 0: warn when not one retrieved doc is judged at all (wrong doc ids)."""
    retrieved: list[str] = []
    for qid in scored:
        ranked = run.get(qid)
        if not ranked:
            continue
        judged = qrels[qid]
        ids = [str(d) for d in ranked]
        if any(d in judged for d in ids):
            return
        retrieved.extend(ids)
    if retrieved:
        _note_unjudged_docs(log, len(retrieved), retrieved)


def _no_scorable_error(level: float | None) -> NoScorableQueriesError:
    return NoScorableQueriesError(
        "no query in qrels has a relevant judgement "
        f"(grade {'> 0' if level is None else f'>= {level}'}), so "
        "there is nothing to average; check the qrels file and the relevance level"
    )


def _no_ranking_error(missing: Sequence[str], run_ids: Iterable[str]) -> InvalidInputError:
    """Not one judged query has a ranking: the ids cannot be the same kind."""
    shown = list(itertools.islice(run_ids, 4))
    return InvalidInputError(
        f"none of the {len(missing)} judged queries has a ranking in the run"
        + (
            f" (the run's query ids, e.g. {some_ids(shown)}, are not qrels ids such as "
            f"{some_ids(missing)}); are the query ids the same strings in both?"
            if shown
            else ": the run is empty"
        )
    )


def _note_missing(
    log: WarningLog, missing: Sequence[str], n_ranked: int, mode: MissingQueries
) -> None:
    log.add(
        "run",
        "missing_queries",
        f"{len(missing)} of {len(missing) + n_ranked} judged queries have no ranking in "
        f"the run (e.g. {some_ids(missing)}); "
        + (
            "they score 0 and count in the mean (missing_queries='zero', = trec_eval "
            "-c); pass missing_queries='skip' to average over the run's queries only"
            if mode == "zero"
            else "they are left out of the mean (missing_queries='skip', trec_eval's default)"
        ),
    )


def _note_unjudged_docs(
    log: WarningLog,
    retrieved: int,
    examples: Iterable[str],
    *,
    stage: str = "run",
    scores: str = "every score",
    run: str = "the run",
    truth: str = "the qrels",
) -> None:
    """Every score is 0 and not one retrieved doc is judged: the doc ids differ.

    ``scores`` says which scores are 0, ``run`` where the retrieved ids come from and
    ``truth`` where the judgements do (evaluate_run's wording by default; evaluate_rag
    names the samples' fields).
    """
    log.add(
        stage,
        "doc_ids",
        f"{scores} is 0 and none of the {retrieved} retrieved doc ids (e.g. "
        f"{some_ids(examples)}) appears in {truth}, not even as judged non-relevant: "
        f"{run} and {truth} probably use different doc ids (check which document "
        "field your retriever returns as the id)",
    )


def _score_custom(
    custom: Sequence[tuple[str, RetrievalMetric]],
    failed: set[str],
    log: WarningLog,
    qid: str,
    judgements: Mapping[str, float],
    ranked: Sequence[str],
    ks: Sequence[int],
    row: dict[str, float],
) -> None:
    """Add each custom metric at each k to ``row``; a metric that raises is dropped and logged."""
    for name, metric in custom:
        if name in failed:
            continue
        try:
            for k in ks:
                value = float(metric.evaluate(judgements, ranked, k))
                if not math.isfinite(value):
                    raise ValueError("returned NaN" if value != value else f"returned {value}")
                row[f"{name}@{k}"] = value
        except Exception as exc:
            failed.add(name)
            log.add(
                "score",
                name,
                f"the {name!r} metric raised {exc!r} on query {qid!r} and was left out "
                "of this run's results rather than silently scoring zero",
            )


def _order_keys(
    keys: Sequence[str], resolved: Sequence[tuple[str, RetrievalMetric]], ks: Sequence[int]
) -> list[str]:
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
    key = f"{metric}@{k}"
    return {q: row[key] for q, row in report.per_query.items() if key in row}


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


def evaluate_retrieval(
    retriever: Callable[..., Iterable[Any]],
    qrels: Qrels,
    queries: Mapping[str, str],
    *,
    k_values: Iterable[int] | int = (1, 5, 10, 100),
    metrics: Iterable[str] | str = ("ndcg", "recall", "precision", "mrr", "map"),
    limit: int | None = None,
    doc_id: Callable[[Any], str] | None = None,
    relevance_level: float | None = None,
    missing_queries: MissingQueries = "zero",
    warnings: WarningLog | None = None,
) -> RetrievalEvalReport:
    """Run ``retriever`` over the judged queries and score it exactly as :func:`evaluate_run`.

    ``retriever`` is any callable ``query_text -> results``; it is called with
    ``limit=`` (``None`` means ``max(k_values)``) when it accepts that keyword. Each result
    becomes a doc id: a ``str`` as is; a ``(doc_id, score)`` pair; an object or mapping's
    ``doc_id``, ``id`` or ``metadata["doc_id"]`` (also inside a ``(document, score)`` pair);
    or whatever ``doc_id(result)`` returns.
    Ids are de-duplicated to each doc's best rank (several chunks of one source), so raise
    ``limit`` when sources are chunked finely. A judged query with no text in ``queries``
    cannot be run: it is left out with a warning, whatever ``missing_queries`` says (as
    BEIR's evaluation does); every query that is run is in the run, so
    ``missing_queries`` (passed on to :func:`evaluate_run`) only matters to code that
    passes one option set to both functions.

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
    ks = _check_ks(k_values)
    _resolve_metrics(metrics)
    _check_level(relevance_level)
    _check_missing(missing_queries)
    qrels = _str_keys(qrels, "qrels")
    queries = _str_keys(queries, "queries")
    if limit is not None:
        check_k(limit, name="limit")
    depth = limit if limit is not None else max(ks)
    to_id = doc_id if doc_id is not None else _doc_id_of
    pass_limit = _accepts_limit(retriever)
    log = warnings if warnings is not None else WarningLog()
    run: dict[str, list[str]] = {}
    judged: dict[str, Mapping[str, float]] = {}
    for qid, judgements in qrels.items():
        if not _is_judged_relevant(judgements, relevance_level):
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
    return evaluate_run(
        judged,
        run,
        k_values=ks,
        metrics=metrics,
        relevance_level=relevance_level,
        missing_queries=missing_queries,
        warnings=log,
    )
