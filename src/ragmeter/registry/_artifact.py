"""A run's scores file: the report with every per-query (per-sample) row, as gzipped JSON
lines beside the database, written whole or not at all, and checked by its sha256 on read.

Line 1 is ``{"format": "ragmeter-scores", "version": 1, "report": ...}`` (the report's
``to_dict()`` without its rows); then one line per item, ``{"id": ..., "scores": {...}}``,
with ``"judged"`` (a retrieval report's ``judged@k``) or ``"details"`` (a RAG report's) when
it has them. Floats are written as ``repr`` writes them, so they read back bit for bit.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ragmeter.registry._errors import RegistryError
from ragmeter.report import RagEvalReport, RetrievalEvalReport

__all__ = ["read_scores", "write_scores"]

FORMAT = "ragmeter-scores"
_ROW_KEYS = ("per_query", "per_sample", "judged_per_query", "details")


class _Hashing:
    """A binary sink that hashes what goes through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


def _lines(report: RetrievalEvalReport | RagEvalReport) -> Iterator[str]:
    data = report.to_dict()
    rows = data.pop("per_query", None) or data.pop("per_sample", None) or {}
    data.pop("per_sample", None)
    judged = data.pop("judged_per_query", None) or {}
    details = data.pop("details", None) or {}
    yield json.dumps({"format": FORMAT, "version": 1, "report": data}, allow_nan=False)
    for rid, row in rows.items():
        line: dict[str, Any] = {"id": rid, "scores": row}
        if rid in judged:
            line["judged"] = judged[rid]
        if rid in details:
            line["details"] = details[rid]
        yield json.dumps(line, allow_nan=False)


def write_scores(report: RetrievalEvalReport | RagEvalReport, target: Path) -> str:
    """Write ``report``'s scores file at ``target`` (through a temporary file in the same
    folder, synced, then renamed: a reader never sees half a file); its sha256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "wb") as raw:
            sink = _Hashing(raw)
            with gzip.GzipFile(fileobj=sink, mode="wb", mtime=0) as gz:
                for line in _lines(report):
                    gz.write(line.encode("utf-8") + b"\n")
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return sink.sha.hexdigest()


def read_scores(path: Path, sha256: str) -> dict[str, Any]:
    """The report dict of the scores file at ``path`` (rows put back), after checking its
    sha256; :class:`RegistryError` naming the file when it is missing, altered or broken."""
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise RegistryError(f"the scores file {path} cannot be read: {exc}") from None
    found = hashlib.sha256(blob).hexdigest()
    if found != sha256:
        raise RegistryError(
            f"the scores file {path} does not match the registry's sha256 ({found} vs "
            f"{sha256}): it was altered or damaged after the run was saved"
        )
    try:
        lines = gzip.decompress(blob).decode("utf-8").splitlines()
        head = json.loads(lines[0])
        if head.get("format") != FORMAT:
            raise ValueError(f"format {head.get('format')!r}")
        data: dict[str, Any] = head["report"]
        rows: dict[str, Any] = {}
        judged: dict[str, Any] = {}
        details: dict[str, Any] = {}
        for text in lines[1:]:
            line = json.loads(text)
            rows[line["id"]] = line["scores"]
            if "judged" in line:
                judged[line["id"]] = line["judged"]
            if "details" in line:
                details[line["id"]] = line["details"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise RegistryError(f"the scores file {path} is not readable: {exc}") from None
    if data.get("kind") == "rag":
        data["per_sample"] = rows
        data["details"] = details
    else:
        data["per_query"] = rows
        data["judged_per_query"] = judged
    return data
