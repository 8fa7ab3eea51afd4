"""Reading a whole TREC run into a :class:`~ragmeter.io.trec.Run`, in trec_eval's order
(a query's lines need not be together)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from ragmeter._gc import paused_gc
from ragmeter.io._lines import PathLike
from ragmeter.io.trec import _compiled
from ragmeter.io.trec._pieces import (
    _check_distinct,
    _file_pieces,
    _Piece,
    _slow_pieces,
    _trec_order,
)
from ragmeter.io.trec._run import TREC_ORDERING, Run


def _assemble(pieces: Iterable[_Piece], source: str) -> Run:
    """A :class:`Run` from pieces in file order (a query's lines need not be together)."""
    parts: dict[str, list[_Piece]] = {}
    last: _Piece | None = None
    with paused_gc():
        for piece in pieces:
            piece = piece._replace(scores=array("d", piece.scores))  # 8 bytes a score, not 32
            held = parts.get(piece.qid)
            if held is None:
                parts[piece.qid] = [piece]
            else:
                held.append(piece)
            if last is not None and last.qid != piece.qid and len(parts[last.qid]) == 1:
                _check_distinct(last.qid, parts[last.qid], source)  # usually: complete now
            last = piece
        for qid, held in parts.items():
            if len(held) > 1 or (last is not None and qid == last.qid):
                _check_distinct(qid, held, source)
        run = Run(ordering=TREC_ORDERING)
        packed: dict[str, array[float]] = {}
        for qid, held in parts.items():
            if len(held) == 1:
                docs, scores = held[0].docs, held[0].scores
            else:
                docs = [d for p in held for d in p.docs]
                scores = array("d", [v for p in held for v in p.scores])
            docs, scores = _trec_order(docs, scores)
            run[qid] = docs
            packed[qid] = scores if isinstance(scores, array) else array("d", scores)
        run._pack(packed)
    return run


def read_trec_run(path: PathLike) -> Run:
    """Read a TREC run file into a :class:`Run`, in trec_eval's order.

    Lines are parsed by the compiled parser, 64 KiB at a time (a 10-million-line run, 349
    MiB, in about a second and a half of CPU, in about 2.5 times the file's size: each doc id
    string, one list per query and a float array of its scores); a query's lines need not be
    together. Raises
    :class:`~ragmeter.errors.DataFormatError` (file and line) for a line with fewer than 5
    columns, a score that is not a finite number, a doc listed twice for one query, or a
    line that cannot be read. For a run larger than memory, see :func:`iter_trec_run`.
    """
    if _compiled.COMPILED:
        run = _compiled_run(path)
        if run is not None:
            return run
    return _python_run(path)


def _python_run(path: PathLike) -> Run:
    """The reference reader (pure Python; its errors are every reader's)."""
    return _assemble(_file_pieces(path), str(path))


def _compiled_run(path: PathLike) -> Run | None:
    """The run read by the compiled parser, or ``None`` when the file is irregular (then
    :func:`_python_run` reads it and says why)."""
    run = Run(ordering=TREC_ORDERING)
    packed: dict[str, array[float]] = {}
    read: dict[str, tuple[str, ...]] = {}
    spread: dict[str, list[tuple[list[str], array[float]]]] = {}
    with paused_gc():
        try:
            for qid, docs, as_read, scores, _ in _compiled.run_pieces(path, tuples=True):
                if qid in packed:  # the query's lines are not together: merged below
                    spread.setdefault(qid, [(run[qid], packed[qid])]).append((docs, scores))
                else:
                    run[qid] = docs
                    read[qid] = as_read  # type: ignore[assignment]  # a tuple: tuples=True
                    packed[qid] = scores
        except _compiled.Irregular:
            return None
        for qid, parts in spread.items():
            docs = [d for part, _ in parts for d in part]
            if len(set(docs)) != len(docs):
                return None  # a doc listed twice: the Python reader names both lines
            ordered, values = _trec_order(docs, array("d", [v for _, s in parts for v in s]))
            run[qid] = ordered
            read[qid] = tuple(ordered)
            packed[qid] = values if isinstance(values, array) else array("d", values)
        run._pack(packed, read)
    return run


def parse_trec_run(lines: Iterable[str], *, source: str = "<run>") -> Run:
    """Parse TREC run lines (any iterable of strings) like :func:`read_trec_run`."""
    return _assemble(_slow_pieces(enumerate(lines, 1), source), source)
