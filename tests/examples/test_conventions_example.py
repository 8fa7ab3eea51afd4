"""The worked example of README.md (Conventions): one query scored by ragmeter, trec_eval,
Haystack's and LlamaIndex's own evaluators.

ragmeter is checked against pytrec_eval; each framework number is computed by *running the
framework* and compared to a value derived by hand from that framework's formula (written
next to it), so the test fails if a framework changes its convention. Ragas is not imported
here (it is heavy); its numbers come from benchmarks/conventions_ragas.py.

Example: qrels a=2, b=1, c=1, d=1 (relevant), n=0 (judged non-relevant); u is unjudged.
Ranking (best first): n, a, u, b, c; cut-off k = 3; d is never retrieved.
Variant with a repeated id: n, a, a, b, c.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragmeter.errors import DuplicateDocumentError, NoScorableQueriesError
from ragmeter.evaluation.retrieval import evaluate_retrieval, evaluate_run

QRELS: dict[str, dict[str, int]] = {"q1": {"a": 2, "b": 1, "c": 1, "d": 1, "n": 0}}
RANKED = ["n", "a", "u", "b", "c"]
REPEATED = ["n", "a", "a", "b", "c"]
K = 3
RELEVANT = ["a", "b", "c", "d"]  # grade > 0; "n" (grade 0) is judged but not relevant
GRADES = {"a": 2.0, "b": 1.0, "c": 1.0, "d": 1.0}


def dcg(gains: Sequence[float]) -> float:
    """Linear-gain DCG: gain / log2(rank + 1), ranks from 1."""
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


IDCG_AT_3 = dcg([2, 1, 1])  # trec_eval ndcg_cut_3: ideal ranking cut at k
IDCG_ALL = dcg([2, 1, 1, 1])  # every relevant doc, no cut (Haystack; = ndcg_cut_5 here)
IDCG_BINARY_ALL = dcg([1, 1, 1, 1])  # LlamaIndex: one unit gain per expected id


# ---------------------------------------------------------------- ragmeter = trec_eval


def test_ragmeter_hand_values() -> None:
    report = evaluate_run(QRELS, {"q1": RANKED}, k_values=[K, 5])
    m = report.metrics
    assert m["ndcg@3"] == pytest.approx(dcg([0, 2, 0]) / IDCG_AT_3, abs=1e-12)  # 0.4030
    assert m["precision@3"] == pytest.approx(1 / 3)  # 1 relevant in top 3, divided by k
    assert m["recall@3"] == pytest.approx(1 / 4)  # of all 4 relevant
    assert m["map@3"] == pytest.approx((1 / 2) / 4)  # P at a's rank, over all 4 relevant
    assert m["mrr@3"] == pytest.approx(1 / 2)
    assert m["hit_rate@3"] == 1.0
    assert m["ndcg@5"] == pytest.approx(dcg([0, 2, 0, 1, 1]) / IDCG_ALL, abs=1e-12)
    assert m["map"] == pytest.approx((1 / 2 + 2 / 4 + 3 / 5) / 4)  # 0.4, uncut


def test_ragmeter_matches_pytrec_eval() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    scores = {d: float(len(RANKED) - i) for i, d in enumerate(RANKED)}  # strictly descending
    measures = {"ndcg_cut.3,5", "P.3,5", "recall.3,5", "map_cut.3,5", "success.3", "map"}
    te = pytrec_eval.RelevanceEvaluator(QRELS, measures).evaluate({"q1": scores})["q1"]
    top3 = {d: scores[d] for d in RANKED[:K]}
    rr3 = pytrec_eval.RelevanceEvaluator(QRELS, {"recip_rank"}).evaluate({"q1": top3})["q1"]
    m = evaluate_run(QRELS, {"q1": RANKED}, k_values=[K, 5]).metrics
    pairs = {
        "ndcg@3": te["ndcg_cut_3"],
        "ndcg@5": te["ndcg_cut_5"],
        "precision@3": te["P_3"],
        "precision@5": te["P_5"],
        "recall@3": te["recall_3"],
        "recall@5": te["recall_5"],
        "map@3": te["map_cut_3"],
        "map@5": te["map_cut_5"],
        "hit_rate@3": te["success_3"],
        "map": te["map"],
        "mrr@3": rr3["recip_rank"],  # trec_eval has no recip_rank cut: score the top 3
    }
    for key, expected in pairs.items():
        assert m[key] == pytest.approx(expected, abs=1e-9), key


def test_the_docs_snippet_prints_what_it_says() -> None:
    doc = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    (code,) = [b for b in blocks if '{"q1": ["n", "a", "u", "b", "c"]}' in b]
    shown = "".join(line.split("# ", 1)[1] for line in code.splitlines() if "# " in line)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().split() == shown.split()


def test_ragmeter_refuses_a_repeated_id_and_evaluate_retrieval_dedupes() -> None:
    with pytest.raises(DuplicateDocumentError, match=r"'q1'.*'a'"):
        evaluate_run(QRELS, {"q1": REPEATED}, k_values=[K])

    def retriever(query: str) -> list[str]:
        return list(REPEATED)

    m = evaluate_retrieval(retriever, QRELS, {"q1": "query"}, k_values=[K]).metrics
    # de-duplicated to best rank: n, a, b, c -> top 3 is n, a, b
    assert m["ndcg@3"] == pytest.approx(dcg([0, 2, 1]) / IDCG_AT_3, abs=1e-12)  # 0.5627
    assert m["precision@3"] == pytest.approx(2 / 3)
    assert m["recall@3"] == pytest.approx(2 / 4)
    assert m["map@3"] == pytest.approx((1 / 2 + 2 / 3) / 4)
    assert m["mrr@3"] == pytest.approx(1 / 2)


def test_ragmeter_skips_queries_without_relevant_docs_and_counts_missing_ones() -> None:
    qrels = {"q1": QRELS["q1"], "q_none": {"n": 0}, "q_missing": {"a": 1}}
    report = evaluate_run(qrels, {"q1": RANKED, "q_none": ["n"]}, k_values=[K])
    assert set(report.per_query) == {"q1", "q_missing"}  # q_none is not averaged
    assert report.per_query["q_missing"]["recall@3"] == 0.0  # missing from the run: 0, counted
    assert report.metrics["recall@3"] == pytest.approx((1 / 4 + 0) / 2)
    with pytest.raises(NoScorableQueriesError, match="no query in qrels has a relevant"):
        evaluate_run({"q_none": {"n": 0}}, {"q_none": ["n"]}, k_values=[K])


# ---------------------------------------------------------------- Haystack


@pytest.fixture(scope="module")
def haystack() -> Any:
    return pytest.importorskip("haystack")


def _haystack_scores(
    haystack: Any, retrieved: Sequence[str], grades: dict[str, float] | None = None
) -> dict[str, list[float]]:
    from haystack.components.evaluators import (
        DocumentMAPEvaluator,
        DocumentMRREvaluator,
        DocumentNDCGEvaluator,
        DocumentRecallEvaluator,
    )

    doc = haystack.Document
    truth = [doc(id=i, score=g) for i, g in (grades or GRADES).items()]
    ret = [doc(id=i) for i in retrieved]
    evaluators: dict[str, Any] = {
        "ndcg": DocumentNDCGEvaluator(document_comparison_field="id"),
        "mrr": DocumentMRREvaluator(document_comparison_field="id"),
        "map": DocumentMAPEvaluator(document_comparison_field="id"),
        "recall_multi": DocumentRecallEvaluator(mode="multi_hit", document_comparison_field="id"),
        "recall_single": DocumentRecallEvaluator(mode="single_hit", document_comparison_field="id"),
    }
    return {
        name: ev.run(ground_truth_documents=[truth], retrieved_documents=[ret])["individual_scores"]
        for name, ev in evaluators.items()
    }


def test_haystack_on_the_top_k(haystack: Any) -> None:
    s = _haystack_scores(haystack, RANKED[:K])
    # no cut-off of its own: the ideal DCG uses all 4 relevant docs, not the best 3
    assert s["ndcg"] == pytest.approx([dcg([0, 2, 0]) / IDCG_ALL], abs=1e-12)  # 0.3543
    assert s["mrr"] == pytest.approx([1 / 2])
    assert s["map"] == pytest.approx([(1 / 2) / 4])  # same denominator as trec_eval
    assert s["recall_multi"] == pytest.approx([1 / 4])
    assert s["recall_single"] == [1.0]  # single_hit is a hit rate


def test_haystack_on_the_full_list(haystack: Any) -> None:
    s = _haystack_scores(haystack, RANKED)
    assert s["ndcg"] == pytest.approx([dcg([0, 2, 0, 1, 1]) / IDCG_ALL], abs=1e-12)  # 0.5838
    assert s["map"] == pytest.approx([(1 / 2 + 2 / 4 + 3 / 5) / 4])  # 0.4
    assert s["recall_multi"] == pytest.approx([3 / 4])
    assert s["mrr"] == pytest.approx([1 / 2])


def test_haystack_counts_a_grade_0_ground_truth_doc_as_relevant(haystack: Any) -> None:
    # Passing the judged non-relevant "n" (score 0) as ground truth: NDCG gives it no gain,
    # but MRR, MAP and recall ignore the score and count it as a 5th relevant doc.
    s = _haystack_scores(haystack, RANKED[:K], grades={**GRADES, "n": 0.0})
    assert s["ndcg"] == pytest.approx([dcg([0, 2, 0]) / IDCG_ALL], abs=1e-12)
    assert s["mrr"] == [1.0]  # n at rank 1
    assert s["map"] == pytest.approx([(1 / 1 + 2 / 2) / 5])  # 0.4
    assert s["recall_multi"] == pytest.approx([2 / 5])


def test_haystack_credits_a_repeat_once_but_the_repeat_keeps_its_rank(haystack: Any) -> None:
    s = _haystack_scores(haystack, REPEATED)
    # n, a, a, b, c: the 2nd "a" earns nothing and pushes b, c to ranks 4, 5
    assert s["ndcg"] == pytest.approx([dcg([0, 2, 0, 1, 1]) / IDCG_ALL], abs=1e-12)
    assert s["map"] == pytest.approx([(1 / 2 + 2 / 4 + 3 / 5) / 4])
    top = _haystack_scores(haystack, REPEATED[:K])
    assert top["ndcg"] == pytest.approx([dcg([0, 2, 0]) / IDCG_ALL], abs=1e-12)
    assert top["recall_multi"] == pytest.approx([1 / 4])


def test_haystack_averages_in_queries_without_relevant_docs(haystack: Any) -> None:
    from haystack.components.evaluators import DocumentMAPEvaluator, DocumentNDCGEvaluator

    doc = haystack.Document
    truth: list[list[Any]] = [[doc(id="a", score=1.0)], []]
    ret = [[doc(id="a")], []]
    for ev in (
        DocumentNDCGEvaluator(document_comparison_field="id"),
        DocumentMAPEvaluator(document_comparison_field="id"),
    ):
        out = ev.run(ground_truth_documents=truth, retrieved_documents=ret)
        assert out["individual_scores"] == [1.0, 0.0]
        assert out["score"] == 0.5  # the query with nothing relevant counts as a 0


# ---------------------------------------------------------------- LlamaIndex


@pytest.fixture(scope="module")
def li_metrics() -> Any:
    return pytest.importorskip("llama_index.core.evaluation.retrieval.metrics")


def _li_scores(mod: Any, retrieved: Sequence[str], expected: Sequence[str] = RELEVANT) -> Any:
    metrics = {
        "hit_rate": mod.HitRate(),
        "hit_rate_granular": mod.HitRate(use_granular_hit_rate=True),
        "mrr": mod.MRR(),
        "mrr_granular": mod.MRR(use_granular_mrr=True),
        "precision": mod.Precision(),
        "recall": mod.Recall(),
        "ap": mod.AveragePrecision(),
        "ndcg": mod.NDCG(),
        "ndcg_exponential": mod.NDCG(mode="exponential"),
    }
    return {
        name: m.compute(expected_ids=list(expected), retrieved_ids=list(retrieved)).score
        for name, m in metrics.items()
    }


def test_llamaindex_on_the_top_k(li_metrics: Any) -> None:
    s = _li_scores(li_metrics, RANKED[:K])
    # binary gain; ideal = one unit gain per expected id (4), not cut at the 3 retrieved
    assert s["ndcg"] == pytest.approx(dcg([0, 1, 0]) / IDCG_BINARY_ALL, abs=1e-12)  # 0.2463
    assert s["ndcg_exponential"] == s["ndcg"]  # 2**1 - 1 == 1: the mode changes nothing
    assert s["precision"] == pytest.approx(1 / 3)  # over the distinct retrieved ids
    assert s["recall"] == pytest.approx(1 / 4)
    assert s["ap"] == pytest.approx((1 / 2) / 4)
    assert s["mrr"] == pytest.approx(1 / 2)
    assert s["hit_rate"] == 1.0
    assert s["hit_rate_granular"] == pytest.approx(1 / 4)


def test_llamaindex_on_the_full_list(li_metrics: Any) -> None:
    s = _li_scores(li_metrics, RANKED)
    assert s["ndcg"] == pytest.approx(dcg([0, 1, 0, 1, 1]) / IDCG_BINARY_ALL, abs=1e-12)
    assert s["precision"] == pytest.approx(3 / 5)  # divides by what came back
    assert s["recall"] == pytest.approx(3 / 4)
    assert s["ap"] == pytest.approx((1 / 2 + 2 / 4 + 3 / 5) / 4)
    assert s["mrr_granular"] == pytest.approx((1 / 2 + 1 / 4 + 1 / 5) / 3)


def test_llamaindex_credits_every_repeat(li_metrics: Any) -> None:
    top = _li_scores(li_metrics, REPEATED[:K])  # n, a, a
    assert top["ndcg"] == pytest.approx(dcg([0, 1, 1]) / IDCG_BINARY_ALL, abs=1e-12)  # 0.4415
    assert top["ap"] == pytest.approx((1 / 2 + 2 / 3) / 4)
    assert top["precision"] == pytest.approx(1 / 2)  # set {n, a}
    assert top["hit_rate_granular"] == pytest.approx(2 / 4)
    full = _li_scores(li_metrics, REPEATED)  # n, a, a, b, c
    assert full["ndcg"] == pytest.approx(dcg([0, 1, 1, 1, 1]) / IDCG_BINARY_ALL, abs=1e-12)
    assert full["ap"] == pytest.approx((1 / 2 + 2 / 3 + 3 / 4 + 4 / 5) / 4)
    assert full["hit_rate_granular"] == 1.0  # 4 "hits" of 4 expected, though d was missed
    assert full["recall"] == pytest.approx(3 / 4)
    assert full["precision"] == pytest.approx(3 / 4)  # set {n, a, b, c}
    above_one = _li_scores(li_metrics, ["a", "a"], expected=["a"])
    assert above_one["ndcg"] == pytest.approx(1 + 1 / math.log2(3))  # 1.6309 > 1
    assert above_one["ap"] == pytest.approx(2.0)
    assert above_one["hit_rate_granular"] == pytest.approx(2.0)


def test_llamaindex_refuses_empty_retrieval_and_no_relevant_docs(li_metrics: Any) -> None:
    for retrieved, expected in (([], ["a"]), (["a"], [])):
        for metric in (li_metrics.Recall(), li_metrics.NDCG(), li_metrics.MRR()):
            with pytest.raises(ValueError, match="ids must be provided"):
                metric.compute(expected_ids=expected, retrieved_ids=retrieved)
