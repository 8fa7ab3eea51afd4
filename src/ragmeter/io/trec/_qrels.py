"""Reading TREC qrels files: ``query_id iteration doc_id grade``, a grade an integer."""

from __future__ import annotations

from typing import cast

from ragmeter._gc import paused_gc
from ragmeter.errors import DataFormatError
from ragmeter.io._lines import PathLike, QrelsBuilder, Records
from ragmeter.io.trec import _compiled
from ragmeter.io.trec._pieces import _lines


def read_trec_qrels(path: PathLike) -> Records[dict[str, int]]:
    """Read a TREC qrels file into ``{query_id: {doc_id: grade}}`` (a :class:`Records`).

    Raises :class:`~ragmeter.errors.DataFormatError` naming the file and line for a line
    that does not have 4 columns, a grade that is not an integer (or is beyond 2**53), a
    doc judged twice for one query with different grades, or a line that cannot be read.
    A doc judged twice with the same grade is kept once, and counted in ``warnings``.
    """
    builder = QrelsBuilder(path, "grade")
    with paused_gc():
        if _compiled.COMPILED:
            try:
                qrels, builder.repeats = _compiled.qrels_grades(path)
            except _compiled.Irregular:
                pass  # the Python reader reads it, and says what is wrong
            else:
                builder.qrels = cast("dict[str, dict[str, float]]", qrels)
                return cast("Records[dict[str, int]]", builder.records())
        return _read_qrels(path, builder)


def _read_qrels(path: PathLike, builder: QrelsBuilder) -> Records[dict[str, int]]:
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
