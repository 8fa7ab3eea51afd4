"""``evaluate_run(..., measures=[...])``: trec_eval's measures by trec_eval's rules, as a report.

With ``measures`` (trec_eval ``-m`` strings such as ``"all_trec"``, ``"ndcg_cut.10,20"``,
``"P.5"``, ``"bpref"``, or ir_measures names such as ``"nDCG@10"``, ``"Judged@10"``,
``"RBP(p=0.8)"``), :func:`ragmeter.evaluate_run` computes them with
:func:`ragmeter.metrics.trec.evaluate` and returns the usual
:class:`~ragmeter.report.RetrievalEvalReport`: ``metrics`` is trec_eval's ``all`` line
(means, sums for the counts, geometric means for ``gm_*``), ``per_query`` each query's values
under the names trec_eval prints (``ndcg_cut_10``, ``P_5``...; as in pytrec_eval, a
query's ``gm_map``/``gm_bpref`` are the logs the ``all`` line's geometric means are made of,
and its ``num_q`` is 1; ``relstring``, a string, stays out). The query set is trec_eval's:
every judged query the run ranks (with ``missing_queries="zero"``, ``-c``, also those it
does not), including queries with no relevant document, which score 0 on most measures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation._checks import RunOptions, id_text
from ragmeter.evaluation._judged import judged_share, warn_unjudged
from ragmeter.metrics.trec import MEASURES, NICKNAMES, TrecEvalResult, parse_measures
from ragmeter.metrics.trec import evaluate as trec_evaluate
from ragmeter.report import Conventions, JudgedShare, RetrievalEvalReport, WarningLog

__all__ = ["evaluate_measures"]


def evaluate_measures(
    qrels: Mapping[str, Mapping[str, Any]],
    run: Mapping[str, Any],
    measures: Iterable[str] | str,
    options: RunOptions,
    *,
    per_query: bool,
    warnings: WarningLog,
) -> RetrievalEvalReport:
    """The report of ``measures`` over ``run`` (see the module docstring) under the checked
    ``options`` (relevance level, missing-query rule, ``judged_only``, judged threshold; their
    metrics and cut-offs are not used); ``report.judged`` holds ``judged@10`` (of the
    rankings as given, before ``judged_only`` removes anything), with the unjudged-docs
    warning of every retrieval report."""
    relevance_level, missing_queries = options.level, options.mode
    judged_only = options.judged_only
    requests = [measures] if isinstance(measures, str) else list(measures)
    if not requests or not all(isinstance(m, str) for m in requests):
        raise InvalidInputError(
            f"measures must name trec_eval or ir_measures measures, got {measures!r}"
        )
    level = 1 if relevance_level is None else relevance_level
    if float(level) != int(level):
        raise InvalidInputError(
            f"relevance_level={relevance_level!r}: trec_eval's levels are integers"
        )
    run = {str(q): _ranking(str(q), r) for q, r in run.items()}
    qrels = {
        str(q): {id_text(d, f"qrels[{q!r}]"): g for d, g in row.items()} for q, row in qrels.items()
    }
    extra = [] if judged_only else [m for m in _JUDGED if m not in _names_of(requests)]
    result = trec_evaluate(
        qrels,
        run,
        requests + extra,
        relevance_level=int(level),
        judged_only=judged_only,
        complete=missing_queries == "zero",
    )
    if judged_only:  # judged@10 of the full rankings, as the default path reports it
        seen = trec_evaluate(qrels, run, list(_JUDGED), relevance_level=int(level))
    else:
        seen = result
    judged = _judged_share(seen, options)
    _drop(result, extra)
    warn_unjudged(warnings, judged, qrels, level)
    missing = [q for q in qrels if q not in run]
    if missing:
        warnings.add(
            "run",
            "missing_queries",
            f"{len(missing)} judged queries have no ranking in the run; they "
            + ("score 0 (trec_eval -c)" if missing_queries == "zero" else "are left out"),
        )
    metrics = {
        name: float(value)
        for name, value in result.aggregate.items()
        if name not in ("runid", "num_q") and not isinstance(value, str)
    }
    rows: dict[str, dict[str, float]] = {}
    if per_query:
        rows = result.per_query  # type: ignore[assignment]  # numbers, once relstring is out
        if any(r.spec.summary == "string" for r in result.requested):
            for values in rows.values():
                for name in [n for n, v in values.items() if isinstance(v, str)]:
                    del values[name]
    n_queries = int(result.aggregate.get("num_q", len(result.queries)))
    return RetrievalEvalReport(
        metrics=metrics,
        per_query=rows,
        n_queries=n_queries,
        k_values=(),
        conventions=Conventions(
            relevance_level=float(level),
            ties="trec_eval: score descending, ties by doc id descending",
            duplicates="rejected",
            cutoff="trec_eval 10.0's definitions (ragmeter.metrics.trec; docs/measures.md)",
            averaging=(
                "trec_eval: mean over every judged query the run ranks, those with no "
                "relevant doc included"
                + (
                    "; a judged query missing from the run scores 0 (-c)"
                    if missing_queries == "zero"
                    else "; a judged query missing from the run is left out"
                )
                + ("; unjudged docs removed first (-J)" if judged_only else "")
            ),
        ),
        warnings=list(warnings.entries),
        missing_queries=missing,
        judged=judged,
        extra={"measures": requests},
    )


_JUDGED = ("Judged@10", "num_ret")
"""What ``report.judged`` is made of: each query's judged share of its top 10, and how
many docs it ranks."""


def _judged_share(result: TrecEvalResult, options: RunOptions) -> JudgedShare:
    """``judged@10`` per query and the pooled counts behind the warning, turned back into
    whole docs by the scoring loop's rule (``round(share * min(10, n))``)."""
    ids, values = [], []
    docs = unjudged = shown = short = 0
    for qid in result.queries:
        row = result.per_query[qid]
        share, n = float(row["Judged@10"]), min(10, int(row["num_ret"]))
        ids.append(qid)
        values.append([share])
        if n:
            missed = round((1.0 - share) * n)
            docs, unjudged, shown = docs + n, unjudged + missed, shown + 1
            short += missed > 0
    judged = judged_share([docs, unjudged, shown, short], 10, options, ("judged@10",))
    judged.set_rows(ids, values, len(ids))
    return judged


def _drop(result: TrecEvalResult, names: list[str]) -> None:
    """Take out of ``result`` the measures asked for only to make ``report.judged``."""
    for name in names:
        result.aggregate.pop(name, None)
        for row in result.per_query.values():
            row.pop(name, None)


def _names_of(requests: list[str]) -> set[str]:
    """The value names ``requests`` make (trec_eval's for its measures, an ir_measures name
    as written)."""
    known = {m.name for m in MEASURES} | set(NICKNAMES)
    trec = [m for m in requests if m.partition(".")[0] in known]
    return {n for r in parse_measures(trec) for n in r.names} | {
        m for m in requests if m.partition(".")[0] not in known
    }


def _ranking(qid: str, ranking: Any) -> dict[str, float] | list[str]:
    """One query's ranking as the engine takes it, its doc ids as strings: ``{doc: score}``
    (ranked by trec_eval's rule) or doc ids, best first; anything else is refused by name."""
    where = f"run[{qid!r}]"
    if isinstance(ranking, Mapping):
        out: dict[str, float] = {}
        for doc, score in ranking.items():
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise InvalidInputError(f"{where}[{doc!r}] = {score!r}: a score must be a number")
            out[id_text(doc, where)] = float(score)
        return out
    if isinstance(ranking, (str, bytes)) or not isinstance(ranking, Iterable):
        raise InvalidInputError(
            f"{where} must be a list of doc ids, best first, or {{doc_id: score}}; "
            f"got {type(ranking).__name__}"
        )
    return [id_text(doc, where) for doc in ranking]
