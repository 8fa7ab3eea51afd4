"""``evaluate_rag``: score RAG samples with sample-level metrics and assemble a RagEvalReport.

The driver makes one pass over the samples (a list, a generator, or a streaming
:func:`ragmeter.io.jsonl.read_jsonl` reader) and scores every metric on each sample in turn;
only the per-sample scores are kept. Retrieval metrics are batched into one
:func:`ragmeter.evaluation.retrieval.evaluate_run` call at the end.

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
* a sample id seen before is reported under ``"<id>#2"``, ``"<id>#3"``... (with a warning);
* a key that is not a field but looks like one (``respones``, Ragas 0.1's ``ground_truth``)
  is kept in ``metadata`` as always, and counted in a warning that names the field it
  probably meant;
* a metric that raises anything but a :class:`~ragmeter.errors.RagmeterError`, or returns
  NaN or an infinity, is left out of the results and recorded in ``warnings`` (never scored
  as 0, and a report never holds a non-finite number).
"""

from __future__ import annotations

import difflib
import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from ragmeter.errors import InvalidInputError, NoSamplesError, RagmeterError, check_k
from ragmeter.metrics import character as _character
from ragmeter.metrics import faithfulness as _faithfulness
from ragmeter.metrics import grounding as _grounding
from ragmeter.metrics import lexical as _lexical
from ragmeter.metrics import operational as _operational
from ragmeter.metrics import sample_retrieval as _sample_retrieval
from ragmeter.metrics.base import RAG_METRICS, RagMetric
from ragmeter.report import RagEvalReport, WarningLog
from ragmeter.schema import RAG_EVAL_ALIASES, RagSample, SampleKeys, SampleLike, coerce_sample

__all__ = ["DEFAULT_METRICS", "SEED_METRICS", "SPAN_METRICS", "evaluate_rag"]

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
    concurrency, rate limit, timeout, retries, budget) and ``progress(done, total)``.
    ``prices`` (``{"input": ..., "output": ...}``,
    USD per million tokens) prices ``cost_usd``. ``skipped_lines`` and ``warnings`` are
    carried into the report (a :func:`ragmeter.io.jsonl.read_jsonl` reader's skipped lines
    are counted automatically).

    The report's ``metrics`` hold each metric's mean over the samples it applied to,
    ``coverage`` how many that was, ``per_sample`` every sample's scores (``None`` =
    skipped) and ``details`` faithfulness' supported and unsupported claims
    (``details[sample_id]["faithfulness"]``). See the module docstring for the rules.

    Raises :class:`~ragmeter.errors.UnknownMetricError` for an unregistered name,
    :class:`~ragmeter.errors.InvalidInputError` for no samples, an invalid sample (naming
    its index and field), ``k < 1``, or an explicitly requested metric that no sample can
    satisfy (naming the missing field).

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
    >>> evaluate_rag(samples, metrics=['precision'])
    Traceback (most recent call last):
    ...
    ragmeter.errors.InvalidInputError: precision@5 needs retrieved_ids ... has them
    """
    check_k(k)
    judges, metrics = _split_judges(metrics)
    if judges:
        from ragmeter.evaluation.judged import evaluate_with_judges

        return evaluate_with_judges(
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
    if skipped_lines is None or isinstance(skipped_lines, bool) or skipped_lines < 0:
        raise InvalidInputError(f"skipped_lines must be an int >= 0, got {skipped_lines!r}")
    resolved, explicit = _resolve(metrics, k, prices)
    log = [str(w) for w in warnings] if warnings is not None else []

    retrieval = [m for m in resolved if isinstance(m, _SampleRetrieval)]
    scored = [(_key(m), _scorer(m), m) for m in resolved if not isinstance(m, _SampleRetrieval)]
    # Which fields occur on some sample (to explain a metric nothing could be scored on).
    # A field only read through ``uses`` stops being looked for once its group is seen.
    needed: set[str] = set()
    groups: list[frozenset[str]] = []
    for m in resolved:
        needed |= m.needs
        uses = frozenset(getattr(m, "uses", ()))
        if uses:
            groups.append(uses)
    pending: set[str] = needed.union(*groups)
    present: set[str] = set()

    rows: dict[str, dict[str, float | None]] = {}
    details: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    run: dict[str, list[str]] = {}
    qrels: dict[str, dict[str, float]] = {}
    keys = SampleKeys()
    lookalikes: Counter[tuple[str, str]] = Counter()
    blank = dict.fromkeys([_key(m) for m in resolved])
    collected: dict[str, list[float]] = {key: [] for key in blank}
    active = [(key, score, m.name, collected[key].append) for key, score, m in scored]

    for index, item in enumerate(samples):
        sample = item if type(item) is RagSample else coerce_sample(item, index=index)
        sid = keys(sample.id)
        row = dict(blank)
        rows[sid] = row
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
                for group in groups:
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
                failed[key] = (
                    f"the {key!r} metric raised {exc!r} on sample {index} (id {sample.id!r}) "
                    "and was left out of the results rather than silently scoring zero"
                )
                active = [e for e in active if e is not entry]  # the loop keeps the old list
                continue
            if value is not None:
                row[key] = value
                append(value)
                if detail is not None:
                    details.setdefault(sid, {})[name] = detail
        if retrieval:
            ranking = _sample_retrieval.sample_ranking(sample)
            if ranking is not None:
                run[sid], qrels[sid] = ranking

    n = len(rows)
    reader_skipped = getattr(samples, "skipped", None)
    if n == 0:
        skipped_note = ""
        if isinstance(reader_skipped, list) and reader_skipped:
            skipped_note = f" ({len(reader_skipped)} malformed lines were skipped)"
        raise NoSamplesError(
            "evaluate_rag got no samples: pass a non-empty list of RagSample objects or "
            f"mappings (or a JSONL file with at least one valid sample){skipped_note}"
        )

    by_k: dict[int, list[str]] = {}
    for m in retrieval:
        by_k.setdefault(getattr(m, "k", k), []).append(m.name)
    for cut, names in by_k.items():
        results = _sample_retrieval.score_rankings(run, qrels, names, cut)
        for name, per in results.items():
            key = f"{name}@{cut}"
            for sid, value in per.items():
                rows[sid][key] = value
            collected[key] = [v for row in rows.values() if (v := row[key]) is not None]

    values = {key: vals for key, vals in collected.items() if key not in failed}

    not_computed: dict[str, str] = {}
    silent: set[str] = set()
    for m in resolved:
        key = _key(m)
        if key in failed:
            continue
        if not values[key]:
            reason = _reason(
                m, present, n, bool(qrels) if isinstance(m, _SampleRetrieval) else False
            )
        else:
            reads = frozenset(getattr(m, "uses", ()))
            if not reads or not reads.isdisjoint(present):
                continue
            reason = _reason(m, present, n, True)
        if explicit:
            raise InvalidInputError(reason)
        if key in SPAN_METRICS and not values[key]:
            silent.add(key)  # an opt-in default: no note for runs without spans
            continue
        not_computed[key] = reason

    dropped = set(failed) | set(not_computed) | silent
    if dropped:
        for row in rows.values():
            for key in dropped:
                row.pop(key, None)
    log.extend(failed.values())
    if keys.repeats:
        log.append(
            f"{keys.repeats} sample id(s) repeat an earlier one; they are reported as '<id>#2', "
            "'<id>#3', ... in per_sample"
        )
    for (key, meant), count in lookalikes.most_common():
        log.append(
            f"{count} sample(s) have a key {key!r}, which is not a field: it was kept in "
            f"metadata and not scored. Did you mean {meant!r}?"
        )
    if not skipped_lines and isinstance(reader_skipped, list):
        skipped_lines = len(reader_skipped)

    kept = [m for m in resolved if _key(m) not in dropped]
    if not kept and not failed:
        hints = [w for w in log if "Did you mean" in w]
        raise InvalidInputError(
            f"no metric could be computed on the {n} sample(s): "
            + "; ".join([*hints, *not_computed.values()])
        )
    extra: dict[str, Any] = {}
    if retrieval:
        extra["k"] = k
    if not_computed:
        extra["not_computed"] = not_computed
    return RagEvalReport(
        metrics={_key(m): _exact_mean(values[_key(m)]) for m in kept},
        coverage={_key(m): len(values[_key(m)]) for m in kept},
        n_samples=n,
        per_sample=rows,
        higher_is_better={_key(m): bool(m.higher_is_better) for m in kept},
        skipped_lines=skipped_lines,
        warnings=log,
        details=details,
        extra=extra,
    )


# Keep the registering imports referenced (they register metrics at import).
_REGISTERING_MODULES = (
    _lexical,
    _faithfulness,
    _operational,
    _sample_retrieval,
    _grounding,
    _character,
)
