"""Run lines into per-query pieces (a block of lines at a time at C speed, or line by line
with exact errors), and pieces into a ranking: trec_eval's order, each doc once."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress, islice
from operator import gt, methodcaller, ne
from typing import NamedTuple, cast

from ragmeter.errors import DataFormatError
from ragmeter.io._lines import BOM, PathLike, open_binary, text_lines


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
            except (EOFError, OSError, ValueError, zlib.error) as exc:
                # a truncated or corrupt .gz: let the line reader say where, exactly
                yield from _slow_pieces(_lines_from(text_lines(path), lineno), where)
                raise DataFormatError(f"cannot read the file ({exc})", path=where) from None
            if first:
                first = False
                for _ in range(2):  # one dropped as bytes, one after decoding, as line by line
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
