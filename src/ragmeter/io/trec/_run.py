"""The :class:`Run` type: a ranking per query that remembers its ordering and the scores
its file gave each (query, doc), and the scores a writer may give a ranking back."""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from operator import eq
from typing import Any

TREC_ORDERING = "trec_eval: score descending, ties by doc id descending"


class Run(dict[str, list[str]]):
    """A run ``{query_id: [doc_id, ...]}`` that remembers how it was ordered.

    ``ordering`` is recorded in every report computed from it; ``scores`` keeps each
    query's ``{doc_id: score}`` when the run came from a scored file (a file's scores are
    held as one float array per query, with the order of the docs they were read in, and
    turned into dicts the first time ``scores`` is read, so a 100k-query run does not hold
    ten million small objects twice).

    A score belongs to its (query, doc), not to a position: after the lists are edited
    (truncated, re-ordered, a query deleted or added, docs appended, a list replaced, in
    place or not) ``scores`` still gives each doc the score the file gave it (and nothing
    for a doc or query the file did not have). :func:`write_trec_run` and
    :func:`ragmeter.io.arrow.run_to_arrow` write what the run holds *now*: see
    :meth:`scores_to_write`.
    """

    def __init__(
        self,
        data: Mapping[str, list[str]] | None = None,
        *,
        ordering: str = "list order",
        scores: dict[str, dict[str, float]] | None = None,
    ) -> None:
        super().__init__(data or {})
        self.ordering = ordering
        self._scores: dict[str, dict[str, float]] | None = scores or {}
        self._packed: dict[str, array[float]] = {}
        self._read: dict[str, tuple[str, ...]] = {}

    @property
    def scores(self) -> dict[str, dict[str, float]]:
        """``{query_id: {doc_id: score}}`` (empty for a run without scores); a query no
        longer in the run has none."""
        if self._scores is None:
            self._scores = {
                qid: dict(zip(self._read[qid], packed, strict=True))
                for qid, packed in self._packed.items()
                if qid in self
            }
            self._packed = {}
            self._read = {}
        return self._scores

    @scores.setter
    def scores(self, value: dict[str, dict[str, float]]) -> None:
        self._scores = value
        self._packed = {}
        self._read = {}

    def _pack(
        self, packed: dict[str, array[float]], read: dict[str, tuple[str, ...]] | None = None
    ) -> None:
        """Hold the file's scores, aligned with each query's ranked list as read (a tuple
        of the same doc id strings, so an edit of the list cannot misalign them; made here
        unless ``read`` gives them)."""
        self._packed = packed
        self._read = read if read is not None else {qid: tuple(self[qid]) for qid in packed}
        self._scores = None if packed else {}

    def scores_to_write(self, query_id: str) -> Sequence[float] | None:
        """The scores a writer gives query ``query_id``'s list as the run holds it now, or
        ``None``: then each doc gets ``n - rank`` (``n`` docs; rank 1 first), which trec_eval
        reads back in list order.

        The remembered scores are written when every doc of the list has one and, by them,
        the list is in trec_eval's order (score descending, ties by doc id descending), so
        the file reads back as exactly this list: an unedited query, a truncated one, one
        with docs deleted. Anything else (re-ordered, a doc appended or put in that the file
        did not score for this query, a new query) is written with rank-derived scores for
        the whole query, never a mix of real and invented ones.
        """
        docs = self[query_id]
        if self._scores is None:
            packed = self._packed.get(query_id)
            if packed is None:
                return None
            read = self._read[query_id]
            if len(docs) == len(read) and all(map(eq, docs, read)):
                return packed  # as read: in trec_eval's order by construction
            return _in_trec_order(docs, dict(zip(read, packed, strict=True)))
        return _in_trec_order(docs, self._scores.get(query_id))


def _in_trec_order(
    docs: Sequence[object], known: Mapping[Any, object] | None
) -> list[float] | None:
    """``known``'s score of each doc when every doc has a finite one and they put ``docs``
    in trec_eval's order (score descending, ties by doc id descending); else ``None``.

    >>> _in_trec_order(["b", "a", "c"], {"a": 1.0, "b": 1.0, "c": 0.5})
    [1.0, 1.0, 0.5]
    >>> _in_trec_order(["a", "b"], {"a": 1.0, "b": 1.0}) is None  # a tie reads back b, a
    True
    """
    if not known:
        return None
    values: list[float] = []
    for doc in docs:
        value = known.get(doc)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        number = float(value)
        if not math.isfinite(number):
            return None
        if values and (
            number > values[-1] or (number == values[-1] and str(doc) >= str(docs[len(values) - 1]))
        ):
            return None
        values.append(number)
    return values


def scores_to_write(run: Mapping[str, Sequence[str]], query_id: str) -> Sequence[float] | None:
    """The scores a writer gives ``run[query_id]``: a :class:`Run`'s
    :meth:`Run.scores_to_write`; for another mapping with a ``scores`` attribute
    (``{query_id: {doc_id: score}}``) the same rule; ``None`` (then ``n - rank``) otherwise.
    """
    if isinstance(run, Run):
        return run.scores_to_write(query_id)
    known = getattr(run, "scores", None)
    if not isinstance(known, Mapping):
        return None
    row = known.get(query_id)
    return _in_trec_order(run[query_id], row if isinstance(row, Mapping) else None)
