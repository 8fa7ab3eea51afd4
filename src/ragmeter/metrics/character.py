"""Character-level retrieval metrics on samples: ``character_recall/precision/f1`` (seed 004).

Sample-level wrappers around :mod:`ragmeter.spans`: each reads a
:class:`~ragmeter.schema.RagSample`'s ``gold_spans`` (gold evidence as character spans) and
``retrieved_spans`` (where the retrieved chunks sit) and is registered in
:data:`ragmeter.metrics.base.RAG_METRICS` at import, so ``evaluate_rag`` can compute them by
name. Semantics are :func:`ragmeter.spans.character_recall` and friends: unions of
characters, overlaps counted once, other documents never overlap, gold means ``grade > 0``.

A sample is skipped (``None``, counted in the report's coverage) when it lacks either field
or has no gold span of grade > 0 -- like a query with no relevant document in
``evaluate_run``, there is nothing to find, so it is left out of the mean rather than
scored 0. A sample with gold and ``retrieved_spans == []`` scores 0.0.

>>> from ragmeter.metrics.base import RAG_METRICS
>>> from ragmeter.schema import RagSample
>>> from ragmeter.spans import GoldSpan, Span
>>> s = RagSample(gold_spans=[GoldSpan(Span("doc1", 100, 270))],
...               retrieved_spans=[Span("doc1", 0, 2000)])
>>> RAG_METRICS["character_recall"].score(s), RAG_METRICS["character_precision"].score(s)
(1.0, 0.085)
"""

from __future__ import annotations

from ragmeter.metrics.base import RagMetric
from ragmeter.metrics.lexical import _register
from ragmeter.schema import RagSample
from ragmeter.spans import _f1, _recall_precision

__all__ = ["CharacterF1", "CharacterPrecision", "CharacterRecall"]


class _CharacterMetric(RagMetric):
    needs = frozenset({"gold_spans", "retrieved_spans"})
    higher_is_better = True

    def _pair(self, sample: RagSample) -> tuple[float, float] | None:
        if sample.gold_spans is None or sample.retrieved_spans is None:
            return None
        gold = [g.span for g in sample.gold_spans if g.grade > 0]
        if not gold:
            return None
        return _recall_precision(gold, sample.retrieved_spans)


class CharacterRecall(_CharacterMetric):
    """``character_recall``: fraction of the gold characters present in the retrieved spans."""

    name = "character_recall"

    def score(self, sample: RagSample) -> float | None:
        pair = self._pair(sample)
        return None if pair is None else pair[0]


class CharacterPrecision(_CharacterMetric):
    """``character_precision``: fraction of the retrieved characters that are gold.

    Exposes context waste: a big chunk holding the evidence scores recall 1.0 but low
    precision. 0.0 when nothing was retrieved.
    """

    name = "character_precision"

    def score(self, sample: RagSample) -> float | None:
        pair = self._pair(sample)
        return None if pair is None else pair[1]


class CharacterF1(_CharacterMetric):
    """``character_f1``: harmonic mean of character recall and precision (0.0 if both are 0)."""

    name = "character_f1"

    def score(self, sample: RagSample) -> float | None:
        pair = self._pair(sample)
        return None if pair is None else _f1(*pair)


for _metric in (CharacterRecall(), CharacterPrecision(), CharacterF1()):
    _register(_metric)
