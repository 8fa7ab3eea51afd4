"""Strict claim faithfulness: a claim needs ONE passage that backs its words, numbers, negations
and word order.

:func:`faithfulness` (rag-eval's claim overlap, kept exactly as it is) calls a claim supported
when 80% of its content words occur *anywhere* in the contexts, so it scores 1.0 for an answer
that negates the context, changes a number, swaps the roles of two things, or is word salad
made of context words. :func:`faithfulness_strict` splits the answer into the same claims,
with the same content words (:func:`~ragmeter.metrics.faithfulness.extract_claims`,
:func:`~ragmeter.text.content_words`), and calls a claim *supported* only when one context
passage (one item of ``contexts``) passes all four checks:

(a) **words**: at least ``threshold`` (0.8, as ``faithfulness``) of the claim's distinct
    content words occur in the passage;
(b) **numbers**: every number of the claim occurs in the passage. A number is a content word
    made of digits with ``.``/``,`` between them, compared normalised: thousands commas
    dropped, leading zeros and a decimal part's trailing zeros dropped (``1,887`` = ``1887``,
    ``3.0`` = ``3``, ``007`` = ``7``); with two or more ``.`` it is compared as written
    (``1.2.3``). Spelled numbers ("three") are words, not numbers;
(c) **negation**: a *negation cue* is one of :data:`NEGATION_CUES` or a word ending in ``n``
    followed by the word ``t`` (``isn't``, ``don't``, ``can't`` tokenise as ``isn t``...).
    A cue negates the next :data:`NEGATION_SCOPE` (3) content words after it in the same
    sentence (sentences split as claims are: ``. ! ? …``, line breaks, ``;``, ``, but``...),
    cues themselves excepted. Each content word of the claim that the passage holds must occur
    there with the claim's polarity (a word negated in the claim needs a negated occurrence
    in the passage, any other word an occurrence that is not negated); and a claim with a cue
    needs the passage to hold at least one of the claim's negated words negated (or, when
    its cue negates no word, any cue);
(d) **order**: at least :data:`ORDER_THRESHOLD` (half) of the claim's *bigrams* -- distinct
    pairs of adjacent content words, numbers normalised -- occur as adjacent content words
    in one sentence of the passage. A claim with one content word has no bigram and passes.

The score is ``supported claims / claims`` in [0, 1]; 1.0 for an answer with no claim, 0.0
for claims against no contexts -- the return shape and edge cases of :func:`faithfulness`.
Every check only narrows ``faithfulness``' test, so ``faithfulness_strict <= faithfulness``
on every input, and adding a passage never lowers the score.

Four answers ``faithfulness`` accepts in full (rag-eval too) and this one does not:

>>> from ragmeter.metrics.faithfulness import faithfulness
>>> contexts = ["Marie Curie was born in Warsaw. She did not study in Russia."]
>>> answer = "Marie Curie was not born in Warsaw."
>>> faithfulness(answer, contexts)[0], faithfulness_strict(answer, contexts)[0]
(1.0, 0.0)
>>> contexts = ["The company was founded in 1897.", "It had 1887 employees in 1950."]
>>> answer = "The company was founded in 1887."
>>> faithfulness(answer, contexts)[0], faithfulness_strict(answer, contexts)[0]
(1.0, 0.0)
>>> contexts = ["The dog chased the cat."]
>>> answer = "The cat chased the dog."
>>> faithfulness(answer, contexts)[0], faithfulness_strict(answer, contexts)[0]
(1.0, 0.0)
>>> contexts = ["Paris is the capital and largest city of France."]
>>> answer = "City France largest capital Paris."
>>> faithfulness(answer, contexts)[0], faithfulness_strict(answer, contexts)[0]
(1.0, 0.0)

and a paraphrase both accept (one of its two bigrams, ``paris capital``, is in the passage):

>>> answer = "Paris is the capital of France."
>>> faithfulness(answer, contexts)[0], faithfulness_strict(answer, contexts)[0]
(1.0, 1.0)

Limits -- still a lexical heuristic, stricter but not a judge:

* word order is checked on adjacent content words only, so a claim that reorders its source
  ("The capital of France is Paris" from "Paris is the capital ... of France"; passive voice)
  fails (d), and a long claim with one swapped pair passes it;
* a number or a negated word is checked against the whole passage, not the sentence the
  other words came from; double negation and negating prefixes ("un-", "non-") are not seen;
* a negation cue after the words it negates ("Paris, not Lyon") scopes over what follows.

Cost is linear in the size of the answer plus the contexts. The passages are indexed once
(per passage: its words, numbers, bigrams and polarities as sets; an inverted index from
each word, number, bigram and negated word to the passages holding it). A claim's candidate
passages come from the index by pigeonhole: a passage that supports the claim holds one of its
``n - need + 1`` rarest words, and one of its rarest bigrams likewise, and its rarest number,
and one of its negated words; the key family with the fewest postings is scanned, rarest key
first. At most :data:`MAX_CANDIDATES` (64) passages are checked per claim, each check a few set
operations the size of the claim: exact whenever the contexts have at most 64 passages, or
the chosen family's postings (say, a number of the claim) name at most 64 passages; beyond
that a claim whose first 64 candidates fail is counted unsupported (the metric's ``detail``
lists it under ``capped_claims``). Words are numbered per sample in order of first
occurrence, and ties between keys are broken by those numbers, so the result never depends on
hash order. The index takes about 20 bytes per byte of context in passages of a kilobyte, and
about 1.4 KB per passage for tiny ones; ``benchmarks/bench_faithfulness_scaling.py`` and
``docs/faithfulness.md`` give the timings (0.2 to 1.2 s per MiB, ~10x ``faithfulness``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any, ClassVar

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.base import RagMetric
from ragmeter.metrics.faithfulness import (
    SUPPORT_THRESHOLD,
    _check_threshold,
    _needed,
    _pieces,
    _split,
)
from ragmeter.metrics.lexical import _check_contexts, _check_text, _register
from ragmeter.schema import RagSample
from ragmeter.text import STOPWORDS, word_tokens

__all__ = [
    "MAX_CANDIDATES",
    "NEGATION_CUES",
    "NEGATION_SCOPE",
    "ORDER_THRESHOLD",
    "StrictClaimFaithfulness",
    "faithfulness_strict",
    "normalize_number",
]

NEGATION_CUES: frozenset[str] = frozenset(
    {"not", "no", "never", "none", "nobody", "nothing", "nowhere", "neither", "nor", "cannot"}
    | {"without"}
)
"""Words that negate what follows them (besides ``n't``, read as a word ending in ``n``
followed by ``t``)."""

NEGATION_SCOPE = 3
"""How many content words after a negation cue, in the same sentence, it negates."""

ORDER_THRESHOLD: float = 0.5
"""Share of a claim's content-word bigrams that must be adjacent in one passage sentence."""

MAX_CANDIDATES = 64
"""Candidate passages checked per claim at most (bounds the work on huge contexts)."""

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def normalize_number(token: str) -> str:
    """``token`` as check (b) compares numbers: a word of digits joined by ``.``/``,`` loses
    its thousands commas, leading zeros and decimal trailing zeros; any other word, or a
    number with two or more ``.``, is returned unchanged.

    >>> normalize_number("1,887"), normalize_number("3.0"), normalize_number("0.50")
    ('1887', '3', '0.5')
    >>> normalize_number("1.2.3"), normalize_number("2nd")
    ('1.2.3', '2nd')
    """
    if not _NUMBER.fullmatch(token):
        return token
    digits = token.replace(",", "")
    whole, _, fraction = digits.partition(".")
    if "." in fraction:
        return digits
    whole = whole.lstrip("0") or "0"
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


class _Profile:
    """What checks (a)-(d) read of a text (a passage, or one claim): built sentence by
    sentence with :meth:`add`."""

    __slots__ = ("bigrams", "cue", "ids", "neg", "numbers", "pos", "words")

    def __init__(self, ids: dict[str, int]) -> None:
        self.ids = ids  # word -> id, shared by the passages and claims of one sample
        self.words: set[int] = set()  # distinct content words, as faithfulness reads them
        self.pos: set[int] = set()  # non-cue content words with an occurrence not negated
        self.neg: set[int] = set()  # ... with a negated occurrence
        self.cue = False  # holds a negation cue
        self.numbers: set[int] = set()  # normalised numbers
        self.bigrams: set[int] = set()  # adjacent content words (numbers normalised): a << 32 | b

    def add(self, sentence: str) -> None:
        """Add one sentence."""
        tokens = word_tokens(sentence)
        ids = self.ids
        content = [ids.setdefault(t, len(ids)) for t in tokens if t not in STOPWORDS]
        if not content:
            return
        self.words.update(content)
        sequence = content
        if any(t[0].isdigit() for t in tokens):
            sequence = [
                ids.setdefault(normalize_number(t), len(ids)) for t in tokens if t not in STOPWORDS
            ]
            self.numbers.update(
                ids.setdefault(normalize_number(t), len(ids))
                for t in tokens
                if _NUMBER.fullmatch(t)
            )
        self.bigrams.update(a << 32 | b for a, b in pairwise(sequence))
        if NEGATION_CUES.isdisjoint(tokens) and "t" not in tokens:
            self.pos.update(content)
        else:
            self._polarities(tokens)

    def _polarities(self, tokens: list[str]) -> None:
        """Sort the content words of one sentence into negated and not negated."""
        scope = 0
        last = len(tokens) - 1
        for i, token in enumerate(tokens):
            if token in NEGATION_CUES or (token[-1] == "n" and i < last and tokens[i + 1] == "t"):
                self.cue = True
                scope = NEGATION_SCOPE
            elif token not in STOPWORDS:
                if scope:
                    self.neg.add(self.ids[token])
                    scope -= 1
                else:
                    self.pos.add(self.ids[token])


_EMPTY: frozenset[int] = frozenset()


class _Passage:
    """A passage's :class:`_Profile`, frozen and compact: a passage without a negation cue
    shares one set for its words and its words not negated, and empty sets are one object
    (thousands of tiny passages would otherwise cost a kilobyte each)."""

    __slots__ = ("bigrams", "cue", "neg", "numbers", "pos", "words")

    def __init__(self, profile: _Profile) -> None:
        self.words = frozenset(profile.words)
        self.pos = self.words if not profile.cue else frozenset(profile.pos)
        self.neg = frozenset(profile.neg) if profile.neg else _EMPTY
        self.cue = profile.cue
        self.numbers = frozenset(profile.numbers) if profile.numbers else _EMPTY
        self.bigrams = frozenset(profile.bigrams) if profile.bigrams else _EMPTY


class _Claim:
    """One claim: its :class:`_Profile` and how many words and bigrams a passage must hold."""

    __slots__ = ("need_bigrams", "need_words", "profile", "text")

    def __init__(
        self, text: str, threshold: float, order_threshold: float, ids: dict[str, int]
    ) -> None:
        self.text = text
        self.profile = _Profile(ids)
        self.profile.add(text)
        self.need_words = _needed(len(self.profile.words), threshold)
        bigrams = len(self.profile.bigrams)
        self.need_bigrams = _needed(bigrams, order_threshold) if bigrams else 0

    def supported_by(self, passage: _Passage) -> bool:
        """Whether ``passage`` passes checks (a) to (d) for this claim."""
        claim = self.profile
        if not claim.numbers <= passage.numbers:
            return False
        if len(claim.words & passage.words) < self.need_words:
            return False
        if self.need_bigrams and len(claim.bigrams & passage.bigrams) < self.need_bigrams:
            return False
        if not (claim.pos & passage.words) <= passage.pos:
            return False
        if not (claim.neg & passage.words) <= passage.neg:
            return False
        if claim.cue:
            return passage.cue and (not claim.neg or not claim.neg.isdisjoint(passage.neg))
        return True


class _Index:
    """The passages' profiles and an inverted index from each key to the passages holding it.

    ``work`` counts postings scanned and passages checked (what the linear-time test reads).
    """

    def __init__(self, contexts: Sequence[str]) -> None:
        self.ids: dict[str, int] = {}
        self.passages: list[_Passage] = []
        self.words: defaultdict[int, list[int]] = defaultdict(list)
        self.numbers: defaultdict[int, list[int]] = defaultdict(list)
        self.negated: defaultdict[int, list[int]] = defaultdict(list)
        self.bigrams: defaultdict[int, list[int]] = defaultdict(list)
        self.cued: list[int] = []
        self.work = 0
        for i, context in enumerate(contexts):
            profile = _Profile(self.ids)
            for sentence in _pieces(context):
                profile.add(sentence)
            passage = _Passage(profile)
            self.passages.append(passage)
            for word in passage.words:
                self.words[word].append(i)
            for number in passage.numbers:
                self.numbers[number].append(i)
            for word in passage.neg:
                self.negated[word].append(i)
            for bigram in passage.bigrams:
                self.bigrams[bigram].append(i)
            if passage.cue:
                self.cued.append(i)

    def _family(self, claim: _Claim) -> list[list[int]]:
        """The postings of the key family with the fewest postings, shortest first: a
        passage that supports ``claim`` is in at least one of them (pigeonhole). Ties are
        broken by the keys themselves, so the candidates never depend on hash order."""
        profile = claim.profile
        n = len(profile.words)
        families = [_rarest(self.words, profile.words, n - claim.need_words + 1)]
        if profile.numbers:
            families.append(_rarest(self.numbers, profile.numbers, 1))
        if claim.need_bigrams:
            n = len(profile.bigrams)
            families.append(_rarest(self.bigrams, profile.bigrams, n - claim.need_bigrams + 1))
        if profile.cue:
            negated = profile.neg
            families.append(
                _rarest(self.negated, negated, len(negated)) if negated else [self.cued]
            )
        return min(families, key=lambda family: sum(map(len, family)))

    def supports(self, claim: _Claim) -> bool | None:
        """Whether some passage supports ``claim``; ``None`` when :data:`MAX_CANDIDATES`
        passages were checked and none does (the search stopped there).

        The candidates are the distinct passages of :meth:`_family`'s postings, in order.
        Each list is scanned to its end or to the cap; the passages already seen, at most
        :data:`MAX_CANDIDATES`, bound the repeats skipped in one list, so the work is at most
        ``2 * MAX_CANDIDATES`` entries per key of the claim plus the checks.
        """
        seen: set[int] = set()
        family = self._family(claim)
        scanned = len(family)
        supported_by, passages = claim.supported_by, self.passages
        try:
            for postings in family:
                for i in postings:
                    scanned += 1
                    if i not in seen:
                        if supported_by(passages[i]):
                            return True
                        seen.add(i)
                        if len(seen) >= MAX_CANDIDATES:
                            return None
            return False
        finally:
            self.work += scanned + len(seen)


def _rarest(index: Mapping[int, list[int]], keys: Iterable[int], count: int) -> list[list[int]]:
    """The postings of the ``count`` keys held by the fewest passages, then the least keys
    (ids number the words in order of first occurrence: no hash order)."""
    empty: list[int] = []
    ranked = sorted((len(index.get(key, empty)), key) for key in keys)
    return [index.get(key, empty) for _, key in ranked[:count]]


def _faithfulness_strict(
    answer: str, contexts: Sequence[str], threshold: float, order_threshold: float
) -> tuple[float, list[str], list[str], list[str]]:
    """Score, supported and unsupported claims, and the unsupported claims whose search was
    capped at :data:`MAX_CANDIDATES`; inputs already checked."""
    supported: list[str] = []
    unsupported: list[str] = []
    capped: list[str] = []
    index: _Index | None = None
    for text, _ in _split(answer):
        if index is None:
            index = _Index(contexts)
        found = index.supports(_Claim(text, threshold, order_threshold, index.ids))
        (supported if found else unsupported).append(text)
        if found is None:
            capped.append(text)
    total = len(supported) + len(unsupported)
    return (len(supported) / total if total else 1.0), supported, unsupported, capped


def faithfulness_strict(
    answer: str,
    contexts: Sequence[str],
    *,
    threshold: float = SUPPORT_THRESHOLD,
    order_threshold: float = ORDER_THRESHOLD,
) -> tuple[float, list[str], list[str]]:
    """Strict claim faithfulness of ``answer``: ``(score, supported, unsupported)``.

    ``score`` is the share of the answer's claims that one passage of ``contexts`` supports
    by checks (a)-(d) of the module docstring: ``threshold`` of the claim's content words,
    all its numbers, its negations, and ``order_threshold`` of its content-word bigrams.
    1.0 when the answer makes no claim; no contexts means every claim is unsupported.
    ``supported`` and ``unsupported`` list the claim texts in answer order, as
    :func:`~ragmeter.metrics.faithfulness.faithfulness` does.

    Raises :class:`~ragmeter.errors.InvalidInputError` when ``answer`` is not a str,
    ``contexts`` is not a list of str (a bare str is refused), or a threshold is outside
    (0, 1].

    >>> faithfulness_strict("The Louvre is not in Lyon.", ["The Louvre is in Paris, not in Lyon."])
    (1.0, ['The Louvre is not in Lyon'], [])
    >>> faithfulness_strict("The Louvre is in Lyon.", ["The Louvre is in Paris, not in Lyon."])
    (0.0, [], ['The Louvre is in Lyon'])
    >>> faithfulness_strict("", ["anything"])
    (1.0, [], [])
    """
    _check_text(answer, "answer")
    _check_contexts(contexts, "contexts")
    score, supported, unsupported, _ = _faithfulness_strict(
        answer, contexts, _check_threshold(threshold), _check_order(order_threshold)
    )
    return score, supported, unsupported


def _check_order(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise InvalidInputError(f"order_threshold must be a number in (0, 1], got {value!r}")
    return float(value)


class StrictClaimFaithfulness(RagMetric):
    """Sample-level :func:`faithfulness_strict` of ``response`` to ``retrieved_contexts``.

    Applies where ``faithfulness`` does (a non-empty ``response`` and a list of contexts,
    possibly empty). :meth:`detail` gives the supported and unsupported claims, and the
    unsupported ones whose search stopped at :data:`MAX_CANDIDATES` passages
    (``capped_claims``, usually empty); ``evaluate_rag`` puts them in
    ``details[sample_id]["faithfulness_strict"]``.
    """

    name: ClassVar[str] = "faithfulness_strict"
    needs: ClassVar[frozenset[str]] = frozenset({"response", "retrieved_contexts"})

    def __init__(
        self, *, threshold: float = SUPPORT_THRESHOLD, order_threshold: float = ORDER_THRESHOLD
    ) -> None:
        self.threshold = _check_threshold(threshold)
        self.order_threshold = _check_order(order_threshold)

    def score_and_detail(self, sample: RagSample) -> tuple[float | None, dict[str, Any] | None]:
        """Score and the claim lists in one pass (what ``evaluate_rag`` calls)."""
        if not sample.response or sample.retrieved_contexts is None:
            return None, None
        score, supported, unsupported, capped = _faithfulness_strict(
            sample.response, sample.retrieved_contexts, self.threshold, self.order_threshold
        )
        detail = {
            "supported_claims": supported,
            "unsupported_claims": unsupported,
            "capped_claims": capped,
        }
        return score, detail

    def score(self, sample: RagSample) -> float | None:
        return self.score_and_detail(sample)[0]

    def detail(self, sample: RagSample) -> dict[str, Any] | None:
        return self.score_and_detail(sample)[1]

    def __repr__(self) -> str:
        options = []
        if self.threshold != SUPPORT_THRESHOLD:
            options.append(f"threshold={self.threshold}")
        if self.order_threshold != ORDER_THRESHOLD:
            options.append(f"order_threshold={self.order_threshold}")
        return f"StrictClaimFaithfulness({', '.join(options)})"


_register(StrictClaimFaithfulness())
