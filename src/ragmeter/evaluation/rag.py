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

import difflib
import math
import os
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ragmeter.aggregate import BLOCK, Distribution, IdRoots, StreamKeys
from ragmeter.errors import InvalidInputError, NoSamplesError, RagmeterError, check_k
from ragmeter.evaluation import sample_retrieval as _sample_retrieval
from ragmeter.evaluation.retrieval import _note_unjudged_docs, score_ranking
from ragmeter.io.scores import ScoreWriter, open_score_writer, score_format, write_scores
from ragmeter.metrics import character as _character
from ragmeter.metrics import faithfulness as _faithfulness
from ragmeter.metrics import grounding as _grounding
from ragmeter.metrics import lexical as _lexical
from ragmeter.metrics import operational as _operational
from ragmeter.metrics._kernel import CODES, kernel_codes, result_keys
from ragmeter.metrics.base import RAG_METRICS, RagMetric
from ragmeter.report import RagEvalReport, WarningLog
from ragmeter.schema import RAG_EVAL_ALIASES, RagSample, SampleKeys, SampleLike, coerce_sample

__all__ = [
    "DEFAULT_METRICS",
    "SEED_METRICS",
    "SPAN_METRICS",
    "RagPartial",
    "evaluate_rag",
    "rag_partial",
    "rag_report",
]

SEED_METRICS: tuple[str, ...] = (
    "exact_match",
    "token_f1",
    "context_recall",
    "context_precision",
    "non_empty_rate",
)
"""Seed 000's five lexical metrics (``ef.evaluation.evaluate_rag``'s default)."""

DEFAULT_METRICS: tuple[str, ...] = (*SEED_METRICS, "faithfulness", "precision")
"""What ``metrics=None`` tries: the seed five, claim faithfulness and ``precision@k`` (what
rag-eval reports); each is computed when at least one sample can be scored on it."""

SPAN_METRICS: tuple[str, ...] = ("character_recall", "character_precision", "character_f1")
"""Seed 004's character-level scores: with ``metrics=None`` they are added when some sample
carries ``gold_spans`` and ``retrieved_spans``, and left out without a note otherwise."""

_SampleRetrieval = _sample_retrieval.SampleRetrievalMetric
_CostUSD = _operational.CostUSD

_FIELD_HINTS: dict[str, str] = {
    "reference": "a reference answer (reference or references)",
    "response": "a non-empty response (rag-eval: answer)",
    "retrieved_contexts": "retrieved_contexts (rag-eval: context)",
    "retrieved_ids": "retrieved_ids",
    "retrieved_texts": "retrieved_texts (rag-eval: retrieved)",
    "reference_contexts": "reference_contexts (rag-eval: golden_documents)",
    "relevance": "relevance or reference_ids",
}


_KNOWN_KEYS: tuple[str, ...] = (
    *(name for name in RagSample.model_fields if name != "metadata"),
    *RAG_EVAL_ALIASES,
)
_OTHER_TOOLS: dict[str, str] = {
    "ground_truth": "reference",
    "ground_truths": "references",
    "contexts": "retrieved_contexts",
    "query": "user_input",
    "query_id": "id",
    "reference_answer": "reference",
    "doc_ids": "retrieved_ids",
}
"""Other tools' names for RagSample fields (Ragas 0.1, LlamaIndex, BEIR) -> the field."""
_MEANT: dict[str, str | None] = {}


def _meant(key: str) -> str | None:
    """The field an unknown key probably meant (a typo or another tool's name), or None."""
    if key in _MEANT:
        return _MEANT[key]
    guess = _OTHER_TOOLS.get(key.lower())
    if guess is None and key not in _KNOWN_KEYS:
        close = difflib.get_close_matches(key.lower(), _KNOWN_KEYS, n=1, cutoff=0.8)
        guess = close[0] if close else None
    if len(_MEANT) < 4096:
        _MEANT[key] = guess
    return guess


def _has(sample: RagSample, field: str) -> bool:
    if field == "reference":
        return sample.reference is not None or bool(sample.references)
    if field == "relevance":
        return sample.relevance is not None or sample.reference_ids is not None
    value = getattr(sample, field, None)
    return value is not None and not (field == "response" and value == "")


def _exact_mean(values: Sequence[float]) -> float:
    """The correctly rounded mean of ``values`` (equal to :func:`statistics.mean`), fast.

    ``math.fsum`` rounds once; the rest of the exact sum is recovered term by term, so the
    division is done on the exact rational sum.

    >>> _exact_mean([0.1, 0.2, 0.4]) == statistics.mean([0.1, 0.2, 0.4])
    True
    """
    n = len(values)
    rest = list(values)
    terms: list[float] = []
    try:
        for _ in range(64):
            t = math.fsum(rest)
            if t == 0.0:
                break
            if not math.isfinite(t):
                return t / n
            terms.append(t)
            rest.append(-t)
        else:  # pragma: no cover - a finite float sum needs at most ~40 terms
            return float(statistics.mean(values))
    except (OverflowError, ValueError):  # a sum beyond the float range, or inf - inf
        return float(statistics.mean(values))
    if not terms:
        return 0.0
    if len(terms) == 1:
        return terms[0] / n
    return float(sum((Fraction(t) for t in terms), Fraction(0)) / n)


def _resolve(
    metrics: Sequence[str | RagMetric] | str | RagMetric | None,
    k: int,
    prices: Mapping[str, float] | None,
) -> tuple[list[RagMetric], bool]:
    explicit = metrics is not None
    if metrics is None:
        requested: Sequence[str | RagMetric] = (*DEFAULT_METRICS, *SPAN_METRICS)
    elif isinstance(metrics, (str, RagMetric)):
        requested = [metrics]
    else:
        requested = list(metrics)
    if not requested:
        raise InvalidInputError(
            "metrics is empty: name at least one metric, e.g. ['token_f1'], or pass None "
            "for the defaults"
        )
    resolved: list[RagMetric] = []
    keys: set[str] = set()
    for item in requested:
        if isinstance(item, str):
            metric = RAG_METRICS.get_metric(item)
            if isinstance(metric, _SampleRetrieval):
                metric = metric.at(k)
        elif isinstance(item, RagMetric):
            metric = item
        else:
            raise InvalidInputError(
                f"each metric must be a registered name or a RagMetric, got "
                f"{type(item).__name__}: {item!r:.80}"
            )
        if isinstance(metric, _CostUSD) and not metric.has_prices:
            if prices is None:
                raise InvalidInputError(
                    "cost_usd needs token prices: pass prices={'input': ..., 'output': ...} "
                    "(USD per million tokens) or CostUSD(input_price=..., output_price=...)"
                )
            metric = metric.with_prices(prices)
        key = _key(metric)
        if key not in keys:
            keys.add(key)
            resolved.append(metric)
    return resolved, explicit


def _key(metric: RagMetric) -> str:
    key = getattr(metric, "key", None)
    return key if isinstance(key, str) and key else metric.name


Scorer = Callable[[RagSample], tuple[float | None, dict[str, Any] | None]]


def _scorer(metric: RagMetric) -> Scorer:
    both = getattr(metric, "score_and_detail", None)
    if callable(both):
        return both  # type: ignore[no-any-return]
    has_detail = type(metric).detail is not RagMetric.detail

    def run(sample: RagSample) -> tuple[float | None, dict[str, Any] | None]:
        if not metric.applies_to(sample):
            return None, None
        value = metric.score(sample)
        if value is None:
            return None, None
        return value, metric.detail(sample) if has_detail else None

    return run


def _reason(metric: RagMetric, present: set[str], n: int, scored_fields: bool) -> str:
    key = _key(metric)
    samples = f"{n} sample" + ("" if n == 1 else "s")
    if isinstance(metric, _SampleRetrieval):
        if scored_fields:
            return (
                f"{key}: no sample has a relevant judgement (grade > 0) in its relevance, "
                "reference_ids or reference_contexts, so there is nothing to average"
            )
        return (
            f"{key} needs retrieved_ids with relevance or reference_ids, or rag-eval's "
            "retrieved + golden_documents texts (retrieved_texts + reference_contexts); none "
            f"of the {samples} has them"
        )
    needs = sorted(metric.needs)
    missing = [f for f in needs if f not in present]
    if missing:
        wanted = ", ".join(_FIELD_HINTS.get(f, f) for f in missing)
        return f"{key} needs {wanted}; none of the {samples} has one"
    if not scored_fields:
        return f"{key} applied to none of the {samples} (it needs {', '.join(needs) or '-'})"
    uses = sorted(getattr(metric, "uses", ()))
    wanted = " or ".join(_FIELD_HINTS.get(f, f) for f in uses)
    return (
        f"{key} reads {wanted}, but none of the {samples} has one; it would score every "
        "sample as empty"
    )


def _split_judges(
    metrics: Sequence[str | RagMetric] | str | RagMetric | None,
) -> tuple[list[Any], Sequence[str | RagMetric] | str | RagMetric | None]:
    """Separate LLM-judged metrics (``ragmeter.judge.JudgeMetric``) from the rest."""
    if metrics is None or isinstance(metrics, (str, RagMetric)):
        return [], metrics
    from ragmeter.judge.metrics import JudgeMetric

    items = list(metrics)
    judges = [m for m in items if isinstance(m, JudgeMetric)]
    if not judges:
        return [], items
    return judges, [m for m in items if not isinstance(m, JudgeMetric)]


PerSample = bool | str | os.PathLike[str] | None


def _per_sample_mode(per_sample: object, samples: object) -> tuple[bool, Path | None]:
    """``(keep in memory, file path)`` for ``per_sample=`` (see the module docstring)."""
    if per_sample is None:
        return isinstance(samples, Sized), None
    if per_sample is True or per_sample is False:
        return per_sample, None
    if isinstance(per_sample, (str, os.PathLike)):
        score_format(per_sample)  # refuse an unknown suffix before reading anything
        return False, Path(per_sample)
    raise InvalidInputError(
        "per_sample must be None (keep them for a list, not for a stream), True, False or a "
        f"file path ending in .jsonl, .jsonl.gz or .parquet; got {per_sample!r:.80}"
    )


_Group = tuple[int, list[str], list[int], list[int], list[str]]
"""Retrieval metrics at one cut-off: (k, names, kernel codes, value positions, keys)."""


def _retrieval_groups(retrieval: Sequence[RagMetric], k: int) -> list[_Group]:
    by_k: dict[int, list[str]] = {}
    for m in retrieval:
        by_k.setdefault(getattr(m, "k", k), []).append(m.name)
    groups: list[_Group] = []
    for cut, names in by_k.items():
        keys = [f"{name}@{cut}" for name in names]
        if all(name in CODES for name in names):
            codes = kernel_codes(names)
            order = result_keys(names, codes, (cut,))
            groups.append((cut, names, codes, [order.index(key) for key in keys], keys))
        else:  # a metric the kernel does not know: scored through evaluate_run
            groups.append((cut, names, [], [], keys))
    return groups


def evaluate_rag(
    samples: Iterable[SampleLike],
    *,
    metrics: Sequence[str | RagMetric] | str | RagMetric | None = None,
    k: int = 5,
    prices: Mapping[str, float] | None = None,
    skipped_lines: int = 0,
    warnings: Iterable[str] | WarningLog | None = None,
    judge_cache: Any = "default",
    judge_options: Any = None,
    progress: Callable[[int, int], None] | None = None,
    per_sample: PerSample = None,
) -> RagEvalReport:
    """Score RAG samples with sample-level metrics; no LLM is called.

    ``samples`` are :class:`~ragmeter.schema.RagSample` objects or plain mappings (Ragas or
    rag-eval field names), in any iterable, consumed once. ``metrics`` are registered names
    (see :data:`ragmeter.metrics.base.RAG_METRICS`: ``exact_match``, ``token_f1``,
    ``context_recall``, ``context_precision``, ``non_empty_rate``, ``faithfulness``,
    ``latency_ms``, ``total_tokens``, ``cost_usd``, the retrieval names ``ndcg``,
    ``recall``, ``precision``, ``mrr``, ``map``, ``hit_rate`` -- reported as
    ``"precision@5"`` with cut-off ``k`` -- and more) or :class:`RagMetric` objects.
    ``None`` tries :data:`DEFAULT_METRICS`, plus the character-level :data:`SPAN_METRICS`
    when samples carry ``gold_spans`` and ``retrieved_spans``. LLM-judged metrics
    (:class:`ragmeter.judge.Faithfulness`, ``AnswerRelevancy``, ``Correctness``) may be
    mixed in; they are run by :mod:`ragmeter.evaluation.judged` with ``judge_cache`` (a
    path, a :class:`~ragmeter.judge.JudgeCache`, ``"default"`` = the user cache dir, or
    ``None`` for no cache), ``judge_options`` (:class:`~ragmeter.judge.JudgeOptions`:
    concurrency, rate limit, timeout, retries, budget) and ``progress(done, total)``; they
    need every sample twice, so the samples and their scores are held in memory then.
    ``prices`` (``{"input": ..., "output": ...}``,
    USD per million tokens) prices ``cost_usd``. ``skipped_lines`` and ``warnings`` are
    carried into the report (a :func:`ragmeter.io.jsonl.read_jsonl` reader's skipped lines
    are counted automatically).

    The report's ``metrics`` hold each metric's mean over the samples it applied to
    (correctly rounded, and the same whatever the order of the samples), ``coverage`` how
    many that was, and ``distributions`` a mergeable aggregate per metric. ``per_sample``
    chooses what happens to every sample's scores (``None`` = skipped) and ``details``
    (faithfulness' supported and unsupported claims, ``details[sample_id]["faithfulness"]``):
    kept in ``report.per_sample`` and ``report.details`` (``True``; the default for a list
    or tuple), not kept (``False``; the default for an iterator: constant memory), or
    written to a ``.jsonl``/``.jsonl.gz``/``.parquet`` file as they are computed (a path).
    See the module docstring for the rules.

    Raises :class:`~ragmeter.errors.UnknownMetricError` for an unregistered name,
    :class:`~ragmeter.errors.InvalidInputError` for no samples, an invalid sample (naming
    its index and field), ``k < 1``, a ``per_sample`` that is none of the above, or an
    explicitly requested metric that no sample can satisfy (naming the missing field).

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
    """
    check_k(k)
    keep, path = _per_sample_mode(per_sample, samples)
    judges, metrics = _split_judges(metrics)
    if judges:
        from ragmeter.evaluation.judged import evaluate_with_judges

        report = evaluate_with_judges(
            samples,
            judge_metrics=judges,
            other_metrics=list(metrics) if isinstance(metrics, list) else [],
            evaluate=evaluate_rag,
            judge_cache=judge_cache,
            judge_options=judge_options,
            progress=progress,
            k=k,
            prices=prices,
            skipped_lines=skipped_lines,
            warnings=warnings,
        )
        if path is not None:
            write_scores(report, path)
            report.extra["per_sample_file"] = str(path)
        return report
    if skipped_lines is None or isinstance(skipped_lines, bool) or skipped_lines < 0:
        raise InvalidInputError(f"skipped_lines must be an int >= 0, got {skipped_lines!r}")
    resolved, explicit = _resolve(metrics, k, prices)
    log = [str(w) for w in warnings] if warnings is not None else []
    writer = open_score_writer(path, [_key(m) for m in resolved]) if path is not None else None
    try:
        report = _evaluate(samples, resolved, explicit, k, keep, writer, log, skipped_lines)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if writer is not None:
        report.extra["per_sample_file"] = str(writer.finish())
    elif not keep:
        report.extra["per_sample"] = "not kept"
    return report


def _evaluate(
    samples: Iterable[SampleLike],
    resolved: list[RagMetric],
    explicit: bool,
    k: int,
    keep: bool,
    writer: ScoreWriter | None,
    log: list[str],
    skipped_lines: int,
) -> RagEvalReport:
    keys = SampleKeys()
    stream_keys = StreamKeys()
    rows: dict[str, dict[str, float | None]] = {}
    details: dict[str, dict[str, Any]] = {}
    partial = _score(samples, resolved, k, keep, writer, keys, stream_keys, rows, details, None)
    return _report(
        partial,
        resolved,
        explicit,
        k,
        log,
        skipped_lines,
        getattr(samples, "skipped", None),
        keys.repeats if keep else stream_keys.repeats,
        rows,
        details,
        writer,
    )


@dataclass
class RagPartial:
    """What :func:`evaluate_rag` holds after scoring some of the samples; mergeable.

    :func:`rag_partial` scores one part of the samples (a Dask partition, a file, a
    shard) into a partial, :meth:`merge` folds in the partial of the part that comes
    next, and :func:`rag_report` turns the partial of all the parts into the report one
    pass over all the samples gives, bit for bit: the means come from exact sums
    (:class:`~ragmeter.aggregate.Distribution`), the repeated-id rule is applied to the ids
    in order, and a metric that raised is reported at its first failing sample. Partials
    pickle, so they can be made in other processes or on other machines
    (:mod:`ragmeter.dask`).
    """

    keys: list[str]
    """The metric keys scored, in order."""
    n: int = 0
    """How many samples were scored."""
    distributions: dict[str, Distribution] = field(default_factory=dict)
    """One mergeable aggregate per key."""
    present: set[str] = field(default_factory=set)
    """Fields some sample had (to explain a metric nothing could be scored on)."""
    ranked_any: bool = False
    """Whether some sample had a ranking for the retrieval metrics."""
    failed: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    """Metric key -> (index of the first sample it raised on, that sample's id, the error)."""
    lookalikes: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(unknown key, the field it probably meant) -> how many samples had it."""
    judged_doc: bool = False
    """Whether some scored ``retrieved_ids`` ranking holds a doc its sample judges."""
    unjudged: int = 0
    """Samples whose scored ``retrieved_ids`` ranking holds no judged doc (while none did)."""
    retrieved: int = 0
    """How many doc ids those rankings hold."""
    examples: list[list[str]] = field(default_factory=list)
    """Their first rankings, in order, until :data:`_EXAMPLES` distinct ids (the message's)."""
    rows: list[tuple[str, dict[str, float | None], dict[str, Any] | None]] | None = None
    """Per-sample ``(id as given, scores, details)`` in order when kept, else ``None``."""
    roots: IdRoots | None = None
    """The ids' root digests when per-sample scores are not kept (to count repeated ids)."""

    def merge(self, later: RagPartial) -> None:
        """Fold in the partial of the samples that come right after this one's.

        Raises :class:`~ragmeter.errors.InvalidInputError` for partials of other metrics or
        of another ``keep``.
        """
        if later.keys != self.keys or (later.rows is None) != (self.rows is None):
            raise InvalidInputError(
                "cannot merge partials scored with other metrics or another keep= "
                f"({self.keys} keep={self.rows is not None} and {later.keys} "
                f"keep={later.rows is not None})"
            )
        for key, (index, sid, error) in later.failed.items():
            if key not in self.failed:
                self.failed[key] = (self.n + index, sid, error)
        self.n += later.n
        for key, dist in later.distributions.items():
            self.distributions[key].merge(dist)
        self.present |= later.present
        self.ranked_any = self.ranked_any or later.ranked_any
        self.lookalikes.update(later.lookalikes)
        self.judged_doc = self.judged_doc or later.judged_doc
        self.unjudged += later.unjudged
        self.retrieved += later.retrieved
        self.examples = [] if self.judged_doc else _prune(self.examples + later.examples)
        if self.rows is not None and later.rows is not None:
            self.rows.extend(later.rows)
        if self.roots is not None and later.roots is not None:
            self.roots.merge(later.roots)


_EXAMPLES = 4
"""Distinct doc ids the doc-ids warning needs (it shows three and ``...``)."""


def _prune(examples: list[list[str]]) -> list[list[str]]:
    """The first rankings that bring a new id, until :data:`_EXAMPLES` distinct ids are seen
    (each ranking holds its first :data:`_EXAMPLES` distinct ids): at most that many short
    lists, giving the message the same ids however the samples were split and merged."""
    kept: list[list[str]] = []
    seen: set[str] = set()
    for ranking in examples:
        if len(seen) >= _EXAMPLES:
            break
        if not seen.issuperset(ranking):
            kept.append(ranking)
            seen.update(ranking)
    return kept


def rag_partial(
    samples: Iterable[SampleLike],
    *,
    metrics: Sequence[str | RagMetric] | str | RagMetric | None = None,
    k: int = 5,
    prices: Mapping[str, float] | None = None,
    keep: bool = False,
) -> RagPartial:
    """Score a part of the samples into a mergeable :class:`RagPartial`, with no report yet.

    ``metrics``, ``k`` and ``prices`` are :func:`evaluate_rag`'s (no judge metrics);
    ``keep=True`` keeps the per-sample scores and details. Nothing is refused that needs
    the other parts to decide (no samples, a metric no sample here can be scored on):
    :func:`rag_report` does that on the merged partial. Raises what :func:`evaluate_rag`
    raises for bad arguments and invalid samples (the index is the sample's in this part).

    >>> first = rag_partial([{"id": "a", "response": "Paris", "reference": "Paris"}],
    ...                     metrics=["exact_match"], keep=True)
    >>> first.merge(rag_partial([{"id": "a", "response": "Lyon", "reference": "Paris"}],
    ...                         metrics=["exact_match"], keep=True))
    >>> report = rag_report(first, metrics=["exact_match"])
    >>> report.metrics, report.per_sample
    ({'exact_match': 0.5}, {'a': {'exact_match': 1.0}, 'a#2': {'exact_match': 0.0}})
    """
    check_k(k)
    resolved, _ = _resolve(metrics, k, prices)
    keys = SampleKeys()
    roots = IdRoots()
    rows: dict[str, dict[str, float | None]] = {}
    details: dict[str, dict[str, Any]] = {}
    raw: list[str] | None = [] if keep else None
    partial = _score(samples, resolved, k, keep, None, keys, roots, rows, details, raw)
    if raw is not None:
        partial.rows = [
            (rid, row, details.get(sid)) for rid, (sid, row) in zip(raw, rows.items(), strict=True)
        ]
    else:
        partial.roots = roots
    return partial


def rag_report(
    partial: RagPartial,
    *,
    metrics: Sequence[str | RagMetric] | str | RagMetric | None = None,
    k: int = 5,
    prices: Mapping[str, float] | None = None,
    warnings: Iterable[str] | WarningLog | None = None,
    skipped_lines: int = 0,
    repeats: int | None = None,
) -> RagEvalReport:
    """The report of the merged :class:`RagPartial` of all the samples: what
    ``evaluate_rag(samples, per_sample=keep)`` returns, bit for bit (the partial is consumed).

    ``metrics``, ``k`` and ``prices`` must be those the partials were scored with
    (``metrics=None`` decides, as :func:`evaluate_rag` does, which defaults are left
    out). When per-sample scores were not kept and ``partial.roots.repeated()`` is not
    empty, ``repeats`` must say how many sample ids repeat an earlier one (see
    :class:`~ragmeter.aggregate.IdRoots`). Raises what :func:`evaluate_rag` raises at the
    end of a pass: :class:`~ragmeter.errors.NoSamplesError` when no part had a sample,
    :class:`~ragmeter.errors.InvalidInputError` for a requested metric no sample could be
    scored on, or other metrics than the partial's.
    """
    check_k(k)
    if skipped_lines is None or isinstance(skipped_lines, bool) or skipped_lines < 0:
        raise InvalidInputError(f"skipped_lines must be an int >= 0, got {skipped_lines!r}")
    resolved, explicit = _resolve(metrics, k, prices)
    if [_key(m) for m in resolved] != partial.keys:
        raise InvalidInputError(
            f"the partial holds the metrics {partial.keys}, not {[_key(m) for m in resolved]}: "
            "pass rag_report the metrics, k and prices the partials were scored with"
        )
    log = [str(w) for w in warnings] if warnings is not None else []
    rows: dict[str, dict[str, float | None]] = {}
    details: dict[str, dict[str, Any]] = {}
    if partial.rows is not None:
        keys = SampleKeys()
        for rid, row, detail in partial.rows:
            sid = keys(rid)
            rows[sid] = row
            if detail is not None:
                details[sid] = detail
        count = keys.repeats
    elif repeats is None:
        if partial.roots is not None and partial.roots.repeated().size:
            raise InvalidInputError(
                "some sample ids may repeat across the parts: pass repeats= (count them with "
                "SampleKeys over the ids whose root is in partial.roots.repeated(), in order)"
            )
        count = 0
    else:
        count = repeats
    report = _report(
        partial, resolved, explicit, k, log, skipped_lines, None, count, rows, details, None
    )
    if partial.rows is None:
        report.extra["per_sample"] = "not kept"
    return report


def _score(
    samples: Iterable[SampleLike],
    resolved: list[RagMetric],
    k: int,
    keep: bool,
    writer: ScoreWriter | None,
    keys: SampleKeys,
    stream_keys: StreamKeys | IdRoots,
    rows: dict[str, dict[str, float | None]],
    details: dict[str, dict[str, Any]],
    raw_ids: list[str] | None,
) -> RagPartial:
    """evaluate_rag's one pass: score every sample into ``rows``/``details`` (kept) or the
    distributions, and return the mergeable state (``raw_ids`` collects the ids as given)."""
    retrieval = [m for m in resolved if isinstance(m, _SampleRetrieval)]
    groups = _retrieval_groups(retrieval, k)
    scored = [(_key(m), _scorer(m), m) for m in resolved if not isinstance(m, _SampleRetrieval)]
    # Which fields occur on some sample (to explain a metric nothing could be scored on).
    # A field only read through ``uses`` stops being looked for once its group is seen.
    needed: set[str] = set()
    uses_groups: list[frozenset[str]] = []
    for m in resolved:
        needed |= m.needs
        uses = frozenset(getattr(m, "uses", ()))
        if uses:
            uses_groups.append(uses)
    pending: set[str] = needed.union(*uses_groups)
    present: set[str] = set()

    failed: dict[str, tuple[int, str, str]] = {}
    lookalikes: Counter[tuple[str, str]] = Counter()
    blank = dict.fromkeys([_key(m) for m in resolved])
    dists = {key: Distribution() for key in blank}
    buffers: dict[str, list[float]] = {key: [] for key in blank}
    active = [(key, score, m.name, buffers[key].append) for key, score, m in scored]
    ranked_any = False
    judged_doc = False
    unjudged = retrieved = 0
    examples: list[list[str]] = []
    block_ids: list[str] = []
    block_rows: list[dict[str, float | None]] = []
    block_details: list[dict[str, Any] | None] = []

    def flush() -> None:
        for key, buffer in buffers.items():
            if buffer:
                dists[key].add_trusted(buffer)
                buffer.clear()
        if block_ids:
            sids = stream_keys.resolve(block_ids)
            if writer is not None:
                writer.write(zip(sids, block_rows, block_details, strict=True))
            block_ids.clear()
            block_rows.clear()
            block_details.clear()

    n = 0
    for index, item in enumerate(samples):
        sample = item if type(item) is RagSample else coerce_sample(item, index=index)
        n += 1
        row = dict(blank)
        sample_details: dict[str, Any] | None = None
        if keep:
            sid = keys(sample.id)
            rows[sid] = row
            if raw_ids is not None:
                raw_ids.append(sample.id)
        else:
            sid = sample.id
            block_ids.append(sid)
            if writer is not None:
                block_rows.append(row)
        if sample.metadata:
            for key in sample.metadata:
                meant = _meant(key)
                if meant is not None:
                    lookalikes[(key, meant)] += 1
        if pending:
            found = [f for f in pending if _has(sample, f)]
            if found:
                present.update(found)
                pending.difference_update(found)
                for group in uses_groups:
                    if not group.isdisjoint(present):
                        pending.difference_update(group - needed)
        for entry in active:
            key, score, name, append = entry
            try:
                value, detail = score(sample)
                # ``v - v`` is 0.0 for every finite float, NaN for NaN and the infinities
                if value is not None and (type(value) is not float or value - value != 0.0):
                    value = float(value)
                    if not math.isfinite(value):
                        raise ValueError("returned NaN" if value != value else f"returned {value}")
            except RagmeterError:
                raise
            except Exception as exc:
                failed[key] = (index, sample.id, repr(exc))
                active = [e for e in active if e is not entry]  # the loop keeps the old list
                continue
            if value is not None:
                row[key] = value
                append(value)
                if detail is not None:
                    if sample_details is None:
                        sample_details = {}
                    sample_details[name] = detail
        if groups:
            ranking = _sample_retrieval.sample_ranking(sample)
            if ranking is not None:
                ranked_any = True
                scored_ranking = _score_retrieval(sid, ranking, groups, row, buffers)
                if (
                    scored_ranking
                    and not judged_doc
                    and ranking[0]
                    and sample.retrieved_ids is not None  # ids, not rag-eval's texts
                ):
                    ranked, judgements = ranking
                    if any(d in judgements for d in ranked):
                        judged_doc = True
                        examples = []
                    else:
                        unjudged += 1
                        retrieved += len(ranked)
                        examples = _prune([*examples, list(dict.fromkeys(ranked))[:_EXAMPLES]])
        if keep:
            if sample_details is not None:
                details[sid] = sample_details
        elif writer is not None:
            block_details.append(sample_details)
        if n % BLOCK == 0:
            flush()
    flush()

    return RagPartial(
        keys=list(blank),
        n=n,
        distributions=dists,
        present=present,
        ranked_any=ranked_any,
        failed=failed,
        lookalikes=lookalikes,
        judged_doc=judged_doc,
        unjudged=unjudged,
        retrieved=retrieved,
        examples=examples,
    )


def _report(
    partial: RagPartial,
    resolved: list[RagMetric],
    explicit: bool,
    k: int,
    log: list[str],
    skipped_lines: int,
    reader_skipped: object,
    repeats: int,
    rows: dict[str, dict[str, float | None]],
    details: dict[str, dict[str, Any]],
    writer: ScoreWriter | None,
) -> RagEvalReport:
    """The end of evaluate_rag's pass: what was not computed and why, warnings, the report."""
    n = partial.n
    dists = partial.distributions
    present = partial.present
    ranked_any = partial.ranked_any
    position = {key: i for i, key in enumerate(partial.keys)}
    failed = {
        key: f"the {key!r} metric raised {error} on sample {index} (id {sid!r}) and was left "
        "out of the results rather than silently scoring zero"
        for key, (index, sid, error) in sorted(
            partial.failed.items(), key=lambda item: (item[1][0], position[item[0]])
        )
    }
    if n == 0:
        skipped_note = ""
        if isinstance(reader_skipped, list) and reader_skipped:
            skipped_note = f" ({len(reader_skipped)} malformed lines were skipped)"
        raise NoSamplesError(
            "evaluate_rag got no samples: pass a non-empty list of RagSample objects or "
            f"mappings (or a JSONL file with at least one valid sample){skipped_note}"
        )

    not_computed: dict[str, str] = {}
    silent: set[str] = set()
    for m in resolved:
        key = _key(m)
        if key in failed:
            continue
        if not dists[key].count:
            reason = _reason(
                m, present, n, ranked_any if isinstance(m, _SampleRetrieval) else False
            )
        else:
            reads = frozenset(getattr(m, "uses", ()))
            if not reads or not reads.isdisjoint(present):
                continue
            reason = _reason(m, present, n, True)
        if explicit:
            raise InvalidInputError(reason)
        if key in SPAN_METRICS and not dists[key].count:
            silent.add(key)  # an opt-in default: no note for runs without spans
            continue
        not_computed[key] = reason

    dropped = set(failed) | set(not_computed) | silent
    if dropped:
        for row in rows.values():
            for key in dropped:
                row.pop(key, None)
        if writer is not None:
            writer.drop(dropped)
    log.extend(failed.values())
    if repeats:
        log.append(
            f"{repeats} sample id(s) repeat an earlier one; they are reported as '<id>#2', "
            "'<id>#3', ... in per_sample"
        )
    retrieval_keys = [
        _key(m) for m in resolved if isinstance(m, _SampleRetrieval) and _key(m) not in dropped
    ]
    if (
        retrieval_keys
        and not partial.judged_doc
        and partial.retrieved
        and not any(dists[key].mean() for key in retrieval_keys)
    ):
        ids_log = WarningLog()
        _note_unjudged_docs(
            ids_log,
            partial.retrieved,
            [d for ranking in partial.examples for d in ranking],
            stage="samples",
            scores=f"every retrieval score ({', '.join(retrieval_keys)}) of the "
            f"{partial.unjudged} sample(s) scored on retrieved_ids",
            run="their retrieved_ids",
            truth="their relevance/reference_ids",
        )
        log.extend(ids_log.entries)
    for (key, meant), count in partial.lookalikes.most_common():
        log.append(
            f"{count} sample(s) have a key {key!r}, which is not a field: it was kept in "
            f"metadata and not scored. Did you mean {meant!r}?"
        )
    if not skipped_lines and isinstance(reader_skipped, list):
        skipped_lines = len(reader_skipped)

    kept = [_key(m) for m in resolved if _key(m) not in dropped]
    if not kept and not failed:
        hints = [w for w in log if "Did you mean" in w]
        raise InvalidInputError(
            f"no metric could be computed on the {n} sample(s): "
            + "; ".join([*hints, *not_computed.values()])
        )
    for key in kept:
        dists[key].missing = n - dists[key].count
    extra: dict[str, Any] = {}
    if any(isinstance(m, _SampleRetrieval) for m in resolved):
        extra["k"] = k
    if not_computed:
        extra["not_computed"] = not_computed
    better = {_key(m): bool(m.higher_is_better) for m in resolved}
    return RagEvalReport(
        metrics={key: dists[key].mean() for key in kept},
        coverage={key: dists[key].count for key in kept},
        n_samples=n,
        per_sample=rows,
        higher_is_better={key: better[key] for key in kept},
        skipped_lines=skipped_lines,
        warnings=log,
        details=details,
        extra=extra,
        distributions={key: dists[key] for key in kept},
    )


def _score_retrieval(
    sid: str,
    ranking: tuple[list[str], dict[str, float]],
    groups: list[_Group],
    row: dict[str, float | None],
    buffers: dict[str, list[float]],
) -> bool:
    """Score one sample's ranking at every cut-off, as evaluate_run scores a query; whether
    some metric scored it (a sample with no relevant judgement is not scored)."""
    ranked, judgements = ranking
    scored = False
    for cut, names, codes, picks, keys in groups:
        if codes:
            values = score_ranking(sid, ranked, judgements, (cut,), codes, None)
            if values is None:
                continue
            scored = True
            for pick, key in zip(picks, keys, strict=True):
                value = values[pick]
                row[key] = value
                buffers[key].append(value)
            continue
        results = _sample_retrieval.score_rankings({sid: ranked}, {sid: judgements}, names, cut)
        for name, key in zip(names, keys, strict=True):
            got = results[name].get(sid)
            if got is not None:
                scored = True
                row[key] = got
                buffers[key].append(got)
    return scored


# Keep the registering imports referenced (they register metrics at import).
_REGISTERING_MODULES = (
    _lexical,
    _faithfulness,
    _operational,
    _sample_retrieval,
    _grounding,
    _character,
)
