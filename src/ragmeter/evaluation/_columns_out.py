"""The report of a columnar run: its qrels as flat columns, the kernel's values, the partial.

What :func:`ragmeter.evaluation.columnar.evaluate_run_columns` does after reading the run:
the qrels laid out as flat arrays in qrels order, one call of the columnar kernel
(:func:`ragmeter.metrics.columns.score_columns`), and the
:class:`~ragmeter.evaluation.scoring.RunPartial` that
:func:`~ragmeter.evaluation.scoring.score_pairs` would have left, so
:func:`~ragmeter.evaluation.scoring.finish_report` makes the very report
:func:`ragmeter.evaluate_run` makes.
"""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter._types import MAX_GRADE
from ragmeter.aggregate import BLOCK
from ragmeter.errors import DuplicateDocumentError, InvalidInputError
from ragmeter.evaluation._checks import str_keys
from ragmeter.evaluation._columns_in import RunColumns, RunRows, Strings, strings_of
from ragmeter.evaluation._columns_qrels import ColumnQrels
from ragmeter.evaluation.scoring import (
    RunPartial,
    RunPlan,
    _distributions,
    _prune,
    finish_report,
    output_noted,
)
from ragmeter.io.trec import TREC_ORDERING
from ragmeter.metrics.columns import SCORED, ColumnScores, query_table, score_columns
from ragmeter.report import RetrievalEvalReport, WarningLog

__all__ = ["Prepared", "column_report", "column_scores", "prepare_qrels"]

_EXAMPLES = 4
"""Distinct ids a message shows (as :mod:`ragmeter.evaluation.scoring`)."""


def _judgements(plan: RunPlan) -> tuple[np.ndarray[Any, Any], list[str], list[float]]:
    """The qrels as flat columns in qrels order: starts, doc ids, grades (checked)."""
    starts = [0]
    docs: list[str] = []
    grades: list[float] = []
    for qid, raw in plan.qrels.items():
        judgements = str_keys(raw, f"qrels[{qid!r}]")
        for doc, grade in judgements.items():
            try:
                ok = -MAX_GRADE <= grade <= MAX_GRADE  # NaN fails both comparisons
            except TypeError:
                ok = None
            if ok is None or isinstance(grade, str):
                raise InvalidInputError(
                    f"cannot score query {qid!r}: grade {grade!r} of doc {doc!r} is not a "
                    "number. qrels must be {query_id: {doc_id: numeric grade}} and run "
                    "{query_id: [doc_id, ...]}"
                )
            if not ok:
                raise InvalidInputError(
                    f"qrels[{qid!r}][{doc!r}] is {grade!r}: a grade must be a finite number with "
                    "|grade| <= 2**53 (NaN or infinity would make every mean NaN)"
                )
            grades.append(float(grade))
        docs.extend(judgements)
        starts.append(len(docs))
    return np.asarray(starts, dtype=np.int64), docs, grades


Prepared = tuple[Strings, Any, list[Strings], Any, Any]
"""The qrels as the kernel reads them: query ids, ``jstart``, judged docs, grades, and the
compiled kernel's prepared qrels (:func:`~ragmeter.metrics.columns.query_table`)."""


def prepare_qrels(plan: RunPlan) -> Prepared:
    """The plan's qrels as flat columns (once per run, however many parts it is read in)."""
    import pyarrow as pa

    qrels = plan.qrels
    if isinstance(qrels, ColumnQrels):  # read from a table: its columns as they are
        jstart, jdocs = qrels.starts, qrels.docs
        grades = np.asarray(qrels.grades, dtype=np.float64)
        qids = strings_of(qrels.id_array)
    else:
        jstart, listed, graded = _judgements(plan)
        jdocs, grades = pa.array(listed, pa.large_string()), np.asarray(graded, np.float64)
        qids = strings_of(pa.array(list(qrels), pa.large_string()))
    judged = [strings_of(c) for c in getattr(jdocs, "chunks", [jdocs])]
    return qids, jstart, judged, grades, query_table(qids, jstart, judged, grades)


def column_scores(
    columns: RunColumns,
    plan: RunPlan,
    prepared: Prepared | None = None,
    out: ColumnScores | None = None,
) -> ColumnScores:
    """Every judged query's kernel values, from the run's buffers and the qrels' columns
    (into ``out`` when given: see :func:`ragmeter.metrics.columns.score_columns`)."""
    query_ids, jstart, jdocs, grades, table = prepared or prepare_qrels(plan)
    chunks = columns.chunks()
    return score_columns(
        chunks, query_ids, jstart, jdocs, grades, plan.ks, plan.codes, plan.level, out, table
    )


def _partial(columns: RunRows, scores: ColumnScores, plan: RunPlan) -> RunPartial:
    """The :class:`~ragmeter.evaluation.scoring.RunPartial` :func:`score_pairs` would leave
    (without its rows or distributions, which :func:`_report` adds)."""
    qids = list(plan.qrels)
    if scores.first_repeat >= 0:
        qid = qids[scores.first_repeat]
        seen: set[str] = set()
        repeated: set[str] = set()
        for doc in columns.ranking(qid):
            (repeated if doc in seen else seen).add(doc)
        raise DuplicateDocumentError(qid, repeated)
    status = scores.status
    scored = np.flatnonzero(status == SCORED)
    part = RunPartial(count=len(scored), ranked=np.flatnonzero(status).tolist())
    part.run_ids = columns.first_query_ids(_EXAMPLES)
    lengths = scores.lengths[scored]
    shown = lengths > 0
    top = np.minimum(lengths[shown], plan.judged_at)
    judged = scores.values[scored[shown], plan.judged_pos]
    missed = top - np.round(judged * top).astype(np.int64)
    part.top = [int(top.sum()), int(missed.sum()), int(shown.sum()), int((missed != 0).sum())]
    part.judged_doc = bool(np.any(scores.found[scored] > 0))
    if not part.judged_doc:  # the message names the first docs of the first rankings
        part.retrieved = int(lengths.sum())
        for index in scored[shown].tolist():
            ids = columns.ranking(qids[index])
            part.examples = _prune([*part.examples, (index, list(dict.fromkeys(ids))[:4])])
            if len({d for _, ds in part.examples for d in ds}) >= _EXAMPLES:
                break
    return part


def column_report(
    columns: RunRows, scores: ColumnScores, plan: RunPlan, log: WarningLog, out: Path | None
) -> RetrievalEvalReport:
    """The report from the kernel's values (kept rows, or distributions and a file)."""
    from ragmeter.io.scores import open_score_writer, removed_on_error

    part = _partial(columns, scores, plan)
    qids = list(plan.qrels)
    scored = np.flatnonzero(scores.status == SCORED).tolist()
    keys = plan.metric_keys
    writer = open_score_writer(out, plan.all_keys, details=False) if out is not None else None
    with removed_on_error(writer):
        if plan.keep:
            kept = part.rows = plan.kept_rows()
            if kept.keys is not None:  # the rows are read from the values: no dict per query
                kept.positions, kept.ids = scored, [qids[i] for i in scored]
                kept.values = array("d")
                kept.values.frombytes(np.ascontiguousarray(scores.values[scored], "d").tobytes())
            else:
                for i, v in zip(scored, scores.values[scored].tolist(), strict=True):
                    kept.add(i, qids[i], dict(zip(keys, v, strict=False)), v)
        else:
            part.distributions = _distributions(plan)
            for start in range(0, len(scored), BLOCK):
                block = scored[start : start + BLOCK]
                matrix = scores.values[block]
                for j, key in enumerate(plan.keys):
                    part.distributions[key].add_trusted(matrix[:, j])
                if writer is not None:
                    writer.write(
                        [(qids[i], dict(zip(keys, v, strict=False)), None)
                         for i, v in zip(block, matrix.tolist(), strict=True)]
                    )  # fmt: skip
        report = finish_report(part, plan, log, ties=TREC_ORDERING, writer=writer)
    return output_noted(report, writer, plan)
