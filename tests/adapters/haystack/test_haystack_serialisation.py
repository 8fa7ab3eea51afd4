"""Evaluation pipelines with ragmeter components survive Pipeline.dumps/loads (YAML)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("haystack")

from haystack import Document, Pipeline
from ragmeter_haystack import (
    ALLOWED_MODULES,
    RagmeterAnswerEvaluator,
    RagmeterRetrievalEvaluator,
)

HAS_ALLOWLIST = "allowed_modules" in inspect.signature(Pipeline.loads).parameters


def _eval_pipeline() -> Pipeline:
    pipe = Pipeline()
    pipe.add_component(
        "retrieval",
        RagmeterRetrievalEvaluator(
            metrics=["ndcg", "recall", "map"], k_values=[1, 10], document_comparison_field="content"
        ),
    )
    pipe.add_component("answers", RagmeterAnswerEvaluator(metrics=["token_f1", "faithfulness"]))
    return pipe


def _inputs() -> dict[str, Any]:
    return {
        "retrieval": {
            "ground_truth_documents": [
                [Document(content="Paris is in France", score=2.0)],
                [Document(content="Rome")],
            ],
            "retrieved_documents": [
                [Document(content="Berlin"), Document(content="Paris is in France")],
                [Document(content="Rome")],
            ],
        },
        "answers": {
            "questions": ["Where is Paris?", "Capital of Italy?"],
            "predicted_answers": ["Paris is in France.", "Rome"],
            "ground_truth_answers": ["in France", "Rome"],
            "contexts": [["Paris is in France"], ["Rome"]],
        },
    }


def _loads(text: str) -> Pipeline:
    if HAS_ALLOWLIST:
        return Pipeline.loads(text, allowed_modules=ALLOWED_MODULES)
    return Pipeline.loads(text)


def test_yaml_round_trip_gives_the_same_pipeline_and_results() -> None:
    pipe = _eval_pipeline()
    text = pipe.dumps()
    assert "ragmeter_haystack.retrieval_evaluator.RagmeterRetrievalEvaluator" in text
    assert "ragmeter_haystack.answer_evaluator.RagmeterAnswerEvaluator" in text
    loaded = _loads(text)
    assert loaded.to_dict() == pipe.to_dict()
    assert loaded.dumps() == text
    before, after = pipe.run(_inputs()), loaded.run(_inputs())
    assert after == before
    assert before["retrieval"]["individual_scores"] == [pytest.approx(1 / 1.584962500721156), 1.0]


@pytest.mark.skipif(not HAS_ALLOWLIST, reason="Haystack 2.x has no deserialization allowlist")
def test_loading_without_the_allowlist_is_refused_by_haystack() -> None:
    from haystack.core.errors import DeserializationError

    text = _eval_pipeline().dumps()
    with pytest.raises(DeserializationError, match="ragmeter_haystack"):
        Pipeline.loads(text)


@pytest.mark.skipif(not HAS_ALLOWLIST, reason="Haystack 2.x has no deserialization allowlist")
def test_allow_deserialization_and_the_environment_variable() -> None:
    """In a fresh process (the allowlist is process-wide): env var, refusal, then the call."""
    code = """
import os, sys
from haystack import Pipeline
from haystack.core.errors import DeserializationError
import ragmeter_haystack
text = sys.stdin.read()
os.environ["HAYSTACK_DESERIALIZATION_ALLOWLIST"] = "ragmeter_haystack"
print(sorted(Pipeline.loads(text).to_dict()["components"]))
del os.environ["HAYSTACK_DESERIALIZATION_ALLOWLIST"]
try:
    Pipeline.loads(text)
except DeserializationError:
    print("refused")
ragmeter_haystack.allow_deserialization()
print(sorted(Pipeline.loads(text).to_dict()["components"]))
"""
    env = {**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False"}
    env.pop("HAYSTACK_DESERIALIZATION_ALLOWLIST", None)
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=_eval_pipeline().dumps(),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == [
        "['answers', 'retrieval']",
        "refused",
        "['answers', 'retrieval']",
    ]


def test_allow_deserialization_is_a_no_op_without_an_allowlist(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Haystack 2 has no allowlist (CI installs Haystack 3, so its absence is simulated:
    without ``allow_deserialization_module`` the call must do nothing and raise nothing)."""
    import haystack.core.serialization as serialization
    import ragmeter_haystack

    calls: list[str] = []
    if hasattr(serialization, "allow_deserialization_module"):
        monkeypatch.delattr(serialization, "allow_deserialization_module")
    ragmeter_haystack.allow_deserialization()  # Haystack 2: nothing to do, nothing raised
    # and with the allowlist present, it is called with the package's name
    monkeypatch.setattr(serialization, "allow_deserialization_module", calls.append, raising=False)
    ragmeter_haystack.allow_deserialization()
    assert calls == ["ragmeter_haystack"]
    assert _loads(_eval_pipeline().dumps()).to_dict() == _eval_pipeline().to_dict()
