"""alpha-nDCG@k over subtopic qrels (Clarke et al., SIGIR 2008), as TREC's ndeval computes it.

Subtopic qrels list, per query, which docs are relevant (grade ``>= relevance_level``) to
which subtopic (intent): the TREC diversity format ``qid subtopic docno grade``, read with
:func:`parse_subtopic_qrels`. A doc's gain at rank ``i`` is ``sum over its subtopics s of
(1 - alpha) ** (docs above it relevant to s)``; alpha-DCG discounts it by ``log(2) /
log(i + 1)`` (none at rank 1). The ideal ranking is ndeval's greedy one over the judged docs
(at each rank the doc with the most gain, ties to the larger doc id), and alpha-nDCG@k is
the run's alpha-DCG@k over the ideal's. A query whose docs are relevant to no subtopic scores
0. The run is ranked as trec_eval ranks it (score descending, ties by doc id descending).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ragmeter.errors import DataFormatError, check_k
from ragmeter.metrics.trec._rank import RunRanking, _trec_order

__all__ = ["SubtopicQrels", "alpha_ndcg", "parse_subtopic_qrels"]

SubtopicQrels = Mapping[str, Mapping[str, Mapping[str, int]]]
"""``{qid: {subtopic: {docno: grade}}}``."""


def parse_subtopic_qrels(
    text: str, path: str | None = None
) -> dict[str, dict[str, dict[str, int]]]:
    """``{qid: {subtopic: {docno: grade}}}`` from ``qid subtopic docno grade`` lines.

    >>> parse_subtopic_qrels("1 1 a 1\\n1 2 a 0\\n1 2 b 1\\n")
    {'1': {'1': {'a': 1}, '2': {'a': 0, 'b': 1}}}
    """
    out: dict[str, dict[str, dict[str, int]]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 4:
            raise DataFormatError(
                f"expected 4 fields (qid subtopic docno grade), found {len(fields)}",
                path=path,
                line=number,
            )
        qid, subtopic, doc, grade = fields
        try:
            value = int(grade)
        except ValueError:
            raise DataFormatError(
                f"grade {grade!r} is not an integer", path=path, line=number
            ) from None
        out.setdefault(qid, {}).setdefault(subtopic, {})[doc] = value
    return out


def _discount(i: int) -> float:
    return 1.0 if i == 0 else math.log(2.0) / math.log(i + 2.0)


def _dcg(gains: list[list[int]], k: int, alpha: float, n_sub: int) -> float:
    remaining = [1.0] * n_sub
    total = 0.0
    for i, subtopics in enumerate(gains[:k]):
        score = 0.0
        for s in subtopics:
            score += remaining[s]
            remaining[s] *= 1.0 - alpha
        total += score * _discount(i)
    return total


def _ideal(docs: dict[str, list[int]], k: int, alpha: float, n_sub: int) -> list[list[int]]:
    remaining = [1.0] * n_sub
    left = dict(docs)
    picked: list[list[int]] = []
    while left and len(picked) < k:
        best = max(left, key=lambda d: (sum(remaining[s] for s in left[d]), d))
        for s in left.pop(best):
            remaining[s] *= 1.0 - alpha
        picked.append(docs[best])
    return picked


def alpha_ndcg(
    qrels: SubtopicQrels,
    run: Mapping[str, RunRanking],
    k: int,
    *,
    alpha: float = 0.5,
    relevance_level: int = 1,
) -> dict[str, float]:
    """alpha-nDCG@k per query of ``run`` (queries in both; see the module docstring).

    >>> q = {"1": {"a": {"d1": 1, "d2": 1}, "b": {"d2": 1, "d3": 1}}}
    >>> round(alpha_ndcg(q, {"1": ["d2", "d1", "d3"]}, 3)["1"], 4)
    1.0
    """
    check_k(k)
    out: dict[str, float] = {}
    for qid, ranking in run.items():
        if qid not in qrels:
            continue
        subtopics = [
            s for s, docs in qrels[qid].items() if any(g >= relevance_level for g in docs.values())
        ]
        index = {s: i for i, s in enumerate(subtopics)}
        relevant: dict[str, list[int]] = {}
        for s, judged in qrels[qid].items():
            for doc, grade in judged.items():
                relevant.setdefault(doc, [])
                if grade >= relevance_level and s in index:
                    relevant[doc].append(index[s])
        for doc in relevant:
            relevant[doc].sort()
        if not subtopics:
            out[qid] = 0.0
            continue
        ranked: Sequence[str] = (
            _trec_order(ranking) if isinstance(ranking, Mapping) else list(ranking)
        )
        run_dcg = _dcg([relevant.get(d, []) for d in ranked], k, alpha, len(subtopics))
        ideal = _dcg(_ideal(relevant, k, alpha, len(subtopics)), k, alpha, len(subtopics))
        out[qid] = run_dcg / ideal if run_dcg else 0.0
    return out
