"""BEIR datasets on disk: ``corpus.jsonl``, ``queries.jsonl`` and a qrels TSV.

:func:`read_beir` returns the evaluation triple ``(corpus, queries, qrels)`` as plain dicts
(``corpus`` text is the record's ``title`` and ``text`` joined by a newline, the BEIR
convention; an empty title leaves the text alone). :func:`write_beir` is its exact inverse:
``read_beir(write_beir(d, *triple))`` gives back the same triple.
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ragmeter.errors import DataFormatError, InvalidInputError

__all__ = ["DEFAULT_QRELS_PATHS", "BeirDataset", "read_beir", "read_beir_qrels", "write_beir"]

DEFAULT_QRELS_PATHS: tuple[str, ...] = (
    "qrels/test.tsv",
    "qrels/dev.tsv",
    "qrels/train.tsv",
    "qrels.tsv",
)

PathLike = str | os.PathLike[str]


class BeirDataset(NamedTuple):
    """The evaluation triple; unpacks as ``corpus, queries, qrels``."""

    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, float]]


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.exists():
        raise FileNotFoundError(f"BEIR file not found: {path}")
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(
                    f"not valid JSON: {exc.msg}", path=str(path), line=lineno
                ) from None
            if not isinstance(record, dict):
                raise DataFormatError("a record must be a JSON object", path=str(path), line=lineno)
            if record.get("_id", record.get("id")) is None:
                raise DataFormatError("record has no '_id' field", path=str(path), line=lineno)
            yield lineno, record


def _doc_text(record: Mapping[str, Any]) -> str:
    title = record.get("title") or ""
    text = record.get("text") or ""
    return f"{title}\n{text}" if title else text


def read_beir_qrels(path: PathLike) -> dict[str, dict[str, float]]:
    """Read a BEIR qrels TSV (``query-id corpus-id score``; a header row is skipped).

    Grades are read as numbers (ints stay ints). Raises
    :class:`~ragmeter.errors.DataFormatError` naming the line for a malformed row.
    """
    qrels: dict[str, dict[str, float]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, row in enumerate(fh, 1):
            if not row.strip():
                continue
            fields = row.rstrip("\n\r").split("\t")
            if len(fields) < 3:
                raise DataFormatError(
                    "a qrels row needs 3 tab-separated columns 'query-id corpus-id score', "
                    f"got {len(fields)}",
                    path=str(path),
                    line=lineno,
                )
            qid, doc, score = fields[0], fields[1], fields[2]
            try:
                value: float = int(score)
            except ValueError:
                try:
                    value = float(score)
                except ValueError:
                    if lineno == 1:
                        continue  # header row
                    raise DataFormatError(
                        f"score must be a number, got {score!r} (query {qid!r})",
                        path=str(path),
                        line=lineno,
                    ) from None
            qrels.setdefault(qid, {})[doc] = value
    return qrels


def read_beir(directory: PathLike, *, qrels: str | None = None) -> BeirDataset:
    """Load a BEIR dataset directory into ``(corpus, queries, qrels)``.

    ``qrels`` is a path relative to ``directory``; ``None`` tries
    ``qrels/test.tsv``, ``qrels/dev.tsv``, ``qrels/train.tsv``, ``qrels.tsv`` in order.
    Raises ``FileNotFoundError`` naming what is missing.
    """
    root = Path(directory)
    corpus = {
        str(r.get("_id", r.get("id"))): _doc_text(r) for _, r in _read_jsonl(root / "corpus.jsonl")
    }
    queries = {
        str(r.get("_id", r.get("id"))): str(r.get("text") or "")
        for _, r in _read_jsonl(root / "queries.jsonl")
    }
    if qrels is not None:
        qpath = root / qrels
        if not qpath.exists():
            raise FileNotFoundError(f"qrels file not found: {qpath}")
    else:
        for candidate in DEFAULT_QRELS_PATHS:
            if (root / candidate).exists():
                qpath = root / candidate
                break
        else:
            raise FileNotFoundError(
                f"no qrels file under {root} (looked for {', '.join(DEFAULT_QRELS_PATHS)}); "
                "pass qrels='<relative/path.tsv>'"
            )
    return BeirDataset(corpus, queries, read_beir_qrels(qpath))


def _tsv_id(kind: str, value: object, where: str) -> str:
    text = str(value)
    if not text or any(c in text for c in "\t\n\r"):
        raise InvalidInputError(
            f"cannot write {kind} {value!r}{where} to qrels.tsv: an id must be non-empty and "
            "contain no tab or line break, or it would not read back as itself"
        )
    return text


def write_beir(
    directory: PathLike,
    corpus: Mapping[str, str],
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, float]],
) -> Path:
    """Write the triple in BEIR layout (``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``).

    Creates ``directory`` (and parents); returns it. Titles are written empty, so
    :func:`read_beir` returns exactly the texts given, and grades are written so that they
    read back as the same numbers: ``read_beir(write_beir(d, c, q, r))`` equals
    ``(c, q, r)``, except that a query whose judgement dict is empty has no qrels row and so
    does not come back. Raises :class:`~ragmeter.errors.InvalidInputError` (before writing
    anything) for an id with a tab or line break, or a grade that is not a number.
    """
    rows: list[str] = ["query-id\tcorpus-id\tscore\n"]
    for qid, judgements in qrels.items():
        q = _tsv_id("query id", qid, "")
        for doc, grade in judgements.items():
            d = _tsv_id("doc id", doc, f" (query {qid!r})")
            if isinstance(grade, bool) or not isinstance(grade, numbers.Real) or grade != grade:
                raise InvalidInputError(
                    f"cannot write grade {grade!r} (query {qid!r}, doc {doc!r}): "
                    "a grade must be a number"
                )
            text = str(int(grade)) if isinstance(grade, numbers.Integral) else repr(float(grade))
            rows.append(f"{q}\t{d}\t{text}\n")
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for doc_id, text in corpus.items():
            fh.write(
                json.dumps({"_id": doc_id, "title": "", "text": text}, ensure_ascii=False) + "\n"
            )
    with (root / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for qid, text in queries.items():
            fh.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    with (root / "qrels.tsv").open("w", encoding="utf-8") as fh:
        fh.writelines(rows)
    return root
