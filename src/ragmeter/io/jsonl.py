"""Samples as JSON Lines: one :class:`~ragmeter.schema.RagSample` per line, streamed.

:func:`read_jsonl` returns a lazy reader: lines are parsed and validated one at a time as
you iterate, so memory stays constant on a file of a million samples. Each line is a JSON
object with ragmeter's field names or rag-eval's (``question``, ``answer``, ``context``,
``golden_documents``, ``retrieved``); unknown keys land in ``metadata``. Blank lines are
ignored. A gzip-compressed file is read as such (detected by content) and a ``.gz`` path is
written compressed; a truncated or corrupt one is a ``DataFormatError`` naming the line
where reading stopped.

A malformed line -- not UTF-8, not JSON, nested too deeply, not an object, or a field that
does not validate -- raises :class:`~ragmeter.errors.DataFormatError` naming the file, the
line number and the problem. With ``skip_errors=True`` the line is skipped instead, logged,
and recorded in the reader's ``skipped`` list as ``(line_number, message)``;
:func:`ragmeter.evaluation.rag.evaluate_rag` counts them in the report's ``skipped_lines``.

:func:`write_jsonl` is the exact inverse: ``read_jsonl(p)`` yields samples equal to those
written (fields left at ``None`` and an empty ``metadata`` are omitted from the file).

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "samples.jsonl"
>>> write_jsonl([{"id": "s1", "question": "q?", "answer": "a", "context": ["a."]}], path)
1
>>> [s.response for s in read_jsonl(path)]
['a']
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from ragmeter.errors import DataFormatError, InvalidInputError
from ragmeter.io._lines import raw_lines
from ragmeter.schema import RagSample, SampleLike, coerce_sample

__all__ = ["JsonlReader", "read_jsonl", "write_jsonl"]

logger = logging.getLogger("ragmeter.io")
logger.addHandler(logging.NullHandler())

PathLike = str | os.PathLike[str]


def _open_binary(path: Path, mode: str) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.open(path, mode + "b")  # type: ignore[return-value]
    return open(path, mode + "b")


class JsonlReader(Iterable[RagSample]):
    """A lazy, re-iterable stream of the samples in a JSONL file (see :func:`read_jsonl`).

    ``skipped`` holds ``(line_number, message)`` for each malformed line skipped during the
    latest iteration (only with ``skip_errors=True``); ``path`` is the file.
    """

    def __init__(self, path: PathLike, *, skip_errors: bool = False) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"JSONL file not found: {self.path}")
        self.skip_errors = bool(skip_errors)
        self.skipped: list[tuple[int, str]] = []

    def __iter__(self) -> Iterator[RagSample]:
        self.skipped = []
        where = str(self.path)
        seen = 0
        for lineno, raw in raw_lines(self.path):
            if not raw.strip():
                continue
            seen += 1
            try:
                sample = self._parse(raw, first=seen == 1)
            except _LineError as exc:
                message = str(exc)
                if not self.skip_errors:
                    raise DataFormatError(message, path=where, line=lineno) from None
                self.skipped.append((lineno, message))
                logger.warning("%s:%d: skipped: %s", where, lineno, message)
                continue
            yield sample

    @staticmethod
    def _parse(raw: bytes, *, first: bool = False) -> RagSample:
        """One line as a sample; any problem with it is a :class:`_LineError`."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _LineError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            hint = _FORMAT_HINT if first or text.lstrip()[:1] in ("[", "]", ",") else ""
            raise _LineError(f"not valid JSON: {exc.msg} (column {exc.colno}){hint}") from None
        except RecursionError:
            raise _LineError("not readable JSON: nested too deeply") from None
        if not isinstance(record, dict):
            raise _LineError(
                f"expected a JSON object, got {type(record).__name__}"
                + (_FORMAT_HINT if isinstance(record, list) else "")
            )
        try:
            return coerce_sample(record)
        except InvalidInputError as exc:
            raise _LineError(str(exc)) from None
        except RecursionError:
            raise _LineError("a field is nested too deeply to validate") from None
        except Exception as exc:  # whatever else is wrong with the line, it is the line's
            raise _LineError(f"cannot read this sample: {type(exc).__name__}: {exc}") from None

    def __repr__(self) -> str:
        return f"JsonlReader({str(self.path)!r}, skip_errors={self.skip_errors})"


_FORMAT_HINT = (
    " (JSONL = one JSON object per line: a JSON array file or a CSV file is not JSONL; "
    "convert a JSON array with `jq -c '.[]' file.json > file.jsonl`)"
)


class _LineError(Exception):
    """One line's problem (internal; surfaces as DataFormatError or a skipped entry)."""


def read_jsonl(path: PathLike, *, skip_errors: bool = False) -> JsonlReader:
    """Stream the samples of a JSONL file (lazy; constant memory; see the module docstring).

    Raises :class:`FileNotFoundError` when ``path`` is not a file, and, while iterating,
    :class:`~ragmeter.errors.DataFormatError` (``path:line: problem``) for a malformed line
    unless ``skip_errors`` is true.
    """
    return JsonlReader(path, skip_errors=skip_errors)


def _record(sample: RagSample) -> dict[str, Any]:
    data = sample.model_dump(exclude_none=True)
    if not data.get("metadata"):
        data.pop("metadata", None)
    return data


def write_jsonl(samples: Iterable[SampleLike], path: PathLike) -> int:
    """Write ``samples`` (RagSample objects or mappings) to ``path`` as JSONL; return the count.

    Streams: one line per sample, UTF-8, standard JSON. Raises
    :class:`~ragmeter.errors.InvalidInputError` naming the sample for one that does not
    validate, or that holds a value JSON cannot represent exactly (NaN, infinity, or an
    object in ``metadata`` that is not JSON); nothing after it is written.
    """
    target = Path(path)
    count = 0
    with _open_binary(target, "w") as fh:
        for index, item in enumerate(samples):
            sample = coerce_sample(item, index=index)
            try:
                line = json.dumps(_record(sample), ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise InvalidInputError(
                    f"sample {index} (id {sample.id!r}) cannot be written as JSON: {exc}. "
                    "Convert NaN/infinite numbers and non-JSON metadata values first"
                ) from None
            try:
                raw = line.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: a JSON \uXXXX escape keeps it
                raw = json.dumps(_record(sample), allow_nan=False).encode("ascii")
            fh.write(raw)
            fh.write(b"\n")
            count += 1
    return count
