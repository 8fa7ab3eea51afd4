"""What the retrieval drivers tell the user: the warnings and errors of a run's scoring.

One wording for every driver (in memory, streamed, on Dask, captured samples), so a report
says the same thing about the same input wherever it was scored.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from ragmeter._types import MISSING_QUERIES, MissingQueries
from ragmeter.errors import InvalidInputError, NoScorableQueriesError, some_ids
from ragmeter.report import JudgedShare, WarningLog


def averaging(mode: MissingQueries) -> str:
    """The report's ``conventions.averaging`` text for a missing-queries rule."""
    return "mean over queries with >= 1 relevant judgement; " + MISSING_QUERIES[mode]


def no_scorable_error(level: float | None) -> NoScorableQueriesError:
    """No query has a relevant judgement: there is nothing to average."""
    return NoScorableQueriesError(
        "no query in qrels has a relevant judgement "
        f"(grade {'> 0' if level is None else f'>= {level}'}), so "
        "there is nothing to average; check the qrels file and the relevance level"
    )


def no_ranking_error(missing: Sequence[str], run_ids: Iterable[str]) -> InvalidInputError:
    """Not one judged query has a ranking: the ids cannot be the same kind."""
    shown = list(itertools.islice(run_ids, 4))
    return InvalidInputError(
        f"none of the {len(missing)} judged queries has a ranking in the run"
        + (
            f" (the run's query ids, e.g. {some_ids(shown)}, are not qrels ids such as "
            f"{some_ids(missing)}); are the query ids the same strings in both?"
            if shown
            else ": the run is empty"
        )
    )


def note_missing(
    log: WarningLog, missing: Sequence[str], n_ranked: int, mode: MissingQueries
) -> None:
    """Count the judged queries the run has no ranking for, and say what they did."""
    log.add(
        "run",
        "missing_queries",
        f"{len(missing)} of {len(missing) + n_ranked} judged queries have no ranking in "
        f"the run (e.g. {some_ids(missing)}); "
        + (
            "they score 0 and count in the mean (missing_queries='zero', = trec_eval "
            "-c); pass missing_queries='skip' to average over the run's queries only"
            if mode == "zero"
            else "they are left out of the mean (missing_queries='skip', trec_eval's default)"
        ),
    )


def note_unjudged_docs(
    log: WarningLog,
    retrieved: int,
    examples: Iterable[str],
    *,
    stage: str = "run",
    scores: str = "every score",
    run: str = "the run",
    truth: str = "the qrels",
) -> None:
    """Every score is 0 and not one retrieved doc is judged: the doc ids differ.

    ``scores`` says which scores are 0, ``run`` where the retrieved ids come from and
    ``truth`` where the judgements do (evaluate_run's wording by default; evaluate_rag
    names the samples' fields).
    """
    log.add(
        stage,
        "doc_ids",
        f"{scores} is 0 and none of the {retrieved} retrieved doc ids (e.g. "
        f"{some_ids(examples)}) appears in {truth}, not even as judged non-relevant: "
        f"{run} and {truth} probably use different doc ids (check which document "
        "field your retriever returns as the id)",
    )


def note_unjudged_top(log: WarningLog, counts: JudgedShare) -> None:
    """Too few of the top-k docs are judged: say how many are not, and what that means."""
    k = counts.k
    rankings = f"{counts.queries:,} ranking" + ("s" if counts.queries != 1 else "")
    head = (
        f"only {counts.share:.1%} of the top-{k} docs are judged (judged@{k}, all rankings "
        f"pooled; judged_threshold {counts.threshold:g}): {counts.unjudged:,} of the "
        f"{counts.documents:,} docs in the top {k} of {rankings} have no judgement, in "
        f"{counts.queries_with_unjudged:,} of those queries; "
    )
    if counts.judged_only:
        tail = (
            "judged_only=True removed them before scoring (trec_eval -J, condensed lists), "
            "so these scores are over judged docs only: not lower bounds, and not comparable "
            "with scores that count unjudged docs as non-relevant"
        )
    else:
        tail = (
            "they count as non-relevant, so every score here is a lower bound (a system "
            "that finds relevant docs the assessors never saw is under-rated); judge them "
            "(add their grades to the qrels), or also score with judged_only=True "
            "(--judged-only; trec_eval -J, condensed lists, Sakai 2007) to see the scores "
            "over judged docs only"
        )
    log.add("run", f"judged@{k}", head + tail)
