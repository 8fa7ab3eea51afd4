"""The rules for scoring captured samples: the options, the id checks and each adapter's hints.

Every adapter's ``evaluate_retrieval`` scores its samples with
:func:`ragmeter.evaluation.captured.evaluate_captured`, which follows these rules: which
ranking a sample scores (:func:`check_stage`), how failed runs and never-captured queries
count (:func:`check_failed`, :func:`missing_rule`), when sample ids or doc ids do not match
the qrels (:func:`sample_id_problem`, :func:`doc_id_problem`), and how the warnings name
each framework's fix (:class:`Hints`). :mod:`ragmeter.capture` re-exports them all.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter._types import FAILED_QUERIES, FailedQueries, MissingQueries
from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.schema import RagSample

__all__ = [
    "NO_CONTEXT",
    "Hints",
    "check_choice",
    "check_failed",
    "check_stage",
    "doc_id_problem",
    "missing_rule",
    "no_context",
    "sample_id_problem",
]

NO_CONTEXT = "context: "
"""How a sample's ``metadata['capture_errors']`` note starts when no stage could be identified
as what reached the generator."""


def check_choice(value: object, choices: Mapping[str, str], name: str) -> str:
    """``value`` if it is one of ``choices`` (``{choice: meaning}``), else
    :class:`~ragmeter.errors.InvalidInputError` naming the option ``name`` and every choice.

    >>> check_choice("zero", FAILED_QUERIES, "failed_queries")
    'zero'
    """
    if isinstance(value, str) and value in choices:
        return value
    meanings = "; ".join(f"{k!r}: {v}" for k, v in choices.items())
    raise InvalidInputError(
        f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r} ({meanings})"
    )


def check_stage(value: object, option: str = "stage") -> str:
    """``value`` if it names a stage (a non-empty str: ``"context"`` or a stage's name), else
    :class:`InvalidInputError`.

    >>> check_stage("bm25")
    'bm25'
    """
    if isinstance(value, str) and value:
        return value
    raise InvalidInputError(
        f"{option} must name a stage: 'context' (what reached the generator, the default) or "
        f"a stage's name such as a retriever's, got {value!r}"
    )


def check_failed(value: object) -> FailedQueries:
    """``value`` if it is a ``failed_queries`` choice (``"zero"``, ``"skip"``), else
    :class:`InvalidInputError`."""
    return "zero" if check_choice(value, FAILED_QUERIES, "failed_queries") == "zero" else "skip"


def missing_rule(
    only_captured: bool, missing_queries: MissingQueries | None, *, stacklevel: int
) -> MissingQueries | None:
    """``missing_queries`` with the deprecated ``only_captured=True`` folded in (it means
    ``"skip"``; a ``DeprecationWarning``, ``stacklevel`` frames up)."""
    if not only_captured:
        return missing_queries
    warnings.warn(
        "evaluate_retrieval(only_captured=True) is deprecated: it is missing_queries='skip' "
        "(judged queries never captured are left out of the mean); pass that instead "
        "(only_captured= will be removed in a future release)",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
    if missing_queries not in (None, "skip"):
        raise InvalidInputError(
            f"only_captured=True means missing_queries='skip' (judged queries never captured "
            f"are left out of the mean), but missing_queries={missing_queries!r} was given "
            "too: pass one of the two"
        )
    return "skip"


@dataclass(frozen=True)
class Hints:
    """How a user of one framework fixes an id problem: the adapters fill it in, and the
    warnings of :meth:`SampleStore.evaluate_retrieval` quote it (and log with its logger).

    ``label`` is the framework's display name (progress bars, messages).
    ``sample_id`` says how to give each captured run its query id; ``doc_id`` how to make a
    retrieved document's id the one the qrels use (naming the current setting); ``stage``
    how to say which ranking reached the generator when ragmeter cannot tell.
    """

    framework: str = "ragmeter"
    sample_id: str = "Give each sample the query id the qrels use (RagSample.id)."
    doc_id: str = "Make retrieved_ids the doc ids the qrels use."
    label: str = ""
    stage: str = "Pick the stage to score by name with stage='<name>'."

    @property
    def name(self) -> str:
        """The framework's name as its users write it (``label``, e.g. ``LangChain``)."""
        return self.label or self.framework

    @property
    def logger(self) -> logging.Logger:
        """``ragmeter_<framework>`` (``ragmeter`` for the core)."""
        name = self.framework
        return logging.getLogger("ragmeter" if name == "ragmeter" else f"ragmeter_{name}")


def no_context(sample: RagSample) -> str | None:
    """The sample's note that no stage could be identified as its context, if any.

    >>> no_context(RagSample(id="q1", metadata={"capture_errors": ["context: two ran"]}))
    'context: two ran'
    """
    for note in sample.metadata.get("capture_errors") or ():
        if isinstance(note, str) and note.startswith(NO_CONTEXT):
            return note
    return None


def sample_id_problem(
    sample_ids: Sequence[str], qrels: Mapping[str, Any], hint: str
) -> tuple[bool, str] | None:
    """``(fatal, message)`` when no captured sample id, or fewer than half, is a qrels query id.

    ``fatal`` is true when none is (nothing captured can be scored). ``None``: no problem.

    >>> sample_id_problem(["4f1c-9a", "q2"], {"q1": {}, "q2": {}}, "Pass ragmeter_id.")
    >>> sample_id_problem(["4f1c-9a"], {"q1": {}}, "Pass ragmeter_id.")[0]
    True
    """
    distinct = list(dict.fromkeys(sample_ids))
    if not distinct:
        return None
    unknown = [i for i in distinct if i not in qrels]
    if len(unknown) == len(distinct):
        return True, (
            f"none of the {len(distinct)} captured sample ids (e.g. {some_ids(distinct)}) is a "
            f"query id of the qrels (e.g. {some_ids(qrels)}), so nothing captured can be "
            f"scored. {hint}"
        )
    judged = len(distinct) - len(unknown)
    if judged * 2 < len(distinct):
        return False, (
            f"only {judged} of {len(distinct)} captured sample ids are query ids of the qrels; "
            f"the other {len(unknown)} (e.g. {some_ids(unknown)}) are not scored. If they "
            f"should be: {hint}"
        )
    return None


def doc_id_problem(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, Any]],
    hint: str,
    *,
    truth: str = "the qrels",
) -> str | None:
    """A warning when no retrieved doc id, or few, appears anywhere in ``qrels``; else ``None``.

    Only judged queries with a non-empty ranking count. A query *matches* when one of its
    retrieved ids is judged for any query (a wrong id field matches nothing anywhere, a poor
    retriever still hits documents judged for some query). No query matching means the run
    and ``truth`` name documents differently; fewer than half matching says they probably do.

    >>> print(doc_id_problem({"q1": ["3f2a"]}, {"q1": {"d1": 1}}, "Pick the id field."))
    none of the 1 doc ids retrieved for the 1 judged queries (e.g. '3f2a') appears anywhere
    in the qrels (whose doc ids are e.g. 'd1'): the two name documents differently, so every
    score is 0. Pick the id field.
    """
    universe = {str(d) for row in qrels.values() for d in row}
    known = sorted(universe)  # for the message, in a stable order
    ranked = [ids for q, ids in run.items() if ids and qrels.get(q)]
    if not ranked or not universe:
        return None
    matched = sum(1 for ids in ranked if any(str(d) in universe for d in ids))
    unmatched = [str(d) for ids in ranked for d in ids if str(d) not in universe]
    if matched == 0:
        return (
            f"none of the {len(set(unmatched))} doc ids retrieved for the {len(ranked)} judged "
            f"queries (e.g. {some_ids(unmatched)}) appears anywhere in {truth} (whose doc ids "
            f"are e.g. {some_ids(known)}): the two name documents differently, so every "
            f"score is 0. {hint}"
        )
    if matched * 2 < len(ranked):
        return (
            f"only {matched} of {len(ranked)} judged queries retrieved any doc id that appears "
            f"in {truth} (retrieved e.g. {some_ids(unmatched)}; {truth}: e.g. "
            f"{some_ids(known)}); unless the retriever is that poor, the doc ids probably "
            f"differ. {hint}"
        )
    return None
