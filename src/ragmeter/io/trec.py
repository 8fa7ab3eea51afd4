"""TREC run and qrels files, read and written the way trec_eval does.

* qrels lines: ``query_id iteration doc_id grade`` (whitespace separated; grade an int,
  possibly negative, with ``|grade| <= 2**53``). A line starting with ``#`` is a comment; a
  ``#`` inside an id is part of the id. A doc judged twice for one query with two grades is
  refused (naming both lines); judged twice with the same grade, it is kept once and the
  returned :class:`~ragmeter.io._lines.Records` says so in ``warnings``.
* run lines: ``query_id Q0 doc_id rank score [tag ...]``. The rank column is ignored and
  extra trailing columns are ignored; the score must be a finite number. Each query's docs
  are ordered by score descending, ties broken by doc id descending (string comparison),
  exactly as trec_eval orders them, so scoring a run file reproduces trec_eval.

Both readers take plain or gzip-compressed files (detected by content), drop a UTF-8
byte-order mark, and name the file and line of anything they cannot read (a line that is
not UTF-8, a truncated ``.gz``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, cast

from ragmeter.errors import DataFormatError, InvalidInputError
from ragmeter.io._lines import QrelsBuilder, Records, text_lines

__all__ = [
    "TREC_ORDERING",
    "Run",
    "parse_trec_run",
    "read_trec_qrels",
    "read_trec_run",
    "write_trec_qrels",
    "write_trec_run",
]

TREC_ORDERING = "trec_eval: score descending, ties by doc id descending"

PathLike = str | os.PathLike[str]


class Run(dict[str, list[str]]):
    """A run ``{query_id: [doc_id, ...]}`` that remembers how it was ordered.

    ``ordering`` is recorded in every report computed from it; ``scores`` keeps each
    query's ``{doc_id: score}`` when the run came from a scored file.
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
        self.scores: dict[str, dict[str, float]] = scores or {}


def _fields(lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, list[str]]]:
    for lineno, line in lines:
        if lineno == 1:
            line = line.removeprefix("\ufeff")
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        yield lineno, stripped.split()


def _lines(path: PathLike) -> Iterator[tuple[int, list[str]]]:
    return _fields(text_lines(path))


def read_trec_qrels(path: PathLike) -> Records[dict[str, int]]:
    """Read a TREC qrels file into ``{query_id: {doc_id: grade}}`` (a :class:`Records`).

    Raises :class:`~ragmeter.errors.DataFormatError` naming the file and line for a line
    that does not have 4 columns, a grade that is not an integer (or is beyond 2**53), a
    doc judged twice for one query with different grades, or a line that cannot be read.
    A doc judged twice with the same grade is kept once, and counted in ``warnings``.
    """
    builder = QrelsBuilder(path, "grade")
    for lineno, fields in _lines(path):
        if len(fields) != 4:
            raise DataFormatError(
                "a qrels line needs 4 columns 'query_id iteration doc_id grade', "
                f"got {len(fields)}",
                path=str(path),
                line=lineno,
            )
        qid, _, doc, grade = fields
        try:
            value = int(grade)
        except ValueError:
            try:
                as_float = float(grade)
            except ValueError:
                as_float = float("nan")
            if as_float != as_float or not as_float.is_integer():
                raise DataFormatError(
                    f"grade must be an integer, got {grade!r} (query {qid!r}, doc {doc!r})",
                    path=str(path),
                    line=lineno,
                ) from None
            value = int(as_float)
        builder.add(qid, doc, value, lineno, grade)
    return cast("Records[dict[str, int]]", builder.records())


def read_trec_run(path: PathLike) -> Run:
    """Read a TREC run file into a :class:`Run`, in trec_eval's order.

    Raises :class:`~ragmeter.errors.DataFormatError` (file and line) for a line with fewer
    than 5 columns, a score that is not a finite number, a doc listed twice for one query,
    or a line that cannot be read.
    """
    return _parse_run(text_lines(path), str(path))


def parse_trec_run(lines: Iterable[str], *, source: str = "<run>") -> Run:
    """Parse TREC run lines (any iterable of strings) like :func:`read_trec_run`."""
    return _parse_run(enumerate(lines, 1), source)


def _parse_run(lines: Iterable[tuple[int, str]], source: str) -> Run:
    path = source
    scored: dict[str, dict[str, float]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for lineno, fields in _fields(lines):
        if len(fields) < 5:
            raise DataFormatError(
                "a run line needs at least 5 columns 'query_id Q0 doc_id rank score [tag]', "
                f"got {len(fields)}",
                path=str(path),
                line=lineno,
            )
        qid, _, doc, _, score = fields[:5]
        try:
            value = float(score)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise DataFormatError(
                f"score must be a finite number, got {score!r} (query {qid!r}, doc {doc!r})",
                path=str(path),
                line=lineno,
            )
        docs = scored.setdefault(qid, {})
        if doc in docs:
            raise DataFormatError(
                f"doc {doc!r} is listed twice for query {qid!r} (first on line "
                f"{first_line[(qid, doc)]}); a ranking lists each doc once",
                path=str(path),
                line=lineno,
            )
        docs[doc] = value
        first_line[(qid, doc)] = lineno
    run = Run(ordering=TREC_ORDERING, scores=scored)
    for qid, docs in scored.items():
        run[qid] = sorted(docs, key=lambda d: (docs[d], d), reverse=True)
    return run


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

    Without ``scores`` (or when ``run`` is a :class:`Run` carrying none), each doc's score
    is ``n - rank``, strictly decreasing, so trec_eval's re-sorting keeps the list order.
    With scores, :func:`read_trec_run` gives back the order trec_eval uses (score
    descending, ties by doc id descending). Raises
    :class:`~ragmeter.errors.InvalidInputError` for an empty id, one containing whitespace,
    or a query id starting with ``#`` (it could not be read back); nothing is written then.
    """
    if scores is None:
        scores = getattr(run, "scores", None) or None
    _check_id("tag", tag, "")
    lines: list[str] = []
    for qid, docs in run.items():
        q = _check_id("query id", qid, "")
        n = len(docs)
        qscores = scores.get(qid) if scores else None
        for i, doc in enumerate(docs):
            d = _check_id("doc id", doc, f" (query {qid!r})")
            value: Any = qscores[doc] if qscores and doc in qscores else n - i
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
