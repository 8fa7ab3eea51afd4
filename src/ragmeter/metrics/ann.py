"""Approximate-vs-exact search checks and the mean rank of the first relevant result (seed 004).

:func:`recall_against_exact` says what fraction of an exact search's top ``k`` an approximate
(ANN, quantised) index also returned -- the number that turns "quantisation feels fine" into
a decision. :func:`mean_rank_of_first_relevant` says where, on average, the first relevant
result landed, together with how many queries never got one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragmeter.errors import InvalidInputError, check_k

__all__ = ["Scored", "mean_rank_of_first_relevant", "recall_against_exact"]


@dataclass(frozen=True, slots=True)
class Scored:
    """One search result: the chunk/doc ``id`` and its similarity ``score``."""

    id: str
    score: float

    def __post_init__(self) -> None:
        if not isinstance(self.id, str):
            raise InvalidInputError(f"Scored.id must be a str, got {self.id!r}")
        if (
            isinstance(self.score, bool)
            or not isinstance(self.score, (int, float))
            or math.isnan(self.score)
        ):
            raise InvalidInputError(
                f"Scored({self.id!r}): score must be a number (not NaN), got {self.score!r}"
            )


def _check_results(results: Sequence[Scored], name: str) -> Sequence[Scored]:
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise InvalidInputError(
            f"{name} must be a sequence of Scored, got {type(results).__name__}"
        )
    for i, r in enumerate(results):
        if not isinstance(r, Scored):
            raise InvalidInputError(f"{name}[{i}] must be a Scored, got {r!r}")
    return results


def recall_against_exact(approximate: Sequence[Scored], exact: Sequence[Scored], k: int) -> float:
    """Fraction of the distinct ids in ``exact[:k]`` that also occur in ``approximate[:k]``.

    Both lists are best first; scores are not compared, only ids. In [0, 1].

    Caution: an **empty** ``exact`` returns ``1.0`` (seed 004's convention), not 0.0 and not
    an error. It reads as "perfect recall" when what happened is "there was nothing to
    compare against" -- check that the exact run returned something before believing it.
    ``k`` must be an int >= 1 (:class:`~ragmeter.errors.InvalidInputError` otherwise).

    >>> exact = [Scored("c1", 0.9), Scored("c2", 0.8), Scored("c3", 0.7)]
    >>> approx = [Scored("c1", 0.9), Scored("c9", 0.75), Scored("c3", 0.7)]
    >>> recall_against_exact(approx, exact, k=3)
    0.6666666666666666
    >>> recall_against_exact(approx, exact, k=1)
    1.0
    >>> recall_against_exact(approx, [], k=3)
    1.0
    """
    check_k(k)
    _check_results(approximate, "approximate")
    _check_results(exact, "exact")
    if not exact:
        return 1.0
    wanted = {r.id for r in exact[:k]}
    found = {r.id for r in approximate[:k]}
    return len(wanted & found) / len(wanted)


def mean_rank_of_first_relevant(
    qrels: Mapping[str, Mapping[str, float]],
    run: Mapping[str, Sequence[str]],
    *,
    k: int | None = None,
) -> tuple[float | None, int]:
    """Mean 1-based rank of the first relevant doc, and how many queries had none.

    Returns ``(mean_rank, n_missed)``. Only queries with at least one doc of grade > 0 are
    considered (``{}`` and ``{"d": 0}`` are both "nothing relevant" and are left out). A
    query missing from ``run``, or whose top ``k`` (all, when ``k`` is ``None``) holds no
    relevant doc, counts in ``n_missed`` and not in the mean. ``mean_rank`` is ``None`` when
    no query found a relevant doc. A repeated id is found at its first (best) position.
    The two are returned together because a mean rank over 90 of 100 queries means
    something very different from one over 40 of them.

    >>> qrels = {"q1": {"c1": 2, "c2": 1}, "q2": {"c4": 2}, "q3": {"c7": 1}, "q4": {"c8": 0}}
    >>> run = {"q1": ["c3", "c1"], "q2": ["c4"], "q3": ["c5", "c6"]}
    >>> mean_rank_of_first_relevant(qrels, run)
    (1.5, 1)
    >>> mean_rank_of_first_relevant(qrels, run, k=1)
    (1.0, 2)
    """
    if k is not None:
        check_k(k)
    if not isinstance(qrels, Mapping):
        raise InvalidInputError(f"qrels must be a mapping, got {type(qrels).__name__}")
    if not isinstance(run, Mapping):
        raise InvalidInputError(f"run must be a mapping, got {type(run).__name__}")
    ranks: list[int] = []
    missed = 0
    for query_id, judgements in qrels.items():
        if not isinstance(judgements, Mapping):
            raise InvalidInputError(
                f"qrels[{query_id!r}] must be a mapping {{doc_id: grade}}, "
                f"got {type(judgements).__name__}"
            )
        relevant = {doc for doc, grade in judgements.items() if grade > 0}
        if not relevant:
            continue
        ranked = run.get(query_id, ())
        if isinstance(ranked, (str, bytes)):
            raise InvalidInputError(
                f"run[{query_id!r}] must be a list of doc ids, not a string: {ranked!r}"
            )
        top = ranked if k is None else ranked[:k]
        rank = next((i for i, doc in enumerate(top, start=1) if doc in relevant), None)
        if rank is None:
            missed += 1
        else:
            ranks.append(rank)
    if not ranks:
        return None, missed
    return sum(ranks) / len(ranks), missed
