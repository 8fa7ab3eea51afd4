"""Retrieval metrics on samples: each sample's ranking is scored as ``evaluate_run`` scores a query.

There is one implementation of every retrieval number in ragmeter,
:func:`ragmeter.evaluation.retrieval.evaluate_run` (trec_eval conventions) and its per-query
kernel; this module only turns a sample into a ranking and judgements
(:func:`ragmeter.evaluation.rag.evaluate_rag` scores each one with that kernel as the
samples stream by, so nothing is batched up). Registered names (bare, as everywhere):
``ndcg``, ``recall``, ``precision``, ``mrr``, ``map``, ``hit_rate``; results are keyed
``"precision@5"`` etc., with the cut-off ``k`` given to
:func:`ragmeter.evaluation.rag.evaluate_rag`.

What a sample contributes (:func:`sample_ranking`), first match wins:

1. ``retrieved_ids`` (best first) with ``relevance`` (graded) or ``reference_ids`` (binary):
   the sample's run row and qrels row. A ranking that repeats an id is refused
   (:class:`~ragmeter.errors.DuplicateDocumentError`), as in ``evaluate_run``.
2. rag-eval's case, **texts as ids**: ``retrieved_texts`` (rag-eval's ``retrieved``) and
   ``reference_contexts`` (rag-eval's ``golden_documents``) and no ids. Each text is its own
   id (exact string match) and every golden text has grade 1. rag-eval's ``precision_at_k``
   has *set semantics* -- ``|set(retrieved[:k]) & set(golden)| / k`` -- so a text retrieved
   twice fills a slot once and wastes the other: a repeat is replaced by a placeholder that
   is never relevant (rather than refused), and ``precision@k`` equals rag-eval's number.

A sample with neither is skipped (``coverage``); so is one whose qrels row has no relevant
judgement (grade > 0), since ``evaluate_run`` averages only over queries with one. Here
ragmeter differs from rag-eval, which scores ``golden_documents: []`` as precision 0.0.

>>> s = RagSample(id="q1", retrieved_texts=["A", "B", "A", "C"], reference_contexts=["A", "C"])
>>> PrecisionAtK(k=3).score(s)  # set(["A", "B", "A"]) & {"A", "C"} = {"A"}: 1/3
0.3333333333333333
>>> RecallAtK(k=4).score(RagSample(retrieved_ids=["d1", "d2"], relevance={"d2": 2, "d9": 1}))
0.5
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from ragmeter.errors import DuplicateDocumentError, NoScorableQueriesError, check_k
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.metrics.base import RagMetric
from ragmeter.metrics.lexical import _register
from ragmeter.schema import RagSample

__all__ = [
    "SAMPLE_RETRIEVAL_METRICS",
    "HitRateAtK",
    "MapAtK",
    "MrrAtK",
    "NdcgAtK",
    "PrecisionAtK",
    "RecallAtK",
    "SampleRetrievalMetric",
    "sample_ranking",
    "score_rankings",
]

Ranking = tuple[list[str], dict[str, float]]

_REPEAT = "\x00ragmeter:repeat:"


def _texts_as_ids(texts: Sequence[str], golden: Iterable[str]) -> Ranking:
    qrels: dict[str, float] = dict.fromkeys(golden, 1)
    seen: set[str] = set()
    ranked: list[str] = []
    for i, text in enumerate(texts):
        if text in seen:
            filler = f"{_REPEAT}{i}"
            while filler in qrels or filler in seen:
                filler += "'"
            ranked.append(filler)
        else:
            ranked.append(text)
        seen.add(ranked[-1])
    return ranked, qrels


def sample_ranking(sample: RagSample) -> Ranking | None:
    """The sample's ``(ranked ids, {doc_id: grade})``, or ``None`` (see the module docstring).

    >>> sample_ranking(RagSample(retrieved_ids=["d1"], reference_ids=["d1", "d2"]))
    (['d1'], {'d1': 1, 'd2': 1})
    >>> sample_ranking(RagSample(retrieved=["x", "x"], golden_documents=["x"]))
    (['x', '\\x00ragmeter:repeat:1'], {'x': 1})
    """
    if sample.retrieved_ids is not None:
        rel = sample.relevance_map()
        if rel is not None:
            return list(sample.retrieved_ids), rel
    if sample.retrieved_texts is not None and sample.reference_contexts is not None:
        return _texts_as_ids(sample.retrieved_texts, sample.reference_contexts)
    return None


def score_rankings(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, float]],
    names: Sequence[str],
    k: int,
) -> dict[str, dict[str, float]]:
    """``{name: {key: score}}`` at cut-off ``k``, by one :func:`evaluate_run` call.

    Keys with no relevant judgement are absent (not scored). Raises what ``evaluate_run``
    raises, except that "no scorable query" gives empty results.
    """
    out: dict[str, dict[str, float]] = {name: {} for name in names}
    if not qrels:
        return out
    try:
        report = evaluate_run(qrels, run, k_values=(k,), metrics=list(names))
    except NoScorableQueriesError:
        return out
    for key, row in report.per_query.items():
        for name in names:
            value = row.get(f"{name}@{k}")
            if value is not None:
                out[name][key] = value
    return out


class SampleRetrievalMetric(RagMetric):
    """A retrieval metric at cut-off ``k`` on one sample (see the module docstring).

    ``key`` is the result key (``"ndcg@5"``); :meth:`at` gives the same metric at another
    cut-off. :meth:`score` runs ``evaluate_run`` on the one sample;
    :func:`ragmeter.evaluation.rag.evaluate_rag` calls its kernel per sample directly.
    """

    needs: ClassVar[frozenset[str]] = frozenset({"retrieved_ids", "relevance"})

    def __init__(self, *, k: int = 5) -> None:
        self.k = check_k(k)

    @property
    def key(self) -> str:
        """The result key, ``f"{name}@{k}"``."""
        return f"{self.name}@{self.k}"

    def at(self, k: int) -> SampleRetrievalMetric:
        """The same metric at cut-off ``k``."""
        return type(self)(k=k)

    def applies_to(self, sample: RagSample) -> bool:
        return (sample.retrieved_ids is not None and sample.relevance_map() is not None) or (
            sample.retrieved_texts is not None and sample.reference_contexts is not None
        )

    def score(self, sample: RagSample) -> float | None:
        ranking = sample_ranking(sample)
        if ranking is None:
            return None
        ranked, rel = ranking
        try:
            result = score_rankings({sample.id: ranked}, {sample.id: rel}, [self.name], self.k)
        except DuplicateDocumentError as exc:
            raise DuplicateDocumentError(sample.id, exc.duplicates) from None
        return result[self.name].get(sample.id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k})"


class NdcgAtK(SampleRetrievalMetric):
    """Graded NDCG@k (trec_eval ``ndcg_cut_k``) of the sample's ranking."""

    name: ClassVar[str] = "ndcg"


class RecallAtK(SampleRetrievalMetric):
    """Recall@k (trec_eval ``recall_k``) of the sample's ranking."""

    name: ClassVar[str] = "recall"


class PrecisionAtK(SampleRetrievalMetric):
    """Precision@k dividing by k (trec_eval ``P_k``; rag-eval's ``precision_at_k``)."""

    name: ClassVar[str] = "precision"


class MrrAtK(SampleRetrievalMetric):
    """Reciprocal rank of the first relevant result within k."""

    name: ClassVar[str] = "mrr"


class MapAtK(SampleRetrievalMetric):
    """Average precision within k over all relevant docs (trec_eval ``map_cut_k``)."""

    name: ClassVar[str] = "map"


class HitRateAtK(SampleRetrievalMetric):
    """1.0 if any relevant doc is in the top k (trec_eval ``success_k``)."""

    name: ClassVar[str] = "hit_rate"


SAMPLE_RETRIEVAL_METRICS: tuple[type[SampleRetrievalMetric], ...] = (
    NdcgAtK,
    RecallAtK,
    PrecisionAtK,
    MrrAtK,
    MapAtK,
    HitRateAtK,
)

for _cls in SAMPLE_RETRIEVAL_METRICS:
    _register(_cls())
