"""Claim-overlap faithfulness (seed 002): is every claim of the answer backed by the contexts?

:func:`faithfulness` splits the answer into claims, and calls a claim *supported* when at
least ``threshold`` (0.8) of its distinct content words occur somewhere in the contexts.
The score is ``supported claims / claims``; an answer with no claim scores 1.0.

How an answer becomes claims (:func:`extract_claims`):

* sentences end at ``.``, ``!``, ``?`` or ``…`` followed by whitespace or the end of the
  text (closing quotes/brackets may sit in between), and at line breaks; so ``3.14`` or
  ``www.example.com`` do not split. A period after a capital initial (``J. Smith``) or a
  common abbreviation (``Mr``, ``Mrs``, ``Ms``, ``Dr``, ``Prof``, ``Sr``, ``Jr``, ``St``,
  ``vs``, ``e.g``, ``i.e``, ``cf``) does not end a sentence; any other abbreviation does;
* a sentence splits further at ``;`` and at a comma followed by a contrast word: ``, but``,
  ``, however``, ``, whereas``, ``, although``, ``, though``, ``, yet``, ``, while``;
* a piece with no content word ("Yes.", "It is.") is not a claim: it asserts nothing
  checkable, and counting it as supported would reward filler.

Content words (:func:`ragmeter.text.content_words`) are lower-cased runs of Unicode letters
and digits (``3.14`` and ``1,000`` stay one token), minus :data:`ragmeter.text.STOPWORDS`
(articles, pronouns, auxiliaries, prepositions, conjunctions). Negations and numbers are
content words, so "Paris is not in Spain" needs ``not`` in the contexts.

Cost is linear in the size of the answer plus the contexts: short contexts are searched as
one string, and when that would cost more than a few times the input, the contexts are
tokenised once per sample into a set of words and each distinct content word of a claim is
one lookup (``benchmarks/bench_faithfulness_scaling.py``: ~0.04 s per MiB at 1 and 10 MiB).

Limits -- this is a lexical heuristic, fast and free, not a judge:

* it sees words, not meaning: a paraphrase ("the capital" vs "the seat of government") is
  unsupported, and a claim that rearranges supported words into a false statement
  ("France is the capital of Paris") is supported;
* negation only counts when the negating word is missing from the contexts; a context that
  says "not" anywhere supports every "not";
* no stemming or synonyms: "cities" does not match "city";
* the splitter is English-centred: it splits after abbreviations it does not know
  ("approx. 5") and keeps a sentence ending in a capital initial ("World War I. Then")
  joined to the next;
* 80% of a long claim's words can be present while the one word that matters is not.

Use an LLM judge (:mod:`ragmeter.ragas_bridge`) when those limits matter.

Where ragmeter differs from ``rag_eval.faithfulness`` (deliberately, tested):

* content words are counted once per claim (rag-eval counts repeats, so repeating a
  supported word can push a claim over the threshold);
* pieces without content words are dropped rather than counted as supported claims;
* ``.`` only ends a sentence before whitespace or the end (rag-eval also splits ``3.14``);
* a larger stopword list, Unicode-aware words (rag-eval keeps ``[a-z0-9]`` only, so
  ``café`` becomes ``caf``) and decimal numbers kept whole;
* more contrast words (``though``, ``yet``, ``while``) and line breaks split claims.

>>> score, supported, unsupported = faithfulness(
...     "Paris is the capital of France. It has 90 million people.",
...     ["Paris is the capital and largest city of France."])
>>> score, unsupported
(0.5, ['It has 90 million people'])
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import filterfalse
from typing import Any, ClassVar

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.base import RagMetric
from ragmeter.metrics.lexical import _check_contexts, _check_text, _register
from ragmeter.schema import RagSample
from ragmeter.text import (
    _WORD_RE,
    STOPWORDS,
    _ascii_words,
    _space_chunks,
    _unicode_words,
    _word_haystack,
    word_tokens,
)

__all__ = [
    "SUPPORT_THRESHOLD",
    "ClaimFaithfulness",
    "extract_claims",
    "faithfulness",
]

SUPPORT_THRESHOLD: float = 0.8
"""Share of a claim's distinct content words that must occur in the contexts."""

_CHUNK = 1 << 16
"""Characters tokenised at a time by :func:`_context_words` (bounds its transient memory
and the length of any one call)."""

_ABBREVIATIONS = ("Mr", "Mrs", "Ms", "Dr", "Prof", "Sr", "Jr", "St", "vs", "e.g", "i.e", "cf")
# A lone "." is checked against the abbreviations *after* it matched, so the look-behinds
# run only at periods.
_NOT_ABBREVIATION = "".join(rf"(?<!\b{re.escape(a)}\.)" for a in _ABBREVIATIONS)
_PERIOD_END = r"\." + _NOT_ABBREVIATION + r"(?<!\b[A-Z]\.)"
_CLAIM_SPLIT = re.compile(
    # Every split starts at one of these characters, and the pattern starts with their set,
    # so re skips through everything else in a tight loop (with the split's branches at
    # the top, it tried each one at every character: several times slower). The branches
    # below then look back at the character just matched.
    r"[.!?\u2026\r\n;,]"
    r"(?:"
    # a sentence end: "!", "?", "…", or a "." that ends no abbreviation or initial ...
    r"(?:(?<=[!?\u2026])|(?<=\.)" + _NOT_ABBREVIATION + r"(?<!\b[A-Z]\.))"
    # ... unless the character before is itself a sentence end: in a run such as "!!!!x"
    # the first "!" already failed for every end a later one could reach, and trying each
    # would make a long run quadratic (a 1 MB run of "!" took hours).
    r"(?<![!?\u2026].)(?<!" + _PERIOD_END + ".)"
    r"[.!?\u2026]*[\"'\u2019\u201d)\]]*(?=\s|$)"
    r"|(?<=[\r\n;])"
    r"|(?<=,)\s+(?i:but|however|whereas|although|though|yet|while)\s"
    r")"
)


def _pieces(answer: str) -> Iterable[str]:
    """``_CLAIM_SPLIT.split(answer)``; lazily for a long answer: one short regex call per
    piece, so a multi-megabyte answer never holds the interpreter (and a server's event
    loop) for one long call. The pattern never matches an empty string, so the lazy form is
    exactly ``split``."""
    if len(answer) <= _CHUNK:
        return _CLAIM_SPLIT.split(answer)
    return _lazy_pieces(answer)


def _lazy_pieces(answer: str) -> Iterator[str]:
    start = 0
    for match in _CLAIM_SPLIT.finditer(answer):
        yield answer[start : match.start()]
        start = match.end()
    yield answer[start:]


def _split(answer: str) -> Iterable[tuple[str, set[str]]]:
    """``(claim, words)`` per claim: ``words`` are its distinct content words."""
    for piece in _pieces(answer):
        claim = piece.strip()
        if claim:
            if len(claim) <= _CHUNK:  # (a set minus STOPWORDS would visit every stopword)
                words = set(filterfalse(STOPWORDS.__contains__, word_tokens(claim)))
            else:
                words = _context_words(claim)
                words -= STOPWORDS
            if words:
                yield claim, words


def _check_threshold(threshold: object) -> float:
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not 0 < threshold <= 1
    ):
        raise InvalidInputError(f"threshold must be a number in (0, 1], got {threshold!r}")
    return float(threshold)


def extract_claims(answer: str) -> list[str]:
    """The claims of ``answer``, in order (see the module docstring for the rules).

    >>> extract_claims("Paris is in France, but Lyon is bigger; pi is 3.14. Yes!")
    ['Paris is in France', 'Lyon is bigger', 'pi is 3.14']
    """
    return [claim for claim, _ in _split(_check_text(answer, "answer"))]


def _spaces(text: str) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` chunks of ``text`` of about :data:`_CHUNK` characters, each cut just
    before a space (the last one runs to the end)."""
    return _space_chunks(text, _CHUNK)


def _context_words(text: str) -> set[str]:
    """The distinct :func:`~ragmeter.text.word_tokens` of ``text``, in one pass.

    Equal to ``set(word_tokens(text))``, but built a chunk of about :data:`_CHUNK`
    characters at a time, cut before a space, so a 10 MiB context never becomes a list of
    millions of tokens, nor one long call. A space is a safe cut: no token holds one, and
    the rules that join a number (``3.14``) look one character either side, which the chunk
    keeps (it starts with the space). Non-ASCII text is lower-cased whole first, as
    :func:`~ragmeter.text.word_tokens` does (lower-casing can depend on the neighbours:
    Greek final sigma).
    """
    words: set[str] = set()
    if text.isascii():
        for start, stop in _spaces(text):
            chunk = text[start:stop].encode("ascii")
            words.update(_ascii_words(chunk).decode("ascii").split())
        return words
    lower = text.lower()
    for start, stop in _spaces(lower):
        found = _unicode_words(lower[start:stop])
        words.update(_WORD_RE.findall(lower, start, stop) if found is None else found.split())
    return words


@lru_cache(maxsize=1024)
def _needed(n: int, threshold: float) -> int:
    """The fewest of a claim's ``n`` words that must be found: the least ``k`` with
    ``k / n >= threshold``, the very test :func:`_faithfulness` applies (``k / n`` never
    decreases as ``k`` grows, so a claim is supported iff at least ``k`` words are found).
    ``threshold`` is in (0, 1], so ``1 <= k <= n``.

    >>> _needed(5, 0.8), _needed(4, 0.8), _needed(3, 1.0), _needed(7, 0.01)
    (4, 4, 3, 1)
    """
    k = min(n, max(1, math.ceil(threshold * n)))
    while k > 1 and (k - 1) / n >= threshold:
        k -= 1
    while k / n < threshold:
        k += 1
    return k


def _enough_in(hay: str, words: Collection[str], need: int) -> bool:
    """Whether at least ``need`` of the distinct ``words`` occur in ``hay``, a space-padded,
    space-separated haystack of words (see :func:`ragmeter.text._word_haystack`).

    A word occurs iff ``" word "`` is a substring. That is searched as ``" word"`` first:
    a needle ending in a letter is skipped through much faster than one ending in a space
    (the commonest character), and the character after its first occurrence is then
    checked; only when that occurrence is the start of a longer word is ``" word "``
    searched, from there on. The words are looked at until the answer is known: ``need``
    found, or more missing than the claim can afford.
    """
    spare = len(words) - need  # words that may still be missing
    find = hay.find
    for word in words:
        prefix = " " + word
        i = find(prefix)
        if i >= 0 and (hay[i + len(prefix)] == " " or find(prefix + " ", i) >= 0):
            need -= 1
            if need <= 0:
                return True
        else:
            spare -= 1
            if spare < 0:
                return False
    return need <= 0  # pragma: no cover - the loop always decides


def _faithfulness(
    answer: str, contexts: str, threshold: float
) -> tuple[float, list[str], list[str]]:
    """The score and claims; ``contexts`` are the contexts joined by spaces.

    Linear in ``len(answer) + len(contexts)``. Typical samples (contexts up to
    :data:`_CHUNK` characters) look each ``" word "`` up in a space-padded haystack of the
    contexts' words (:func:`_enough_in`, which stops as soon as the claim is decided),
    which is the cheapest for a few short claims; once that substring scanning could have
    cost a few times the input size (many claims against long contexts), the contexts are
    tokenised once into a set of words and every further word is one set lookup. Both
    give the same answer: a word occurs iff ``" word "`` is in the haystack, and a claim
    is supported iff ``found / len(words) >= threshold``, i.e. iff at least
    :func:`_needed` of its words are found.
    """
    supported: list[str] = []
    unsupported: list[str] = []
    hay: str | None = None
    known: set[str] | None = None
    budget = 4 * (len(answer) + len(contexts)) + (1 << 16)  # characters of substring search
    for claim, words in _split(answer):
        if known is None and hay is None and len(contexts) <= _CHUNK:
            hay = _word_haystack(contexts)
        if hay is not None:
            budget -= len(words) * len(hay)
            if budget < 0:
                hay = None
        if hay is not None:
            ok = _enough_in(hay, words, _needed(len(words), threshold))
        else:
            if known is None:
                known = _context_words(contexts)
            ok = sum(map(known.__contains__, words)) / len(words) >= threshold
        if ok:
            supported.append(claim)
        else:
            unsupported.append(claim)
    total = len(supported) + len(unsupported)
    if total == 0:
        return 1.0, supported, unsupported
    return len(supported) / total, supported, unsupported


def faithfulness(
    answer: str, contexts: Sequence[str], *, threshold: float = SUPPORT_THRESHOLD
) -> tuple[float, list[str], list[str]]:
    """Claim-overlap faithfulness of ``answer``: ``(score, supported, unsupported)``.

    ``score`` is the share of the answer's claims whose distinct content words are at least
    ``threshold`` present in the union of the contexts' words, in [0, 1]; 1.0 when the
    answer makes no claim. ``supported`` and ``unsupported`` list the claim texts in answer
    order. No contexts means every claim is unsupported. See the module docstring for the
    splitting rules, the limits and where this differs from rag-eval.

    Raises :class:`~ragmeter.errors.InvalidInputError` when ``answer`` is not a str,
    ``contexts`` is not a list of str (a bare str is refused), or ``threshold`` is outside
    (0, 1].

    >>> faithfulness("Paris is the capital of France.",
    ...              ["Paris is the capital and largest city of France."])
    (1.0, ['Paris is the capital of France'], [])
    >>> faithfulness("", ["anything"])
    (1.0, [], [])
    """
    _check_text(answer, "answer")
    if isinstance(contexts, str) or not isinstance(contexts, Sequence):
        _check_contexts(contexts, "contexts")  # raises, naming the problem
    try:
        joined = " ".join(contexts)
    except TypeError:
        _check_contexts(contexts, "contexts")  # names the item that is not a str
        raise
    return _faithfulness(answer, joined, _check_threshold(threshold))


class ClaimFaithfulness(RagMetric):
    """Sample-level :func:`faithfulness` of ``response`` to ``retrieved_contexts``.

    Needs a non-empty ``response`` and ``retrieved_contexts`` (an empty list is scored:
    every claim is then unsupported). :meth:`detail` gives the supported and unsupported
    claims, which :func:`ragmeter.evaluation.rag.evaluate_rag` puts in the report's
    ``details[sample_id]["faithfulness"]``.
    """

    name: ClassVar[str] = "faithfulness"
    needs: ClassVar[frozenset[str]] = frozenset({"response", "retrieved_contexts"})

    def __init__(self, *, threshold: float = SUPPORT_THRESHOLD) -> None:
        self.threshold = _check_threshold(threshold)

    def score_and_detail(self, sample: RagSample) -> tuple[float | None, dict[str, Any] | None]:
        """Score and the claim lists in one pass (what ``evaluate_rag`` calls)."""
        if not sample.response or sample.retrieved_contexts is None:
            return None, None
        score, supported, unsupported = _faithfulness(
            sample.response, " ".join(sample.retrieved_contexts), self.threshold
        )
        return score, {"supported_claims": supported, "unsupported_claims": unsupported}

    def score(self, sample: RagSample) -> float | None:
        return self.score_and_detail(sample)[0]

    def detail(self, sample: RagSample) -> dict[str, Any] | None:
        return self.score_and_detail(sample)[1]

    def __repr__(self) -> str:
        if self.threshold == SUPPORT_THRESHOLD:
            return "ClaimFaithfulness()"
        return f"ClaimFaithfulness(threshold={self.threshold})"


_register(ClaimFaithfulness())
