"""Reference-based lexical answer metrics (seed 000): no LLM, deterministic, SQuAD-normalised.

Every metric here compares texts after the official SQuAD v1.1 normalisation
(:func:`ragmeter.text.normalize_answer`: lower-case, no ASCII punctuation, no ``a``/``an``/
``the``, whitespace collapsed).

==================== ========================================================== ==========
metric               meaning                                                    needs
==================== ========================================================== ==========
``exact_match``      1.0 if the normalised response equals a normalised         reference
                     reference, else 0.0 (max over references)
``token_f1``         SQuAD F1 of the response's token bag against a reference's reference
                     (max over references)
``context_recall``   share of the reference's distinct tokens found anywhere in reference
                     the retrieved contexts (a lexical proxy, not Ragas' judge)
``context_precision`` share of the retrieved contexts that share at least one    reference
                     token with the reference (a lexical proxy)
``non_empty_rate``   1.0 if the sample retrieved anything, else 0.0             --
==================== ========================================================== ==========

Conventions (those of ``ef.evaluation``, seed 000, and of the SQuAD script):

* A sample with a reference but **no response** is scored as an empty answer (0.0), as the
  official SQuAD script scores an unanswered question; a sample with a reference but no
  ``retrieved_contexts`` is scored as having retrieved nothing (0.0). A sample without any
  reference is skipped (counted in ``coverage``).
* ``token_f1`` of two texts that both normalise to nothing is 1.0 (SQuAD v2.0's rule;
  the v1.1 script returns 0.0 there). An empty normalised reference gives
  ``context_recall`` and ``context_precision`` 0.0.
* Several references (``reference`` plus ``references``): the maximum over them.
* ``non_empty_rate`` counts a sample as non-empty when it has any retrieved context text,
  id, chunk text or chunk span (``ef`` looks at ``retrieved_contexts`` only).

Cost is linear in the size of the texts: a short reference's tokens are searched for as
substrings of the normalised contexts, a long one's (more than 24 distinct tokens) are
matched in one pass over the contexts' tokens, and ``token_f1`` of long texts counts
tokens with a ``Counter``. The numbers are the same either way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import ClassVar

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.base import RAG_METRICS, RagMetric
from ragmeter.schema import RagSample
from ragmeter.text import (
    _cached_tokens,
    _passage,
    _reference_needles,
    _reference_set,
    _space_chunks,
    register_memo,
)

__all__ = [
    "ContextPrecision",
    "ContextRecall",
    "ExactMatch",
    "NonEmptyRate",
    "TokenF1",
    "context_precision",
    "context_recall",
    "exact_match",
    "token_f1",
]


# --------------------------------------------------------------------------- argument checks


def _check_text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a str, got {type(value).__name__}: {value!r:.80}")
    return value


def _check_references(value: object, name: str = "reference") -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        refs = tuple(value)
        if not refs:
            raise InvalidInputError(f"{name} is an empty list: give at least one reference answer")
        for i, ref in enumerate(refs):
            if not isinstance(ref, str):
                raise InvalidInputError(
                    f"{name}[{i}] must be a str, got {type(ref).__name__}: {ref!r:.80}"
                )
        return refs
    raise InvalidInputError(
        f"{name} must be a str or a list of str, got {type(value).__name__}: {value!r:.80}"
    )


def _check_contexts(value: object, name: str = "retrieved_contexts") -> Sequence[str]:
    if isinstance(value, str):
        raise InvalidInputError(
            f"{name} must be a list of str, got a single str ({value!r:.40}); wrap it: [text]"
        )
    if not isinstance(value, Sequence):
        raise InvalidInputError(
            f"{name} must be a list of str, got {type(value).__name__}: {value!r:.80}"
        )
    for i, ctx in enumerate(value):
        if not isinstance(ctx, str):
            raise InvalidInputError(
                f"{name}[{i}] must be a str, got {type(ctx).__name__}: {ctx!r:.80}"
            )
    return value


# --------------------------------------------------------------------------- private kernels
# Arguments are trusted here: tuples of references, sequences of str.

_COUNT_LIMIT = 4096


def _f1(pred: tuple[str, ...], gold: tuple[str, ...]) -> float:
    if not pred or not gold:
        return float(not pred and not gold)
    common = set(pred).intersection(gold)
    if not common:
        return 0.0
    # The multiset overlap (Counter & Counter). For short texts, counting only the shared
    # tokens is faster; past a few thousand comparisons it would be quadratic.
    if len(common) * (len(pred) + len(gold)) <= _COUNT_LIMIT:
        overlap = sum(min(pred.count(t), gold.count(t)) for t in common)
    else:
        overlap = (Counter(pred) & Counter(gold)).total()
    precision = overlap / len(pred)
    recall = overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


@lru_cache(maxsize=4)
def _answer_scores(response: str, references: tuple[str, ...]) -> tuple[float, float]:
    """``(exact_match, token_f1)`` together: both metrics of one sample normalise the same
    texts, so the second one is a memo hit."""
    pred = _cached_tokens(response)
    best = 0.0
    for ref in references:
        gold = _cached_tokens(ref)
        if gold == pred:
            return 1.0, 1.0  # the same tokens (or both empty): F1 is 1 as well
        best = max(best, _f1(pred, gold))
    return 0.0, best


def _exact_match(response: str, references: tuple[str, ...]) -> float:
    return _answer_scores(response, references)[0]


def _token_f1(response: str, references: tuple[str, ...]) -> float:
    return _answer_scores(response, references)[1]


_SEARCH_MAX = 24
"""A reference with up to this many distinct tokens is searched for token by token, as
``" token "`` substrings of the contexts' haystacks (one fast C scan each, which stops at
the first occurrence); one with more is matched in one pass over the contexts' tokens
(split, then looked up in the reference's token set), which costs about as much as 13 scans
that find nothing, or 30 that find every token (measured on passages of ~50 words; both
costs grow with the contexts' length alike). Both give the same tokens, and a huge
reference against huge contexts costs linear time instead of tokens x contexts."""

_CHUNK = 1 << 16
"""Characters of a haystack split into tokens at a time (bounds the memory and the length
of any one call on a huge context)."""


def _hits(tokens: frozenset[str], hay: str) -> frozenset[str] | set[str]:
    """The members of ``tokens`` that are tokens of the haystack ``hay`` (see
    :func:`ragmeter.text._passage`), a chunk of about :data:`_CHUNK` characters at a time,
    each cut before a space."""
    if len(hay) <= _CHUNK:
        return tokens.intersection(hay.split())
    found: set[str] = set()
    for start, stop in _space_chunks(hay, _CHUNK):
        found.update(tokens.intersection(hay[start:stop].split()))
    return found


@lru_cache(maxsize=4)
def _context_scores(references: tuple[str, ...], contexts: tuple[str, ...]) -> tuple[float, float]:
    """``(context_recall, context_precision)`` together: both metrics of one sample search
    the same haystacks for the same tokens, so the second one is a memo hit.

    Linear in the size of the texts for a long reference (see :data:`_SEARCH_MAX`)."""
    if not contexts:
        return 0.0, 0.0
    hays = list(map(_passage, contexts))
    # Haystacks are space-padded, so concatenating them keeps every token whole, and a
    # token occurs in the concatenation iff it occurs in one of them.
    hay = "".join(hays)
    recall = precision = 0.0
    for ref in references:
        needles = _reference_needles(ref)
        if not needles:
            continue
        if len(needles) > _SEARCH_MAX:
            tokens = _reference_set(ref)  # the needles' tokens
            useful = 0
            seen: set[str] = set()
            for h in hays:
                hit = _hits(tokens, h)
                if hit:
                    useful += 1
                    seen |= hit
            if not useful:
                continue
            recall = max(recall, len(seen) / len(needles))
            precision = max(precision, useful / len(hays))
            continue
        found = list(filter(hay.__contains__, needles))
        if not found:
            continue
        recall = max(recall, len(found) / len(needles))
        if len(hays) == 1:
            precision = 1.0
        elif precision < 1.0:
            # Only tokens found somewhere can make a context useful.
            useful = sum(1 for h in hays if any(map(h.__contains__, found)))
            precision = max(precision, useful / len(hays))
    return recall, precision


def _context_recall(references: tuple[str, ...], contexts: Sequence[str]) -> float:
    return _context_scores(references, tuple(contexts))[0]


def _context_precision(references: tuple[str, ...], contexts: Sequence[str]) -> float:
    return _context_scores(references, tuple(contexts))[1]


register_memo(_answer_scores)
register_memo(_context_scores)


# --------------------------------------------------------------------------- public functions


def exact_match(response: str, reference: str | Sequence[str]) -> float:
    """``1.0`` if ``response`` equals ``reference`` after SQuAD normalisation, else ``0.0``.

    ``reference`` may be a list of acceptable answers: 1.0 if any matches. Raises
    :class:`~ragmeter.errors.InvalidInputError` for a non-str argument or an empty list.

    >>> exact_match('The Eiffel Tower', 'eiffel tower')
    1.0
    >>> exact_match('Paris', 'London')
    0.0
    >>> exact_match('Paris', ['London', 'paris.'])
    1.0
    """
    return _exact_match(_check_text(response, "response"), _check_references(reference))


def token_f1(response: str, reference: str | Sequence[str]) -> float:
    """Token-overlap F1 of ``response`` against ``reference`` (the SQuAD F1), in [0, 1].

    The harmonic mean of precision and recall over the normalised token *bags* (a token
    repeated twice must match twice). Two texts that both normalise to nothing score 1.0;
    exactly one empty side scores 0.0. With a list of references, the maximum over them.
    Symmetric in its two arguments for a single reference.

    >>> token_f1('the quick brown fox', 'a quick brown fox')
    1.0
    >>> round(token_f1('quick brown fox', 'quick brown dog'), 4)
    0.6667
    >>> token_f1('quick brown fox', ['dog', 'brown fox'])
    0.8
    """
    return _token_f1(_check_text(response, "response"), _check_references(reference))


def context_recall(reference: str | Sequence[str], retrieved_contexts: Sequence[str]) -> float:
    """Lexical recall of the ``reference`` tokens by the retrieved contexts, in [0, 1].

    The fraction of the normalised reference's *distinct* tokens that appear anywhere in
    ``retrieved_contexts``: a deterministic proxy for "did retrieval surface the words the
    answer needs" (for the LLM-judged context recall, see :mod:`ragmeter.ragas_bridge`).
    An empty normalised reference or no contexts give 0.0. With a list of references, the
    maximum over them.

    >>> context_recall('paris france', ['Paris is the capital of France.'])
    1.0
    >>> context_recall('paris france', ['London is in England.'])
    0.0
    >>> context_recall('paris france', ['Paris is big.', 'London is in England.'])
    0.5
    """
    return _context_recall(_check_references(reference), _check_contexts(retrieved_contexts))


def context_precision(reference: str | Sequence[str], retrieved_contexts: Sequence[str]) -> float:
    """Fraction of the retrieved contexts that lexically overlap the ``reference``, in [0, 1].

    A context counts as useful when it shares at least one normalised token with the
    reference: a deterministic proxy for retrieval precision, blind to rank. No contexts or
    an empty normalised reference give 0.0. With a list of references, the maximum.

    >>> context_precision('paris', ['Paris is in France.', 'Unrelated text.'])
    0.5
    """
    return _context_precision(_check_references(reference), _check_contexts(retrieved_contexts))


# --------------------------------------------------------------------------- metric objects


class _ReferenceMetric(RagMetric):
    """Applies to samples with at least one reference; a missing response/context is empty."""

    needs: ClassVar[frozenset[str]] = frozenset({"reference"})
    uses: ClassVar[frozenset[str]] = frozenset()
    """Fields scored as empty when a sample lacks them, but that at least one sample of a run
    must carry (otherwise the metric measures nothing and ``evaluate_rag`` refuses it)."""

    def applies_to(self, sample: RagSample) -> bool:
        return sample.reference is not None or bool(sample.references)

    def score_and_detail(self, sample: RagSample) -> tuple[float | None, None]:
        """The score and no detail (what ``evaluate_rag`` calls; applicability is checked)."""
        if sample.references:
            return self._kernel(sample, tuple(sample.all_references())), None
        if sample.reference is None:
            return None, None
        return self._kernel(sample, (sample.reference,)), None

    def score(self, sample: RagSample) -> float | None:
        return self.score_and_detail(sample)[0]

    def _kernel(self, sample: RagSample, references: tuple[str, ...]) -> float:
        raise NotImplementedError


class ExactMatch(_ReferenceMetric):
    """``exact_match`` of the response against the sample's references (see module doc)."""

    name: ClassVar[str] = "exact_match"
    uses: ClassVar[frozenset[str]] = frozenset({"response"})

    def _kernel(self, sample: RagSample, references: tuple[str, ...]) -> float:
        return _answer_scores(sample.response or "", references)[0]


class TokenF1(_ReferenceMetric):
    """``token_f1`` of the response against the sample's references (see module doc)."""

    name: ClassVar[str] = "token_f1"
    uses: ClassVar[frozenset[str]] = frozenset({"response"})

    def _kernel(self, sample: RagSample, references: tuple[str, ...]) -> float:
        return _answer_scores(sample.response or "", references)[1]


class ContextRecall(_ReferenceMetric):
    """``context_recall`` of the references by ``retrieved_contexts`` (see module doc)."""

    name: ClassVar[str] = "context_recall"
    uses: ClassVar[frozenset[str]] = frozenset({"retrieved_contexts"})

    def _kernel(self, sample: RagSample, references: tuple[str, ...]) -> float:
        return _context_scores(references, tuple(sample.retrieved_contexts or ()))[0]


class ContextPrecision(_ReferenceMetric):
    """``context_precision`` of ``retrieved_contexts`` against the references."""

    name: ClassVar[str] = "context_precision"
    uses: ClassVar[frozenset[str]] = frozenset({"retrieved_contexts"})

    def _kernel(self, sample: RagSample, references: tuple[str, ...]) -> float:
        return _context_scores(references, tuple(sample.retrieved_contexts or ()))[1]


class NonEmptyRate(RagMetric):
    """1.0 when the sample retrieved anything (context texts, ids, chunk texts or chunk
    spans), else 0.0.

    Averaged over samples, the share of queries for which retrieval returned something.
    Every sample is scored; at least one sample of a run must record its retrieval.
    """

    name: ClassVar[str] = "non_empty_rate"
    needs: ClassVar[frozenset[str]] = frozenset()
    uses: ClassVar[frozenset[str]] = frozenset(
        {"retrieved_contexts", "retrieved_ids", "retrieved_texts", "retrieved_spans"}
    )

    def score_and_detail(self, sample: RagSample) -> tuple[float | None, None]:
        """The score and no detail (what ``evaluate_rag`` calls)."""
        hit = (
            sample.retrieved_contexts
            or sample.retrieved_ids
            or sample.retrieved_texts
            or sample.retrieved_spans
        )
        return (1.0 if hit else 0.0), None

    def score(self, sample: RagSample) -> float | None:
        return self.score_and_detail(sample)[0]


def _register(metric: RagMetric) -> None:
    # Idempotent when a module is executed twice (doctest collection), strict otherwise.
    name = metric.name
    replace = (
        name in RAG_METRICS and type(RAG_METRICS[name]).__qualname__ == type(metric).__qualname__
    )
    RAG_METRICS.register(metric, replace=replace)


for _metric in (ExactMatch(), TokenF1(), ContextRecall(), ContextPrecision(), NonEmptyRate()):
    _register(_metric)
