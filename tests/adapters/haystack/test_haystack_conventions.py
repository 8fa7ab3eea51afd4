"""The worked example of docs/haystack.md: Haystack's Document*Evaluators vs ragmeter on one input.

Every expected number is computed by hand (the formulas are written next to it) and both
sides are run on the same documents, so a change in either convention fails here.
"""

from __future__ import annotations

import math
from importlib.metadata import version
from typing import Any

import pytest

pytest.importorskip("haystack")

from haystack import Document
from haystack.components.evaluators import (
    DocumentMAPEvaluator,
    DocumentMRREvaluator,
    DocumentNDCGEvaluator,
    DocumentRecallEvaluator,
)
from ragmeter_haystack import RagmeterRetrievalEvaluator

log2 = math.log2

_HAYSTACK = tuple(int(p) for p in version("haystack-ai").split(".")[:2])
# Haystack's own evaluators changed between the two versions tested here (see the docs):
# 2.31 credits a retrieved duplicate twice and divides AP by the relevant documents found.
OLD = _HAYSTACK == (2, 31)
if not OLD and _HAYSTACK < (3, 4):
    pytest.skip(
        f"Haystack's evaluator numbers are pinned for 2.31 and 3.4+, not {_HAYSTACK}",
        allow_module_level=True,
    )


def _example() -> tuple[list[list[Document]], list[list[Document]]]:
    """Three questions (see docs/haystack.md, "Why the numbers differ from Haystack's")."""
    ground_truth = [
        # q1: graded; C is judged *non-relevant* (grade 0)
        [Document(id="A", score=2.0), Document(id="B", score=1.0), Document(id="C", score=0.0)],
        # q2: no relevant document is known
        [],
        # q3: binary
        [Document(id="A"), Document(id="B")],
    ]
    q1 = ["C", "A", "X1", "X2", "X3", "X4", "X5", "X6", "X7", "X8", "B"]  # B at rank 11
    retrieved = [
        [Document(id=i) for i in q1],
        [Document(id="A"), Document(id="X1")],
        [Document(id="A"), Document(id="A"), Document(id="B")],  # A retrieved twice
    ]
    return ground_truth, retrieved


def _haystack(cls: Any, **kwargs: Any) -> dict[str, Any]:
    gt, ret = _example()
    result: dict[str, Any] = cls(document_comparison_field="id", **kwargs).run(
        ground_truth_documents=gt, retrieved_documents=ret
    )
    return result


def test_haystack_ndcg_has_no_cutoff_and_averages_in_the_empty_question() -> None:
    out = _haystack(DocumentNDCGEvaluator)
    q1 = (2 / log2(3) + 1 / log2(12)) / (2 + 1 / log2(3))  # B at rank 11 still counts
    q3 = (1 + 1 / log2(4)) / (1 + 1 / log2(3))  # the second A takes rank 2, B sits at rank 3
    if OLD:  # 2.31: the copy of A is credited again, NDCG goes above 1
        q3 = (1 + 1 / log2(3) + 1 / log2(4)) / (1 + 1 / log2(3))
    assert out["individual_scores"] == pytest.approx([q1, 0.0, q3], abs=1e-12)
    assert out["score"] == pytest.approx((q1 + q3) / 3, abs=1e-12)  # 0.5018


def test_haystack_mrr_map_recall_treat_every_ground_truth_document_as_relevant() -> None:
    mrr = _haystack(DocumentMRREvaluator)
    assert mrr["individual_scores"] == [1.0, 0.0, 1.0]  # C (grade 0) at rank 1 counts as a hit
    ap = _haystack(DocumentMAPEvaluator)
    q1 = (1 / 1 + 2 / 2 + 3 / 11) / 3  # C, A and B are all "relevant", no cut-off
    q3 = (1 / 1 + 2 / 3) / 2  # the duplicate A costs B a rank
    if OLD:  # 2.31: A counted twice, and AP divided by the 3 "hits" found, not by R = 2
        q3 = (1 / 1 + 2 / 2 + 3 / 3) / 3
    assert ap["individual_scores"] == pytest.approx([q1, 0.0, q3], abs=1e-12)
    single = _haystack(DocumentRecallEvaluator, mode="single_hit")
    multi = _haystack(DocumentRecallEvaluator, mode="multi_hit")
    assert single["individual_scores"] == [1.0, 0.0, 1.0]  # a hit rate, not a recall
    assert multi["individual_scores"] == [1.0, 0.0, 1.0]  # B at rank 11 is still "recalled"
    assert single["score"] == pytest.approx(2 / 3)


def test_ragmeter_on_the_same_input() -> None:
    gt, ret = _example()
    out = RagmeterRetrievalEvaluator(k_values=[10]).run(
        ground_truth_documents=gt, retrieved_documents=ret
    )
    q1, q2, q3 = out["individual_metrics"]
    assert q2 is None  # not scorable: left out of every mean
    assert math.isnan(out["individual_scores"][1])
    # q1: C has grade 0 (non-relevant); B at rank 11 is past the cut-off; R = 2.
    assert q1["ndcg@10"] == pytest.approx((2 / log2(3)) / (2 + 1 / log2(3)), abs=1e-12)
    assert q1["mrr"] == 0.5  # first *relevant* document is A at rank 2
    assert q1["map"] == pytest.approx((1 / 2 + 2 / 11) / 2, abs=1e-12)  # uncut: B counts
    assert q1["map@10"] == pytest.approx((1 / 2) / 2, abs=1e-12)
    assert q1["recall@10"] == 0.5
    # q3: the duplicate A is dropped (best rank kept), so the ranking is A, B.
    assert q3["ndcg@10"] == 1.0
    assert q3["map"] == 1.0
    assert out["score"] == pytest.approx((q1["ndcg@10"] + 1.0) / 2, abs=1e-12)  # 0.7398
    assert out["metrics"]["mrr"] == 0.75
