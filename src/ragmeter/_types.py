"""The shapes every layer shares: a run, qrels, and the largest grade (one definition each).

A **run** (:data:`RunLike`) maps a query id to its ranked doc ids, best first
(``{"q1": ["d3", "d1"]}``); **qrels** map a query id to graded judgements
(``{"q1": {"d1": 2, "d7": 0}}``; grade > 0 is relevant at the default relevance level 1,
trec_eval's convention).

>>> run: RunLike = {"q1": ["d3", "d1"]}
>>> qrels: Qrels = {"q1": {"d1": 2}}
>>> MAX_GRADE == 2.0**53
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, TypeAlias

__all__ = [
    "DEFAULT_K_VALUES",
    "FAILED_QUERIES",
    "MAX_GRADE",
    "MISSING_QUERIES",
    "FailedQueries",
    "MissingQueries",
    "Qrels",
    "RunLike",
]

Qrels: TypeAlias = Mapping[str, Mapping[str, float]]
"""``{query_id: {doc_id: grade}}``."""

RunLike: TypeAlias = Mapping[str, Sequence[str]]
"""``{query_id: [doc_id, ...]}``, best first: any mapping of ranked lists (a plain dict, or
:class:`ragmeter.Run`, the run a TREC file is read into, which keeps its scores too)."""

DEFAULT_K_VALUES: tuple[int, ...] = (1, 3, 5, 10, 20, 100)
"""The cut-offs every retrieval entry point scores at unless told otherwise."""

MAX_GRADE = float(2**53)
"""Largest grade magnitude accepted: ints up to 2**53 are exact as doubles, and a sum of
grades this size stays finite, so no NDCG can overflow to ``inf``/``nan``."""

MissingQueries = Literal["zero", "skip"]
MISSING_QUERIES: dict[str, str] = {
    "zero": "a judged query missing from the run scores 0 and counts in the mean (= trec_eval -c)",
    "skip": "a judged query missing from the run is left out of the mean "
    "(= trec_eval's default, without -c)",
}
"""What ``missing_queries=`` may be, and what each choice means."""

FailedQueries = Literal["zero", "skip"]
FAILED_QUERIES: dict[str, str] = {
    "zero": "a sample whose run failed before a ranking was captured scores 0 and counts in "
    "the mean",
    "skip": "a sample whose run failed before a ranking was captured is left out of the mean",
}
"""What ``failed_queries=`` may be (``evaluate_retrieval`` of every adapter)."""
