"""What each side gives a comparison, and how the two are paired: the scores read from a
report or a mapping, the ids both score, and the warnings when they do not score the same
queries the same way."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.stats._base import PRIMARY_RETRIEVAL_METRIC, TESTS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]


def _default_metric(x: object, which: str) -> str | None:
    if isinstance(x, RetrievalEvalReport):
        return PRIMARY_RETRIEVAL_METRIC
    if isinstance(x, RagEvalReport):
        if not x.metrics:
            raise InvalidInputError(f"report {which} has no metrics to compare")
        return next(iter(x.metrics))
    return None


def _check_score(value: object, qid: str, which: str) -> float:
    if not isinstance(value, numbers.Real):
        raise InvalidInputError(
            f"the score for query {qid!r} in {which} is {value!r}, not a number; "
            "pass {query_id: score} with float scores"
        )
    out = float(value)
    if not math.isfinite(out):
        raise InvalidInputError(
            f"the score for query {qid!r} in {which} is {out!r}; a paired test needs a finite "
            "number for every query (fix the metric, or leave the query out of both)"
        )
    return out


def _extract(x: object, key: str | None, which: str) -> tuple[dict[str, float], bool | None]:
    """``({id: score}, higher_is_better or None if unknown)`` for one side."""
    if isinstance(x, (RetrievalEvalReport, RagEvalReport)) and key is None:
        raise InvalidInputError(f"name the metric to compare {which} on, e.g. metric='ndcg@10'")
    if isinstance(x, RetrievalEvalReport):
        key = str(key)
        if not x.per_query:
            raise InvalidInputError(
                f"report {which} has no per-query scores (per_query is empty); a paired test "
                "needs them: keep the report from evaluate_run or its full to_dict() JSON"
            )
        scores = x.scores(key)
        if not scores:
            raise InvalidInputError(
                f"report {which} has no per-query scores for {key!r}; its metrics are: "
                f"{', '.join(x.metrics) or 'none'}"
            )
        return {q: _check_score(v, q, which) for q, v in scores.items()}, True
    if isinstance(x, RagEvalReport):
        key = str(key)
        scores = x.scores(key)
        if not scores:
            raise InvalidInputError(
                f"report {which} has no per-sample scores for {key!r}; its metrics are: "
                f"{', '.join(x.metrics) or 'none'}"
            )
        return {q: _check_score(v, q, which) for q, v in scores.items()}, x.higher_is_better.get(
            key
        )
    if isinstance(x, Mapping):
        return {str(q): _check_score(v, str(q), which) for q, v in x.items()}, None
    raise InvalidInputError(
        f"{which} must be a RetrievalEvalReport, a RagEvalReport or a {{query_id: score}} "
        f"mapping, got {type(x).__name__}"
    )


def _pair(
    sa: dict[str, float], sb: dict[str, float], on_missing: str, la: str, lb: str
) -> tuple[list[str], set[str], set[str]]:
    only_a = sa.keys() - sb.keys()
    only_b = sb.keys() - sa.keys()
    shared = sa.keys() & sb.keys()
    if (only_a or only_b) and on_missing == "error":
        parts = []
        if only_a:
            parts.append(f"{len(only_a)} only in {la} (e.g. {some_ids(sorted(only_a))})")
        if only_b:
            parts.append(f"{len(only_b)} only in {lb} (e.g. {some_ids(sorted(only_b))})")
        raise InvalidInputError(
            f"{la} and {lb} do not score the same queries: {'; '.join(parts)}. Score both "
            f"against the same qrels, or pass on_missing='intersect' to compare only the "
            f"{len(shared)} queries both score."
        )
    if len(shared) < 2:
        raise InvalidInputError(
            f"a paired comparison needs at least 2 queries scored by both {la} and {lb}, "
            f"got {len(shared)}"
        )
    return sorted(shared), set(only_a), set(only_b)


def _unranked(x: object) -> tuple[set[str], bool]:
    """``(judged queries the run had no ranking for, whether that is known)`` of one side:
    known for a :class:`RetrievalEvalReport` (its ``missing_queries``), not for the rest."""
    if isinstance(x, RetrievalEvalReport):
        return set(x.missing_queries), True
    return set(), False


def _pairing_warnings(
    a: object,
    b: object,
    ids: list[str],
    d: FloatArray,
    only: tuple[set[str], set[str]],
    labels: tuple[str, str],
) -> list[str]:
    """What :func:`compare` says when the sides do not score the same queries the same way.

    A paired query that one side's report lists in ``missing_queries`` (its run has no
    ranking for it) was scored 0 by that report (``missing_queries="zero"``) and is paired
    as a 0; a query scored by one side only was left out (``on_missing="intersect"``).
    """
    la, lb = labels
    unranked = (_unranked(a), _unranked(b))
    n = len(ids)
    notes: list[str] = []
    for side in (0, 1):
        mine, (theirs, known) = unranked[side][0], unranked[1 - side]
        lx, ly = labels[side], labels[1 - side]
        zeroed = [i for i, q in enumerate(ids) if q in mine and q not in theirs]
        if not zeroed:
            continue
        others = "ranks" if known else "scores"
        rest = [i for i, q in enumerate(ids) if q not in unranked[0][0] | unranked[1][0]]
        common = (
            f"; over the {len(rest)} paired queries both rank, the mean difference is "
            f"{float(d[rest].mean()):+.4f}"
            if rest and known
            else ""
        )
        notes.append(
            f"{lx}'s run has no ranking for {len(zeroed)} of the {n} paired queries that "
            f"{ly} {others} (e.g. {some_ids(ids[i] for i in zeroed)}): {lx}'s report scored "
            "them 0 (missing_queries='zero', = trec_eval -c) and they are paired as 0, so "
            f"they count against {lx} in the means, the wins and losses and the test; they "
            f"make up {float(d[zeroed].sum()) / n:+.4f} of the {float(d.mean()):+.4f} mean "
            f"difference ({lb} - {la}){common}. To compare only the queries both rank, "
            "score both with missing_queries='skip' (ragmeter compare: --missing-queries "
            "skip) and pass on_missing='intersect'"
        )
    both = sum(1 for q in ids if q in unranked[0][0] and q in unranked[1][0])
    if both:
        notes.append(
            f"{both} of the {n} paired queries have no ranking in either run: both reports "
            "scored them 0 (missing_queries='zero', = trec_eval -c), so they are paired as "
            "ties"
        )
    only_a, only_b = only
    if only_a or only_b:
        parts = []
        for side, (lx, ly, ids_x) in enumerate(((la, lb, only_a), (lb, la, only_b))):
            if not ids_x:
                continue
            part = f"{len(ids_x)} only in {lx} (e.g. {some_ids(sorted(ids_x))}"
            unranked_y, known = unranked[1 - side]
            skipped = len(ids_x & unranked_y)
            if known and skipped:
                part += (
                    f"; {ly}'s run has no ranking for {skipped} of them, which its report "
                    "left out: missing_queries='skip'"
                )
            parts.append(part + ")")
        notes.append(
            f"left out {len(only_a)} queries only in {la} and {len(only_b)} only in {lb} "
            f"(on_missing='intersect'): {'; '.join(parts)}. The comparison is paired on the "
            f"{n} queries both score; the left-out ones count on neither side"
        )
    return notes


def _check_options(test: str, n: object, confidence: float, alpha: float, on_missing: str) -> None:
    if test not in TESTS:
        raise InvalidInputError(f"test must be one of {', '.join(map(repr, TESTS))}, got {test!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"n (the number of resamples) must be an int >= 1, got {n!r}")
    if not 0 < confidence < 1:
        raise InvalidInputError(f"confidence must be between 0 and 1, got {confidence!r}")
    if not 0 < alpha < 1:
        raise InvalidInputError(f"alpha must be between 0 and 1, got {alpha!r}")
    if on_missing not in ("error", "intersect"):
        raise InvalidInputError(f"on_missing must be 'error' or 'intersect', got {on_missing!r}")
