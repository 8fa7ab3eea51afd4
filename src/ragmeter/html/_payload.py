"""The data the page's script reads: per-item scores, texts and drill-down records.

Everything here is plain JSON-ready Python built from a report's public surface
(``per_query``/``per_sample``, ``details``, ``conventions``) and the inputs the caller
passes (run, qrels, queries, corpus, samples). Texts are cut to :class:`Limits` so the page
stays within its size budget; the caller tries looser limits first (see ``_page.fit``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.schema import RagSample, SampleKeys, SampleLike, coerce_sample

__all__ = [
    "LADDER",
    "DocTable",
    "Limits",
    "cut",
    "match_samples",
    "num",
    "order_keys",
    "rag_detail",
    "ranking_detail",
]


@dataclass(frozen=True)
class Limits:
    """How much text the page keeps, in characters (0 = none): per text (a query, a
    question, an answer, a reference), per retrieved context, per document snippet; and how
    many contexts per sample."""

    text: int
    context: int
    snippet: int
    contexts: int


LADDER: tuple[Limits, ...] = (
    Limits(2000, 1000, 300, 10),
    Limits(1000, 500, 200, 5),
    Limits(1000, 300, 120, 5),
    Limits(600, 200, 60, 3),
    Limits(400, 120, 0, 3),
    Limits(300, 80, 0, 2),
    Limits(200, 0, 0, 0),
    Limits(100, 0, 0, 0),
    Limits(0, 0, 0, 0),
)
"""Tried in order until the page fits its byte budget."""

_RETRIEVAL_ORDER = ("ndcg", "recall", "precision", "map", "mrr", "hit_rate")
_KEY = re.compile(r"^(?P<name>[^@]+)(?:@(?P<k>\d+))?$")


def order_keys(keys: Iterable[str]) -> list[str]:
    """Metric keys in reading order: the built-in retrieval metrics first (ndcg, recall,
    precision, map, mrr, hit_rate), each by cut-off with the uncut value last; any other
    key keeps its place after them.

    >>> order_keys(["map", "recall@10", "ndcg@10", "ndcg@1", "mine"])
    ['ndcg@1', 'ndcg@10', 'recall@10', 'map', 'mine']
    """
    keyed = []
    for pos, key in enumerate(keys):
        m = _KEY.match(key)
        name, k = (m.group("name"), m.group("k")) if m else (key, None)
        rank = _RETRIEVAL_ORDER.index(name) if name in _RETRIEVAL_ORDER else len(_RETRIEVAL_ORDER)
        cut_off = int(k) if k is not None else 1 << 62
        keyed.append(((rank, pos if rank == len(_RETRIEVAL_ORDER) else 0, cut_off), key))
    return [key for _, key in sorted(keyed)]


def num(value: float | None) -> float | int | None:
    """A score as the page stores it: 6 significant digits, integral values as ints.

    >>> num(0.34579767289), num(1.0), num(None), num(1234567.8)
    (0.345798, 1, None, 1234570)
    """
    if value is None:
        return None
    short = float(f"{value:.6g}")
    return int(short) if short.is_integer() and abs(short) < 2**53 else short


def cut(text: str | None, limit: int) -> str | None:
    """``text`` cut to ``limit`` characters (an ellipsis marks the cut); ``None`` when
    ``limit`` is 0.

    >>> cut("abcdef", 3), cut("abc", 3), cut("abc", 0)
    ('abc…', 'abc', None)
    """
    if text is None or limit <= 0:
        return None
    return text if len(text) <= limit else text[:limit] + "…"


def _grade(value: float) -> float | int:
    number = float(value)
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


class DocTable:
    """Interns document ids: rankings refer to documents by their index here, and each
    document's snippet is stored once however many rankings show it."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.ids: list[str] = []

    def __call__(self, doc: str) -> int:
        found = self.index.get(doc)
        if found is None:
            found = self.index[doc] = len(self.ids)
            self.ids.append(doc)
        return found


def ranking_detail(
    ranked: Iterable[str] | None,
    judged: Mapping[str, float],
    *,
    depth: int,
    level: float | None,
    docs: DocTable,
) -> dict[str, Any]:
    """One query's ranking as the drill-down shows it.

    ``r``: the top ``depth`` doc indices, ``g``: their grades (``None`` = unjudged), ``n``:
    how many docs the run ranked, ``m``: ``[doc, grade, rank or None]`` for each relevant
    doc not in the top ``depth`` (best grade first). ``x`` marks a query with no ranking.
    """

    def is_relevant(grade: float) -> bool:
        return grade > 0 if level is None else grade >= level

    def missed_rows(found: Mapping[str, int]) -> list[list[Any]]:
        rows = [
            (-float(g), found.get(d) is None, found.get(d, 0), d, _grade(g))
            for d, g in judged.items()
            if is_relevant(g) and d not in shown
        ]
        rows.sort(key=lambda row: row[:3])  # best grade first, then by rank, unretrieved last
        return [[docs(d), grade, found.get(d)] for *_, d, grade in rows]

    if ranked is None:
        shown: set[str] = set()
        return {"x": 1, "m": missed_rows({})}
    ranking = ranked if isinstance(ranked, (list, tuple)) else list(ranked)
    top = list(ranking[:depth])
    shown = set(top)
    wanted = {d for d, g in judged.items() if is_relevant(g) and d not in shown}
    ranks: dict[str, int] = {}
    if wanted:
        for pos, d in enumerate(ranking, 1):
            if d in wanted and d not in ranks:
                ranks[d] = pos
    grades = [None if (g := judged.get(d)) is None else _grade(g) for d in top]
    return {"r": [docs(d) for d in top], "g": grades, "n": len(ranking), "m": missed_rows(ranks)}


def match_samples(keys: Sequence[str], samples: Iterable[SampleLike]) -> dict[str, RagSample]:
    """Pair ``samples`` with a RAG report's ``per_sample`` keys.

    A sample's key is its id, or ``"<id>#2"``... for a repeated id (the rule
    ``evaluate_rag`` uses). A mapping without an ``id`` (``evaluate_rag`` gave it a fresh
    one) is paired by its position instead. Raises
    :class:`~ragmeter.errors.InvalidInputError` when samples are given and none matches.
    """
    wanted = set(keys)
    naming = SampleKeys()
    out: dict[str, RagSample] = {}
    count = 0
    for i, raw in enumerate(samples):
        sample = coerce_sample(raw, index=i)
        key = naming(sample.id)
        count += 1
        if isinstance(raw, Mapping) and raw.get("id") is None:
            key = keys[i] if i < len(keys) else ""
        if key in wanted and key not in out:
            out[key] = sample
    if count and not out:
        raise InvalidInputError(
            f"samples: none of the {count} samples matches the report's sample ids "
            f"(report: {some_ids(keys)}); pass the samples the report was computed from"
        )
    return out


_CLAIM_KEYS = frozenset({"supported_claims", "unsupported_claims"})


def _short_json(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def rag_detail(
    sample: RagSample | None,
    details: Mapping[str, Any] | None,
    *,
    limits: Limits,
    depth: int,
) -> dict[str, Any] | None:
    """One sample's drill-down record: answer ``a``, references ``ref``, contexts ``ctx``
    (of ``nctx``), retrieved ids ``rid`` with grades ``rg``, faithfulness' unsupported
    ``un`` and supported ``su`` claims, the pipeline's ``err`` and other ``more`` details."""
    details = details or {}
    if sample is None and not details:
        return None
    found = details.get("faithfulness")
    claims: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    out: dict[str, Any] = {
        "un": [cut(str(c), max(limits.text, 200)) for c in claims.get("unsupported_claims") or ()],
        "su": [cut(str(c), max(limits.text, 200)) for c in claims.get("supported_claims") or ()],
    }
    more = {
        str(name): _short_json(value, 300)
        for name, value in details.items()
        if not (name == "faithfulness" and value is claims and set(claims) <= _CLAIM_KEYS)
    }
    if more:
        out["more"] = more
    if sample is None:
        return out
    out["a"] = cut(sample.response, limits.text) if limits.text else None
    out["ref"] = [t for r in sample.all_references() if (t := cut(r, limits.text)) is not None]
    contexts = sample.retrieved_contexts or []
    out["nctx"] = len(contexts)
    out["ctx"] = [
        t for c in contexts[: limits.contexts] if (t := cut(c, limits.context)) is not None
    ]
    if sample.retrieved_ids:
        rel = sample.relevance_map()
        ids = list(sample.retrieved_ids[:depth])
        out["rid"] = ids
        if rel is not None:
            out["rg"] = [None if (g := rel.get(d)) is None else _grade(g) for d in ids]
    if sample.error:
        out["err"] = cut(sample.error, 500)
    return out
