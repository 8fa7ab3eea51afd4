"""Real, judged test collections shipped inside the package (like scikit-learn's toy sets).

Cranfield 1400 (1,400 aeronautics abstracts, 225 queries, graded qrels with gain
``5 - code``) and a depth-100 BM25 run over it whose trec_eval numbers are known
(``ndcg_cut_10`` 0.3458). Everything loads offline from compressed files in the package.

>>> corpus, queries, qrels = load_cranfield()
>>> len(corpus), len(queries), len(qrels)
(1400, 225, 225)
>>> run = load_cranfield_bm25_run()
>>> len(run["1"])
100
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from importlib import resources

from ragmeter.io.beir import BeirDataset, _doc_text
from ragmeter.io.trec import Run, parse_trec_run

__all__ = ["load_cranfield", "load_cranfield_bm25_run"]


def _read(name: str) -> str:
    data = resources.files("ragmeter.datasets").joinpath("data").joinpath(name).read_bytes()
    return gzip.decompress(data).decode("utf-8")


@lru_cache(maxsize=1)
def _cranfield() -> BeirDataset:
    corpus = {}
    for line in _read("cranfield.corpus.jsonl.gz").splitlines():
        if line.strip():
            rec = json.loads(line)
            corpus[str(rec["_id"])] = _doc_text(rec)
    queries = {}
    for line in _read("cranfield.queries.jsonl.gz").splitlines():
        if line.strip():
            rec = json.loads(line)
            queries[str(rec["_id"])] = str(rec["text"])
    qrels: dict[str, dict[str, float]] = {}
    for i, line in enumerate(_read("cranfield.qrels.tsv.gz").splitlines()):
        fields = line.split("\t")
        if i == 0 or len(fields) < 3:
            continue
        qrels.setdefault(fields[0], {})[fields[1]] = int(fields[2])
    return BeirDataset(corpus, queries, qrels)


def load_cranfield() -> BeirDataset:
    """The Cranfield collection as ``(corpus, queries, qrels)`` (fresh dict copies)."""
    c, q, r = _cranfield()
    return BeirDataset(dict(c), dict(q), {k: dict(v) for k, v in r.items()})


def load_cranfield_bm25_run() -> Run:
    """The bundled BM25 run over Cranfield (depth 100), in trec_eval's order."""
    return parse_trec_run(_read("cranfield.bm25.run.gz").splitlines(), source="cranfield.bm25.run")
