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
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, islice
from operator import eq, gt, methodcaller, ne
from pathlib import Path
from typing import IO, Any, NamedTuple, cast

from ragmeter._gc import paused_gc
from ragmeter.errors import DataFormatError, InvalidInputError
from ragmeter.io._lines import BOM, QrelsBuilder, Records, open_binary, text_lines

__all__ = [
    "TREC_ORDERING",
    "RankedQuery",
    "Run",
    "UngroupedRunError",
    "iter_trec_run",
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

    def _pack(self, packed: dict[str, array[float]]) -> None:
        """Hold the file's scores, aligned with each query's ranked list as read (a tuple
        of the same doc id strings, so an edit of the list cannot misalign them)."""
        self._packed = packed
        self._read = {qid: tuple(self[qid]) for qid in packed}
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
    with paused_gc():
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


class UngroupedRunError(DataFormatError):
    """A streamed run file whose query's lines are not together (see :func:`iter_trec_run`)."""


class RankedQuery(NamedTuple):
    """One query of a run file: its id, doc ids in trec_eval's order, their scores, and the
    line its ranking starts on (:func:`iter_trec_run`)."""

    query_id: str
    doc_ids: list[str]
    scores: list[float]
    line: int


class _Piece(NamedTuple):
    """Consecutive lines of one query: ids and scores in file order, and their lines."""

    qid: str
    docs: list[str]
    scores: Sequence[float]
    lines: Sequence[int]


_CHUNK = 1 << 20


def _slow_pieces(lines: Iterable[tuple[int, str]], source: str) -> Iterator[_Piece]:
    """Run lines parsed one at a time (comments, blank lines, bad lines: exact errors)."""
    current: _Piece | None = None
    for lineno, fields in _fields(lines):
        if len(fields) < 5:
            raise DataFormatError(
                "a run line needs at least 5 columns 'query_id Q0 doc_id rank score [tag]', "
                f"got {len(fields)}",
                path=source,
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
                path=source,
                line=lineno,
            )
        if current is None or current.qid != qid:
            if current is not None:
                yield current
            current = _Piece(qid, [], [], [])
        current.docs.append(doc)
        cast("list[float]", current.scores).append(value)
        cast("list[int]", current.lines).append(lineno)
    if current is not None:
        yield current


def _chunk_pieces(text: str, first_line: int) -> list[_Piece] | None:
    """A block of whole lines parsed at C speed, or ``None`` when it needs the slow path
    (a comment, a blank line, lines of different widths, a score that is not a finite
    number).

    A NUL token is put at the end of every line before one ``split()`` of the block, so one
    ``count`` proves that every line has the first line's number of columns; the columns
    are then strided slices of the tokens.
    """
    end = text.find("\n")
    if end <= 0 or "\x00" in text:
        return None
    width = len(text[:end].split())
    lines = text.count("\n")
    if width < 5:
        return None
    tokens = text.replace("\n", " \x00\n").split()
    stride = width + 1
    if len(tokens) != lines * stride or tokens[width::stride].count("\x00") != lines:
        return None
    qids = tokens[0::stride]
    if "#" in text and any(map(_is_comment, qids)):
        return None
    try:
        scores = list(map(float, tokens[4::stride]))
    except ValueError:
        return None
    if not all(map(math.isfinite, scores)):
        return None
    # fresh, contiguous strings: the split left each doc id between four freed tokens of
    # its own size, and scoring 100k queries touched ids scattered that way ~40% slower
    docs = "\n".join(tokens[2::stride]).split("\n")
    del tokens
    starts = [0, *compress(range(1, lines), map(ne, islice(qids, 1, None), qids)), lines]
    return [
        _Piece(qids[a], docs[a:b], scores[a:b], range(first_line + a, first_line + b))
        for a, b in zip(starts, islice(starts, 1, None), strict=False)
    ]


_is_comment = methodcaller("startswith", "#")


def _file_pieces(path: PathLike) -> Iterator[_Piece]:
    """The run file's lines as pieces, one block of lines at a time (gzip read, BOM
    dropped); blocks that are not plain run lines go through :func:`_slow_pieces`."""
    where = str(path)
    fh = open_binary(path)
    try:
        lineno = 1
        rest = b""
        first = True
        while True:
            try:
                block = fh.read(_CHUNK)
            except (EOFError, OSError, ValueError) as exc:
                # a truncated or corrupt .gz: let the line reader say where, exactly
                yield from _slow_pieces(_lines_from(text_lines(path), lineno), where)
                raise DataFormatError(f"cannot read the file ({exc})", path=where) from None
            if first:
                first = False
                if block.startswith(BOM):
                    block = block[len(BOM) :]
            if not block:
                if rest:
                    yield from _decoded_pieces(rest + b"\n", lineno, where, path)
                return
            block = rest + block
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                rest = block
                continue
            rest = block[cut:]
            whole = block[:cut]
            yield from _decoded_pieces(whole, lineno, where, path)
            lineno += whole.count(b"\n")
    finally:
        fh.close()
        inner = getattr(fh, "fileobj", None)
        if inner is not None:
            inner.close()


def _lines_from(lines: Iterator[tuple[int, str]], start: int) -> Iterator[tuple[int, str]]:
    return ((n, line) for n, line in lines if n >= start)


def _decoded_pieces(raw: bytes, lineno: int, where: str, path: PathLike) -> Iterator[_Piece]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # name the line and byte exactly, as every reader does
        yield from _slow_pieces(_lines_from(text_lines(path), lineno), where)
        return  # pragma: no cover - the slow reader raised
    pieces = _chunk_pieces(text, lineno)
    if pieces is None:
        numbered = enumerate(text.split("\n")[:-1], lineno)
        yield from _slow_pieces(numbered, where)
    else:
        yield from pieces


def _trec_order(docs: list[str], scores: Sequence[float]) -> tuple[list[str], Sequence[float]]:
    """Score descending, ties by doc id descending (trec_eval); a list already in that
    order (scores strictly decreasing, as most runs are written) is kept as is."""
    if all(map(gt, scores, islice(scores, 1, None))):
        return docs, scores
    pairs = sorted(zip(scores, docs, strict=True), reverse=True)
    return [d for _, d in pairs], [v for v, _ in pairs]


def _check_distinct(qid: str, pieces: Sequence[_Piece], source: str) -> None:
    """Refuse a doc listed twice for one query, naming both lines (as trec_eval cannot)."""
    docs = pieces[0].docs if len(pieces) == 1 else [d for p in pieces for d in p.docs]
    if len(set(docs)) == len(docs):
        return
    lines = [n for p in pieces for n in p.lines]
    first: dict[str, int] = {}
    for doc, line in zip(docs, lines, strict=True):
        if doc in first:
            raise DataFormatError(
                f"doc {doc!r} is listed twice for query {qid!r} (first on line "
                f"{first[doc]}); a ranking lists each doc once",
                path=source,
                line=line,
            )
        first[doc] = line


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

    Lines are parsed a block at a time at C speed (a 10-million-line run in seconds, in
    about 2.5 times the file's size: each doc id string, one list per query and a float
    array of its scores); a query's lines need not be together. Raises
    :class:`~ragmeter.errors.DataFormatError` (file and line) for a line with fewer than 5
    columns, a score that is not a finite number, a doc listed twice for one query, or a
    line that cannot be read. For a run larger than memory, see :func:`iter_trec_run`.
    """
    return _assemble(_file_pieces(path), str(path))


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
            raise UngroupedRunError(
                f"query {piece.qid!r} comes back after other queries' lines: iter_trec_run "
                "needs each query's lines together, as in a file sorted by query id (sort -s "
                "-k1,1 run > sorted.run), or read the run whole with read_trec_run",
                path=source,
                line=piece.lines[0],
            )
        current = [piece]
    if current:
        yield _finish(current, source)


def _finish(pieces: list[_Piece], source: str) -> RankedQuery:
    _check_distinct(pieces[0].qid, pieces, source)
    if len(pieces) == 1:
        docs, scores = pieces[0].docs, pieces[0].scores
    else:
        docs = [d for p in pieces for d in p.docs]
        scores = [v for p in pieces for v in p.scores]
    docs, ordered = _trec_order(docs, scores)
    return RankedQuery(pieces[0].qid, docs, list(ordered), pieces[0].lines[0])


def parse_trec_run(lines: Iterable[str], *, source: str = "<run>") -> Run:
    """Parse TREC run lines (any iterable of strings) like :func:`read_trec_run`."""
    return _assemble(_slow_pieces(enumerate(lines, 1), source), source)


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
