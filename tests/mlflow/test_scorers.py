"""ragmeter's metrics as MLflow GenAI scorers, run by ``mlflow.genai.evaluate`` on a real local
store: every assessment equals ragmeter's own score of that row as a sample, and the
retrieval ones equal pytrec_eval's per-query numbers.

The data: SQuAD 2.0 dev questions (tests/data/squad/small.json, answerable and not). A small
offline "RAG app" retrieves paragraphs by word overlap inside an MLflow ``RETRIEVER`` span and
answers with the retrieved sentence that shares most words with the question.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import mlflow
import pytest
import pytrec_eval
from mlflow.entities import SpanType

from ragmeter import evaluate_rag
from ragmeter.errors import InvalidInputError, UnknownMetricError
from ragmeter.mlflow import row_sample, scorers

pytestmark = pytest.mark.slow  # a real MLflow store: ~8 s to create its tables

DATA = Path(__file__).resolve().parents[1] / "data" / "squad" / "small.json"
K = 3
_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _load() -> tuple[dict[str, str], list[dict[str, Any]]]:
    article = json.loads(DATA.read_text(encoding="utf-8"))["data"][0]
    paragraphs = {f"p{i}": p["context"] for i, p in enumerate(article["paragraphs"][:8])}
    questions = []
    for i, para in enumerate(article["paragraphs"][:8]):
        for qa in para["qas"][:2]:
            answers = [a["text"] for a in qa["answers"]]
            questions.append(
                {
                    "id": str(qa["id"]),
                    "question": qa["question"],
                    "gold": f"p{i}",
                    "answers": answers,
                }
            )
    return paragraphs, questions


PARAGRAPHS, QUESTIONS = _load()


def _rank(question: str) -> list[str]:
    asked = _words(question)
    return sorted(PARAGRAPHS, key=lambda p: (-len(asked & _words(PARAGRAPHS[p])), p))[:K]


@mlflow.trace(span_type=SpanType.RETRIEVER)
def _retrieve(question: str) -> list[dict[str, Any]]:
    return [{"page_content": PARAGRAPHS[p], "metadata": {"doc_uri": p}} for p in _rank(question)]


def _answer(question: str, documents: list[dict[str, Any]]) -> str:
    sentences = [s for d in documents for s in re.split(r"(?<=\.)\s+", d["page_content"])]
    asked = _words(question)
    return max(sentences, key=lambda s: len(asked & _words(s)))


@mlflow.trace
def app(question: str) -> str:
    return _answer(question, _retrieve(question))


def _expectations(q: dict[str, Any]) -> dict[str, Any]:
    gold = [{"doc_uri": q["gold"], "content": PARAGRAPHS[q["gold"]]}]
    if not q["answers"]:  # unanswerable: no expected response
        return {"expected_retrieved_context": gold}
    return {"expected_response": q["answers"], "expected_retrieved_context": gold}


def _sample(q: dict[str, Any]) -> dict[str, Any]:
    """The same row as ragmeter's own sample (what evaluate_rag scores)."""
    ranked = _rank(q["question"])
    contexts = [PARAGRAPHS[p] for p in ranked]
    docs = [{"page_content": c} for c in contexts]
    return {
        "id": q["id"],
        "user_input": q["question"],
        "response": _answer(q["question"], docs),
        "retrieved_contexts": contexts,
        "retrieved_ids": ranked,
        "reference_ids": [q["gold"]],
        **(
            {"reference": q["answers"][0], "references": q["answers"][1:] or None}
            if q["answers"]
            else {}
        ),
    }


SCORERS = {
    "exact_match": scorers.exact_match,
    "token_f1": scorers.token_f1,
    "context_recall": scorers.context_recall,
    "context_precision": scorers.context_precision,
    "faithfulness": scorers.faithfulness,
    "faithfulness_strict": scorers.faithfulness_strict,
    "groundedness": scorers.groundedness,
    "non_empty_rate": scorers.non_empty_rate,
}
RETRIEVAL = {
    "ndcg": scorers.ndcg,
    "recall": scorers.recall,
    "precision": scorers.precision,
    "mrr": scorers.mrr,
    "map": scorers.map,
    "hit_rate": scorers.hit_rate,
}


@pytest.fixture(scope="module")
def evaluated(tracking: Path) -> Any:
    exp = mlflow.create_experiment("scorers", artifact_location=(tracking / "a").as_uri())
    mlflow.set_experiment(experiment_id=exp)
    data = [
        {"inputs": {"question": q["question"]}, "expectations": _expectations(q)} for q in QUESTIONS
    ]
    made = [make() for make in SCORERS.values()] + [make(k=K) for make in RETRIEVAL.values()]
    return mlflow.genai.evaluate(data=data, predict_fn=app, scorers=made)


def _assessments(result: Any) -> dict[str, dict[str, float | None]]:
    """``{question: {assessment name: value}}`` from the evaluation's result table."""
    by_question: dict[str, dict[str, float | None]] = {}
    for _, row in result.result_df.iterrows():
        values = {}
        for column, value in row.items():
            if str(column).endswith("/value") and not str(column).startswith("expected_"):
                missing = value is None or (isinstance(value, float) and math.isnan(value))
                values[str(column)[: -len("/value")]] = None if missing else value
        by_question[row["request"]["question"]] = values
    return by_question


def test_every_assessment_is_ragmeters_score_of_the_row(evaluated: Any) -> None:
    metrics = [*SCORERS, *RETRIEVAL]
    report = evaluate_rag([_sample(q) for q in QUESTIONS], metrics=metrics, k_values=K)
    got = _assessments(evaluated)
    assert len(got) == len(QUESTIONS) == 16
    for q in QUESTIONS:
        ours = report.per_sample[q["id"]]
        for name in SCORERS:
            assert got[q["question"]][name] == ours.get(name), (q["id"], name)
        for name in RETRIEVAL:
            assert got[q["question"]][f"{name}_at_{K}"] == ours.get(f"{name}@{K}"), (q["id"], name)
    # unanswerable questions get no answer assessment: left out of the mean, as ragmeter skips
    unanswerable = [q for q in QUESTIONS if not q["answers"]]
    assert unanswerable and all(got[q["question"]]["exact_match"] is None for q in unanswerable)
    for name in SCORERS:
        assert evaluated.metrics[f"{name}/mean"] == pytest.approx(report.metrics[name], rel=1e-12)


def test_retrieval_assessments_equal_pytrec_eval(evaluated: Any) -> None:
    qrels = {q["id"]: {q["gold"]: 1} for q in QUESTIONS}
    n = len(PARAGRAPHS)
    run = {
        q["id"]: {p: float(n - i) for i, p in enumerate(_rank(q["question"]))} for q in QUESTIONS
    }
    oracle = pytrec_eval.RelevanceEvaluator(
        qrels, {f"ndcg_cut.{K}", f"recall.{K}", f"P.{K}", f"success.{K}"}
    ).evaluate(run)
    got = _assessments(evaluated)
    for q in QUESTIONS:
        row, mine = oracle[q["id"]], got[q["question"]]
        assert mine[f"ndcg_at_{K}"] == pytest.approx(row[f"ndcg_cut_{K}"], abs=1e-12)
        assert mine[f"recall_at_{K}"] == pytest.approx(row[f"recall_{K}"], abs=1e-12)
        assert mine[f"precision_at_{K}"] == pytest.approx(row[f"P_{K}"], abs=1e-12)
        assert mine[f"hit_rate_at_{K}"] == pytest.approx(row[f"success_{K}"], abs=1e-12)
    hits = [got[q["question"]][f"hit_rate_at_{K}"] for q in QUESTIONS]
    assert 0 < sum(h or 0 for h in hits) < len(QUESTIONS)  # the ranking misses some: a real test


@mlflow.trace(span_type=SpanType.RETRIEVER)
def _given(texts: list[str]) -> list[dict[str, Any]]:
    return [{"page_content": t, "metadata": {"doc_uri": f"d{i}"}} for i, t in enumerate(texts)]


def _retrieval_trace(texts: list[str]) -> Any:
    """A real MLflow trace whose one RETRIEVER span returned ``texts``."""
    _given(texts)
    return mlflow.get_trace(mlflow.get_last_active_trace_id())


def test_a_scorer_called_directly(experiment: str) -> None:
    em, f1 = scorers.exact_match(), scorers.token_f1()
    expected = {"expected_response": ["the Normans", "Normandy"]}
    assert em(outputs="Normandy.", expectations=expected) == 1.0
    assert f1(outputs="in Normandy", expectations=expected) == pytest.approx(2 / 3)
    assert em(outputs="Normandy") is None  # no expectation: not measurable, no assessment
    assert (em.name, scorers.ndcg(k=10).name, scorers.recall().name) == (
        "exact_match",
        "ndcg_at_10",
        "recall_at_5",
    )
    assert scorers.scorer("token_f1", name="f1").name == "f1"
    # a metric with per-sample detail explains itself in the feedback's rationale
    claims = scorers.faithfulness()(
        outputs="Rollo led the Normans. He had 3 moons.",
        trace=_retrieval_trace(["Rollo led the Normans into Normandy."]),
    )
    assert claims.value == 0.5
    assert json.loads(claims.rationale) == {
        "supported_claims": ["Rollo led the Normans"],
        "unsupported_claims": ["He had 3 moons"],
    }


def test_rows_in_mlflows_other_shapes() -> None:
    chat = {"messages": [{"role": "user", "content": "Who?"}]}
    answer = {"choices": [{"message": {"role": "assistant", "content": "Rollo"}}]}
    s = row_sample(inputs=chat, outputs=answer, expectations={"relevance": {"d1": 2}})
    assert (s.user_input, s.response, s.relevance) == ("Who?", "Rollo", {"d1": 2.0})
    assert row_sample(outputs={"answer": "x", "n": 1}).response == "x"
    assert row_sample(inputs={"a": 1, "b": [2]}).user_input == '{"a": 1, "b": [2]}'
    with pytest.raises(InvalidInputError, match=r"cannot read the row's outputs as text.*answer"):
        row_sample(outputs={"n": 1})
    with pytest.raises(InvalidInputError, match=r"expected_response.*list of strings"):
        row_sample(expectations={"expected_response": 3})
    with pytest.raises(InvalidInputError, match=r"expected_retrieved_context'\]\[0\] must be"):
        row_sample(expectations={"expected_retrieved_context": ["d1"]})


def test_bad_scorer_arguments_are_refused() -> None:
    with pytest.raises(UnknownMetricError, match=r"no metric named 'ndcg@10'.*Registry names"):
        scorers.scorer("ndcg@10")
    with pytest.raises(InvalidInputError, match="k is the cut-off of a retrieval metric"):
        scorers.scorer("exact_match", k=3)
    with pytest.raises(InvalidInputError, match="k must be an int >= 1, got 0"):
        scorers.ndcg(k=0)
    with pytest.raises(InvalidInputError, match="cost_usd needs token prices"):
        scorers.scorer("cost_usd")


@mlflow.trace(span_type=SpanType.RETRIEVER)
def _inner(question: str) -> list[dict[str, Any]]:
    return [{"page_content": "nested, not counted", "metadata": {"doc_uri": "x9"}}]


@mlflow.trace(span_type=SpanType.RETRIEVER)
def _dense(question: str) -> list[dict[str, Any]]:
    _inner(question)  # a retriever under a retriever: its documents are the outer one's input
    return [{"page_content": PARAGRAPHS["p1"], "metadata": {"doc_uri": "p1"}}]


@mlflow.trace(span_type=SpanType.RETRIEVER)
def _sparse(question: str) -> list[dict[str, Any]]:
    return [{"page_content": PARAGRAPHS["p0"], "metadata": {"doc_uri": "p0"}}, {"text": "no id"}]


@mlflow.trace
def _two_retrievers(question: str) -> str:
    _dense(question)
    _sparse(question)
    return "the Normans"


def test_the_top_level_retriever_spans_of_a_real_trace(experiment: str) -> None:
    _two_retrievers("Who were the Normans?")
    trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
    assert trace is not None
    s = row_sample(
        inputs={"question": "Who were the Normans?"},
        outputs="the Normans",
        expectations={"expected_retrieved_context": [{"doc_uri": "p0"}]},
        trace=trace,
    )
    # both top-level retrievers in the order they ran; the nested one left out
    assert s.retrieved_contexts == [PARAGRAPHS["p1"], PARAGRAPHS["p0"], "no id"]
    assert s.retrieved_ids is None  # one document has no doc_uri: no ranking to score
    assert s.id == trace.info.trace_id and s.latency_ms is not None
    gold = {"expected_retrieved_context": [{"doc_uri": "p0"}]}
    assert scorers.ndcg(k=3)(trace=trace, expectations=gold) is None
    faithful = scorers.faithfulness()(outputs="the Normans", trace=trace)
    ours = evaluate_rag([s], metrics=["faithfulness"])
    assert faithful.value == ours.per_sample[s.id]["faithfulness"] == 1.0
    assert json.loads(faithful.rationale) == ours.details[s.id]["faithfulness"]
