"""Which answer metrics apply to which samples, and how each one is scored and explained."""

from __future__ import annotations

import difflib
import math
import os
import statistics
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from fractions import Fraction
from pathlib import Path
from typing import Any

from ragmeter.errors import InvalidInputError, check_k
from ragmeter.evaluation import sample_retrieval as _sample_retrieval
from ragmeter.io.scores import score_format
from ragmeter.metrics import operational as _operational
from ragmeter.metrics._kernel import CODES, kernel_codes, result_keys
from ragmeter.metrics.base import RAG_METRICS, RagMetric
from ragmeter.schema import RAG_EVAL_ALIASES, RagSample

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


class _DefaultCutOff(int):
    """The default ``k_values`` (5), told apart from an explicit one so that passing it with
    the deprecated ``k`` too can be refused."""

    __slots__ = ()


DEFAULT_K: int = _DefaultCutOff(5)
"""``k_values``' default: the retrieval metrics at cut-off 5 (``"precision@5"``)."""


def _cut_offs(
    k_values: Iterable[int] | int, k: int | None, *, caller: str, stacklevel: int
) -> tuple[int, ...]:
    """The distinct cut-offs of ``k_values``, ascending, checked as ``evaluate_run`` checks
    its own; the deprecated ``k`` (one cut-off) is folded in with a ``DeprecationWarning``
    ``stacklevel`` frames up, and refused with ``k_values`` too.

    >>> _cut_offs(DEFAULT_K, None, caller="evaluate_rag", stacklevel=1)
    (5,)
    >>> _cut_offs([10, 1, 10], None, caller="evaluate_rag", stacklevel=1)
    (1, 10)
    """
    if k is not None:
        warnings.warn(
            f"{caller}(k=...) is deprecated: it is k_values={k!r} (the same cut-off; k_values "
            "takes several too, e.g. (5, 10)); pass that instead (k= will be removed in a "
            "future release)",
            DeprecationWarning,
            stacklevel=stacklevel + 1,
        )
        if k_values is not DEFAULT_K:
            raise InvalidInputError(
                f"k={k!r} is the deprecated name of k_values, but k_values={k_values!r} was "
                "given too: pass k_values only"
            )
        return (int(check_k(k)),)
    if isinstance(k_values, int):
        k_values = (k_values,)
    elif isinstance(k_values, (str, bytes)) or not isinstance(k_values, Iterable):
        raise InvalidInputError(
            f"k_values must be an int >= 1 or an iterable of them, got {k_values!r:.80}"
        )
    ks = tuple(sorted({int(check_k(cut, name="every k in k_values")) for cut in k_values}))
    if not ks:
        raise InvalidInputError("k_values is empty: give at least one cut-off, e.g. (10,)")
    return ks


def _k_extra(ks: Sequence[int]) -> int | list[int]:
    """``report.extra["k"]``: the cut-off, or the list of them when there are several."""
    return ks[0] if len(ks) == 1 else list(ks)


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
    ks: Sequence[int],
    prices: Mapping[str, float] | None,
) -> tuple[list[RagMetric], bool]:
    """The metrics to score (a retrieval name once per cut-off in ``ks``, in order),
    distinct by key, and whether they were requested explicitly."""
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
        metric = _metric(item, prices)
        found: list[RagMetric] = [metric]
        if isinstance(item, str) and isinstance(metric, _SampleRetrieval):
            found = [metric.at(k) for k in ks]  # a name: at every cut-off
        for each in found:
            key = _key(each)
            if key not in keys:
                keys.add(key)
                resolved.append(each)
    return resolved, explicit


def _metric(item: object, prices: Mapping[str, float] | None) -> RagMetric:
    """The metric a requested item names (a registered name or a RagMetric), priced."""
    if isinstance(item, str):
        metric = RAG_METRICS.get_metric(item)
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
    return metric


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
