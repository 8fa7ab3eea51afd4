"""The TREC readers' compiled path: :mod:`ragmeter.io._ctrec` parses a file a block of bytes
at a time, and any file it finds irregular is read again by the Python reader.

The pure-Python reader is the reference: the compiled parser gives the same queries, doc ids,
scores, grades and order (bit for bit: the same ``str.split()``, ``float()`` and ``int()``
rules), and it never explains a problem: on a line the Python reader would refuse (or a
``.gz`` that cannot be read) it stops, :class:`Irregular` is raised here, and the caller reads
the file with the Python reader, which raises the error with its file, line and wording. A
good file is read once. The compiled path is used when the extension was built (a C compiler
at install time) unless the environment variable ``RAGMETER_PURE_PYTHON`` is set to anything
but ``""``/``"0"`` when this module is imported; :data:`BACKEND` says which.
"""

from __future__ import annotations

import os
import zlib
from array import array
from collections.abc import Iterator
from typing import Literal

from ragmeter.io._lines import PathLike, open_binary

try:
    from ragmeter.io import _ctrec
except ImportError:  # pragma: no cover - built wherever a C compiler exists
    _ctrec = None  # type: ignore[assignment]

BLOCK = 1 << 16
"""Bytes read (and parsed) at a time: the strs made from a block stay in the CPU's cache
until the next one (a streamed query freed early is reused hot), 1 MiB blocks parse ~1.5x
slower."""

BUILT = _ctrec is not None
"""Whether the compiled parser was built."""

COMPILED = BUILT and os.environ.get("RAGMETER_PURE_PYTHON", "").strip() in ("", "0")
"""Whether the readers use the compiled parser (tests switch it off to read the reference)."""

BACKEND: Literal["c", "python"] = "c" if COMPILED else "python"
"""Which parser the TREC readers use: ``"c"`` (compiled) or ``"python"``."""

Piece = tuple[str, list[str], "tuple[str, ...] | None", "array[float]", int]
"""One query's consecutive lines: its id, its distinct doc ids in trec_eval's order (a list,
and with ``tuples`` the same strs in a tuple), their scores, and the line of the first."""


class Irregular(Exception):
    """The compiled parser will not read this file as given: the Python reader must."""


def _blocks(path: PathLike) -> Iterator[bytes]:
    """The file's bytes (gzip read when it starts with gzip's magic), a block at a time."""
    fh = open_binary(path)
    try:
        while True:
            try:
                block = fh.read(BLOCK)
            except (EOFError, OSError, ValueError, zlib.error):
                raise Irregular from None  # a truncated or corrupt .gz: the Python reader says
            if not block:
                return
            yield block
    finally:
        fh.close()
        inner = getattr(fh, "fileobj", None)  # closing a GzipFile leaves its file open
        if inner is not None:
            inner.close()


def run_pieces(path: PathLike, *, tuples: bool = False) -> Iterator[Piece]:
    """The run file's queries as :data:`Piece` s, one per maximal run of consecutive lines of
    a query, in file order; raises :class:`Irregular` where the Python reader must take over
    (a query's pieces already yielded stay valid: only the file is irregular)."""
    parser = _ctrec.RunParser(tuples=tuples)
    for block in _blocks(path):
        pieces = parser.feed(block)
        if pieces is None:
            raise Irregular
        yield from pieces
    pieces = parser.finish()
    if pieces is None:
        raise Irregular
    yield from pieces


def qrels_grades(path: PathLike) -> tuple[dict[str, dict[str, int]], int]:
    """The qrels file's ``{query_id: {doc_id: grade}}`` in first-seen order and the number of
    lines that repeat a judgement with the same grade; :class:`Irregular` when the Python
    reader must read it."""
    parser = _ctrec.QrelsParser()
    for block in _blocks(path):
        if not parser.feed(block):
            raise Irregular
    read = parser.finish()
    if read is None:
        raise Irregular
    return read
