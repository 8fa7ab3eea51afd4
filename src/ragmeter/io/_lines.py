"""Reading input files line by line, the same way in every reader (TREC, BEIR, JSONL).

* A file that starts with gzip's magic bytes is decompressed, whatever its name; one that
  ends early or holds corrupt data is a :class:`~ragmeter.errors.DataFormatError` naming the
  file and the last line read, never a bare ``EOFError`` or ``zlib.error``.
* A UTF-8 byte-order mark at the start of the file is dropped (Windows editors write one;
  kept, it would become part of the first query id).
* :func:`text_lines` decodes each line as UTF-8 and names the file and line of one that is
  not; :func:`raw_lines` leaves decoding to the caller (the JSONL reader can skip such a
  line).
"""

from __future__ import annotations

import gzip
import os
import zlib
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, TypeVar

from ragmeter._types import MAX_GRADE
from ragmeter.errors import DataFormatError

__all__ = ["BOM", "QrelsBuilder", "Records", "open_binary", "raw_lines", "text_lines"]

BOM = b"\xef\xbb\xbf"
GZIP_MAGIC = b"\x1f\x8b"

PathLike = str | os.PathLike[str]
V = TypeVar("V")


class Records(dict[str, V]):
    """A dict read from a file, with what the reader noticed but did not refuse.

    ``warnings`` holds plain-English notes with counts (e.g. repeated identical
    judgements); :func:`ragmeter.evaluate_run` copies the notes of the qrels and run it is
    given into its report. ``source`` is the file it came from.
    """

    def __init__(
        self, data: Any = (), *, source: str = "", warnings: list[str] | None = None
    ) -> None:
        super().__init__(data)
        self.source = source
        self.warnings: list[str] = list(warnings or [])


def open_binary(path: PathLike) -> IO[bytes]:
    """Open ``path`` for reading bytes, through gzip when it starts with gzip's magic."""
    fh = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    try:
        magic = fh.peek(2)[:2] if hasattr(fh, "peek") else b""
    except OSError:
        magic = b""
    if magic == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh


@contextmanager
def _opened(path: PathLike) -> Iterator[IO[bytes]]:
    fh = open_binary(path)
    try:
        yield fh
    finally:
        fh.close()
        inner = getattr(fh, "fileobj", None)  # closing a GzipFile leaves its file open
        if inner is not None:
            inner.close()


def raw_lines(path: PathLike) -> Iterator[tuple[int, bytes]]:
    """``(line_number, bytes)`` for each line of ``path`` (1-based; BOM dropped; gzip read).

    Raises :class:`~ragmeter.errors.DataFormatError` when a compressed file is truncated or
    corrupt, naming the file and the line where reading stopped.
    """
    where = str(path)
    with _opened(path) as fh:
        lineno = 0
        lines = iter(fh)
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                return
            except EOFError:
                raise DataFormatError(
                    f"the compressed file ends early, after line {lineno}: it is truncated "
                    "(an interrupted download or copy?)",
                    path=where,
                    line=lineno + 1,
                ) from None
            except (zlib.error, gzip.BadGzipFile) as exc:
                raise DataFormatError(
                    f"the compressed file is corrupt after line {lineno} ({exc})",
                    path=where,
                    line=lineno + 1,
                ) from None
            lineno += 1
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            yield lineno, raw


def text_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """``(line_number, text)`` for each line of a UTF-8 file (see :func:`raw_lines`).

    A line that is not valid UTF-8 raises :class:`~ragmeter.errors.DataFormatError` naming
    the file, the line and the byte.
    """
    for lineno, raw in raw_lines(path):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataFormatError(
                f"not valid UTF-8 ({exc.reason} at byte {exc.start} of the line); is this the "
                "right file, and is it saved as UTF-8?",
                path=str(path),
                line=lineno,
            ) from None
        yield lineno, text


class QrelsBuilder:
    """Collects a qrels file's judgements the same way in every reader.

    :meth:`add` refuses a grade beyond ``|2**53|`` (or NaN, infinite) and a doc judged
    twice for one query with two grades, naming the file and both lines; an identical
    repeat is kept once and counted in the :meth:`records`' ``warnings``.
    """

    def __init__(self, path: PathLike, word: str) -> None:
        self.path = str(path)
        self.word = word  # what the file calls a grade: "grade" (TREC) or "score" (BEIR)
        self.qrels: dict[str, dict[str, float]] = {}
        # the line of each judgement, in the order of the query's dict (8 bytes each; the
        # position of a doc is looked up only to name the line of a conflict)
        self._lines: dict[str, array[int]] = {}
        self.repeats = 0

    def add(self, qid: str, doc: str, value: float, lineno: int, text: str) -> None:
        """Judge ``doc`` for ``qid`` with ``value`` (read from ``text`` on line ``lineno``)."""
        if not -MAX_GRADE <= value <= MAX_GRADE:
            raise DataFormatError(
                f"{self.word} must be a finite number with |{self.word}| <= 2**53, got "
                f"{text!r} (query {qid!r}, doc {doc!r})",
                path=self.path,
                line=lineno,
            )
        judgements = self.qrels.get(qid)
        if judgements is None:
            judgements = self.qrels[qid] = {}
            self._lines[qid] = array("q")
        if doc in judgements:
            if judgements[doc] != value:
                first = self._lines[qid][list(judgements).index(doc)]
                raise DataFormatError(
                    f"doc {doc!r} is judged twice for query {qid!r}, with {self.word}s "
                    f"{judgements[doc]} (line {first}) and {value}; keep one",
                    path=self.path,
                    line=lineno,
                )
            self.repeats += 1
            return
        judgements[doc] = value
        self._lines[qid].append(lineno)

    def records(self) -> Records[dict[str, float]]:
        """The qrels read, with a note counting identical repeats."""
        notes = (
            [
                f"{self.repeats} qrels line(s) repeat an earlier judgement with the same "
                f"{self.word}; each was counted once"
            ]
            if self.repeats
            else []
        )
        self._lines = {}
        return Records(self.qrels, source=self.path, warnings=notes)
