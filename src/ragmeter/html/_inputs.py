"""Read the texts a page shows: query texts and document texts, from the usual files.

Used by the command line (``ragmeter report``, ``ragmeter compare --html``), which has
only paths. Accepted: a BEIR directory (its ``queries.jsonl`` or ``corpus.jsonl``), a
BEIR-style JSONL file (``_id`` or ``id``, and ``text``; a corpus ``title`` is joined to the
text by a newline as BEIR does; a query may use ``query`` or ``question`` instead of
``text``), or a two-column TSV ``id<TAB>text`` (TREC topics, MS MARCO queries). Gzip is
read by content; a UTF-8 byte-order mark is dropped.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Literal

from ragmeter.errors import DataFormatError

__all__ = ["beir_texts", "load_texts"]

Kind = Literal["queries", "corpus"]
_TEXT_KEYS = {"queries": ("text", "query", "question"), "corpus": ("text", "contents", "body")}
_HEADER_IDS = frozenset(
    {"id", "_id", "qid", "query-id", "query_id", "doc_id", "docid", "corpus-id"}
)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with ExitStack() as stack:
        raw = stack.enter_context(open(path, "rb"))
        packed = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream: Iterable[bytes] = stack.enter_context(gzip.GzipFile(fileobj=raw)) if packed else raw
        lineno = 0
        try:
            for lineno, line in enumerate(stream, 1):
                try:
                    text = line.decode("utf-8-sig" if lineno == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise DataFormatError(
                        f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                        path=str(path),
                        line=lineno,
                    ) from None
                if text.strip():
                    yield lineno, text.rstrip("\r\n")
        except (OSError, EOFError) as exc:  # a corrupt or truncated .gz
            raise DataFormatError(
                f"cannot be read as gzip: {exc}", path=str(path), line=lineno + 1
            ) from None


def _from_json(path: Path, kind: Kind, lineno: int, line: str) -> tuple[str, str]:
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise DataFormatError(f"not valid JSON: {why}", path=str(path), line=lineno) from None
    if not isinstance(record, dict) or record.get("_id", record.get("id")) is None:
        raise DataFormatError(
            "a record must be a JSON object with an '_id' (or 'id') field",
            path=str(path),
            line=lineno,
        )
    text = next((str(record[k]) for k in _TEXT_KEYS[kind] if record.get(k) is not None), "")
    title = record.get("title") if kind == "corpus" else None
    if title:
        text = f"{title}\n{text}" if text else str(title)
    return str(record.get("_id", record.get("id"))), text


def load_texts(path: str | os.PathLike[str], kind: Kind) -> dict[str, str]:
    """``{id: text}`` from ``path`` (see the module docstring for the formats).

    Raises ``FileNotFoundError`` naming a missing file, and
    :class:`~ragmeter.errors.DataFormatError` (file and line) for a line that cannot be read.
    A repeated id keeps its first text.
    """
    target = Path(path)
    if target.is_dir():
        target = target / f"{kind}.jsonl"
    if not target.exists():
        raise FileNotFoundError(f"{kind} file not found: {target}")
    out: dict[str, str] = {}
    json_lines: bool | None = None
    first = True
    for lineno, line in _lines(target):
        if json_lines is None:
            json_lines = line.lstrip().startswith("{")
        if json_lines:
            key, text = _from_json(target, kind, lineno, line)
        else:
            parts = line.split("\t", 1)
            if len(parts) < 2:
                raise DataFormatError(
                    "expected 'id<TAB>text' (or JSONL records with '_id' and 'text')",
                    path=str(target),
                    line=lineno,
                )
            if first and parts[0].strip().lower() in _HEADER_IDS:
                first = False
                continue  # a header row
            key, text = parts[0].strip(), parts[1]
        first = False
        out.setdefault(key, text)
    return out


def beir_texts(directory: str | os.PathLike[str], kind: Kind) -> dict[str, str] | None:
    """The ``kind`` texts of ``directory`` if it is a BEIR directory holding them, else
    ``None`` (so a qrels path that is a BEIR directory brings its queries and corpus)."""
    root = Path(directory)
    if root.is_dir() and (root / f"{kind}.jsonl").exists():
        return load_texts(root, kind)
    return None
