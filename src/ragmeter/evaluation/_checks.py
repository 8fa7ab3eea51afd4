"""The checks every retrieval driver makes on its options and ids, before any scoring.

Ids are compared as strings: ``1`` and ``"1"`` are one id, two keys that become the same
string are refused, and anything else that is not a ``str`` or an int (a float such as
``1.0``, ``None``, a bool) is refused, since its string would not match the id meant.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from ragmeter._types import MAX_GRADE, MISSING_QUERIES, MissingQueries
from ragmeter.errors import InvalidInputError, check_k
from ragmeter.metrics.registry import METRICS, RetrievalMetric
from ragmeter.report import WarningLog

V = TypeVar("V")

PerQuery: TypeAlias = "bool | str | os.PathLike[str]"
"""What a driver does with every query's scores: keep them (``True``), keep only mergeable
aggregates (``False``), or write them to a ``.jsonl``/``.jsonl.gz``/``.parquet`` file."""

_STR = frozenset({str})

JUDGED_THRESHOLD = 0.9
"""The default ``judged_threshold``: warn when under 90% of the top-k docs are judged."""


@dataclass(frozen=True)
class RunOptions:
    """The options of a retrieval driver, checked (see :func:`check_options`)."""

    metrics: list[tuple[str, RetrievalMetric]]
    """``(name, metric)`` per distinct name, in the order given."""
    ks: tuple[int, ...]
    """The cut-offs, sorted and distinct."""
    level: float | None
    """``relevance_level``: a doc is relevant when its grade ``>=`` it (``None``: ``> 0``)."""
    mode: MissingQueries
    """What a judged query without a ranking does to the mean."""
    judged_only: bool = False
    """Score each ranking with its unjudged docs removed and the ranks closed up
    (trec_eval ``-J``; condensed lists)."""
    judged_threshold: float = JUDGED_THRESHOLD
    """Warn when the share of judged docs in the top k (at :func:`judged_cutoff`) is below it."""


def check_options(
    metrics: Iterable[str] | str,
    k_values: Iterable[int] | int,
    relevance_level: object,
    missing_queries: object,
    *,
    judged_only: object = False,
    judged_threshold: object = JUDGED_THRESHOLD,
) -> RunOptions:
    """Check a driver's options in the order every driver reports them.

    Raises :class:`~ragmeter.errors.UnknownMetricError` for an unregistered metric and
    :class:`~ragmeter.errors.InvalidInputError` for an empty metric list, a ``k < 1``, no
    ``k``, a relevance level that is not a finite number, a ``missing_queries`` rule
    other than ``"zero"`` and ``"skip"``, a ``judged_only`` that is not a bool or a
    ``judged_threshold`` outside ``[0, 1]``.

    >>> check_options("ndcg", [10, 1, 10], None, "zero").ks
    (1, 10)
    """
    return RunOptions(
        metrics=resolve_metrics(metrics),
        ks=check_ks(k_values),
        level=check_level(relevance_level),
        mode=check_missing(missing_queries),
        judged_only=check_flag(judged_only, "judged_only"),
        judged_threshold=check_threshold(judged_threshold),
    )


def check_flag(value: object, name: str) -> bool:
    """A yes/no option: ``True`` or ``False`` only (not ``"no"``, which is truthy)."""
    if value is True or value is False:
        return value
    raise InvalidInputError(f"{name} must be True or False, got {value!r:.80}")


def check_threshold(value: object) -> float:
    """``judged_threshold``: a number in ``[0, 1]`` (``0`` never warns)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    raise InvalidInputError(
        "judged_threshold must be a number from 0 to 1 (the share of judged docs in the top "
        f"k below which the report warns; 0 never warns), got {value!r:.80}"
    )


def judged_cutoff(ks: Sequence[int]) -> int:
    """The cut-off the unjudged-docs warning looks at: 10 when it is among ``ks`` (the
    headline NDCG@10's), else the one nearest 10 (the smaller of two as near).

    >>> judged_cutoff((1, 10, 100)), judged_cutoff((5, 20)), judged_cutoff((100,))
    (10, 5, 100)
    """
    return min(ks, key=lambda k: (abs(k - 10), k))


def check_per_query(per_query: object) -> tuple[bool, Path | None]:
    """``(keep the rows, file to write them to)`` for a driver's ``per_query`` option."""
    from ragmeter.io.scores import score_format

    if per_query is True or per_query is False:
        return per_query, None
    if isinstance(per_query, (str, os.PathLike)):
        score_format(per_query)
        return False, Path(per_query)
    raise InvalidInputError(
        "per_query must be True, False or a file path ending in .jsonl, .jsonl.gz or "
        f".parquet; got {per_query!r:.80}"
    )


def resolve_metrics(metrics: Iterable[str] | str) -> list[tuple[str, RetrievalMetric]]:
    """``(name, metric)`` for each distinct registered name, in the order given."""
    if isinstance(metrics, str):
        metrics = [metrics]
    resolved: list[tuple[str, RetrievalMetric]] = []
    seen: set[str] = set()
    for name in metrics:
        metric = METRICS.get_metric(name)
        if name not in seen:
            seen.add(name)
            resolved.append((name, metric))
    if not resolved:
        raise InvalidInputError("metrics is empty: name at least one metric, e.g. ['ndcg']")
    return resolved


def check_ks(k_values: Iterable[int] | int) -> tuple[int, ...]:
    """The cut-offs sorted and distinct; each a positive int, at least one."""
    if isinstance(k_values, int):
        k_values = (k_values,)
    ks = tuple(sorted({check_k(k, name="every k in k_values") for k in k_values}))
    if not ks:
        raise InvalidInputError("k_values is empty: give at least one cut-off, e.g. (10,)")
    return ks


def check_level(level: object) -> float | None:
    """``relevance_level`` as given: ``None`` or a finite number within ``±2**53``."""
    if level is None:
        return None
    if (
        isinstance(level, bool)
        or not isinstance(level, (int, float))
        or not -MAX_GRADE <= level <= MAX_GRADE
    ):
        raise InvalidInputError(
            f"relevance_level must be a finite number (a doc is relevant when its grade >= "
            f"it, like trec_eval -l) or None (grade > 0), got {level!r}"
        )
    return level


def check_missing(value: object) -> MissingQueries:
    """``missing_queries``: ``"zero"`` (= ``trec_eval -c``) or ``"skip"`` (its default)."""
    if value == "zero":
        return "zero"
    if value == "skip":
        return "skip"
    choices = "; ".join(f"{k!r}: {v}" for k, v in MISSING_QUERIES.items())
    raise InvalidInputError(f"missing_queries must be 'zero' or 'skip', got {value!r} ({choices})")


def is_judged_relevant(judgements: Mapping[str, float], level: float | None) -> bool:
    """Whether some judgement makes a doc relevant at ``level`` (a query that is scored)."""
    if level is None:
        return any(g > 0 for g in judgements.values())
    return any(g >= level for g in judgements.values())


def ordering_of(run: Any) -> str:
    """How the run's rankings were ordered (a TREC run says; a dict is in list order)."""
    return str(getattr(run, "ordering", "list order"))


def log_read_notes(log: WarningLog, *sources: Any) -> None:
    """Carry what a reader noted about its input (``source.warnings``) into ``log``."""
    for source in sources:
        for note in getattr(source, "warnings", None) or ():
            log.add("read", str(getattr(source, "source", None) or "input"), str(note))


def str_keys(mapping: Mapping[Any, V], what: str) -> Mapping[str, V]:
    """``mapping`` with its keys as ``str`` (the same object when they already are).

    Raises :class:`InvalidInputError` when two keys become the same string (``1`` and
    ``"1"``): keeping one would silently drop the other.

    >>> str_keys({1: "a", "2": "b"}, "run")
    {'1': 'a', '2': 'b'}
    """
    if not isinstance(mapping, Mapping):
        raise InvalidInputError(
            f"{what} must be a mapping {{id: ...}}, got {type(mapping).__name__}"
        )
    if _STR.issuperset(map(type, mapping)):  # the usual case, checked at C speed
        return mapping
    out: dict[str, V] = {}
    original: dict[str, Any] = {}
    for key, value in mapping.items():
        text = id_text(key, what)
        if text in out:
            raise InvalidInputError(
                f"{what} has both {original[text]!r} ({type(original[text]).__name__}) and "
                f"{key!r} ({type(key).__name__}) as ids; ids are compared as strings, so they "
                "are the same id: merge them"
            )
        out[text] = value
        original[text] = key
    return out


def id_text(value: object, where: str) -> str:
    """An id as the string it is compared as: a ``str`` as is, an int as its digits.

    Anything else (a float such as ``1.0``, ``None``, a bool, a list) is refused: its
    string would not match the id the user meant.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    raise InvalidInputError(
        f"{where}: id {value!r} is a {type(value).__name__}; ids must be strings (ints are "
        "read as their digits, so 1 and '1' are the same id)"
    )


def as_ranking(qid: object, ranked: object) -> Sequence[str]:
    """Accept any sequence of doc ids; refuse a string or a ``{doc: score}`` mapping."""
    if isinstance(ranked, (str, bytes)) or not isinstance(ranked, Sequence):
        hint = (
            " (a {doc_id: score} mapping has no rank order: sort it, or write it as a TREC run "
            "and read it with read_trec_run, which orders it the way trec_eval does)"
            if isinstance(ranked, Mapping)
            else ""
        )
        raise InvalidInputError(
            f"the run for query {qid!r} must be a list of doc ids, best first; got "
            f"{type(ranked).__name__} {ranked!r:.80}{hint}"
        )
    return ranked
