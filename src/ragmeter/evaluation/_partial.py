"""What scoring some rankings of a run leaves: the plan it follows and partials that merge.

A :class:`RunPlan` is fixed before the first ranking (and sent once to every Dask worker);
a :class:`RunPartial` holds what :func:`~ragmeter.evaluation.scoring.score_pairs` scored of
some rankings, kept rows or mergeable distributions, and folds in the partials of other
partitions in any order (:func:`merge_partials`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmeter.aggregate import BLOCK, Distribution
from ragmeter.evaluation._checks import RunOptions
from ragmeter.evaluation._rows import KeptRows
from ragmeter.metrics.registry import RetrievalMetric

__all__ = ["JUDGED", "RunPartial", "RunPlan", "merge_partials"]

_EXAMPLES = 4
"""Distinct ids a message shows before its "..." (see :func:`ragmeter.errors.some_ids`)."""

JUDGED = "judged"
"""The name of the ``judged@k`` keys every report carries (the kernel's last code)."""


@dataclass
class RunPlan:
    """What scoring a run needs, fixed before the first ranking: qrels, cut-offs, metrics.

    Picklable and sent once to every Dask worker.
    """

    qrels: Mapping[str, Mapping[str, float]]
    """The qrels, keyed by ``str`` ids."""
    index: dict[str, int]
    """Each judged query's position in the qrels (the order of per_query and messages)."""
    options: RunOptions
    codes: list[int]
    """The compiled kernel's codes of the built-in metrics, ``judged`` last."""
    keys: list[str]
    """The kernel's result keys, in its order (``ndcg@10``, ..., ``map``, ``judged@1``, ...)."""
    metric_keys: list[str]
    """The first of ``keys``: the metrics asked for (``judged@k`` only if asked for)."""
    judged_keys: list[str]
    """The last of ``keys``: ``judged@k`` at each cut-off."""
    all_keys: list[str]
    """``metric_keys`` then each custom metric at each cut-off: the report's metrics."""
    custom: list[tuple[str, RetrievalMetric]]
    """Registered metrics that are not built in (scored in Python, failures dropped)."""
    keep: bool
    """Keep every query's scores (``report.per_query``) or only mergeable aggregates."""
    judged_at: int = 10
    """The cut-off of :class:`~ragmeter.report.JudgedShare`'s counts and its warning."""
    judged_pos: int = -1
    """Where ``judged@{judged_at}`` sits in ``keys`` (and in the kernel's values)."""

    @property
    def ks(self) -> tuple[int, ...]:
        return self.options.ks

    @property
    def level(self) -> float | None:
        return self.options.level

    def kept_rows(self) -> KeptRows:
        """Empty kept rows for this plan: with built-in metrics only, each row is its first
        values under ``metric_keys`` and is read from them (no dict per query); rows with
        custom metrics are kept as dicts."""
        return KeptRows(len(self.keys), keys=None if self.custom else tuple(self.metric_keys))


@dataclass
class RunPartial:
    """What scoring some rankings of a run leaves; mergeable in any order of partitions."""

    count: int = 0
    """Judged queries with a relevant judgement scored from a ranking."""
    distributions: dict[str, Distribution] = field(default_factory=dict)
    rows: KeptRows | None = None
    """Every scored query's position, id, metrics and kernel values, when they are kept."""
    ranked: list[int] = field(default_factory=list)
    """Qrels positions of the judged queries that had a ranking (sorted, distinct)."""
    duplicate: int | None = None
    """A qrels position ranked twice (refused when the report is made)."""
    failed: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Custom metric -> (qrels position of its first failure, the warning)."""
    run_ids: list[str] = field(default_factory=list)
    """The first few query ids of the run (judged or not), for a message."""
    judged_doc: bool = False
    """Whether some scored ranking holds a judged doc."""
    retrieved: int = 0
    """How many doc ids the scored rankings hold."""
    examples: list[tuple[int, list[str]]] = field(default_factory=list)
    """The first rankings in qrels order (enough distinct ids for the doc-ids message)."""
    top: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    """At the plan's ``judged_at``: docs in the scored rankings' tops, how many of them are
    unjudged, rankings that hold a doc, rankings with an unjudged doc in their top."""

    def merge(self, other: RunPartial) -> None:
        """Fold in ``other`` (the rankings of other partitions)."""
        self.count += other.count
        for key, dist in other.distributions.items():
            self.distributions[key].merge(dist)
        if self.rows is not None and other.rows is not None:
            self.rows.extend(other.rows)
        both = sorted(self.ranked + other.ranked)
        if self.duplicate is None:
            self.duplicate = other.duplicate
        if self.duplicate is None:
            self.duplicate = next((a for a, b in itertools.pairwise(both) if a == b), None)
        self.ranked = both
        for name, (index, entry) in other.failed.items():
            if name not in self.failed or index < self.failed[name][0]:
                self.failed[name] = (index, entry)
        for qid in other.run_ids:
            if len(self.run_ids) < _EXAMPLES and qid not in self.run_ids:
                self.run_ids.append(qid)
        self.judged_doc = self.judged_doc or other.judged_doc
        self.retrieved += other.retrieved
        self.top = [a + b for a, b in zip(self.top, other.top, strict=True)]
        self.examples = [] if self.judged_doc else _prune(self.examples + other.examples)


def merge_partials(*parts: RunPartial) -> RunPartial:
    """Merge partials into a new one (the inputs are left as they were)."""
    first = parts[0]
    merged = RunPartial(
        distributions={key: Distribution() for key in first.distributions},
        rows=None if first.rows is None else KeptRows(first.rows.width, keys=first.rows.keys),
    )
    for part in parts:
        merged.merge(part)
    return merged


def _prune(examples: list[tuple[int, list[str]]]) -> list[tuple[int, list[str]]]:
    """The first rankings in qrels order until :data:`_EXAMPLES` distinct ids are seen:
    all a message showing the first distinct ids of every ranking needs."""
    kept: list[tuple[int, list[str]]] = []
    seen: set[str] = set()
    for entry in sorted(examples):
        if len(seen) >= _EXAMPLES:
            break
        kept.append(entry)
        seen.update(entry[1])
    return kept


class _Sink:
    """Where a partial's scores go while it is scored: kept rows, or blocks of values folded
    into the partial's distributions (and written to a per-query file when one is open)."""

    def __init__(self, plan: RunPlan, part: RunPartial, writer: Any) -> None:
        self.plan, self.part, self.writer = plan, part, writer
        self.values: list[list[float]] = []  # kernel values, one list per query
        self.custom: list[dict[str, float]] = []
        self.written: list[tuple[str, dict[str, float], None]] = []

    def add(self, qid: str, values: list[float], row: dict[str, float] | None) -> None:
        self.values.append(values)
        if self.plan.custom:
            self.custom.append(row or {})
        if self.writer is not None:
            row = row if row is not None else dict(zip(self.plan.metric_keys, values, strict=False))
            self.written.append((qid, row, None))
        if len(self.values) >= BLOCK:
            self.flush()

    def flush(self) -> None:
        if self.values:
            import numpy as np

            dists = self.part.distributions
            matrix = np.array(self.values, dtype=np.float64)  # transposed at C speed
            for j, key in enumerate(self.plan.keys):
                dists[key].add_trusted(matrix[:, j])  # a float64 view, no Python floats
            for key in self.plan.all_keys[len(self.plan.metric_keys) :]:
                dists[key].add_trusted([row[key] for row in self.custom if key in row])
        if self.writer is not None and self.written:
            self.writer.write(self.written)
        self.values.clear()
        self.custom.clear()
        self.written.clear()


def _look_for_judged_docs(
    part: RunPartial, judgements: Mapping[str, float], ranked: Sequence[Any], index: int
) -> None:
    """Note whether a scored ranking holds a judged doc (else count it for the message)."""
    ids = [str(d) for d in ranked]
    if any(d in judgements for d in ids):
        part.judged_doc = True
        part.examples = []
    else:
        part.retrieved += len(ids)
        part.examples = _prune([*part.examples, (index, list(dict.fromkeys(ids))[:4])])


def _distributions(plan: RunPlan) -> dict[str, Distribution]:
    """An empty distribution per report metric and per ``judged@k``."""
    return {key: Distribution() for key in dict.fromkeys(plan.all_keys + plan.judged_keys)}
