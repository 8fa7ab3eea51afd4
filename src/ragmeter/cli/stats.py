"""The ``ragmeter compare`` and ``ragmeter gate`` commands, a thin shell over ragmeter.stats.

``register(app)`` adds both commands to a :class:`typer.Typer` app; ``ragmeter.cli`` calls it.
``gate --baseline`` takes a report file or a run saved in the run registry (``pinned``,
``NAME~1``, a run id), checked like for like with the current report before gating.

Exit codes: ``compare`` exits 0 when the comparison ran and 1 on bad input (like the other
commands); ``gate`` exits 0 when the gate passes, 1 on a regression and 2 on bad input, so a
CI job can tell a regression from a broken setup. Errors are one stderr line,
``ragmeter: error: <what and where>``.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.cli._app import CliError, error_exit
from ragmeter.cli._options import JudgedOnlyOpt, RegistryOpt
from ragmeter.errors import InvalidInputError, RagmeterError, describe_error
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.stats import Comparable, compare, compare_many, gate, registry_baseline

__all__ = ["load_comparable", "read_qrels_file", "register"]

_KEY = re.compile(r"^(?P<name>[^@\s]+)(?:@(?P<k>\d+))?$")

TestOpt = Annotated[
    str,
    typer.Option(
        "--test",
        help="Paired test: randomization (sign flips; default), bootstrap or t-test.",
    ),
]
ResamplesOpt = Annotated[
    int, typer.Option("--resamples", "-n", help="Resamples for the bootstrap CI and the test.")
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed (results are reproducible).")]
AlphaOpt = Annotated[float, typer.Option("--alpha", help="Significance level.")]
OnMissingOpt = Annotated[
    str,
    typer.Option(
        "--on-missing",
        help="Queries scored by only one side: 'error' (default) or 'intersect'.",
    ),
]
DirectionOpt = Annotated[
    bool | None,
    typer.Option(
        "--higher-is-better/--lower-is-better",
        help="Direction of the metric (default: from the report; higher for retrieval).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
HtmlOpt = Annotated[
    Path | None,
    typer.Option(
        "--html",
        help="Also write the comparison as one self-contained HTML file (scatter, wins, "
        "most-moved queries, drill-downs side by side).",
        show_default=False,
    ),
]
RunsArg = Annotated[
    list[Path],
    typer.Argument(
        help="Two or more TREC run files (JSONL sample files with --samples); "
        "the first is the baseline.",
        show_default=False,
    ),
]
QrelsOpt = Annotated[
    Path | None,
    typer.Option("--qrels", help="Qrels: TREC file, BEIR TSV, or a BEIR directory."),
]
SamplesOpt = Annotated[
    bool, typer.Option("--samples", help="RUNS are JSONL sample files, not TREC runs.")
]
CompareMetricOpt = Annotated[
    str | None,
    typer.Option("--metric", "-m", help="Metric key, e.g. ndcg@10 (default) or recall@5."),
]
ConfidenceOpt = Annotated[
    float, typer.Option("--confidence", help="Confidence level of the interval.")
]
PairByOpt = Annotated[
    str,
    typer.Option(
        "--pair-by",
        help="With --samples: pair samples by 'id' (default) or by line 'order' "
        "(for files whose samples have no ids).",
    ),
]
RelevanceLevelOpt = Annotated[
    float | None,
    typer.Option("--relevance-level", help="Relevant when grade >= this (trec_eval -l)."),
]
MissingQueriesOpt = Annotated[
    str,
    typer.Option(
        "--missing-queries",
        help="A judged query a run has no ranking for: 'zero' (default) scores it 0 "
        "(= trec_eval -c), so it is paired as 0; 'skip' leaves it out of that run's "
        "scores (then pass --on-missing intersect to pair the queries both rank). "
        "Either way a warning counts them.",
    ),
]
QueriesOpt = Annotated[
    Path | None,
    typer.Option(
        "--queries",
        help="With --html: query texts (a BEIR directory, queries.jsonl, or a TSV "
        "'id<TAB>text'); a BEIR --qrels directory brings its own.",
        show_default=False,
    ),
]
CorpusOpt = Annotated[
    Path | None,
    typer.Option(
        "--corpus",
        help="With --html: document texts for snippets (a BEIR directory or corpus.jsonl).",
        show_default=False,
    ),
]
BaselineOpt = Annotated[
    str,
    typer.Option(
        "--baseline",
        help="Baseline: a report JSON file (report.to_json()), or a saved run: pinned, "
        "pinned:NAME, a run name (its newest run), NAME~1, a run id (see ragmeter runs).",
    ),
]
CurrentOpt = Annotated[Path, typer.Option("--current", help="Current report JSON to check.")]
GateMetricOpt = Annotated[
    str | None,
    typer.Option("--metric", "-m", help="Metric key (default: ndcg@10, or the report's first)."),
]
MaxDropOpt = Annotated[
    float,
    typer.Option("--max-drop", help="Largest tolerated drop, in the metric's units."),
]


def read_qrels_file(path: Path) -> Mapping[str, Mapping[str, float]]:
    """Read qrels in TREC or BEIR TSV format, or a BEIR directory
    (:func:`ragmeter.io.read_qrels`)."""
    from ragmeter.io import read_qrels

    return read_qrels(path)


def _retrieval_report(
    run_path: Path,
    qrels: Mapping[str, Mapping[str, float]],
    metric: str | None,
    level: float | None,
    missing_queries: str = "zero",
    judged_only: bool = False,
) -> RetrievalEvalReport:
    from ragmeter.evaluation.retrieval import evaluate_run
    from ragmeter.evaluation.scoring import check_options
    from ragmeter.io.trec import read_trec_run

    key = metric or "ndcg@10"
    m = _KEY.match(key)
    if m is None:
        raise InvalidInputError(f"--metric must look like 'ndcg@10' or 'map', got {key!r}")
    k = int(m.group("k")) if m.group("k") else 10
    mode = check_options([m.group("name")], (k,), level, missing_queries).mode  # before reading
    run = read_trec_run(run_path)
    return evaluate_run(
        qrels,
        run,
        k_values=(k,),
        metrics=[m.group("name")],
        relevance_level=level,
        missing_queries=mode,
        judged_only=judged_only,
    )


def _samples_report(path: Path, metric: str | None) -> RagEvalReport:
    try:
        from ragmeter.evaluation.rag import evaluate_rag
        from ragmeter.io.jsonl import read_jsonl  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise InvalidInputError(
            "--samples needs ragmeter's RAG evaluation (ragmeter.evaluation.rag and "
            "ragmeter.io.jsonl), which this installation does not have"
        ) from None
    samples: Any = read_jsonl(path)
    if metric is None:
        return evaluate_rag(samples, per_sample=True)  # a paired test needs every score
    m = _KEY.match(metric)
    if m is None:
        raise InvalidInputError(f"--metric must look like 'token_f1' or 'ndcg@5', got {metric!r}")
    if m.group("k"):
        k = int(m.group("k"))
        return evaluate_rag(samples, metrics=[m.group("name")], k_values=k, per_sample=True)
    return evaluate_rag(samples, metrics=[metric], per_sample=True)


def _by_order(report: Comparable, metric: str | None) -> Comparable:
    """Re-key a RAG report's samples by their position (``"1"``, ``"2"``, ...)."""
    if not isinstance(report, RagEvalReport):
        return report
    key = metric or next(iter(report.metrics), None)
    if key is None:
        return report
    return RagEvalReport(
        metrics={key: report.metrics.get(key, 0.0)},
        coverage={key: report.coverage.get(key, 0)},
        n_samples=report.n_samples,
        per_sample={
            str(i): {key: row.get(key)} for i, row in enumerate(report.per_sample.values(), 1)
        },
        higher_is_better={key: report.higher_is_better.get(key, True)},
        details={  # faithfulness' claims, for compare --html
            str(i): report.details[sid]
            for i, sid in enumerate(report.per_sample, 1)
            if sid in report.details
        },
    )


def load_comparable(path: Path) -> Comparable:
    """Load one side of a gate: a saved report JSON (``to_dict()``) or ``{id: score}`` JSON."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if isinstance(data, dict):
        kind = data.get("kind")
        try:
            if kind == "retrieval" or (kind is None and "per_query" in data and "metrics" in data):
                return RetrievalEvalReport.from_dict(data)
            if kind == "rag" or (kind is None and "per_sample" in data and "metrics" in data):
                return RagEvalReport.from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"{path}: a {kind or 'saved'} report that cannot be read back ({exc!r}); "
                "save reports with report.to_json() / to_dict()"
            ) from None
        if kind is None and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in data.values()
        ):
            return {str(k): float(v) for k, v in data.items()}
    raise InvalidInputError(
        f"{path}: expected a report saved with to_dict()/to_json() (a JSON object with "
        "'kind': 'retrieval' or 'rag') or a {query_id: score} object"
    )


def _labels(paths: list[Path]) -> list[str]:
    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    return [f"{i}:{stem}" for i, stem in enumerate(stems, 1)]


def _write_compare_html(
    html: Path,
    result: Any,
    reports: list[Comparable],
    paths: list[Path],
    samples: bool,
    by_order: bool,
    judged: Mapping[str, Mapping[str, float]] | None,
    qrels: Path | None,
    queries: Path | None,
    corpus: Path | None,
) -> None:
    """Write ``ragmeter compare --html``: re-read what the page's drill-downs show."""
    from ragmeter.html import beir_texts, load_texts, write_comparison

    options: dict[str, Any] = {}
    if samples:
        from ragmeter.io.jsonl import read_jsonl

        read = [list(read_jsonl(p)) for p in paths]
        if by_order:  # the reports were keyed "1", "2", ... by line: key the samples so too
            read = [[s.model_copy(update={"id": str(i)}) for i, s in enumerate(r, 1)] for r in read]
        options["samples_a"], options["samples_b"] = read
    else:
        from ragmeter.io.trec import read_trec_run

        options["run_a"], options["run_b"] = (read_trec_run(p) for p in paths)
        options["qrels"] = judged
    texts = load_texts(queries, "queries") if queries is not None else None
    docs = load_texts(corpus, "corpus") if corpus is not None else None
    if qrels is not None and qrels.is_dir():  # a BEIR directory brings its own texts
        texts = texts if texts is not None else beir_texts(qrels, "queries")
        docs = docs if docs is not None else beir_texts(qrels, "corpus")
    written = write_comparison(
        result,
        html,
        a=reports[0],
        b=reports[1],
        queries=texts,
        corpus=docs,
        dataset=qrels.name if qrels is not None and qrels.is_dir() else None,
        **options,
    )
    typer.echo(f"wrote {written}", err=True)


def _score_runs(
    runs: list[Path],
    *,
    samples: bool,
    pair_by: str,
    qrels: Path | None,
    metric: str | None,
    relevance_level: float | None,
    missing_queries: str,
    judged_only: bool = False,
) -> tuple[list[Comparable], Mapping[str, Mapping[str, float]] | None]:
    """Each run (or sample file) scored on the metric compared, and the qrels read (``None``
    for sample files)."""
    if len(runs) < 2:
        raise InvalidInputError("compare needs at least two runs (the first is the baseline)")
    if pair_by not in ("id", "order"):
        raise InvalidInputError(f"--pair-by must be 'id' or 'order', got {pair_by!r}")
    reports: list[Comparable]
    if samples:
        reports = [_samples_report(p, metric) for p in runs]
        if pair_by == "order":
            reports = [_by_order(r, metric) for r in reports]
        return reports, None
    if qrels is None:
        raise InvalidInputError(
            "--qrels is required to score TREC runs (or pass --samples for JSONL sample files)"
        )
    judged = read_qrels_file(qrels)
    reports = [
        _retrieval_report(p, judged, metric, relevance_level, missing_queries, judged_only)
        for p in runs
    ]
    return reports, judged


def compare_command(
    runs: RunsArg,
    qrels: QrelsOpt = None,
    samples: SamplesOpt = False,
    metric: CompareMetricOpt = None,
    test: TestOpt = "randomization",
    resamples: ResamplesOpt = 10_000,
    seed: SeedOpt = 0,
    confidence: ConfidenceOpt = 0.95,
    alpha: AlphaOpt = 0.05,
    on_missing: OnMissingOpt = "error",
    pair_by: PairByOpt = "id",
    relevance_level: RelevanceLevelOpt = None,
    missing_queries: MissingQueriesOpt = "zero",
    higher_is_better: DirectionOpt = None,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    queries: QueriesOpt = None,
    corpus: CorpusOpt = None,
    judged_only: JudgedOnlyOpt = False,
) -> None:
    """Is the difference real? Paired test, confidence interval and per-query wins.

    More than two runs: each against the first, Holm–Bonferroni adjusted.
    """
    options: dict[str, Any] = {
        "metric": metric,
        "test": test,
        "n": resamples,
        "seed": seed,
        "confidence": confidence,
        "alpha": alpha,
        "on_missing": on_missing,
        "higher_is_better": higher_is_better,
    }
    try:
        reports, judged = _score_runs(
            runs,
            samples=samples,
            pair_by=pair_by,
            qrels=qrels,
            metric=metric,
            relevance_level=relevance_level,
            missing_queries=missing_queries,
            judged_only=judged_only,
        )
        labels = _labels(runs)
        if html is not None and len(reports) != 2:
            raise InvalidInputError(
                f"--html draws one comparison of two systems, got {len(reports)} runs: "
                "compare each against the baseline in its own command"
            )
        if len(reports) == 2:
            a, b = reports
            result = compare(a, b, label_a=labels[0], label_b=labels[1], **options)
            if html is not None:
                by_order = pair_by == "order"
                _write_compare_html(
                    html, result, reports, runs, samples, by_order, judged, qrels, queries, corpus
                )
            text = json.dumps(result.to_dict(), indent=2) if as_json else str(result)
        else:
            table = compare_many(dict(zip(labels, reports, strict=True)), **options)
            text = json.dumps(table.to_dict(), indent=2) if as_json else str(table)
    except (RagmeterError, OSError) as exc:
        raise error_exit(exc) from None
    typer.echo(text)


def gate_command(
    baseline: BaselineOpt,
    current: CurrentOpt,
    metric: GateMetricOpt = None,
    max_drop: MaxDropOpt = 0.01,
    alpha: AlphaOpt = 0.05,
    test: TestOpt = "randomization",
    resamples: ResamplesOpt = 10_000,
    seed: SeedOpt = 0,
    on_missing: OnMissingOpt = "error",
    higher_is_better: DirectionOpt = None,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    registry: RegistryOpt = None,
) -> None:
    """Fail (exit 1) only when the metric dropped by more than --max-drop AND significantly.

    A saved baseline (--baseline pinned, NAME~1, a run id) is read from the run registry
    and checked like for like with the current report first: scored on other data or with
    other settings, the gate refuses (exit 2) and names every difference.
    """
    try:
        now = load_comparable(current)
        base, notes = _gate_baseline(baseline, now, registry, metric)
        result = gate(
            base,
            now,
            metric=metric,
            max_drop=max_drop,
            alpha=alpha,
            test=test,  # type: ignore[arg-type]  # checked by compare()
            n=resamples,
            seed=seed,
            on_missing=on_missing,  # type: ignore[arg-type]
            higher_is_better=higher_is_better,
        )
        if notes:
            comparison = replace(result.comparison, warnings=(*notes, *result.comparison.warnings))
            result = replace(result, comparison=comparison)
        if html is not None:
            from ragmeter.html import write_comparison

            written = write_comparison(result.comparison, html, a=base, b=now, note=result.reason)
            typer.echo(f"wrote {written}", err=True)
    except (RagmeterError, OSError) as exc:
        # bad input exits 2 like a bad command line, so CI tells a broken setup from a
        # regression (exit 1)
        raise error_exit(CliError(describe_error(exc))) from None
    typer.echo(json.dumps(result.to_dict(), indent=2) if as_json else str(result))
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _gate_baseline(
    baseline: str, current: Comparable, registry: Path | None, metric: str | None
) -> tuple[Comparable, list[str]]:
    """The gate's baseline, a report file or a saved run, and notes for its warnings."""
    path = Path(baseline)
    if path.is_file():
        if registry is not None:
            raise CliError("--registry goes with a saved baseline (a ref), not a report file")
        return load_comparable(path), []
    if path.suffix.lower() == ".json":  # a report file that is not there, not a run ref
        raise CliError(f"baseline report file not found: {path}")
    report, _, notes = registry_baseline(baseline, current, registry=registry, metric=metric)
    return report, notes


def register(app: typer.Typer) -> None:
    """Add the ``compare`` and ``gate`` commands to ``app``."""
    app.command("compare")(compare_command)
    app.command("gate")(gate_command)
