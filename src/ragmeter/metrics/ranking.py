"""Ranking metric primitives: pure functions of ``(ranked, relevant, k)``.

``ranked`` is a list of doc ids, best first. ``relevant`` is a ``{doc_id: grade}``
mapping (a qrels row). These follow trec_eval (the conventions ragmeter reports under):

* A doc is **relevant** when its grade is ``> 0``; ``relevance_level=L`` raises the
  threshold to ``grade >= L`` (``trec_eval -l L``). Grade 0 (or negative) means judged
  non-relevant: ``{}`` and ``{"d": 0}`` are the same thing. Unjudged docs are non-relevant.
* **NDCG** uses linear gain ``grade / log2(rank + 1)`` over every doc with a positive grade
  (the relevance level does not change gains, as in trec_eval ``ndcg_cut``); the ideal DCG
  is built from all judged positive grades sorted descending, cut at ``k``.
* **Precision@k** divides by ``k`` even when fewer than ``k`` docs came back (``P_k``).
* **AP** divides by the number of relevant docs, not by ``min(R, k)`` (``map``/``map_cut_k``).
* A doc id repeated in ``ranked`` counts once, at its first (best) rank; later copies are
  wasted slots. (:func:`ragmeter.evaluate_run` goes further and refuses such a ranking.)
* A query with no relevant doc scores ``0.0`` here; the evaluation drivers leave such
  queries out of the mean instead.

Every function checks ``k`` (an int >= 1, or ``None`` where documented) and raises
:class:`~ragmeter.errors.InvalidInputError` otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ragmeter.errors import check_k

__all__ = [
    "average_precision",
    "dcg_at_k",
    "hit_rate_at_k",
    "judged_at_k",
    "ndcg_at_k",
    "precision_at_k",
    "recall_at_k",
    "reciprocal_rank",
]

Relevant = Mapping[str, float]


def _is_relevant(grade: float | None, relevance_level: float | None) -> bool:
    if grade is None:
        return False
    return grade > 0 if relevance_level is None else grade >= relevance_level


def _first_ranks(ranked: Sequence[str], k: int | None) -> dict[str, int]:
    """``{doc_id: 0-based first rank}`` over the top ``k`` (all when ``None``)."""
    top = ranked if k is None else ranked[:k]
    ranks: dict[str, int] = {}
    for i, doc in enumerate(top):
        ranks.setdefault(doc, i)
    return ranks


def _relevant_hit_ranks(
    ranked: Sequence[str], relevant: Relevant, k: int | None, relevance_level: float | None
) -> list[int]:
    ranks = _first_ranks(ranked, k)
    return sorted(r for d, r in ranks.items() if _is_relevant(relevant.get(d), relevance_level))


def _n_relevant(relevant: Relevant, relevance_level: float | None) -> int:
    return sum(1 for g in relevant.values() if _is_relevant(g, relevance_level))


def dcg_at_k(ranked: Sequence[str], relevant: Relevant, k: int) -> float:
    """Discounted cumulative gain of ``ranked`` at cut-off ``k``.

    ``sum(grade_i / log2(i + 2))`` over the top ``k`` results (``i`` 0-based), counting only
    positive grades; unjudged docs gain 0; a repeated doc gains only at its first rank.

    >>> round(dcg_at_k(['d1', 'x', 'd2'], {'d1': 1.0, 'd2': 1.0}, 3), 4)
    1.5
    """
    check_k(k)
    total = 0.0
    for doc, i in _first_ranks(ranked, k).items():
        grade = relevant.get(doc)
        if grade is not None and grade > 0:
            total += grade / math.log2(i + 2)
    return total


def _ideal_dcg(relevant: Relevant, k: int) -> float:
    gains = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_at_k(ranked: Sequence[str], relevant: Relevant, k: int) -> float:
    """Normalised DCG at cut-off ``k`` (trec_eval ``ndcg_cut_k``), in ``[0, 1]``.

    :func:`dcg_at_k` divided by the DCG of the ideal ranking of every judged doc with a
    positive grade, cut at ``k``. ``0.0`` when no doc has a positive grade or nothing
    relevant was retrieved.

    >>> ndcg_at_k(['d1', 'd2'], {'d1': 1.0, 'd2': 1.0}, 2)  # perfect order
    1.0
    >>> round(ndcg_at_k(['x', 'd1'], {'d1': 1.0}, 2), 4)  # relevant doc at rank 2
    0.6309
    """
    check_k(k)
    ideal = _ideal_dcg(relevant, k)
    if ideal <= 0.0:
        return 0.0
    return dcg_at_k(ranked, relevant, k) / ideal


def recall_at_k(
    ranked: Sequence[str], relevant: Relevant, k: int, *, relevance_level: float | None = None
) -> float:
    """Relevant docs in the top ``k`` over all relevant docs (trec_eval ``recall_k``).

    ``0.0`` when the query has no relevant doc.

    >>> recall_at_k(['d1', 'x', 'd2'], {'d1': 1.0, 'd2': 1.0}, 2)
    0.5
    >>> recall_at_k(['d1', 'x', 'd2'], {'d1': 1.0, 'd2': 1.0}, 3)
    1.0
    """
    check_k(k)
    n_rel = _n_relevant(relevant, relevance_level)
    if n_rel == 0:
        return 0.0
    return len(_relevant_hit_ranks(ranked, relevant, k, relevance_level)) / n_rel


def precision_at_k(
    ranked: Sequence[str], relevant: Relevant, k: int, *, relevance_level: float | None = None
) -> float:
    """Distinct relevant docs in the top ``k``, divided by ``k`` itself (trec_eval ``P_k``).

    A run that returns only 3 docs still divides by ``k=10``.

    >>> precision_at_k(['d1', 'x', 'd2'], {'d1': 1.0, 'd2': 1.0}, 2)
    0.5
    >>> precision_at_k(['d1'], {'d1': 1.0}, 10)
    0.1
    """
    check_k(k)
    return len(_relevant_hit_ranks(ranked, relevant, k, relevance_level)) / k


def reciprocal_rank(
    ranked: Sequence[str],
    relevant: Relevant,
    k: int | None = None,
    *,
    relevance_level: float | None = None,
) -> float:
    """``1 / rank`` of the first relevant doc within ``k`` (``0.0`` if none).

    Averaged over queries this is MRR; ``k=None`` looks at the whole ranking (trec_eval
    ``recip_rank``).

    >>> reciprocal_rank(['x', 'd1', 'd2'], {'d1': 1.0})
    0.5
    >>> reciprocal_rank(['x', 'd1'], {'d1': 1.0}, k=1)  # relevant doc past the cut-off
    0.0
    """
    if k is not None:
        check_k(k)
    hits = _relevant_hit_ranks(ranked, relevant, k, relevance_level)
    return 1.0 / (hits[0] + 1) if hits else 0.0


def average_precision(
    ranked: Sequence[str],
    relevant: Relevant,
    k: int | None = None,
    *,
    relevance_level: float | None = None,
) -> float:
    """Average precision: the per-query term of MAP (trec_eval ``map`` / ``map_cut_k``).

    The sum of the precision at each relevant doc's rank (within ``k`` when given), divided
    by the number of relevant docs, so a query with 20 relevant docs caps at 0.25 at
    ``k=5``. ``0.0`` when the query has no relevant doc.

    >>> average_precision(['d1', 'x', 'd2'], {'d1': 1.0, 'd2': 1.0})
    0.8333333333333333
    """
    if k is not None:
        check_k(k)
    n_rel = _n_relevant(relevant, relevance_level)
    if n_rel == 0:
        return 0.0
    hits = _relevant_hit_ranks(ranked, relevant, k, relevance_level)
    return sum((j + 1) / (r + 1) for j, r in enumerate(hits)) / n_rel


def hit_rate_at_k(
    ranked: Sequence[str], relevant: Relevant, k: int, *, relevance_level: float | None = None
) -> float:
    """``1.0`` if any relevant doc is in the top ``k``, else ``0.0`` (trec_eval ``success_k``).

    >>> hit_rate_at_k(['x', 'd1'], {'d1': 2}, 2), hit_rate_at_k(['x', 'd1'], {'d1': 2}, 1)
    (1.0, 0.0)
    """
    check_k(k)
    return 1.0 if _relevant_hit_ranks(ranked, relevant, k, relevance_level) else 0.0


def judged_at_k(ranked: Sequence[str], judgements: Mapping[str, object], k: int) -> float:
    """The share of the top ``k`` that is judged (has any grade, 0 included), as
    ir_measures' ``Judged@k``: judged docs among the first ``min(k, len(ranked))`` divided
    by that number; ``0.0`` for an empty ranking. A low value says the other scores are
    lower bounds: unjudged docs count as non-relevant.

    >>> judged_at_k(['d1', 'new', 'd2', 'new2'], {'d1': 1, 'd2': 0}, 10)
    0.5
    >>> judged_at_k(['d1', 'new'], {'d1': 1}, 1), judged_at_k([], {'d1': 1}, 10)
    (1.0, 0.0)
    """
    check_k(k)
    top = ranked[:k]
    if not top:
        return 0.0
    return sum(1 for doc in top if doc in judgements) / len(top)
