"""File formats: TREC runs and qrels, BEIR datasets, score files (JSONL samples live in
``jsonl``, Parquet and Arrow in ``arrow``).

Every reader drops a UTF-8 byte-order mark, reads gzip-compressed files (detected by
content), and names the file and line of anything it cannot read exactly.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

from ragmeter.errors import InvalidInputError
from ragmeter.io._lines import Records, text_lines
from ragmeter.io.beir import (
    DEFAULT_QRELS_PATHS,
    BeirDataset,
    read_beir,
    read_beir_qrels,
    write_beir,
)
from ragmeter.io.scores import read_scores, write_scores
from ragmeter.io.trec import (
    RankedQuery,
    Run,
    UngroupedRunError,
    iter_trec_run,
    read_trec_qrels,
    read_trec_run,
    write_trec_qrels,
    write_trec_run,
)

__all__ = [
    "BeirDataset",
    "RankedQuery",
    "Records",
    "Run",
    "UngroupedRunError",
    "iter_trec_run",
    "read_beir",
    "read_beir_qrels",
    "read_qrels",
    "read_scores",
    "read_trec_qrels",
    "read_trec_run",
    "write_beir",
    "write_scores",
    "write_trec_qrels",
    "write_trec_run",
]


def _is_beir_tsv(path: Path) -> bool:
    """A qrels file whose first data line has 3 tab-separated columns is BEIR's TSV."""
    for _, line in text_lines(path):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return len(line.rstrip("\r\n").split("\t")) == 3
    return False


def read_qrels(path: str | os.PathLike[str]) -> Records[dict[str, float]]:
    """Read qrels in either format, detected: TREC (``qid iter doc grade``) or BEIR's TSV.

    A file is BEIR's TSV when its first data line has 3 tab-separated columns; a directory
    is a BEIR dataset (its ``qrels/test.tsv``, or the first of ``qrels/dev.tsv``,
    ``qrels/train.tsv``, ``qrels.tsv`` that exists). Raises ``FileNotFoundError`` for a
    path that does not exist and :class:`~ragmeter.errors.DataFormatError` (file and line)
    for what cannot be read.
    """
    where = Path(path)
    if where.is_dir():
        for rel in DEFAULT_QRELS_PATHS:
            if (where / rel).is_file():
                return read_beir_qrels(where / rel)
        raise InvalidInputError(
            f"{where} is a directory without a BEIR qrels file "
            f"({', '.join(DEFAULT_QRELS_PATHS)}); pass the qrels file itself"
        )
    if not where.exists():
        raise FileNotFoundError(2, "qrels file not found", str(where))
    if _is_beir_tsv(where):
        return read_beir_qrels(where)
    return cast("Records[dict[str, float]]", read_trec_qrels(where))
