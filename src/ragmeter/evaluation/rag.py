"""``evaluate_rag``: score RAG samples with sample-level metrics and assemble a RagEvalReport.

The driver makes one pass over the samples (a list, a generator, or a streaming
:func:`ragmeter.io.jsonl.read_jsonl` / :func:`ragmeter.io.arrow.read_parquet` reader) and
scores every metric on each sample in turn, retrieval metrics too (each sample's ranking
goes through :func:`ragmeter.evaluation.retrieval.evaluate_run`'s per-query kernel, so the
numbers are evaluate_run's). Each metric's scores are folded into a mergeable
:class:`~ragmeter.aggregate.Distribution` (exact sum, count, exact min/max and sum of
squares, exact value counts or log buckets) a block at a time; per-sample scores are kept
in memory, written to a file as they are computed, or not kept at all (``per_sample=``):

* ``per_sample=None`` (the default) keeps them when ``samples`` is a sized collection (a
  list or tuple: already in memory, and what users of ``report.per_sample`` expect) and
  does not keep them for an iterator (a generator, a JSONL or Parquet reader), so a
  stream of any length is scored in constant memory (about 30 bytes per sample, for the
  repeated-id rule);
* ``per_sample=True`` keeps them, ``False`` does not;
* ``per_sample="scores.jsonl"`` (``.jsonl.gz``, ``.parquet``) writes one row per sample as
  it goes (:mod:`ragmeter.io.scores`) and keeps none; ``report.extra["per_sample_file"]``
  names the file.

Without per-sample scores, ``report.summaries`` come from the distributions (see
:class:`~ragmeter.report.DistributionSummary`'s ``exact``); ``metrics`` and ``coverage`` are
the same numbers either way.

Rules (seed 000's ``evaluate_rag`` and seed 003's metric contract):

* a metric skips a sample that lacks what it needs (``None`` in ``per_sample``), and
  ``coverage[key]`` counts the samples it scored; ``metrics[key]`` is the exact mean over
  those (correctly rounded, as :func:`statistics.mean`);
* a metric **explicitly requested** that no sample can satisfy is refused with an
  :class:`~ragmeter.errors.InvalidInputError` saying which field is missing, instead of a
  number that means nothing. With ``metrics=None`` such a metric is simply left out, and
  ``report.extra["not_computed"]`` says why (the character-level :data:`SPAN_METRICS`, which
  only span-labelled data can have, are left out without a note);
* an unknown metric name raises :class:`~ragmeter.errors.UnknownMetricError`, no samples
  raises :class:`~ragmeter.errors.NoSamplesError`, and samples on which no metric at all can
  be computed raise :class:`~ragmeter.errors.InvalidInputError` saying why (all are
  ``ValueError``);
* a sample id seen before is reported under ``"<id>#2"``, ``"<id>#3"``... (with a warning;
  a stream resolves ids with :class:`~ragmeter.aggregate.StreamKeys`, the same rule);
* a key that is not a field but looks like one (``respones``, Ragas 0.1's ``ground_truth``)
  is kept in ``metadata`` as always, and counted in a warning that names the field it
  probably meant;
* a metric that raises anything but a :class:`~ragmeter.errors.RagmeterError`, or returns
  NaN or an infinity, is left out of the results and recorded in ``warnings`` (never scored
  as 0, and a report never holds a non-finite number);
* when every retrieval score is 0 and not one of the ``retrieved_ids`` of the samples
  scored on them appears in that sample's ``relevance``/``reference_ids`` (not even as
  judged non-relevant), a warning counts the retrieved ids and samples: the two name
  documents differently (evaluate_run's doc-ids rule, per sample).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ragmeter.aggregate import StreamKeys
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation import sample_retrieval as _sample_retrieval
from ragmeter.evaluation._rag_partial import RagPartial
from ragmeter.evaluation._rag_passes import _report, rag_partial, rag_report
from ragmeter.evaluation._rag_rules import (
    DEFAULT_K,
    DEFAULT_METRICS,
    SEED_METRICS,
    SPAN_METRICS,
    PerSample,
    _cut_offs,
    _key,
    _per_sample_mode,
    _resolve,
    _split_judges,
)
from ragmeter.evaluation._rag_score import _score
from ragmeter.evaluation.embedded import split_embedded
from ragmeter.io.scores import ScoreWriter, open_score_writer, removed_on_error, write_scores
from ragmeter.metrics import character as _character
from ragmeter.metrics import faithfulness as _faithfulness
from ragmeter.metrics import faithfulness_strict as _faithfulness_strict
from ragmeter.metrics import grounding as _grounding
from ragmeter.metrics import lexical as _lexical
from ragmeter.metrics import operational as _operational
from ragmeter.metrics.base import RagMetric
from ragmeter.report import RagEvalReport, WarningLog
from ragmeter.schema import SampleKeys, SampleLike

__all__ = [
    "DEFAULT_METRICS",
    "SEED_METRICS",
    "SPAN_METRICS",
    "RagPartial",
    "evaluate_rag",
    "rag_partial",
    "rag_report",
]


def evaluate_rag(
    samples: Iterable[SampleLike],
    *,
    metrics: Sequence[str | RagMetric] | str | RagMetric | None = None,
    k_values: Iterable[int] | int = DEFAULT_K,
    prices: Mapping[str, float] | None = None,
    skipped_lines: int = 0,
    warnings: Iterable[str] | WarningLog | None = None,
    judge_cache: Any = "default",
    judge_options: Any = None,
    progress: Callable[[int, int], None] | None = None,
    per_sample: PerSample = None,
    k: int | None = None,
    embed_cache: Any = "default",
    embed_options: Any = None,
) -> RagEvalReport:
    """Score RAG samples with sample-level metrics; only judge metrics, when passed, call an LLM.

    ``samples`` are :class:`~ragmeter.schema.RagSample` objects or plain mappings (Ragas or
    rag-eval field names), in any iterable, consumed once. ``metrics`` are registered names
    (see :data:`ragmeter.metrics.base.RAG_METRICS`: ``exact_match``, ``token_f1``,
    ``context_recall``, ``context_precision``, ``non_empty_rate``, ``faithfulness``,
    ``latency_ms``, ``total_tokens``, ``cost_usd``, the retrieval names ``ndcg``,
    ``recall``, ``precision``, ``mrr``, ``map``, ``hit_rate`` -- reported at each cut-off
    of ``k_values``, as ``"precision@5"`` -- and more) or :class:`RagMetric` objects; none
    of these calls a model. ``k_values`` is one cut-off (``5``) or several (``(5, 10)``
    reports ``"precision@5"`` and ``"precision@10"``), as :func:`evaluate_run`'s; ``k`` is
    its deprecated name (one cut-off: a ``DeprecationWarning``, the same report).
    ``None`` tries :data:`DEFAULT_METRICS`, plus the character-level :data:`SPAN_METRICS`
    when samples carry ``gold_spans`` and ``retrieved_spans``. LLM-judged metrics
    (:class:`ragmeter.judge.Faithfulness`, ``AnswerRelevancy``, ``Correctness``) may be
    mixed in: they, and only they, call an LLM (the judge you give them), run by
    :mod:`ragmeter.evaluation.judged` with ``judge_cache`` (a path, a
    :class:`~ragmeter.judge.JudgeCache`, ``"default"`` = the user cache dir, or ``None`` for
    no cache), ``judge_options`` (:class:`~ragmeter.judge.JudgeOptions`: concurrency, rate
    limit, timeout, retries, budget) and ``progress(done, total)``; they need every sample
    twice, so the samples and their scores are held in memory then. Embedding metrics
    (``semantic_similarity``, ``semantic_context_recall``, ``semantic_context_precision``:
    by name with the offline default model of ``ragmeter[semantic]``, or as
    :class:`ragmeter.embed.SemanticSimilarity` ... objects with your embedder) are run the
    same way by :mod:`ragmeter.evaluation.embedded`, with ``embed_cache`` (as
    ``judge_cache``, a :class:`~ragmeter.embed.EmbedCache`) and ``embed_options``
    (:class:`~ragmeter.embed.EmbedOptions`: batch size, concurrency, timeout). ``prices``
    (``{"input": ..., "output": ...}``, USD per million tokens) prices ``cost_usd``.
    ``skipped_lines`` and ``warnings`` are carried into the report (a
    :func:`ragmeter.io.jsonl.read_jsonl` reader's skipped lines are counted automatically).

    The report's ``metrics`` hold each metric's mean over the samples it applied to
    (correctly rounded, and the same whatever the order of the samples), ``coverage`` how
    many that was, and ``distributions`` a mergeable aggregate per metric; with a retrieval
    metric, ``extra["k"]`` is the cut-off (the list of them when there are several).
    ``per_sample`` chooses what happens to every sample's scores (``None`` = skipped) and
    ``details`` (faithfulness' supported and unsupported claims,
    ``details[sample_id]["faithfulness"]``): kept in ``report.per_sample`` and
    ``report.details`` (``True``; the default for a list or tuple), not kept (``False``;
    the default for an iterator: constant memory), or written to a
    ``.jsonl``/``.jsonl.gz``/``.parquet`` file as they are computed (a path).
    See the module docstring for the rules.

    Raises :class:`~ragmeter.errors.UnknownMetricError` for an unregistered name,
    :class:`~ragmeter.errors.InvalidInputError` for no samples, an invalid sample (naming
    its index and field), ``k_values`` that are not ints >= 1 (or ``k < 1``), both
    ``k_values`` and ``k``, a ``per_sample`` that is none of the above, or an explicitly
    requested metric that no sample can satisfy (naming the missing field).

    >>> samples = [
    ...     {'user_input': 'capital of France?', 'response': 'Paris',
    ...      'reference': 'Paris',
    ...      'retrieved_contexts': ['Paris is the capital of France.']},
    ...     {'user_input': '2 + 2?', 'response': 'five', 'reference': 'four',
    ...      'retrieved_contexts': []},
    ... ]
    >>> report = evaluate_rag(samples)
    >>> report.metrics['exact_match']
    0.5
    >>> report.metrics['non_empty_rate']
    0.5
    >>> report.coverage['faithfulness'], report.metrics['faithfulness']
    (2, 0.5)
    >>> streamed = evaluate_rag(iter(samples))      # an iterator: per-sample scores not kept
    >>> streamed.metrics == report.metrics, streamed.per_sample, streamed.summary('token_f1').mean
    (True, {}, 0.5)
    >>> evaluate_rag(samples, metrics=['precision'])
    Traceback (most recent call last):
    ...
    ragmeter.errors.InvalidInputError: precision@5 needs retrieved_ids ... has them
    >>> ranked = [{'retrieved_ids': ['d1', 'd2', 'd3'], 'reference_ids': ['d3']}]
    >>> evaluate_rag(ranked, metrics=['precision', 'recall'], k_values=(1, 3)).metrics
    {'precision@1': 0.0, 'precision@3': 0.3333333333333333, 'recall@1': 0.0, 'recall@3': 1.0}
    """
    ks = _cut_offs(k_values, k, caller="evaluate_rag", stacklevel=2)
    keep, path = _per_sample_mode(per_sample, samples)
    embeds, metrics = split_embedded(metrics)
    judges, metrics = ([], metrics) if embeds else _split_judges(metrics)
    if embeds or judges:
        # model-scored metrics: the embedding run hands the judges on to evaluate_rag
        shared: dict[str, Any] = {
            "other_metrics": metrics if isinstance(metrics, list) else [],
            "evaluate": evaluate_rag,
            "judge_cache": judge_cache,
            "judge_options": judge_options,
            "progress": progress,
            "k_values": ks,
            "prices": prices,
            "skipped_lines": skipped_lines,
            "warnings": warnings,
        }
        if embeds:
            from ragmeter.evaluation.embedded import evaluate_with_embeddings

            report = evaluate_with_embeddings(
                samples,
                embed_metrics=embeds,
                embed_cache=embed_cache,
                embed_options=embed_options,
                **shared,
            )
        else:
            from ragmeter.evaluation.judged import evaluate_with_judges

            report = evaluate_with_judges(samples, judge_metrics=judges, **shared)
        if path is not None:
            write_scores(report, path)
            report.extra["per_sample_file"] = str(path)
        return report
    if skipped_lines is None or isinstance(skipped_lines, bool) or skipped_lines < 0:
        raise InvalidInputError(f"skipped_lines must be an int >= 0, got {skipped_lines!r}")
    resolved, explicit = _resolve(metrics, ks, prices)
    log = [str(w) for w in warnings] if warnings is not None else []
    writer = open_score_writer(path, [_key(m) for m in resolved]) if path is not None else None
    with removed_on_error(writer):
        report = _evaluate(samples, resolved, explicit, ks, keep, writer, log, skipped_lines)
    if writer is not None:
        report.extra["per_sample_file"] = str(writer.finish())
    elif not keep:
        report.extra["per_sample"] = "not kept"
    return report


def _evaluate(
    samples: Iterable[SampleLike],
    resolved: list[RagMetric],
    explicit: bool,
    ks: tuple[int, ...],
    keep: bool,
    writer: ScoreWriter | None,
    log: list[str],
    skipped_lines: int,
) -> RagEvalReport:
    keys = SampleKeys()
    stream_keys = StreamKeys()
    rows: dict[str, dict[str, float | None]] = {}
    details: dict[str, dict[str, Any]] = {}
    partial = _score(
        samples, resolved, ks[0], keep, writer, keys, stream_keys, rows, details, None, defer=True
    )
    return _report(
        partial,
        resolved,
        explicit,
        ks,
        log,
        skipped_lines,
        getattr(samples, "skipped", None),
        keys.repeats if keep else stream_keys.repeats,
        rows,
        details,
        writer,
    )


# Keep the registering imports referenced (they register metrics at import).
_REGISTERING_MODULES = (
    _lexical,
    _faithfulness,
    _faithfulness_strict,
    _operational,
    _sample_retrieval,
    _grounding,
    _character,
)
