"""What a report records beside its numbers: the :class:`Conventions` they were computed
under, how much of what was retrieved was judged (:class:`JudgedShare`) and the
:class:`WarningLog` of the evaluation."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from functools import cached_property
from typing import Any

from ragmeter._version import __version__

__all__ = [
    "UNJUDGED_JUDGED_ONLY",
    "UNJUDGED_NON_RELEVANT",
    "Conventions",
    "JudgedShare",
    "WarningLog",
]

UNJUDGED_NON_RELEVANT = (
    "unjudged docs count as non-relevant, so scores are lower bounds; judged@k is the share "
    "of the top min(k, n) docs that is judged (ir_measures Judged@k)"
)
"""``Conventions.unjudged`` of a report scored as trec_eval scores by default."""
UNJUDGED_JUDGED_ONLY = (
    "judged_only (trec_eval -J): unjudged docs, and docs with a negative grade (trec_eval: "
    "in the pool, not judged), are removed from each ranking before scoring and the ranks "
    "closed up (condensed lists, Sakai 2007); judged@k is of the full ranking"
)
"""``Conventions.unjudged`` of a report scored with ``judged_only=True``."""


@dataclass(frozen=True)
class Conventions:
    """The rules a report's numbers were computed under, so two numbers compare honestly."""

    relevance_level: float | None = None
    """``None``: a doc is relevant when its grade > 0; else grade >= this (trec_eval -l)."""
    ties: str = "list order"
    """How equal scores were ordered: ``"list order"`` or trec_eval's order."""
    duplicates: str = "rejected"
    """What a repeated doc id in a ranking does."""
    cutoff: str = (
        "trec_eval: P@k divides by k; recall@k by all relevant; map@k by all relevant; "
        "ndcg@k linear gain, ideal from all judged positive grades cut at k"
    )
    averaging: str = (
        "mean over queries with >= 1 relevant judgement; a judged query missing from the "
        "run scores 0 and counts in the mean (= trec_eval -c)"
    )
    """Which queries the means are over (``missing_queries="zero"`` or ``"skip"``); runs
    for unjudged queries are always ignored."""
    unjudged: str = UNJUDGED_NON_RELEVANT
    """What a retrieved doc without a judgement does (``judged_only`` or not)."""
    ragmeter_version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return asdict(self)


@dataclass
class JudgedShare:
    """How much of what the rankings hold is judged: ``judged@k`` (ir_measures' ``Judged@k``,
    the share of a ranking's top ``min(k, n)`` docs that has a judgement, any grade) per
    query and on average, and the counts behind the unjudged-docs warning.

    ``means`` holds ``judged@k`` at each of the report's cut-offs, averaged like its metrics
    (a judged query with no ranking counts ``0.0`` under ``missing_queries="zero"``);
    ``per_query`` every query's ``{"judged@k": share}`` (empty when per-query scores were not
    kept). The counts pool the docs of the scored rankings at one cut-off, ``k`` (10 when the
    report has it, else the one nearest 10): ``documents`` in their tops (``min(k, n)``
    each), of which ``unjudged`` have no judgement; ``queries`` rankings that hold a doc, of
    which ``queries_with_unjudged`` have an unjudged doc in their top ``k``. The report warns
    when the judged ``share`` is under ``threshold``, unless the qrels judge no doc
    non-relevant (``relevant_only``: many collections list only the relevant docs, and
    then ``judged@k`` is ``precision@k`` and says nothing about what was never judged; it
    is looked at only when the share is under the threshold, ``None`` otherwise);
    ``judged_only`` says whether the unjudged docs were removed before scoring (trec_eval
    ``-J``).

    >>> j = JudgedShare(k=10, documents=200, unjudged=50, queries=20,
    ...                 queries_with_unjudged=12, threshold=0.9, keys=("judged@10",))
    >>> j.share, j.below_threshold
    (0.75, True)
    >>> j.set_rows(["q1", "q2"], [[1.0], [0.5]], 2)
    >>> j.means, j.per_query["q2"]
    ({'judged@10': 0.75}, {'judged@10': 0.5})
    """

    k: int
    documents: int
    unjudged: int
    queries: int
    queries_with_unjudged: int
    threshold: float
    judged_only: bool = False
    relevant_only: bool | None = None
    keys: tuple[str, ...] = ()
    """The ``judged@k`` keys, one per cut-off, in order."""

    def __post_init__(self) -> None:
        self._ids: Sequence[str] = ()
        self._values: Sequence[Sequence[float]] = ()
        self._n = 0
        self._means: dict[str, float] | None = None

    def set_rows(self, ids: Sequence[str], values: Sequence[Sequence[float]], n: int) -> None:
        """Set the per-query values (``values[i]``: query ``ids[i]``'s share at each of
        ``keys``) and how many queries the means are over (``means`` and ``per_query`` are
        computed from them when first asked for)."""
        self._ids, self._values, self._n, self._means = ids, values, n, None
        self.__dict__.pop("per_query", None)
        self.__dict__.pop("means", None)

    def set_means(self, means: Mapping[str, float]) -> None:
        """Set the means (for a run whose per-query values were not kept)."""
        self._means = dict(means)
        self.__dict__.pop("means", None)

    @cached_property
    def means(self) -> dict[str, float]:
        """``judged@k``'s mean at each cut-off (``math.fsum`` over the queries / their number)."""
        if self._means is not None:
            return dict(self._means)
        if not self._n:
            return {}
        columns = zip(*self._values, strict=True)
        return {key: math.fsum(col) / self._n for key, col in zip(self.keys, columns, strict=True)}

    @cached_property
    def per_query(self) -> dict[str, dict[str, float]]:
        """Every query's ``{"judged@k": share}`` (empty when per-query scores were not kept)."""
        keys = self.keys
        rows = zip(self._ids, self._values, strict=True)
        return {q: dict(zip(keys, v, strict=True)) for q, v in rows}

    @property
    def share(self) -> float:
        """The share of the top-``k`` docs that is judged (``1.0`` when there are none)."""
        return 1.0 - self.unjudged / self.documents if self.documents else 1.0

    @property
    def below_threshold(self) -> bool:
        """Whether the judged share is under ``threshold`` (then the report warns, unless
        the qrels list relevant docs only)."""
        return self.unjudged > 0 and self.share < self.threshold

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form, with the ``share``, without ``per_query`` (the report writes it
        as ``judged_per_query``, row by row)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "keys"}
        out["means"] = dict(self.means)
        out["share"] = self.share
        return out

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], per_query: Mapping[str, Mapping[str, Any]] | None = None
    ) -> JudgedShare:
        """Rebuild from :meth:`to_dict` output (``share`` is recomputed) and the report's
        ``judged_per_query``."""
        share = cls(
            k=int(data["k"]),
            documents=int(data["documents"]),
            unjudged=int(data["unjudged"]),
            queries=int(data["queries"]),
            queries_with_unjudged=int(data["queries_with_unjudged"]),
            threshold=float(data["threshold"]),
            judged_only=bool(data.get("judged_only", False)),
            relevant_only=None
            if data.get("relevant_only") is None
            else bool(data["relevant_only"]),
            keys=tuple(str(k) for k in (data.get("means") or {})),
        )
        rows = per_query or {}
        values = [[float(row[k]) for k in share.keys] for row in rows.values()]
        share.set_rows([str(q) for q in rows], values, 0)
        share.set_means({str(k): float(v) for k, v in (data.get("means") or {}).items()})
        return share


class WarningLog:
    """Collects plain-English warnings raised during an evaluation (seed 004's WarningLog).

    >>> log = WarningLog()
    >>> log.add("score", "broken", "the 'broken' metric raised")
    >>> print(log.entries[0])
    CAUTION [score] (broken): the 'broken' metric raised
    """

    def __init__(self) -> None:
        self.entries: list[str] = []

    def add(self, stage: str, source: str, message: str) -> None:
        """Record one warning."""
        self.entries.append(f"CAUTION [{stage}] ({source}): {message}")

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Any:
        return iter(self.entries)
