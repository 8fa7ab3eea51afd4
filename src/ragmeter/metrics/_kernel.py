"""The fused per-query kernel behind :func:`ragmeter.evaluate_run` for the built-ins.

One dictionary of first ranks per query (built in C by ``dict(zip(...))``), then one walk
over the query's judgements, then every built-in metric at every cut-off from the sorted
hit ranks. Arguments are trusted: the public drivers validate them.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence

_DISCOUNT: list[float] = [1.0 / math.log2(i + 2) for i in range(1024)]


def _discount(rank: int) -> float:
    if rank >= len(_DISCOUNT):
        _DISCOUNT.extend(1.0 / math.log2(i + 2) for i in range(len(_DISCOUNT), rank * 2 + 2))
    return _DISCOUNT[rank]


def duplicates_in(ranked: Sequence[str]) -> list[str]:
    """The doc ids that occur more than once in ``ranked``."""
    seen: set[str] = set()
    dups: set[str] = set()
    for d in ranked:
        if d in seen:
            dups.add(d)
        seen.add(d)
    return sorted(dups)


def score_query(
    ranked: Sequence[str],
    judgements: Mapping[str, float],
    ks: Sequence[int],
    names: frozenset[str],
    relevance_level: float | None,
    out: dict[str, float],
) -> bool:
    """Write every requested built-in metric for one query into ``out``.

    Returns ``False`` (and writes nothing) when the query has no relevant judgement, and
    ``None``-free floats otherwise. ``ranked`` must be duplicate-free (checked by caller
    via the returned rank map size). Keys: ``name@k`` for each k, plus uncut ``map`` and
    ``mrr`` when those are requested.
    """
    pos = dict(zip(ranked, range(len(ranked))))
    rel_ranks: list[int] = []
    gain_hits: list[tuple[int, float]] = []
    pos_grades: list[float] = []
    n_rel = 0
    get = pos.get
    for doc, grade in judgements.items():
        if grade > 0:
            pos_grades.append(grade)
            relevant = relevance_level is None or grade >= relevance_level
            if relevant:
                n_rel += 1
            r = get(doc)
            if r is not None:
                gain_hits.append((r, grade))
                if relevant:
                    rel_ranks.append(r)
        elif relevance_level is not None and grade >= relevance_level:
            n_rel += 1
            r = get(doc)
            if r is not None:
                rel_ranks.append(r)
    if n_rel == 0:
        return False
    rel_ranks.sort()
    n_hits = len(rel_ranks)

    if "map" in names:
        ap_prefix = [0.0]
        acc = 0.0
        for j, r in enumerate(rel_ranks):
            acc += (j + 1) / (r + 1)
            ap_prefix.append(acc)
        out["map"] = acc / n_rel
    if "mrr" in names:
        out["mrr"] = 1.0 / (rel_ranks[0] + 1) if n_hits else 0.0
    if "ndcg" in names:
        gain_hits.sort()
        pos_grades.sort(reverse=True)
    for k in ks:
        c = bisect_left(rel_ranks, k) if n_hits else 0
        if "precision" in names:
            out[f"precision@{k}"] = c / k
        if "recall" in names:
            out[f"recall@{k}"] = c / n_rel
        if "hit_rate" in names:
            out[f"hit_rate@{k}"] = 1.0 if c else 0.0
        if "mrr" in names:
            out[f"mrr@{k}"] = 1.0 / (rel_ranks[0] + 1) if c else 0.0
        if "map" in names:
            out[f"map@{k}"] = ap_prefix[c] / n_rel
        if "ndcg" in names:
            ideal = 0.0
            for i, g in enumerate(pos_grades[:k]):
                ideal += g * _discount(i)
            dcg = 0.0
            for r, g in gain_hits:
                if r >= k:
                    break
                dcg += g * _discount(r)
            out[f"ndcg@{k}"] = dcg / ideal if ideal > 0 else 0.0
    return True
