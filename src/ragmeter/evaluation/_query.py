"""One query's scores: the kernel's values with its errors made readable, and custom metrics.

The compiled kernel (:mod:`ragmeter.metrics._kernel`) takes the usual case; anything it
leaves (non-``str`` ids, a repeated doc, a bad grade) is retried or explained here, so every
driver raises the same error for the same query. :func:`score_condensed` is the same for a
ranking scored with its unjudged docs removed (``judged_only``, trec_eval ``-J``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ragmeter.errors import DuplicateDocumentError, InvalidInputError
from ragmeter.evaluation._checks import id_text, str_keys
from ragmeter.metrics._kernel import (
    BadGradeError,
    NonStrIdsError,
    RepeatedDocsError,
    duplicates_in,
    py_score_query,
    score_query,
)
from ragmeter.metrics.registry import RetrievalMetric
from ragmeter.report import WarningLog

if TYPE_CHECKING:
    from ragmeter.evaluation.scoring import RunPlan


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
            ranked = [id_text(d, f"run[{qid!r}]") for d in ranked]
            judgements = str_keys(judgements, f"qrels[{qid!r}]")
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
    when it has no relevant judgement; the checks and errors of the scoring loop (``ks``
    sorted and distinct, ``codes`` from ``kernel_codes``: trusted)."""
    try:
        return score_query(ranked, judgements, ks, codes, level)
    except Exception:
        return _score_one(qid, ranked, judgements, ks, codes, level)[0]


def score_condensed(
    qid: str,
    ranked: Sequence[str],
    judgements: Mapping[str, float],
    ks: Sequence[int],
    codes: Sequence[int],
    level: float | None,
) -> tuple[list[float] | None, Sequence[str], Mapping[str, float]]:
    """One query's values with its unjudged docs removed first, as ``trec_eval -J`` does:
    the docs without a judgement, and those with a negative grade (trec_eval reads one as
    "in the pool, not judged"), leave the ranking and the rest move up (a condensed list,
    Sakai 2007); the relevant docs, the ideal DCG and the denominators are unchanged.
    ``codes`` ends with ``judged``, which is of the full ranking (what was removed shows).
    Returns the values, the condensed ranking and the judgements (ids as ``str``).

    >>> from ragmeter.metrics._kernel import kernel_codes
    >>> values, kept, _ = score_condensed(
    ...     "q1", ["new", "d1", "d2"], {"d1": 0, "d2": 1}, [1, 2], kernel_codes(["mrr", "judged"]),
    ...     None)
    >>> values, kept
    ([0.0, 0.5, 0.5, 0.0, 0.5], ['d1', 'd2'])
    """
    full, ranked, judgements = _score_one(qid, ranked, judgements, ks, codes[-1:], level)
    if full is None:
        return None, ranked, judgements
    get = judgements.get
    kept = [d for d in ranked if get(d, -1) >= 0]  # grades are checked numbers by now
    rest = score_query(kept, judgements, ks, codes[:-1], level) or [] if len(codes) > 1 else []
    return rest + full, kept, judgements


def score_custom(
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


def _custom(
    plan: RunPlan,
    failed: dict[str, tuple[int, str]],
    qid: str,
    index: int,
    judgements: Mapping[str, float],
    ranked: Sequence[str],
    row: dict[str, float],
) -> None:
    """The custom metrics on one query, every metric tried (the first failure in qrels
    order is the one reported, wherever the query sits in the run)."""
    fails: set[str] = set()
    log = WarningLog()
    score_custom(plan.custom, fails, log, qid, judgements, ranked, plan.ks, row)
    names = [name for name, _ in plan.custom if name in fails]
    for name, entry in zip(names, log.entries, strict=True):
        if name not in failed or index < failed[name][0]:
            failed[name] = (index, entry)
