"""How much of what a run retrieved is judged: the counts behind ``report.judged``.

The kernel gives each query's ``judged@k`` (the share of its top ``min(k, n)`` that has a
judgement); the scoring loop turns ``judged@k`` at one cut-off back into whole docs as it
goes (``round(share * min(k, n))``, exact), so these counts merge across partitions and
never depend on the order the queries came in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragmeter.evaluation._checks import RunOptions
from ragmeter.evaluation._notes import note_unjudged_top
from ragmeter.report import JudgedShare, WarningLog

__all__ = ["judged_share", "relevant_only", "warn_unjudged"]


def judged_share(
    top: Sequence[int], k: int, options: RunOptions, keys: Sequence[str] = ()
) -> JudgedShare:
    """The :class:`~ragmeter.report.JudgedShare` of a run from the scoring loop's counts at
    cut-off ``k``: ``top`` is (docs in the scored rankings' tops, how many of them are
    unjudged, rankings that hold a doc, rankings with an unjudged doc in their top);
    ``keys`` the ``judged@k`` keys.

    >>> from ragmeter.evaluation._checks import check_options
    >>> share = judged_share([20, 5, 2, 1], 10, check_options("ndcg", 10, None, "zero"))
    >>> share.share, share.queries_with_unjudged, share.below_threshold
    (0.75, 1, True)
    """
    docs, unjudged, shown, short = top
    return JudgedShare(
        k=k,
        documents=docs,
        unjudged=unjudged,
        queries=shown,
        queries_with_unjudged=short,
        threshold=options.judged_threshold,
        judged_only=options.judged_only,
        keys=tuple(keys),
    )


def relevant_only(qrels: Mapping[str, Mapping[str, float]], level: float | None) -> bool:
    """Whether the qrels judge no doc non-relevant (many collections list only the relevant
    docs: then every non-relevant doc a run retrieves is an unjudged one).

    >>> relevant_only({"q1": {"d1": 1}, "q2": {"d2": 2}}, None)
    True
    >>> relevant_only({"q1": {"d1": 1, "d3": 0}}, None), relevant_only({"q1": {"d1": 1}}, 2)
    (False, False)
    """
    try:
        for judgements in qrels.values():
            for grade in judgements.values():
                if (grade <= 0) if level is None else (grade < level):
                    return False
    except TypeError:  # a grade of a query that was not scored: not for this note to say
        return False
    return True


def warn_unjudged(
    log: WarningLog,
    judged: JudgedShare,
    qrels: Mapping[str, Mapping[str, float]],
    level: float | None,
) -> None:
    """Warn when the judged share is under the threshold, unless the qrels list relevant
    docs only (then ``judged@k`` is ``precision@k``: ``judged.relevant_only`` says so)."""
    if judged.below_threshold:
        judged.relevant_only = relevant_only(qrels, level)
        if not judged.relevant_only:
            note_unjudged_top(log, judged)
