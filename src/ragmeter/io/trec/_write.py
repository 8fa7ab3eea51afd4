"""Writing TREC run and qrels files that trec_eval (and the readers) read back as written."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ragmeter.errors import InvalidInputError
from ragmeter.io._lines import PathLike
from ragmeter.io.trec._run import scores_to_write


def _open_out(path: PathLike | IO[str]) -> tuple[IO[str], bool]:
    if not isinstance(path, (str, os.PathLike)):
        return path, False
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return open(target, "w", encoding="utf-8"), True


_WHITESPACE = re.compile(r"\s")


def _check_id(kind: str, value: object, where: str) -> str:
    """``value`` as a TREC column; it must read back as itself."""
    text = str(value)
    if (
        not text
        or _WHITESPACE.search(text)
        or (kind == "query id" and text.startswith(("#", "\ufeff")))
    ):
        raise InvalidInputError(
            f"cannot write {kind} {value!r}{where} to a TREC file: columns are separated by "
            "whitespace, so an id must be non-empty and contain none (and a line starting "
            "with '#' is a comment, so a query id cannot start with '#'; nor with U+FEFF, "
            "the byte-order mark readers drop)"
        )
    return text


def write_trec_run(
    run: Mapping[str, Sequence[str]],
    path: PathLike | IO[str],
    *,
    tag: str = "ragmeter",
    scores: Mapping[str, Mapping[str, float]] | None = None,
) -> None:
    """Write ``run`` as a TREC run file that trec_eval reads back in the same order.

    The file holds the run as it is now, each query's docs in list order with rank
    ``1..n``. A :class:`Run` read from a scored file (or another mapping with ``scores``)
    keeps a query's scores while they still give its list's order; otherwise, and for a
    run without scores, each doc's score is ``n - rank``, strictly decreasing (see
    :meth:`Run.scores_to_write`). Either way :func:`read_trec_run` reads back exactly
    these lists, so the file scores what the run scores, also after the run was edited
    (truncated, re-ordered, queries deleted or added, docs appended). With ``scores=``
    given, those are written as they are (``n - rank`` for a doc they lack), and
    :func:`read_trec_run` gives back the order trec_eval makes of them (score descending,
    ties by doc id descending). Raises :class:`~ragmeter.errors.InvalidInputError` for an
    empty id, one containing whitespace, or a query id starting with ``#`` (it could not be
    read back); nothing is written then.
    """
    _check_id("tag", tag, "")
    lines: list[str] = []
    for qid, docs in run.items():
        q = _check_id("query id", qid, "")
        n = len(docs)
        if scores is not None:
            qscores = scores.get(qid)
            values: Sequence[Any] = [
                qscores[doc] if qscores and doc in qscores else n - i for i, doc in enumerate(docs)
            ]
        else:
            values = scores_to_write(run, qid) or range(n, 0, -1)
        for i, (doc, value) in enumerate(zip(docs, values, strict=True)):
            d = _check_id("doc id", doc, f" (query {qid!r})")
            lines.append(f"{q} Q0 {d} {i + 1} {value} {tag}\n")
    fh, close = _open_out(path)
    try:
        fh.writelines(lines)
    finally:
        if close:
            fh.close()


def write_trec_qrels(qrels: Mapping[str, Mapping[str, float]], path: PathLike | IO[str]) -> None:
    """Write ``{query_id: {doc_id: grade}}`` as a TREC qrels file (iteration column ``0``).

    Raises :class:`~ragmeter.errors.InvalidInputError` for an id that cannot be a
    whitespace-separated column or a grade that is not an integer; nothing is written then.
    """
    lines: list[str] = []
    for qid, judgements in qrels.items():
        q = _check_id("query id", qid, "")
        for doc, grade in judgements.items():
            d = _check_id("doc id", doc, f" (query {qid!r})")
            if isinstance(grade, bool) or not float(grade).is_integer():
                raise InvalidInputError(
                    f"cannot write grade {grade!r} (query {qid!r}, doc {doc!r}) to a TREC qrels "
                    "file: trec_eval grades are integers"
                )
            lines.append(f"{q} 0 {d} {int(grade)}\n")
    fh, close = _open_out(path)
    try:
        fh.writelines(lines)
    finally:
        if close:
            fh.close()


def iter_pairs(qrels: Mapping[str, Mapping[str, float]]) -> Iterable[tuple[str, str, float]]:
    """Yield ``(query_id, doc_id, grade)`` triples."""
    for qid, judgements in qrels.items():
        for doc, grade in judgements.items():
            yield qid, doc, grade
