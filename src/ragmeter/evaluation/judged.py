"""LLM-judged metrics inside :func:`ragmeter.evaluate_rag`.

:func:`ragmeter.evaluate_rag` hands any :class:`~ragmeter.judge.JudgeMetric` it is given to
:func:`evaluate_with_judges`: the deterministic metrics are computed as usual, the judge
metrics by :func:`ragmeter.judge.run_judges` (bounded, cached, budgeted), and both land in
one :class:`~ragmeter.report.RagEvalReport`. A judge score that could not be had is ``None``
for that sample (counted in ``summaries[key].missing``) and its reason is in
``details[sample_id][key]``; the report's ``extra`` carries ``judge_calls`` (calls actually
sent), ``judge_cache_hits``, ``judge_deduplicated`` (verdicts shared by identical prompts
in the run), ``judge_cache_writes_skipped`` (new verdicts the cache did not store, with a
warning saying why: a read-only cache, a failed write), judge token counts and, when a
budget stopped the run, ``incomplete: True`` with the reason; ``judges`` holds each judge
metric's settings (:func:`judge_settings`: the judge's identity, prompt hash, version).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ragmeter.errors import InvalidInputError, NoSamplesError
from ragmeter.evaluation._model_runs import add_metric, base_report
from ragmeter.judge.cache import JudgeCache
from ragmeter.judge.metrics import JudgeMetric
from ragmeter.judge.runner import JudgeOptions, JudgeRun, run_judges
from ragmeter.report import RagEvalReport
from ragmeter.schema import RagSample, SampleLike, coerce_sample

__all__ = ["DEFAULT_CACHE", "evaluate_with_judges", "judge_settings", "open_cache"]

DEFAULT_CACHE = "default"
"""``judge_cache=DEFAULT_CACHE`` (the default) uses the user cache directory."""

CacheArg = str | os.PathLike[str] | JudgeCache | None


def open_cache(judge_cache: CacheArg) -> JudgeCache | None:
    """``None`` -> no cache; ``"default"`` -> the user cache dir; a path or a JudgeCache."""
    if judge_cache is None:
        return None
    if isinstance(judge_cache, JudgeCache):
        return judge_cache
    if isinstance(judge_cache, str) and judge_cache == DEFAULT_CACHE:
        return JudgeCache()
    return JudgeCache(judge_cache)


def evaluate_with_judges(
    samples: Iterable[SampleLike],
    *,
    judge_metrics: Sequence[JudgeMetric],
    other_metrics: Sequence[Any] | None,
    evaluate: Callable[..., RagEvalReport],
    judge_cache: CacheArg = DEFAULT_CACHE,
    judge_options: JudgeOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    **kwargs: Any,
) -> RagEvalReport:
    """Score ``other_metrics`` with ``evaluate`` and ``judge_metrics`` with the judge runner.

    ``other_metrics=None`` lets ``evaluate`` choose its defaults (``metrics=None``: every
    default metric some sample can be scored on); an empty list means judge metrics only.
    """
    coerced = _judgeable(samples, judge_metrics)
    report, ids, renamed = base_report(coerced, other_metrics, evaluate, kwargs)
    cache = open_cache(judge_cache)
    try:
        run = run_judges(
            renamed, list(judge_metrics), cache=cache, options=judge_options, progress=progress
        )
    finally:
        if cache is not None and not isinstance(judge_cache, JudgeCache):
            cache.close()
    for metric in judge_metrics:
        _add_scores(report, run, metric, ids)
    _add_run(report, run, cache)
    report.extra["judges"] = {m.name: judge_settings(m) for m in judge_metrics}
    report.__dict__.pop("summaries", None)  # drop a cached summary computed before the merge
    return report


def judge_settings(metric: JudgeMetric) -> dict[str, Any]:
    """What of a judge metric changes its scores (the report's config fingerprint): the
    judge's identity, the metric's version and repeats, and ``prompt_sha256``, a hash of the
    messages it sends for a sample whose fields are placeholders (the prompt template)."""
    probe = RagSample(
        id="probe",
        user_input="{user_input}",
        response="{response}",
        retrieved_contexts=["{context}"],
        reference="{reference}",
    )
    try:
        shown = [[m.role, m.content] for m in metric.messages(probe)]
    except Exception as exc:  # a custom metric that needs other fields
        shown = [["unavailable", type(exc).__name__]]
    prompt = hashlib.sha256(json.dumps(shown, ensure_ascii=False).encode("utf-8")).hexdigest()
    return {
        **dict(metric.judge.identity),
        "metric_version": str(getattr(metric, "version", "")),
        "repeats": int(getattr(metric, "repeats", 1)),
        "prompt_sha256": prompt,
    }


def _judgeable(
    samples: Iterable[SampleLike], judge_metrics: Sequence[JudgeMetric]
) -> list[RagSample]:
    """The samples as :class:`~ragmeter.schema.RagSample` objects; refuses an empty
    ``samples``, and a judge metric that no sample can be scored on."""
    coerced = [coerce_sample(s, index=i) for i, s in enumerate(samples)]
    if not coerced:
        raise NoSamplesError(
            "evaluate_rag got no samples: pass a non-empty list of RagSample objects or mappings"
        )
    for metric in judge_metrics:
        if not any(metric.applies_to(s) for s in coerced):
            need = ", ".join(sorted(metric.needs))
            raise InvalidInputError(
                f"{metric.name} needs {need} on a sample; none of the {len(coerced)} samples "
                "has all of them, so no judge call could score anything"
            )
    return coerced


def _add_scores(report: RagEvalReport, run: JudgeRun, metric: JudgeMetric, ids: list[str]) -> None:
    """Put one judge metric's per-sample scores, reasons and spreads, and its mean, in the
    report (or say why it has none)."""
    key = metric.name
    rows: list[tuple[str, float | None, dict[str, Any]]] = []
    for sid in ids:
        info: dict[str, Any] = {}
        reason = run.reasons.get(sid, {}).get(key)
        if reason:
            info["reason"] = reason
        spread = run.spread.get(sid, {}).get(key)
        if spread:
            info["spread"] = spread
        rows.append((sid, run.scores.get(sid, {}).get(key), info))
    why = "the judge scored no sample (each sample's reason is in details)"
    add_metric(report, key, metric.higher_is_better, rows, why)


def _add_run(report: RagEvalReport, run: JudgeRun, cache: JudgeCache | None) -> None:
    """Put what the judge run took (calls, cache hits, tokens) and how it ended in the
    report's ``extra`` and ``warnings``."""
    report.extra.update(
        judge_calls=run.calls,
        judge_cache_hits=run.cache_hits,
        judge_deduplicated=run.deduplicated,
        judge_cache_writes_skipped=run.cache_writes_skipped,
        judge_input_tokens=run.input_tokens,
        judge_output_tokens=run.output_tokens,
    )
    if run.cache_writes_skipped and cache is not None:
        report.warnings.append(
            f"judge cache {cache.path}: {run.cache_writes_skipped} new verdict(s) were not "
            f"stored ({run.cache_write_problem}); a re-run will ask the judge for them again"
        )
    if run.incomplete:
        report.extra["incomplete"] = True
        report.extra["stop_reason"] = run.stop_reason
        report.warnings.append(f"incomplete: {run.stop_reason}; unscored samples are None")
