"""How ``ragmeter eval`` reads its samples, scores them (with or without a judge), prints.

:class:`_Source` streams the samples file (JSONL or Parquet, with a progress bar on a
terminal); :func:`_plain_report` scores it as it streams, :func:`_judged_report` loads it
to score with the user's judge (or to print a ``--dry-run`` estimate), and
:func:`_print_eval` prints the report and what was skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmeter.cli import _progress
from ragmeter.cli._app import _print_table, _stderr
from ragmeter.cli._embed import embed_estimate, print_embed_estimate, print_embed_summary
from ragmeter.cli._judges import (
    _judge_metric_names,
    _judge_metrics,
    _make_judge,
    _open_judge_cache,
    _print_estimate,
    _print_judge_summary,
)
from ragmeter.cli._tables import _print_json, rag_table
from ragmeter.errors import NoSamplesError

if TYPE_CHECKING:
    from ragmeter.report import RagEvalReport


def _loaded(source: _Source) -> list[Any]:
    """Every sample of ``source`` in memory (model-scored metrics need them twice)."""
    try:
        loaded = list(source.samples)
    finally:
        source.samples.close()
    if not loaded:
        raise source.empty()
    return loaded


class _Source:
    """The samples file, streamed (a JSONL or Parquet reader, with a progress bar on a
    terminal for large files)."""

    def __init__(self, data: Path, skip_errors: bool, as_json: bool) -> None:
        from ragmeter.io.jsonl import read_jsonl

        self.data = data
        self.as_json = as_json
        self.parquet = data.name.lower().endswith((".parquet", ".pq"))
        self.kind = "Parquet row" if self.parquet else "JSON object"
        self.reader: Any
        if self.parquet:
            from ragmeter.io.arrow import read_parquet

            self.reader = read_parquet(data, skip_errors=skip_errors)
        else:
            self.reader = read_jsonl(data, skip_errors=skip_errors)
        enabled = _progress.wanted(data, as_json)
        total = None
        if enabled:
            if self.parquet:
                total = self.reader.num_rows
            elif data.suffix != ".gz":
                total = _progress.count_lines(data)
        self.samples = _progress.with_progress(self.reader, total=total, enabled=enabled)

    def empty(self, note: str = "") -> NoSamplesError:
        """The error for a file that held no sample."""
        return NoSamplesError(
            f"{self.data}: no samples to score: the file holds no {self.kind}{note}"
            + ("" if self.parquet else " (JSONL = one JSON object per line)")
        )


def _judged_report(
    source: _Source,
    judge: str,
    judge_metrics: list[str] | None,
    options: Any,
    cache_path: Path | None,
    *,
    repeats: int,
    dry_run: bool,
    names: list[Any],
    k: int,
    prices: dict[str, float] | None,
    per_sample_out: Path | None,
    embedding: dict[str, Any],
) -> tuple[RagEvalReport, list[str]] | None:
    """Score with the user's judge (``None`` after printing a ``--dry-run`` estimate)."""
    from ragmeter.evaluation.judged import evaluate_with_judges
    from ragmeter.evaluation.rag import evaluate_rag
    from ragmeter.io.scores import write_scores

    judge_names = _judge_metric_names(judge_metrics)
    the_judge = _make_judge(judge)
    loaded = _loaded(source)  # judge mode needs them twice: to choose, then to score
    judged, notes = _judge_metrics(the_judge, judge_names, repeats, loaded)
    if dry_run:
        from ragmeter.judge.runner import estimate_judges
        from ragmeter.schema import coerce_sample

        cache = _open_judge_cache(cache_path, create=False)
        try:
            coerced = [coerce_sample(s, index=i) for i, s in enumerate(loaded)]
            estimate = estimate_judges(coerced, judged, cache=cache)
        finally:
            if cache is not None:
                cache.close()
        embeddings = embed_estimate(loaded, names, embedding)
        _print_estimate(estimate, cache_path, as_json=source.as_json, embeddings=embeddings)
        if embeddings is not None and not source.as_json:
            print_embed_estimate(embeddings, samples=len(loaded), as_json=False)
        return None
    err = _stderr()
    for note in notes:
        err.print(f"not computed: {note}", markup=False, style="dim")
    cache = _open_judge_cache(cache_path)
    try:
        shown = not source.as_json and _progress.stderr_is_tty()
        with _progress.judge_progress(shown) as progress:
            report = evaluate_with_judges(
                loaded,
                judge_metrics=judged,
                other_metrics=names or None,
                evaluate=evaluate_rag,
                judge_cache=cache,
                judge_options=options,
                progress=progress,
                k_values=k,
                prices=prices,
                **embedding,
            )
    finally:
        if cache is not None:
            cache.close()
    if per_sample_out is not None:
        write_scores(report, per_sample_out)
        report.extra["per_sample_file"] = str(per_sample_out)
    return report, [m.name for m in judged]


def _plain_report(
    source: _Source,
    names: list[Any],
    k: int,
    prices: dict[str, float] | None,
    per_sample_out: Path | None,
    keep_per_sample: bool,
    embedding: dict[str, Any],
) -> RagEvalReport:
    """Score without a judge, streaming the samples."""
    from ragmeter.evaluation.rag import evaluate_rag

    keep: Any = per_sample_out if per_sample_out is not None else keep_per_sample
    try:
        return evaluate_rag(
            source.samples,
            metrics=names or None,
            k_values=k,
            prices=prices,
            per_sample=keep,
            **embedding,
        )
    except NoSamplesError:
        skipped = source.reader.skipped
        what = "rows" if source.parquet else "lines"
        note = f" ({len(skipped)} malformed {what} skipped)" if skipped else ""
        raise source.empty(note) from None
    finally:
        source.samples.close()  # stops the progress bar at once, also on an error


def _print_eval(
    report: RagEvalReport, source: _Source, judge_keys: list[str], cache_path: Path | None
) -> None:
    """The report on stdout (a table, or JSON); skipped lines, gaps and warnings on stderr."""
    skipped = list(source.reader.skipped)
    report.skipped_lines = len(skipped)
    if source.as_json:
        _print_json(report)
        return
    heading = f"RAG evaluation: {report.n_samples} samples"
    if report.skipped_lines:
        heading += f" ({report.skipped_lines} malformed lines skipped)"
    _print_table(rag_table(report), heading)
    if judge_keys:
        _print_judge_summary(report, judge_keys, cache_path)
    print_embed_summary(report)
    err = _stderr()
    unit = "row" if source.parquet else "line"
    for line, message in skipped[:20]:
        err.print(f"skipped {unit} {line}: {message}", markup=False)
    if len(skipped) > 20:
        err.print(f"... and {len(skipped) - 20} more skipped {unit}s", markup=False)
    for reason in dict(report.extra.get("not_computed") or {}).values():
        err.print(f"not computed: {reason}", markup=False, style="dim")
    for warning in report.warnings:
        if report.incomplete and warning.startswith("incomplete:"):
            continue  # said under the table already
        err.print(f"warning: {warning}", markup=False)
