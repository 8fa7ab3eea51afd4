"""LLM-judged metrics: a documented prompt, a strict verdict parser, a score or ``None``.

Each metric asks the judge for a JSON object ``{"score": <number in [0, 1]>, "reason":
"<one sentence>"}``. The parser accepts exactly that (also inside a fenced code block) or
a bare number in ``[0, 1]``; anything else is *not* a score: the sample gets ``None`` and
the reason is recorded (the report's ``missing`` counts it). Never NaN, never a silently
dropped sample.

The prompts are part of the metric's ``version``: changing a prompt bumps the version,
which changes the cache key.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from ragmeter import errors as _errors
from ragmeter.errors import InvalidInputError
from ragmeter.judge.protocol import Judge, Message
from ragmeter.schema import RagSample

__all__ = [
    "AnswerRelevancy",
    "Correctness",
    "Faithfulness",
    "JudgeMetric",
    "VerdictError",
    "parse_verdict",
]

_SYSTEM = (
    "You are a strict evaluator of question-answering systems. Reply with only a JSON object "
    'of the form {"score": <number between 0 and 1>, "reason": "<one short sentence>"}.'
)


VerdictError = _errors.VerdictError  # defined in ragmeter.errors, re-exported


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def parse_verdict(text: str) -> float:
    """Parse a judge reply strictly into a score in ``[0, 1]``.

    Accepts a JSON object with a numeric ``score`` (optionally fenced as a code block) or
    a bare number. Raises :class:`VerdictError` saying why otherwise.

    >>> parse_verdict('{"score": 0.75, "reason": "mostly supported"}')
    0.75
    >>> parse_verdict("1")
    1.0
    >>> parse_verdict("The answer is great!")
    Traceback (most recent call last):
    ...
    ragmeter.errors.VerdictError: not a JSON verdict or a number: 'The answer is great!'
    """
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    value: Any
    try:
        value = json.loads(stripped)
    except (json.JSONDecodeError, ValueError):
        raise VerdictError(f"not a JSON verdict or a number: {text.strip()[:80]!r}") from None
    if isinstance(value, dict):
        if "score" not in value:
            raise VerdictError(f"verdict has no 'score' field: {stripped[:80]!r}")
        value = value["score"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise VerdictError(f"score is not a number: {value!r}")
    score = float(value)
    if math.isnan(score) or not 0.0 <= score <= 1.0:
        raise VerdictError(f"score {score!r} is outside [0, 1]")
    return score


class JudgeMetric:
    """Shared machinery for a metric scored by asking a judge model.

    ``repeats=n`` asks the judge n times (each a distinct cache entry) and scores the mean;
    the spread per sample is reported. Subclasses define ``name``, ``version``, ``needs``
    and :meth:`messages`.
    """

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    needs: ClassVar[frozenset[str]] = frozenset({"response"})
    higher_is_better: ClassVar[bool] = True

    def __init__(self, *, judge: Judge, repeats: int = 1) -> None:
        if not isinstance(judge, Judge):
            raise InvalidInputError(
                f"{type(self).__name__}(judge=...) needs a judge with .identity and async "
                f".complete(messages); got {type(judge).__name__}. Wrap a framework model with "
                "ragmeter_langchain.judge(...), ragmeter_llamaindex.judge(...), "
                "ragmeter_haystack.judge(...) or ragmeter.FunctionJudge(fn)"
            )
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise InvalidInputError(f"repeats must be an int >= 1, got {repeats!r}")
        self.judge = judge
        self.repeats = repeats

    def applies_to(self, sample: RagSample) -> bool:
        """True when the sample has every field this metric needs."""
        return all(getattr(sample, f) not in (None, "", []) for f in self.needs)

    def messages(self, sample: RagSample) -> list[Message]:
        """The chat messages sent for ``sample`` (documented per metric)."""
        raise NotImplementedError

    def parse(self, text: str) -> float:
        """Turn the judge's reply into a score (strict; see :func:`parse_verdict`)."""
        return parse_verdict(text)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(judge={dict(self.judge.identity)!r}, repeats={self.repeats})"


def _contexts(contexts: Sequence[str] | None) -> str:
    return "\n".join(f"[{i + 1}] {c}" for i, c in enumerate(contexts or []))


class Faithfulness(JudgeMetric):
    """How well the answer is supported by the retrieved contexts, per the judge (0..1).

    Prompt (user message): the numbered contexts, the answer, and the instruction to score
    the fraction of the answer's claims that the contexts support.
    """

    name: ClassVar[str] = "judge_faithfulness"
    version: ClassVar[str] = "1"
    needs: ClassVar[frozenset[str]] = frozenset({"response", "retrieved_contexts"})

    def messages(self, sample: RagSample) -> list[Message]:
        """System instruction + contexts and answer."""
        return [
            Message("system", _SYSTEM),
            Message(
                "user",
                "Contexts:\n"
                f"{_contexts(sample.retrieved_contexts)}\n\n"
                f"Answer:\n{sample.response}\n\n"
                "Score the fraction of the answer's factual claims that the contexts support "
                "(1 = every claim supported, 0 = none).",
            ),
        ]


class AnswerRelevancy(JudgeMetric):
    """How relevant the answer is to the question asked, per the judge (0..1).

    Prompt: the question and the answer; 1 = directly and completely addresses it.
    """

    name: ClassVar[str] = "judge_answer_relevancy"
    version: ClassVar[str] = "1"
    needs: ClassVar[frozenset[str]] = frozenset({"user_input", "response"})

    def messages(self, sample: RagSample) -> list[Message]:
        """System instruction + question and answer."""
        return [
            Message("system", _SYSTEM),
            Message(
                "user",
                f"Question:\n{sample.user_input}\n\nAnswer:\n{sample.response}\n\n"
                "Score how directly and completely the answer addresses the question "
                "(1 = fully relevant, 0 = unrelated or evasive).",
            ),
        ]


class Correctness(JudgeMetric):
    """How correct the answer is against the reference answer(s), per the judge (0..1).

    Prompt: the question, the reference answer(s) and the answer.
    """

    name: ClassVar[str] = "judge_correctness"
    version: ClassVar[str] = "1"
    needs: ClassVar[frozenset[str]] = frozenset({"response", "reference"})

    def messages(self, sample: RagSample) -> list[Message]:
        """System instruction + question, references and answer."""
        refs = "\n".join(f"- {r}" for r in sample.all_references())
        return [
            Message("system", _SYSTEM),
            Message(
                "user",
                f"Question:\n{sample.user_input or ''}\n\nReference answer(s):\n{refs}\n\n"
                f"Answer:\n{sample.response}\n\n"
                "Score how factually correct the answer is with respect to the reference "
                "(1 = same meaning, 0 = wrong).",
            ),
        ]
