"""The bridge to Ragas for LLM-judged metrics (faithfulness, answer relevancy, ...).

ragmeter computes only what needs no model. For judged metrics, hand the same samples to
Ragas with your own LLM. :class:`~ragmeter.schema.RagSample` already uses Ragas'
``SingleTurnSample`` field names, so :func:`as_ragas_dataset` copies each Ragas field
unchanged (``user_input``, ``response``, ``retrieved_contexts``, ``reference``,
``reference_contexts``; plus ``retrieved_ids``/``reference_ids`` as
``retrieved_context_ids``/``reference_context_ids`` when the installed Ragas has those
fields). Fields Ragas has no place for (ids, relevance grades, latency, tokens, metadata)
stay on the ragmeter samples; match the two by position.

Ragas is an optional extra: ``pip install 'ragmeter[ragas]'``. Without it,
:func:`as_ragas_dataset` raises :class:`~ragmeter.errors.MissingDependencyError` (an
``ImportError``) saying so.

Usage (with ragas installed and an LLM configured)::

    from ragas import evaluate
    from ragas.metrics import answer_relevancy, faithfulness

    dataset = as_ragas_dataset(samples)
    result = evaluate(dataset, metrics=[faithfulness, answer_relevancy])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ragmeter.errors import MissingDependencyError
from ragmeter.schema import RagSample, SampleLike, coerce_sample

__all__ = ["RAGAS_FIELDS", "as_ragas_dataset", "ragas_fields"]

RAGAS_FIELDS: dict[str, str] = {
    "user_input": "user_input",
    "response": "response",
    "retrieved_contexts": "retrieved_contexts",
    "reference": "reference",
    "reference_contexts": "reference_contexts",
    "retrieved_ids": "retrieved_context_ids",
    "reference_ids": "reference_context_ids",
}
"""RagSample field -> Ragas ``SingleTurnSample`` field (the id fields only where Ragas has them)."""


def ragas_fields(sample: RagSample, available: Iterable[str] | None = None) -> dict[str, Any]:
    """The ``SingleTurnSample`` keyword arguments for ``sample`` (``None`` fields left out).

    ``available`` limits the result to the fields a Ragas version has (all when ``None``).

    >>> ragas_fields(RagSample(question="q?", answer="a", retrieved_ids=["d"]))
    {'user_input': 'q?', 'response': 'a', 'retrieved_context_ids': ['d']}
    """
    allowed = None if available is None else set(available)
    out: dict[str, Any] = {}
    for ours, theirs in RAGAS_FIELDS.items():
        value = getattr(sample, ours)
        if value is None or (allowed is not None and theirs not in allowed):
            continue
        out[theirs] = list(value) if isinstance(value, list) else value
    return out


def as_ragas_dataset(samples: Iterable[SampleLike]) -> Any:
    """Convert samples (RagSample objects or mappings) into a ``ragas.EvaluationDataset``.

    Every Ragas field is copied unchanged, in order (see the module docstring). Raises
    :class:`~ragmeter.errors.MissingDependencyError` when ``ragas`` is not installed, and
    :class:`~ragmeter.errors.InvalidInputError` naming a sample that does not validate.
    """
    try:
        from ragas import EvaluationDataset, SingleTurnSample
    except ImportError:
        raise MissingDependencyError("ragas", "ragas") from None
    available = getattr(SingleTurnSample, "model_fields", None)
    names = None if available is None else list(available)
    turns: list[Any] = [  # EvaluationDataset takes single- and multi-turn samples
        SingleTurnSample(**ragas_fields(coerce_sample(s, index=i), names))
        for i, s in enumerate(samples)
    ]
    return EvaluationDataset(samples=turns)
