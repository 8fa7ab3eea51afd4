"""Streaming a TREC run grouped by query, one query at a time in constant memory."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import NamedTuple

from ragmeter.errors import DataFormatError
from ragmeter.io._lines import PathLike
from ragmeter.io.trec import _compiled
from ragmeter.io.trec._pieces import _check_distinct, _file_pieces, _Piece, _trec_order


class UngroupedRunError(DataFormatError):
    """A streamed run file whose query's lines are not together (see :func:`iter_trec_run`)."""


class RankedQuery(NamedTuple):
    """One query of a run file: its id, doc ids in trec_eval's order, their scores, and the
    line its ranking starts on (:func:`iter_trec_run`)."""

    query_id: str
    doc_ids: list[str]
    scores: list[float]
    line: int


def iter_trec_run(path: PathLike) -> Iterator[RankedQuery]:
    r"""Stream a TREC run file one query at a time (constant memory, whatever its size).

    Yields a :class:`RankedQuery` per query, in file order, each ranking in trec_eval's
    order, the same rankings :func:`read_trec_run` gives. **The file must be grouped by
    query**: each query's lines together, as in a file sorted by query id (``sort -s -k1,1
    run > sorted.run``; any order of the queries themselves). A query whose lines come back
    after another query's is a :class:`~ragmeter.errors.DataFormatError` naming the line
    and where its ranking started; the other errors are :func:`read_trec_run`'s.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.txt"
    >>> _ = path.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.9 t\nq2 Q0 c 1 1.0 t\n")
    >>> [(q.query_id, q.doc_ids) for q in iter_trec_run(path)]
    [('q1', ['b', 'a']), ('q2', ['c'])]
    """
    if not _compiled.COMPILED:
        yield from _python_queries(path)
        return
    sent = 0
    try:
        for query in _compiled_queries(path):
            yield query
            sent += 1
        return
    except _compiled.Irregular:
        pass
    # the Python reader reads the file again and raises the error where it is; the queries
    # before it are the ones already sent
    yield from islice(_python_queries(path), sent, None)


def _compiled_queries(path: PathLike) -> Iterator[RankedQuery]:
    """The queries read by the compiled parser; :class:`~._compiled.Irregular` where the
    Python reader must take over.

    A query is yielded once the next one is read whole, never before the Python reader
    would yield it (it yields a query when the next one's first lines are read and checked),
    so the queries sent before an irregular line are the first ones the Python reader sends.
    """
    done: set[str] = set()
    held: RankedQuery | None = None
    for qid, docs, _, scores, line in _compiled.run_pieces(path):
        if qid in done:
            # every line up to the end of this query's lines is valid, and the query before
            # it complete: the Python reader would send that one and raise this
            if held is not None:
                yield held
            raise _ungrouped(qid, str(path), line)
        done.add(qid)
        if held is not None:
            yield held
        held = RankedQuery(qid, docs, scores.tolist(), line)
    if held is not None:
        yield held


def _python_queries(path: PathLike) -> Iterator[RankedQuery]:
    """The reference streaming reader (pure Python; its errors are every reader's)."""
    source = str(path)
    done: set[str] = set()
    current: list[_Piece] = []
    for piece in _file_pieces(path):
        if current and piece.qid == current[0].qid:
            current.append(piece)
            continue
        if current:
            yield _finish(current, source)
            done.add(current[0].qid)
        if piece.qid in done:
            raise _ungrouped(piece.qid, source, piece.lines[0])
        current = [piece]
    if current:
        yield _finish(current, source)


def _ungrouped(qid: str, source: str, line: int) -> UngroupedRunError:
    return UngroupedRunError(
        f"query {qid!r} comes back after other queries' lines: iter_trec_run needs each "
        "query's lines together, as in a file sorted by query id (sort -s -k1,1 run > "
        "sorted.run), or read the run whole with read_trec_run",
        path=source,
        line=line,
    )


def _finish(pieces: list[_Piece], source: str) -> RankedQuery:
    _check_distinct(pieces[0].qid, pieces, source)
    if len(pieces) == 1:
        docs, scores = pieces[0].docs, pieces[0].scores
    else:
        docs = [d for p in pieces for d in p.docs]
        scores = [v for p in pieces for v in p.scores]
    docs, ordered = _trec_order(docs, scores)
    return RankedQuery(pieces[0].qid, docs, list(ordered), pieces[0].lines[0])
