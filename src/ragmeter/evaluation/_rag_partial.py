"""The mergeable state of a pass over RAG samples (:class:`RagPartial`), and how two merge."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ragmeter.aggregate import Distribution, IdRoots
from ragmeter.errors import InvalidInputError
from ragmeter.report import SampleDigests

__all__ = ["RagPartial"]


@dataclass
class RagPartial:
    """What :func:`evaluate_rag` holds after scoring some of the samples; mergeable.

    :func:`rag_partial` scores one part of the samples (a Dask partition, a file, a
    shard) into a partial, :meth:`merge` folds in the partial of the part that comes
    next, and :func:`rag_report` turns the partial of all the parts into the report one
    pass over all the samples gives, bit for bit: the means come from exact sums
    (:class:`~ragmeter.aggregate.Distribution`), the repeated-id rule is applied to the ids
    in order, and a metric that raised is reported at its first failing sample. Partials
    pickle, so they can be made in other processes or on other machines
    (:mod:`ragmeter.dask`).
    """

    keys: list[str]
    """The metric keys scored, in order."""
    n: int = 0
    """How many samples were scored."""
    distributions: dict[str, Distribution] = field(default_factory=dict)
    """One mergeable aggregate per key."""
    present: set[str] = field(default_factory=set)
    """Fields some sample had (to explain a metric nothing could be scored on)."""
    ranked_any: bool = False
    """Whether some sample had a ranking for the retrieval metrics."""
    failed: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    """Metric key -> (index of the first sample it raised on, that sample's id, the error)."""
    lookalikes: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(unknown key, the field it probably meant) -> how many samples had it."""
    judged_doc: bool = False
    """Whether some scored ``retrieved_ids`` ranking holds a doc its sample judges."""
    unjudged: int = 0
    """Samples whose scored ``retrieved_ids`` ranking holds no judged doc (while none did)."""
    retrieved: int = 0
    """How many doc ids those rankings hold."""
    examples: list[list[str]] = field(default_factory=list)
    """Their first rankings, in order, until :data:`_EXAMPLES` distinct ids (the message's)."""
    rows: list[tuple[str, dict[str, float | None], dict[str, Any] | None]] | None = None
    """Per-sample ``(id as given, scores, details)`` in order when kept, else ``None``."""
    roots: IdRoots | None = None
    """The ids' root digests when per-sample scores are not kept (to count repeated ids)."""
    truth: SampleDigests | None = None
    """The samples' ground-truth digests (the report's dataset fingerprint)."""

    def merge(self, later: RagPartial) -> None:
        """Fold in the partial of the samples that come right after this one's.

        Raises :class:`~ragmeter.errors.InvalidInputError` for partials of other metrics or
        of another ``keep``.
        """
        if later.keys != self.keys or (later.rows is None) != (self.rows is None):
            raise InvalidInputError(
                "cannot merge partials scored with other metrics or another keep= "
                f"({self.keys} keep={self.rows is not None} and {later.keys} "
                f"keep={later.rows is not None})"
            )
        had = self.n
        for key, (index, sid, error) in later.failed.items():
            if key not in self.failed:
                self.failed[key] = (self.n + index, sid, error)
        self.n += later.n
        for key, dist in later.distributions.items():
            self.distributions[key].merge(dist)
        self.present |= later.present
        self.ranked_any = self.ranked_any or later.ranked_any
        self.lookalikes.update(later.lookalikes)
        self.judged_doc = self.judged_doc or later.judged_doc
        self.unjudged += later.unjudged
        self.retrieved += later.retrieved
        self.examples = [] if self.judged_doc else _prune(self.examples + later.examples)
        if self.rows is not None and later.rows is not None:
            self.rows.extend(later.rows)
        if self.roots is not None and later.roots is not None:
            self.roots.merge(later.roots)
        if self.truth is None and not had and later.truth is not None:
            self.truth = SampleDigests(keep_items=later.truth.rows is not None)  # was empty
        if self.truth is not None:
            if later.truth is not None:
                self.truth.merge(later.truth)
            elif later.n:
                self.truth = None  # samples without digests: no fingerprint rather than a wrong one


_EXAMPLES = 4
"""Distinct doc ids the doc-ids warning needs (it shows three and ``...``)."""


def _prune(examples: list[list[str]]) -> list[list[str]]:
    """The first rankings that bring a new id, until :data:`_EXAMPLES` distinct ids are seen
    (each ranking holds its first :data:`_EXAMPLES` distinct ids): at most that many short
    lists, giving the message the same ids however the samples were split and merged."""
    kept: list[list[str]] = []
    seen: set[str] = set()
    for ranking in examples:
        if len(seen) >= _EXAMPLES:
            break
        if not seen.issuperset(ranking):
            kept.append(ranking)
            seen.update(ranking)
    return kept
