"""The per-query rows a run keeps: their shape, their order and their means.

A kept row is ``(qrels position, query id, metrics, judged@k values)``; the report lists
the queries in qrels order, with each key's mean taken by ``math.fsum`` (exact, so the same
float whatever order the rows came in).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import itemgetter

__all__ = ["Row", "column_means", "kept_rows", "order_keys"]

Row = tuple[int, str, dict[str, float], list[float]]
"""A kept query: qrels position, query id, its metrics, its ``judged@k`` at each cut-off."""


def order_keys(keys: Sequence[str], names: Sequence[str], ks: Sequence[int]) -> list[str]:
    """``keys`` in the order of the metric ``names``, each at its cut-offs then uncut.

    >>> order_keys(["map", "ndcg@1", "judged@1", "map@1"], ["ndcg", "map", "judged"], [1])
    ['ndcg@1', 'map@1', 'map', 'judged@1']
    """
    present = set(keys)
    ordered: list[str] = []
    for name in dict.fromkeys(names):
        for k in ks:
            key = f"{name}@{k}"
            if key in present:
                ordered.append(key)
        if name in present:
            ordered.append(name)
    return ordered


def kept_rows(
    rows: list[Row], absent: list[Row], failed: set[str]
) -> tuple[dict[str, dict[str, float]], list[str], list[list[float]]]:
    """The per-query rows in qrels order, without the custom metrics that failed, then the
    query ids and their ``judged@k`` values, in the same order."""
    entries = rows + absent if absent else rows
    entries.sort(key=itemgetter(0))
    ids = [entry[1] for entry in entries]
    judged = [entry[3] for entry in entries]
    if not failed:
        return dict(zip(ids, [entry[2] for entry in entries], strict=True)), ids, judged
    per_q: dict[str, dict[str, float]] = {}
    for _, qid, row, _ in entries:
        for key in [k for k in row if k.split("@", 1)[0] in failed]:
            del row[key]
        per_q[qid] = row
    return per_q, ids, judged


def column_means(
    per_q: dict[str, dict[str, float]],
    ordered: list[str],
    keys: list[str],
    n: int,
    *,
    custom: bool,
) -> dict[str, float]:
    """Each key's mean over the kept rows (``math.fsum``: exact, in any order). Without
    ``custom`` metrics every row holds exactly ``keys``, in order."""
    if custom:
        return {key: math.fsum(row[key] for row in per_q.values()) / n for key in ordered}
    columns = zip(*(row.values() for row in per_q.values()), strict=True)
    return {key: math.fsum(col) / n for key, col in zip(keys, columns, strict=True)}
