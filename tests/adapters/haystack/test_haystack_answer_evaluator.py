"""RagmeterAnswerEvaluator: parity with the seed oracles (ef, rag_eval) on SQuAD, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("haystack")

from haystack import Pipeline
from haystack.core.serialization import component_from_dict, component_to_dict
from haystack.evaluation import EvaluationRunResult
from ragmeter_haystack import RagmeterAnswerEvaluator

from ragmeter.errors import UnknownMetricError


def _squad(data_dir: Path) -> dict[str, list[Any]]:
    """Answerable SQuAD 2.0 dev questions with three kinds of predicted answer."""
    data = json.loads((data_dir / "squad" / "small.json").read_text(encoding="utf-8"))
    out: dict[str, list[Any]] = {"questions": [], "predicted": [], "truth": [], "contexts": []}
    for article in data["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                if not qa["answers"]:
                    continue
                answer = qa["answers"][0]["text"]
                i = len(out["questions"])
                if i % 3 == 0:
                    pred = answer
                elif i % 3 == 1:
                    pred = f"The {answer}, indeed."
                else:
                    pred = " ".join(para["context"].split()[:5])
                out["questions"].append(qa["question"])
                out["predicted"].append(pred)
                out["truth"].append(answer)
                out["contexts"].append([para["context"]])
    return out


def test_lexical_metrics_match_ef_on_squad(data_dir: Path) -> None:
    ef = pytest.importorskip("ef.evaluation")
    s = _squad(data_dir)
    out = RagmeterAnswerEvaluator(metrics=["token_f1", "exact_match"]).run(
        questions=s["questions"], predicted_answers=s["predicted"], ground_truth_answers=s["truth"]
    )
    assert len(out["individual_scores"]) == len(s["questions"]) > 200
    f1 = [ef.token_f1(p, t) for p, t in zip(s["predicted"], s["truth"], strict=True)]
    em = [ef.exact_match(p, t) for p, t in zip(s["predicted"], s["truth"], strict=True)]
    assert out["individual_scores"] == pytest.approx(f1, abs=1e-12)  # token_f1 is the score
    assert [row["exact_match"] for row in out["individual_metrics"]] == em
    assert out["score"] == pytest.approx(math.fsum(f1) / len(f1), abs=1e-12)
    assert out["metrics"]["exact_match"] == pytest.approx(sum(em) / len(em), abs=1e-12)
    assert 0 < out["metrics"]["exact_match"] < 1


def test_faithfulness_matches_rag_eval() -> None:
    faithfulness = pytest.importorskip("rag_eval.faithfulness").faithfulness
    answers = [
        "Paris is the capital of France. It has ten million cats.",
        "Berlin is in Germany.",
        "The sky is green.",
    ]
    contexts = [
        ["Paris is the capital and largest city of France."],
        ["Berlin is the capital of Germany."],
        ["Grass is green."],
    ]
    out = RagmeterAnswerEvaluator(metrics=["faithfulness"]).run(
        questions=["q1", "q2", "q3"], predicted_answers=answers, contexts=contexts
    )
    expected = [faithfulness(a, c)[0] for a, c in zip(answers, contexts, strict=True)]
    assert out["individual_scores"] == pytest.approx(expected, abs=1e-12)
    assert type(out["score"]) is float


def test_missing_reference_is_nan_and_left_out_of_the_mean() -> None:
    out = RagmeterAnswerEvaluator(metrics=["exact_match"]).run(
        questions=["a", "b", "c"],
        predicted_answers=["Paris", "Rome", "x"],
        ground_truth_answers=["Paris", None, "y"],  # type: ignore[list-item]
    )
    assert out["individual_scores"][0] == 1.0 and out["individual_scores"][2] == 0.0
    assert math.isnan(out["individual_scores"][1])
    assert out["individual_metrics"][1] == {"exact_match": None}
    assert out["score"] == 0.5


def test_score_metric_and_evaluation_pipeline_and_run_result() -> None:
    pipe = Pipeline()
    pipe.add_component(
        "answers",
        RagmeterAnswerEvaluator(metrics=["exact_match", "token_f1"], score_metric="token_f1"),
    )
    inputs = {
        "questions": ["capital of France?", "largest planet?"],
        "predicted_answers": ["Paris", "the planet Jupiter"],
        "ground_truth_answers": ["Paris", "Jupiter"],
    }
    out = pipe.run({"answers": inputs})["answers"]
    assert out["individual_scores"] == [1.0, pytest.approx(2 / 3)]  # "planet jupiter" vs "jupiter"
    assert out["metrics"]["exact_match"] == 0.5
    result = EvaluationRunResult(
        "demo", inputs={"question": inputs["questions"]}, results={"answers": out}
    )
    assert result.aggregated_report()["score"] == [out["score"]]


def test_to_dict_round_trip() -> None:
    ev = RagmeterAnswerEvaluator(metrics=["token_f1", "faithfulness"], score_metric="faithfulness")
    data = component_to_dict(ev, "answers")
    assert data == {
        "type": "ragmeter_haystack.answer_evaluator.RagmeterAnswerEvaluator",
        "init_parameters": {
            "metrics": ["token_f1", "faithfulness"],
            "score_metric": "faithfulness",
        },
    }
    back = component_from_dict(RagmeterAnswerEvaluator, data, "answers")
    assert back.to_dict() == data
    assert RagmeterAnswerEvaluator.from_dict(ev.to_dict()).metrics == ["token_f1", "faithfulness"]


def test_length_mismatch_names_the_input() -> None:
    with pytest.raises(ValueError, match="predicted_answers has 1 items but questions has 2"):
        RagmeterAnswerEvaluator().run(
            questions=["a", "b"], predicted_answers=["x"], ground_truth_answers=["x", "y"]
        )
    with pytest.raises(ValueError, match="contexts has 3 items but questions has 1"):
        RagmeterAnswerEvaluator(metrics=["faithfulness"]).run(
            questions=["a"], predicted_answers=["x"], contexts=[[], [], []]
        )


def test_metric_without_its_input_names_the_haystack_input() -> None:
    with pytest.raises(
        ValueError, match=r"token_f1 needs a reference answer.*reference is ground_truth_answers"
    ):
        RagmeterAnswerEvaluator().run(questions=["a"], predicted_answers=["x"])


def test_bad_init_arguments() -> None:
    with pytest.raises(ValueError, match="metrics is empty"):
        RagmeterAnswerEvaluator(metrics=[])
    with pytest.raises(
        ValueError, match=r"score_metric 'faithfulness' is not one of metrics \['token_f1'\]"
    ):
        RagmeterAnswerEvaluator(metrics=["token_f1"], score_metric="faithfulness")
    with pytest.raises(UnknownMetricError, match="no metric named 'bleu'"):
        RagmeterAnswerEvaluator(metrics=["bleu"])


def test_empty_input() -> None:
    with pytest.raises(ValueError, match="questions is empty"):
        RagmeterAnswerEvaluator().run(questions=[], predicted_answers=[])
