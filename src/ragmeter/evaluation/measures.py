"""``evaluate_run(..., measures=[...])``: trec_eval's measures by trec_eval's rules, as a report.

With ``measures`` (trec_eval ``-m`` strings such as ``"all_trec"``, ``"ndcg_cut.10,20"``,
``"P.5"``, ``"bpref"``, or ir_measures names such as ``"nDCG@10"``, ``"Judged@10"``,
``"RBP(p=0.8)"``), :func:`ragmeter.evaluate_run` computes them with
:func:`ragmeter.metrics.trec.evaluate` and returns the usual
:class:`~ragmeter.report.RetrievalEvalReport`: ``metrics`` is trec_eval's ``all`` line
(means, sums for the counts, geometric means for ``gm_*``), ``per_query`` each query's values
under the names trec_eval prints (``ndcg_cut_10``, ``P_5``...; as in pytrec_eval, a
query's ``gm_map``/``gm_bpref`` are the logs the ``all`` line's geometric means are made of,
and its ``num_q`` is 1; ``relstring``, a string, stays out). The query set is trec_eval's: every judged query the run ranks (with
``missing_queries="zero"``, ``-c``, also those it does not), including queries with no
relevant document, which score 0 on most measures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.trec import evaluate as trec_evaluate
from ragmeter.report import Conventions, RetrievalEvalReport, WarningLog

__all__ = ["evaluate_measures"]

def evaluate_measures(
    qrels: Mapping[str, Mapping[str, Any]],
    run: Mapping[str, Any],
    measures: Iterable[str] | str,
    *,
    relevance_level: float | None,
    missing_queries: str,
    judged_only: bool,
    per_query: bool,
    warnings: WarningLog,
) -> RetrievalEvalReport:
    """The report of ``measures`` over ``run`` (see the module docstring)."""
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
    run = {str(q): r for q, r in run.items()}
    qrels = {str(q): {str(d): g for d, g in row.items()} for q, row in qrels.items()}
    result = trec_evaluate(
        qrels,
        run,
        requests,
        relevance_level=int(level),
        judged_only=judged_only,
        complete=missing_queries == "zero",
    )
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
        extra={"measures": requests},
    )
