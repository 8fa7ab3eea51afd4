"""trec_eval's rules for reading qrels and results text (``get_qrels.c``, ``get_trec_results.c``).

* **qrels**: ``qid iter docno grade`` per line, whitespace-separated, exactly four fields;
  the grade is read like C ``atol`` (``"1.5"`` is 1); a line starting with ``#`` is a comment;
  a blank line is an error, as in trec_eval.
* **results**: ``qid iter docno rank score runid`` per line, six fields or more (the rest is
  ignored); ``rank`` is ignored (trec_eval ranks by score); the score is read like C ``atof``;
  blank lines and lines whose first non-blank character is ``#`` are skipped; the run id is
  the last line's.

A doc listed twice for one query (in either file) is an error naming the query and the doc:
trec_eval refuses such a query too. Errors name the file and the 1-based line. A grade or
score that is not a plain number is read as C reads it (``"x"`` is 0), as trec_eval does, and
noted in ``notes`` when a list is given, so a caller can say so.
"""

from __future__ import annotations

import re

from ragmeter.errors import DataFormatError
from ragmeter.metrics.trec._spec import atof, atol

__all__ = ["Results", "parse_qrels", "parse_results"]

_SPACE = " \t\v\f\r"  # C isspace, less the newline that ends a line
_SPLIT = re.compile(f"[{_SPACE}]+")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|infinity|nan)", re.I)


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _fields(line: str) -> list[str]:
    stripped = line.strip(_SPACE)
    return _SPLIT.split(stripped) if stripped else []


def parse_qrels(
    text: str, path: str | None = None, notes: list[str] | None = None
) -> dict[str, dict[str, int]]:
    """``{qid: {docno: grade}}`` from qrels text, by trec_eval's rules (module docstring).

    >>> parse_qrels("# judged by hand\\n1 0 d1 2\\n1 0 d2 0\\n")
    {'1': {'d1': 2, 'd2': 0}}
    >>> notes = []
    >>> parse_qrels("1 0 d1 1.5\\n1 0 d2 x\\n", "q.txt", notes), notes[1]
    ({'1': {'d1': 1, 'd2': 0}}, "q.txt line 2: grade 'x' is not an integer; read as 0")
    """
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(_lines(text), start=1):
        if line.startswith("#"):
            continue
        fields = _fields(line)
        if len(fields) != 4:
            raise DataFormatError(
                f"expected 4 fields (qid iter docno grade), found {len(fields)}",
                path=path,
                line=number,
            )
        qid, _, doc, grade = fields
        judged = qrels.setdefault(qid, {})
        if doc in judged:
            raise DataFormatError(
                f"doc {doc!r} is judged twice for query {qid!r}", path=path, line=number
            )
        judged[doc] = atol(grade)
        if notes is not None and not _INT.fullmatch(grade):
            notes.append(f"{path or 'qrels'} line {number}: grade {grade!r} is not an integer; "
                         f"read as {judged[doc]}")  # fmt: skip
    return qrels


class Results:
    """A results file read the trec_eval way: ``scores[qid][docno]`` and the run id."""

    def __init__(self, scores: dict[str, dict[str, float]], runid: str | None) -> None:
        self.scores = scores
        self.runid = runid


def parse_results(text: str, path: str | None = None, notes: list[str] | None = None) -> Results:
    """:class:`Results` from results text, by trec_eval's rules (module docstring).

    >>> r = parse_results("1 Q0 d1 1 0.5 bm25\\n\\n1 Q0 d2 2 0.25 bm25 extra\\n")
    >>> r.scores, r.runid
    ({'1': {'d1': 0.5, 'd2': 0.25}}, 'bm25')
    """
    scores: dict[str, dict[str, float]] = {}
    runid: str | None = None
    for number, line in enumerate(_lines(text), start=1):
        fields = _fields(line)
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) < 6:
            raise DataFormatError(
                f"expected 6 fields (qid iter docno rank score runid), found {len(fields)}",
                path=path,
                line=number,
            )
        qid, _, doc, _, score, runid = fields[:6]
        ranked = scores.setdefault(qid, {})
        if doc in ranked:
            raise DataFormatError(
                f"doc {doc!r} is retrieved twice for query {qid!r}", path=path, line=number
            )
        ranked[doc] = atof(score)
        if notes is not None and not _FLOAT.fullmatch(score):
            notes.append(f"{path or 'results'} line {number}: score {score!r} is not a number; "
                         f"read as {ranked[doc]!r}")  # fmt: skip
    return Results(scores, runid)
