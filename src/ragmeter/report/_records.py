"""What a report records beside its numbers: the :class:`Conventions` they were computed
under and the :class:`WarningLog` of the evaluation."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ragmeter._version import __version__

__all__ = ["Conventions", "WarningLog"]


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
    ragmeter_version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return asdict(self)


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
