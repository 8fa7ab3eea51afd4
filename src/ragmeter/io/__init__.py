"""File formats: TREC runs and qrels, BEIR datasets (JSONL samples live in ``jsonl``)."""

from ragmeter.io.beir import BeirDataset, read_beir, read_beir_qrels, write_beir
from ragmeter.io.trec import (
    Run,
    read_trec_qrels,
    read_trec_run,
    write_trec_qrels,
    write_trec_run,
)

__all__ = [
    "BeirDataset",
    "Run",
    "read_beir",
    "read_beir_qrels",
    "read_trec_qrels",
    "read_trec_run",
    "write_beir",
    "write_trec_qrels",
    "write_trec_run",
]
