"""``fill_holes``: grade a run's unjudged top documents with the user's judge, after
measuring how far that judge agrees with the human grades.

A new retriever retrieves documents nobody judged; scored against old qrels they count as
non-relevant, so its score is a lower bound. :func:`fill_holes` asks an LLM judge
(:mod:`ragmeter.judge.holes`: UMBRELA-style 0-3 prompt, strict parser; cached, budgeted,
bounded by :func:`ragmeter.judge.run_judges`) about those documents, and, before anyone
trusts the new grades, about a stratified sample of documents that **are** judged, to
report Cohen's kappa, the confusion matrix and, with several runs, Kendall's tau between
the systems' rankings under human and judge labels (:mod:`ragmeter.stats._agreement`).
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter._types import Qrels, RunLike
from ragmeter.errors import InvalidInputError, NoScorableQueriesError
from ragmeter.evaluation.judged import DEFAULT_CACHE, CacheArg, open_cache
from ragmeter.evaluation.run import evaluate_run
from ragmeter.io.beir import read_beir
from ragmeter.judge.cache import JudgeCache
from ragmeter.judge.holes import (
    GRADES,
    Grading,
    MissingText,
    RelevanceGrade,
    find_holes,
    grade_documents,
    texts_for,
)
from ragmeter.judge.protocol import Judge
from ragmeter.judge.runner import JudgeOptions
from ragmeter.stats._agreement import cohen_kappa, confusion_matrix, kendall_tau
from ragmeter.stats._holes_result import HoleFilling, JudgeAgreement, SystemFill

__all__ = ["fill_holes", "stratified_sample"]

Corpus = Mapping[str, str] | Mapping[str, Mapping[str, Any]] | str | os.PathLike[str]


def _named_runs(run: RunLike | Mapping[str, RunLike]) -> dict[str, RunLike]:
    """One run ``{qid: [doc, ...]}`` as ``{"run": run}``; named runs as they are."""
    if not isinstance(run, Mapping):
        raise InvalidInputError(
            f"run must be a mapping {{query_id: [doc_id, ...]}} or {{name: run}}, "
            f"got {type(run).__name__}"
        )
    values = list(run.values())
    if values and all(isinstance(v, Mapping) for v in values):
        return {str(name): r for name, r in run.items()}  # type: ignore[misc]
    return {"run": run}  # type: ignore[dict-item]


def _texts(
    corpus: Corpus, queries: Mapping[str, str] | None
) -> tuple[dict[str, str], dict[str, str]]:
    """``(queries, corpus)`` as ``{id: text}``: a BEIR directory brings both; a BEIR corpus
    dict's ``title`` is joined to its ``text`` by a newline, as BEIR does."""
    if isinstance(corpus, (str, os.PathLike)):
        data = read_beir(corpus)
        docs: dict[str, str] = dict(data.corpus)
        if queries is None:
            queries = data.queries
    else:
        docs = {}
        for doc, value in corpus.items():
            if isinstance(value, Mapping):
                title, text = value.get("title") or "", value.get("text") or ""
                docs[str(doc)] = f"{title}\n{text}" if title else str(text)
            else:
                docs[str(doc)] = str(value)
    if queries is None:
        raise InvalidInputError(
            "fill_holes needs the query texts: pass queries={query_id: text} "
            "(or corpus= a BEIR directory, which has them)"
        )
    return {str(q): str(t) for q, t in queries.items()}, docs


def stratified_sample(
    pool: Sequence[tuple[str, str, float]], size: int, *, seed: int = 0
) -> list[tuple[str, str, float]]:
    """``size`` items of ``pool`` (``(query_id, doc_id, grade)``), spread as evenly as the
    pool allows over the grades: each grade gets an equal share (lower grades take the
    remainder), a grade with too few items gives its unused share to the others. Seeded and
    independent of the pool's order; the sample comes back sorted.

    >>> pool = [("q", f"d{i}", g) for i, g in enumerate([0] * 10 + [1] * 10 + [2] * 1)]
    >>> sorted({g for _, _, g in stratified_sample(pool, 7)}), len(stratified_sample(pool, 7))
    ([0, 1, 2], 7)
    """
    strata: dict[float, list[tuple[str, str, float]]] = {}
    for item in sorted(set(pool)):
        strata.setdefault(item[2], []).append(item)
    grades = sorted(strata)
    take = dict.fromkeys(grades, 0)
    left = min(size, len(pool))
    while left > 0:
        open_ = [g for g in grades if take[g] < len(strata[g])]
        share, extra = divmod(left, len(open_))
        for rank, g in enumerate(open_):
            add = min(len(strata[g]) - take[g], share + (1 if rank < extra else 0))
            take[g] += add
            left -= add
    rng = random.Random(seed)
    return sorted(item for g in grades for item in rng.sample(strata[g], take[g]))


def _agreement_pool(
    runs: Mapping[str, RunLike], qrels: Mapping[str, Mapping[str, float]], depth: int
) -> list[tuple[str, str, float]]:
    """Judged documents of the runs' top ``depth``: where the judge is about to work."""
    pool: set[tuple[str, str, float]] = set()
    for run in runs.values():
        for qid, ranking in run.items():
            judged = qrels.get(str(qid))
            if not judged:
                continue
            for doc in list(ranking)[:depth]:
                grade = judged.get(str(doc))
                if grade is not None and grade >= 0:  # below 0: pooled, not judged (trec_eval)
                    pool.add((str(qid), str(doc), grade))
    return sorted(pool)


def _scores(
    qrels: Qrels, run: RunLike, metric: str, k: int, level: float | None
) -> tuple[float, float]:
    """``(metric@k, judged@k)`` of ``run`` from one :func:`~ragmeter.evaluate_run` report (its
    ``report.judged``: the judged share every retrieval report carries)."""
    report = evaluate_run(qrels, run, k_values=(k,), metrics=[metric], relevance_level=level)
    judged = report.judged.means[f"judged@{k}"] if report.judged is not None else math.nan
    return report.metrics[f"{metric}@{k}"], judged


def _score(qrels: Qrels, run: RunLike, metric: str, k: int, level: float | None) -> float:
    return _scores(qrels, run, metric, k, level)[0]


def _try_score(qrels: Qrels, run: RunLike, metric: str, k: int, level: float | None) -> float:
    """The score, or NaN when the sample's qrels leave nothing to score for this run (no
    query of theirs ranked, or none with a relevant grade)."""
    if not any(str(q) in qrels for q in run):
        return math.nan
    try:
        return _score(qrels, run, metric, k, level)
    except NoScorableQueriesError:
        return math.nan


def _check_grade_map(grade_map: Mapping[int, float] | None) -> dict[int, float]:
    if grade_map is None:
        return {g: g for g in GRADES}
    missing = [g for g in GRADES if g not in grade_map]
    if missing:
        raise InvalidInputError(
            f"grade_map must give a qrels grade for each judge grade 0, 1, 2, 3; missing {missing}"
        )
    for g in GRADES:
        value = grade_map[g]
        if isinstance(value, bool) or not float(value).is_integer():
            raise InvalidInputError(
                f"grade_map[{g}] must be an integer grade (TREC qrels hold integers), got {value!r}"
            )
    return {g: int(grade_map[g]) for g in GRADES}  # TREC grades are integers


def _measure_agreement(
    sample: Sequence[tuple[str, str, float]],
    grading: Grading,
    grades: Mapping[int, float],
    runs: Mapping[str, RunLike],
    *,
    metric: str,
    k: int,
    level: float | None,
) -> JudgeAgreement:
    pairs = [
        (q, d, h, grades[grading.grades[q][d]])
        for q, d, h in sample
        if d in grading.grades.get(q, {})
    ]
    human = [p[2] for p in pairs]
    model = [p[3] for p in pairs]
    scale = sorted(set(grades.values()) | set(human))  # the whole ordinal scale, seen or not
    labels, matrix = confusion_matrix(human, model, labels=scale)
    scores: dict[str, tuple[float, float]] = {}
    tau: float | None = None
    if len(runs) >= 2 and pairs:
        by_human: dict[str, dict[str, float]] = {}
        by_judge: dict[str, dict[str, float]] = {}
        for q, d, h, j in pairs:
            by_human.setdefault(q, {})[d] = h
            by_judge.setdefault(q, {})[d] = j
        for name, run in runs.items():
            scores[name] = (
                _try_score(by_human, run, metric, k, level),
                _try_score(by_judge, run, metric, k, level),
            )
        tau = kendall_tau([s[0] for s in scores.values()], [s[1] for s in scores.values()])
    return JudgeAgreement(
        asked=len(sample),
        failed=len(sample) - len(pairs),
        pairs=pairs,
        labels=labels,
        confusion=matrix,
        kappa=cohen_kappa(human, model, labels=scale),
        kappa_linear=cohen_kappa(human, model, weights="linear", labels=scale),
        kappa_quadratic=cohen_kappa(human, model, weights="quadratic", labels=scale),
        exact=sum(h == j for h, j in zip(human, model, strict=True)) / len(pairs)
        if pairs
        else math.nan,
        tau=tau,
        system_scores=scores,
    )


def _merge(
    qrels: Mapping[str, Mapping[str, float]],
    holes: Mapping[str, Sequence[str]],
    grading: Grading,
    grades: Mapping[int, float],
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """``(augmented qrels, the judge's added grades)``: each graded hole with its grade on
    the qrels' scale; the human grades are never changed."""
    merged = {q: dict(docs) for q, docs in qrels.items()}
    added: dict[str, dict[str, float]] = {}
    for qid, docs in holes.items():
        for doc in docs:
            grade = grading.grades.get(qid, {}).get(doc)
            if grade is not None:
                merged.setdefault(qid, {})[doc] = added.setdefault(qid, {})[doc] = grades[grade]
    return merged, added


@dataclass(frozen=True)
class _Plan:
    """What fill_holes settled before asking the judge anything."""

    runs: dict[str, RunLike]
    human: dict[str, dict[str, float]]
    queries: dict[str, str]
    docs: dict[str, str]
    holes: dict[str, list[str]]
    skipped: dict[str, list[str]]
    sample: list[tuple[str, str, float]]
    before: dict[str, tuple[float, float]]  # name -> (score, judged@k) with the human qrels
    grades: dict[int, float]
    metric: str
    k: int
    depth: int
    level: float | None
    scored: frozenset[str] = frozenset()
    """The queries the human qrels score (a relevant grade): "after" is averaged over them
    too, so a query the judge alone made scorable does not change the mean's denominator."""


def _system(plan: _Plan, name: str, merged: Qrels | None, added: Qrels) -> SystemFill:
    run = plan.runs[name]
    holes = find_holes([run], plan.human, depth=plan.depth)
    graded = [added[q][d] for q, docs in holes.items() for d in docs if d in added.get(q, {})]
    level = plan.level
    relevant = sum(g >= level if level is not None else g > 0 for g in graded)
    before, judged_before = plan.before[name]
    after: tuple[float | None, float | None] = (None, None)
    if merged is not None:  # over the queries "before" was averaged over, and no others
        scored = {q: docs for q, docs in merged.items() if q in plan.scored}
        after = _scores(scored, run, plan.metric, plan.k, level)
    return SystemFill(
        name=name,
        before=before,
        after=after[0],
        judged_before=judged_before,
        judged_after=after[1],
        holes=sum(len(d) for d in holes.values()),
        filled=len(graded),
        relevant=relevant,
    )


def _check_sizes(depth: int, k: int | None, sample_size: int) -> int:
    for name, value in (("depth", depth), ("sample_size", sample_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (name == "depth"):
            least = 1 if name == "depth" else 0
            raise InvalidInputError(f"{name} must be an int >= {least}, got {value!r}")
    k = depth if k is None else k
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be an int >= 1, got {k!r}")
    return k


def fill_holes(
    run: RunLike | Mapping[str, RunLike],
    qrels: Qrels,
    *,
    judge: Judge,
    corpus: Corpus,
    queries: Mapping[str, str] | None = None,
    depth: int = 10,
    k: int | None = None,
    metric: str = "ndcg",
    sample_size: int = 100,
    seed: int = 0,
    grade_map: Mapping[int, float] | None = None,
    missing_text: MissingText = "error",
    relevance_level: float | None = None,
    judge_cache: CacheArg = DEFAULT_CACHE,
    judge_options: JudgeOptions | None = None,
    dry_run: bool = False,
) -> HoleFilling:
    """Ask ``judge`` for the 0-3 relevance grade of every unjudged document in each judged
    query's top ``depth``, and of a stratified sample of judged ones to measure it.

    ``run`` is one run ``{query_id: [doc_id, ...]}`` or several named runs ``{name: run}``
    (their holes are pooled, and Kendall's tau compares the systems' rankings). Texts come
    from ``corpus`` (``{doc_id: text}``, a BEIR corpus dict with ``title``/``text``, or a
    BEIR directory, which brings its queries too) and ``queries`` (``{query_id: text}``);
    a pair without a text raises :class:`~ragmeter.errors.InvalidInputError` naming the
    query and doc, or with ``missing_text="skip"`` is counted in ``skipped``.

    The agreement sample: ``sample_size`` (query, doc) pairs drawn with ``seed`` from the
    judged documents of the runs' top ``depth``, evenly over the human grades
    (:func:`stratified_sample`); ``0`` skips it. Its grades never enter the qrels. The
    judge's grade ``g`` enters the qrels as ``grade_map[g]`` (default ``g``): give the
    mapping when the human scale is not 0-3. Scores are ``metric@k`` (``k`` defaults to
    ``depth``) by :func:`ragmeter.evaluate_run`, with the human qrels (before) and the
    augmented ones (after); judged@k likewise. Judge calls go through
    :func:`ragmeter.judge.run_judges` with ``judge_cache`` (default: the user cache dir;
    ``None`` for none) and ``judge_options`` (concurrency, budget); a reply that is not a
    grade is a bad reply, counted, never a 0. ``dry_run=True`` sends nothing and returns
    the estimate.
    """
    k = _check_sizes(depth, k, sample_size)
    metric_obj = RelevanceGrade(judge=judge)
    plan = _plan(
        run,
        qrels,
        corpus,
        queries,
        depth=depth,
        k=k,
        metric=metric,
        sample_size=sample_size,
        seed=seed,
        grades=_check_grade_map(grade_map),
        missing_text=missing_text,
        level=relevance_level,
    )
    asked: dict[str, list[str]] = {}
    for q, d, _ in plan.sample:
        asked.setdefault(q, []).append(d)
    for q, ds in plan.holes.items():
        asked.setdefault(q, []).extend(ds)
    cache = open_cache(judge_cache)
    try:
        grading = grade_documents(
            asked,
            metric=metric_obj,
            queries=plan.queries,
            corpus=plan.docs,
            cache=cache,
            options=judge_options,
            dry_run=dry_run,
        )
    finally:
        if cache is not None and not isinstance(judge_cache, JudgeCache):
            cache.close()  # opened here, closed here; the caller's own cache stays open
    return _result(plan, grading)


def _plan(
    run: RunLike | Mapping[str, RunLike],
    qrels: Qrels,
    corpus: Corpus,
    queries: Mapping[str, str] | None,
    *,
    depth: int,
    k: int,
    metric: str,
    sample_size: int,
    seed: int,
    grades: dict[int, float],
    missing_text: MissingText,
    level: float | None,
) -> _Plan:
    """Runs, texts, holes and the agreement sample, and every system's score with the human
    qrels: any bad input (an unknown metric, a repeated doc) is refused before a call."""
    named = _named_runs(run)
    human = {str(q): {str(d): g for d, g in docs.items()} for q, docs in qrels.items()}
    before = {name: _scores(human, r, metric, k, level) for name, r in named.items()}
    query_texts, docs = _texts(corpus, queries)
    holes = find_holes(list(named.values()), human, depth=depth)
    holes, skipped = texts_for(holes, query_texts, docs, missing_text=missing_text)
    pool = [p for p in _agreement_pool(named, human, depth) if p[0] in query_texts and p[1] in docs]
    return _Plan(
        runs=named,
        human=human,
        queries=query_texts,
        docs=docs,
        holes=holes,
        skipped=skipped,
        sample=stratified_sample(pool, sample_size, seed=seed),
        before=before,
        grades=grades,
        metric=metric,
        k=k,
        depth=depth,
        level=level,
        scored=frozenset(
            q
            for q, row in human.items()
            if any((g >= level) if level is not None else (g > 0) for g in row.values())
        ),
    )


def _result(plan: _Plan, grading: Grading) -> HoleFilling:
    dry = grading.run is None
    merged, added = _merge(plan.human, plan.holes, grading, plan.grades)
    systems = [_system(plan, name, None if dry else merged, added) for name in plan.runs]
    agreement = None
    if plan.sample and not dry:
        agreement = _measure_agreement(
            plan.sample,
            grading,
            plan.grades,
            plan.runs,
            metric=plan.metric,
            k=plan.k,
            level=plan.level,
        )
    result = HoleFilling(
        qrels=merged,
        judged_by_model=added,
        holes=plan.holes,
        metric=f"{plan.metric}@{plan.k}",
        k=plan.k,
        depth=plan.depth,
        systems=systems,
        agreement=agreement,
        failed=grading.failed,
        skipped=plan.skipped,
        bad_replies=grading.bad_replies,
        dry_run=dry,
        estimate=grading.estimate,
    )
    if grading.run is not None:
        jr = grading.run
        result.calls, result.cache_hits = jr.calls, jr.cache_hits
        result.input_tokens, result.output_tokens = jr.input_tokens, jr.output_tokens
        result.incomplete, result.stop_reason = jr.incomplete, jr.stop_reason
    outside = sorted(
        {g for docs in plan.human.values() for g in docs.values()} - set(plan.grades.values())
    )
    if outside:
        result.notes.append(
            f"the human qrels use grades {outside} that no judge grade becomes (the judge's "
            f"0, 1, 2, 3 enter the qrels as {[plan.grades[g] for g in GRADES]}); if the two "
            "scales differ, pass grade_map= (CLI: --grade-map) to put the judge's grades on "
            "the qrels' scale"
        )
    return result
