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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, TypeVar

from ragmeter.errors import DataFormatError

__all__ = ["BOM", "Records", "open_binary", "raw_lines", "text_lines"]

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
