"""The shared per-query arrays every trec_eval measure is read from (trec_eval's res_rels).

For the evaluated queries (the qrels' queries, in byte order of their ids) it builds, once:

* ``rel``: an ``(n_queries, width)`` int matrix, row ``q`` holding the judgement of each
  retrieved doc in rank order: the grade (``>= 0``) of a judged doc, :data:`NONPOOL` (-1) for a
  doc the qrels do not list, :data:`UNJUDGED` (-2) for a doc listed with a negative grade (in the
  pool but not judged, as for infAP), and :data:`PAD` (-3) past the end of the ranking;
* ``num_ret``, ``num_rel`` (docs graded ``>= relevance_level``), ``rel_levels`` (how many
  judged docs have each grade ``0, 1, 2 ...``) and the counts of non-pool and unjudged docs.

A ranking given as ``{doc: score}`` is ordered as trec_eval orders it: score descending, ties
by doc id descending (byte order). A ranking given as a list is taken in its order.
``max_retrieved`` keeps the first N (``-M``); ``judged_only`` then drops the docs that are not
judged (``-J``), closing the gaps.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import chain, islice, repeat

import numpy as np
import numpy.typing as npt

from ragmeter.errors import DuplicateDocumentError, InvalidInputError

__all__ = [
    "BOGUS_DOC",
    "NONPOOL",
    "PAD",
    "UNJUDGED",
    "Ranked",
    "RunRanking",
    "build",
    "with_level",
]

NONPOOL = -1
UNJUDGED = -2
PAD = -3
_MISSING = -(1 << 62)
#: the one doc trec_eval -c ranks for a query the run lacks
BOGUS_DOC = "ceci_nest_pas_un_docno"

IntArray = npt.NDArray[np.int64]
RunRanking = Mapping[str, float] | Sequence[str]


@dataclass(frozen=True)
class Ranked:
    """The evaluated queries' judgements by rank, and the counts measures share."""

    qids: list[str]
    rel: IntArray
    num_ret: IntArray
    num_rel: IntArray
    rel_levels: IntArray
    num_nonpool: IntArray
    num_unjudged: IntArray
    relevance_level: int
    missing: npt.NDArray[np.bool_]

    @property
    def num_rel_levels(self) -> IntArray:
        """Per query, 1 + the highest grade some judged doc has (0 when none is judged)."""
        present = self.rel_levels > 0
        last = present.shape[1] - np.argmax(present[:, ::-1], axis=1)
        return np.where(present.any(axis=1), last, 0).astype(np.int64)


def _trec_order(scores: Mapping[str, float]) -> list[str]:
    return sorted(scores, key=lambda d: (scores[d], d.encode()), reverse=True)


def _ordered(run: Mapping[str, RunRanking], qids: list[str]) -> list[Collection[str]]:
    """Each query's doc ids in rank order; a vectorised check skips sorting sorted dicts
    (such a dict is returned as is: iterating it gives its ids in rank order)."""
    rankings = [run[q] for q in qids]
    is_dict = [type(r) is dict or isinstance(r, Mapping) for r in rankings]
    scored = [i for i, d in enumerate(is_dict) if d]
    out: list[Collection[str]] = [
        [] if d else _checked_list(qids[i], r)  # type: ignore[arg-type]
        for i, (r, d) in enumerate(zip(rankings, is_dict, strict=True))
    ]
    if not scored or not any(len(rankings[i]) for i in scored):
        for i in scored:
            out[i] = list(rankings[i])
        return out
    dicts = [rankings[i] for i in scored]
    lens = np.fromiter(map(len, dicts), np.int64, len(dicts))
    values = np.fromiter(
        chain.from_iterable(d.values() for d in dicts),  # type: ignore[union-attr]
        np.float64,
        int(lens.sum()),
    )
    ends = np.cumsum(lens)
    strictly_down = np.ones(len(values), dtype=bool)
    if len(values) > 1:
        strictly_down[1:] = values[1:] < values[:-1]
    strictly_down[ends[lens > 0] - lens[lens > 0]] = True  # first doc of each query
    ups = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(~strictly_down, out=ups[1:])
    bad = ups[ends] - ups[ends - lens]  # per query: ranks not strictly below the one above
    for j, i in enumerate(scored):
        d = rankings[i]
        if lens[j] > 1 and bad[j] > 0:
            out[i] = _trec_order(d)  # type: ignore[arg-type]
        else:
            out[i] = d  # a sorted dict ranks in key order
    return out


def _checked_list(qid: str, docs: Sequence[str]) -> list[str]:
    listed = list(docs)
    if len(set(listed)) != len(listed):
        seen: set[str] = set()
        repeated = []
        for doc in listed:
            if doc in seen:
                repeated.append(doc)
            seen.add(doc)
        raise DuplicateDocumentError(qid, repeated)
    return listed


def build(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, RunRanking],
    *,
    relevance_level: int = 1,
    judged_only: bool = False,
    max_retrieved: int | None = None,
    complete: bool = False,
) -> Ranked:
    """The :class:`Ranked` arrays of ``run`` against ``qrels`` (see the module docstring).

    The evaluated queries are the qrels' queries the run has, or all the qrels' queries when
    ``complete`` (``-c``): a query the run lacks then ranks one unjudged doc, as in trec_eval.
    """
    qids = sorted(qrels, key=str.encode)
    missing = [q not in run for q in qids]
    if not complete:
        qids = [q for q, m in zip(qids, missing, strict=True) if not m]
        missing = [False] * len(qids)
    full_run: dict[str, RunRanking] = {
        q: ([BOGUS_DOC] if m else run[q]) for q, m in zip(qids, missing, strict=True)
    }
    docs = _ordered(full_run, qids)
    if max_retrieved is not None:
        if max_retrieved < 0:
            raise InvalidInputError(f"max_retrieved must be >= 0, got {max_retrieved}")
        docs = [list(islice(d, max_retrieved)) for d in docs]
    lens = np.fromiter(map(len, docs), np.int64, len(docs))
    codes = chain.from_iterable(
        map(qrels[q].get, ranked, repeat(_MISSING)) for q, ranked in zip(qids, docs, strict=True)
    )
    flat = np.fromiter(codes, np.int64, int(lens.sum()))
    flat = np.where(flat == _MISSING, NONPOOL, np.where(flat < 0, UNJUDGED, flat))
    if judged_only:
        keep = flat >= 0
        kept = np.zeros(len(flat) + 1, dtype=np.int64)
        np.cumsum(keep, out=kept[1:])
        ends = np.cumsum(lens)
        lens = kept[ends] - kept[ends - lens]
        flat = flat[keep]
    width = max(int(lens.max()) if len(lens) else 0, 1)
    rel = np.full((len(qids), width), PAD, dtype=np.int64)
    rel[np.arange(width)[None, :] < lens[:, None]] = flat  # row-major: each query's ranks
    levels = _rel_levels(qrels, qids)
    num_rel = levels[:, max(relevance_level, 0) :].sum(axis=1) if len(qids) else lens * 0
    return Ranked(
        qids=qids,
        rel=rel,
        num_ret=lens,
        num_rel=np.asarray(num_rel, dtype=np.int64),
        rel_levels=levels,
        num_nonpool=(rel == NONPOOL).sum(axis=1).astype(np.int64),
        num_unjudged=(rel == UNJUDGED).sum(axis=1).astype(np.int64),
        relevance_level=relevance_level,
        missing=np.array(missing, dtype=bool),
    )


def with_level(ranked: Ranked, relevance_level: int) -> Ranked:
    """The same rankings with another relevance level (``num_rel`` recounted)."""
    num_rel = ranked.rel_levels[:, max(relevance_level, 0) :].sum(axis=1).astype(np.int64)
    return replace(ranked, relevance_level=relevance_level, num_rel=num_rel)


def _rel_levels(qrels: Mapping[str, Mapping[str, int]], qids: list[str]) -> IntArray:
    """``(n_queries, max_grade + 1)`` counts of judged docs per grade (negative grades skipped)."""
    lens = np.fromiter((len(qrels[q]) for q in qids), np.int64, len(qids))
    grades = np.fromiter(
        chain.from_iterable(qrels[q].values() for q in qids), np.int64, int(lens.sum())
    )
    rows = np.repeat(np.arange(len(qids)), lens)
    keep = grades >= 0
    grades, rows = grades[keep], rows[keep]
    n_levels = int(grades.max()) + 1 if len(grades) else 1
    flat = np.bincount(rows * n_levels + grades, minlength=len(qids) * n_levels)
    return flat.reshape(len(qids), n_levels).astype(np.int64)
