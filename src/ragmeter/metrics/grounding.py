"""Lexical answer checks that need no second model: groundedness, abstention, ``score_answer``.

Seed 004 semantics. Everything here compares *word sets*: a word is a maximal run of
Unicode word characters (``\\w+``), lower-cased, and each distinct word counts once. That is
coarse on purpose -- it is checkable, deterministic and fast, where an LLM judge is
sensitive and unaudited -- and it has the limits of any bag of words: it cannot see negation,
paraphrase or word order ("not 30 days" is as grounded as "30 days").

* :func:`groundedness` -- fraction of the answer's distinct words that occur in the context.
* :func:`is_abstention` -- whether a text declines to answer, by case-insensitive phrase
  match against :data:`DEFAULT_ABSTENTION_PHRASES` (configurable).
* :func:`score_answer` -- one generated :class:`Answer` judged against the
  :class:`AssembledContext` it was given and the gold evidence: an :class:`AnswerScore`.

Three sample-level metrics are registered in :data:`ragmeter.metrics.base.RAG_METRICS` at
import: ``groundedness`` (needs ``response`` and ``retrieved_contexts``), ``abstained``
(needs ``response``; 1.0 when the response declines, else 0.0) and ``abstention_correct``
(needs ``response`` and ``gold_spans``; 1.0 when it declined exactly when it should have).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.base import RagMetric
from ragmeter.metrics.lexical import _check_text, _register
from ragmeter.schema import RagSample
from ragmeter.spans import Chunk, EvalItem

__all__ = [
    "DEFAULT_ABSTENTION_PHRASES",
    "AbstainedMetric",
    "AbstentionCorrectMetric",
    "Answer",
    "AnswerScore",
    "AssembledContext",
    "GroundednessMetric",
    "groundedness",
    "is_abstention",
    "score_answer",
]

_WORD = re.compile(r"\w+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_SPACES = re.compile(r"\s+")

DEFAULT_ABSTENTION_PHRASES: tuple[str, ...] = (
    "i don't know",
    "i do not know",
    "i'm not sure",
    "i am not sure",
    "cannot answer",
    "can't answer",
    "unable to answer",
    "cannot be determined",
    "can't be determined",
    "not enough information",
    "insufficient information",
    "no information",
    "not mentioned",
    "not specified",
    "is not stated",
    "does not say",
    "does not mention",
    "do not contain the answer",
    "does not contain the answer",
    "passages do not",
    "the context does not",
    "the documents do not",
)
"""Phrases that mark an answer as a refusal, matched case-insensitively as substrings.

Deliberately broad: a false positive mislabels one answer as an abstention, a false negative
hides the "confidently answered what it could not know" failure entirely. Matching first
lower-cases the text, maps typographic apostrophes (U+2019, U+2018, U+02BC) to ``'`` and
collapses runs of whitespace to one space. Pass ``phrases=`` to :func:`is_abstention` (or
:func:`score_answer`) to use your own list, e.g. for another language.
"""


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def groundedness(answer: str, context: str) -> float:
    """Fraction of the answer's distinct words that also occur in ``context``, in [0, 1].

    Words are lower-cased ``\\w+`` runs, counted once each. Low groundedness means the
    answer's content was invented or recalled from training rather than read from the
    context. ``0.0`` when the answer has no words or the context has none (nothing to be
    grounded in). Raises :class:`~ragmeter.errors.InvalidInputError` for a non-string.

    >>> groundedness("Refunds are available within 30 days.",
    ...              "Refunds are available within 30 days of purchase.")
    1.0
    >>> groundedness("Paris, obviously", "The capital of France is Paris.")
    0.5
    >>> groundedness("", "anything")
    0.0
    """
    answer_words = _words(_check_text(answer, "answer"))
    context_words = _words(_check_text(context, "context"))
    if not answer_words or not context_words:
        return 0.0
    return len(answer_words & context_words) / len(answer_words)


def _normalise_for_phrases(text: str) -> str:
    return _SPACES.sub(" ", text.translate(_APOSTROPHES).lower())


def is_abstention(text: str, *, phrases: Sequence[str] = DEFAULT_ABSTENTION_PHRASES) -> bool:
    """True when ``text`` declines to answer rather than guessing.

    A case-insensitive substring match of any of ``phrases`` (see
    :data:`DEFAULT_ABSTENTION_PHRASES` for the normalisation both sides get). An empty
    ``phrases`` never matches. Raises :class:`~ragmeter.errors.InvalidInputError` when
    ``text`` is not a string, ``phrases`` is a bare string, or a phrase is empty.

    >>> is_abstention("The passages do not contain the answer.")
    True
    >>> is_abstention("I don\u2019t   know.")
    True
    >>> is_abstention("Refunds are available within 30 days.")
    False
    >>> is_abstention("Keine Angabe.", phrases=["keine angabe"])
    True
    """
    _check_text(text, "text")
    if isinstance(phrases, str):
        raise InvalidInputError(
            f"phrases must be a sequence of strings, not one string: {phrases!r} "
            "(wrap it in a list)"
        )
    normalised = _normalise_for_phrases(text)
    for phrase in phrases:
        if not isinstance(phrase, str) or not phrase.strip():
            raise InvalidInputError(
                f"every abstention phrase must be a non-empty string, got {phrase!r} "
                "(an empty phrase would match every answer)"
            )
        if _normalise_for_phrases(phrase).strip() in normalised:
            return True
    return False


@dataclass(frozen=True, slots=True)
class Answer:
    """What a generator said: its ``text`` and the 1-based passage numbers it ``citations``."""

    text: str
    citations: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _check_text(self.text, "Answer.text")
        if isinstance(self.citations, (str, bytes)) or not isinstance(self.citations, Sequence):
            raise InvalidInputError(
                f"Answer.citations must be a tuple of ints, got {self.citations!r}"
            )
        for n in self.citations:
            if isinstance(n, bool) or not isinstance(n, int):
                raise InvalidInputError(
                    f"Answer.citations must hold ints (1-based passage numbers), got {n!r}"
                )
        object.__setattr__(self, "citations", tuple(self.citations))


@dataclass(frozen=True, slots=True)
class AssembledContext:
    """What the generator was given: the prompt ``text``, the ``chunks`` in it (passage 1 is
    ``chunks[0]``) and its size in ``tokens``."""

    text: str
    chunks: tuple[Chunk, ...] = ()
    tokens: int = 0

    def __post_init__(self) -> None:
        _check_text(self.text, "AssembledContext.text")
        chunks = tuple(self.chunks)
        for i, chunk in enumerate(chunks):
            if not isinstance(chunk, Chunk):
                raise InvalidInputError(
                    f"AssembledContext.chunks[{i}] must be a Chunk, got {type(chunk).__name__}"
                )
        object.__setattr__(self, "chunks", chunks)
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 0:
            raise InvalidInputError(
                f"AssembledContext.tokens must be an int >= 0, got {self.tokens!r}"
            )


@dataclass(frozen=True, slots=True)
class AnswerScore:
    """How one answer did, judged lexically against its context and the gold evidence.

    ``groundedness`` and ``evidence_overlap`` are in [0, 1]; ``citation_accuracy`` is in
    [0, 1], or ``None`` when the answer cited nothing. ``should_have_abstained`` is True when
    there was nothing to answer from (the item has no resolved gold, or the context has no
    chunks). ``warnings`` are plain-English notes about what looked wrong.
    """

    item_id: str
    groundedness: float = 0.0
    citation_accuracy: float | None = None
    evidence_overlap: float = 0.0
    abstained: bool = False
    should_have_abstained: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def abstention_correct(self) -> bool:
        """``abstained == should_have_abstained``: a correct refusal scores as a success."""
        return self.abstained == self.should_have_abstained


def score_answer(
    item: EvalItem,
    answer: Answer,
    context: AssembledContext,
    gold_chunks: Sequence[Chunk] = (),
    *,
    phrases: Sequence[str] = DEFAULT_ABSTENTION_PHRASES,
) -> AnswerScore:
    """Judge one generated answer without calling a second model (seed 004).

    * ``groundedness`` -- :func:`groundedness` of the answer against ``context.text``; a
      warning when it is below 0.5 and the answer did not abstain.
    * ``citation_accuracy`` -- fraction of cited passage numbers within
      ``1..len(context.chunks)``; ``None`` when nothing was cited; a warning lists the
      citations that were not in the context.
    * ``evidence_overlap`` -- fraction of the gold chunks' distinct words the answer used;
      0.0 unless ``gold_chunks`` is given.
    * ``abstained`` -- :func:`is_abstention` with ``phrases``.
    * ``should_have_abstained`` -- ``not item.is_resolved or not context.chunks``. It uses
      :attr:`~ragmeter.spans.EvalItem.is_resolved`, not ``is_answerable``: an item whose
      evidence was quoted but never located in this parse gives nothing to answer from, so
      declining is right.

    An answer with no words scores zeros, carries the warning ``"the generator returned
    nothing"`` and is not checked further.

    >>> from ragmeter.spans import Chunk, EvalItem, GoldSpan, Span
    >>> item = EvalItem("q1", "Refund window?", gold=(GoldSpan(Span("refund.md", 0, 46)),))
    >>> ctx = AssembledContext("", chunks=(), tokens=0)
    >>> s = score_answer(item, Answer("The passages do not contain the answer."), ctx)
    >>> s.abstained, s.should_have_abstained, s.abstention_correct
    (True, True, True)
    """
    if not isinstance(item, EvalItem):
        raise InvalidInputError(f"item must be an EvalItem, got {type(item).__name__}")
    if not isinstance(answer, Answer):
        raise InvalidInputError(f"answer must be an Answer, got {type(answer).__name__}")
    if not isinstance(context, AssembledContext):
        raise InvalidInputError(
            f"context must be an AssembledContext, got {type(context).__name__}"
        )
    for i, chunk in enumerate(gold_chunks):
        if not isinstance(chunk, Chunk):
            raise InvalidInputError(f"gold_chunks[{i}] must be a Chunk, got {type(chunk).__name__}")

    abstained = is_abstention(answer.text, phrases=phrases)
    should = not item.is_resolved or not context.chunks
    warnings: list[str] = []

    answer_words = _words(answer.text)
    if not answer_words:
        warnings.append("the generator returned nothing")
        return AnswerScore(
            item.id, abstained=abstained, should_have_abstained=should, warnings=warnings
        )

    grounded = 0.0
    context_words = _words(context.text)
    if context_words:
        grounded = len(answer_words & context_words) / len(answer_words)
        if grounded < 0.5 and not abstained:
            warnings.append(
                f"only {grounded:.0%} of the answer's words appear in the context it was "
                "given, so most of it came from somewhere else"
            )

    overlap = 0.0
    if gold_chunks:
        gold_words = _words(" ".join(c.text for c in gold_chunks))
        if gold_words:
            overlap = len(answer_words & gold_words) / len(gold_words)

    citation_accuracy: float | None = None
    if answer.citations:
        n_passages = len(context.chunks)
        valid = [n for n in answer.citations if 1 <= n <= n_passages]
        citation_accuracy = len(valid) / len(answer.citations)
        if len(valid) < len(answer.citations):
            warnings.append(
                "cited passage(s) that were not in the context: "
                f"{sorted(set(answer.citations) - set(valid))}"
            )

    return AnswerScore(
        item_id=item.id,
        groundedness=grounded,
        citation_accuracy=citation_accuracy,
        evidence_overlap=overlap,
        abstained=abstained,
        should_have_abstained=should,
        warnings=warnings,
    )


class GroundednessMetric(RagMetric):
    """``groundedness``: :func:`groundedness` of ``response`` against the retrieved contexts.

    The contexts are joined with newlines. A sample with ``retrieved_contexts == []`` scores
    0.0 (nothing to be grounded in). Higher is better.
    """

    name = "groundedness"
    needs = frozenset({"response", "retrieved_contexts"})
    higher_is_better = True

    def score(self, sample: RagSample) -> float | None:
        if sample.response is None or sample.retrieved_contexts is None:
            return None
        if not self.applies_to(sample):
            return None
        return groundedness(sample.response, "\n".join(sample.retrieved_contexts))


class AbstainedMetric(RagMetric):
    """``abstained``: 1.0 when ``response`` declines to answer (:func:`is_abstention`), else 0.0.

    Its mean is the abstention rate. Neither direction is better on its own -- a refusal is
    right when the evidence is missing -- so ``higher_is_better`` is False only by
    convention of "fewer refusals is the usual goal"; read it with the retrieval scores.
    """

    name = "abstained"
    needs = frozenset({"response"})
    higher_is_better = False

    def score(self, sample: RagSample) -> float | None:
        if not self.applies_to(sample) or sample.response is None:
            return None
        return 1.0 if is_abstention(sample.response) else 0.0


class AbstentionCorrectMetric(RagMetric):
    """``abstention_correct``: 1.0 when ``response`` declined exactly when it should have.

    :attr:`AnswerScore.abstention_correct` on a sample: ``should_have_abstained`` is True when
    the sample has no resolved gold (``gold_spans == []``, a question deliberately left
    without evidence) or retrieved nothing (no ``retrieved_contexts`` and no
    ``retrieved_spans``). Needs ``response`` and ``gold_spans``; its mean is the abstention
    accuracy, where a correct refusal counts as a success.
    """

    name = "abstention_correct"
    needs = frozenset({"response", "gold_spans"})
    higher_is_better = True

    def score(self, sample: RagSample) -> float | None:
        if not self.applies_to(sample) or sample.response is None or sample.gold_spans is None:
            return None
        retrieved = bool(sample.retrieved_contexts or sample.retrieved_spans)
        should = not sample.gold_spans or not retrieved
        return 1.0 if is_abstention(sample.response) == should else 0.0


for _metric in (GroundednessMetric(), AbstainedMetric(), AbstentionCorrectMetric()):
    _register(_metric)
