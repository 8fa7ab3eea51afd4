"""The Ragas bridge: a clear error without ragas; field-for-field conversion with it."""

from __future__ import annotations

import sys

import pytest

from ragmeter.errors import MissingDependencyError, RagmeterError
from ragmeter.ragas_bridge import RAGAS_FIELDS, as_ragas_dataset, ragas_fields
from ragmeter.schema import RagSample

SAMPLE = RagSample(
    id="s1",
    question="What is the capital of France?",
    answer="Paris",
    context=["Paris is the capital of France."],
    reference="Paris",
    golden_documents=["Paris is the capital of France."],
    retrieved_ids=["d1"],
    reference_ids=["d1"],
    latency_ms=12.0,
)


def test_missing_ragas_gives_the_pip_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ragas", None)  # makes `import ragas` fail
    with pytest.raises(MissingDependencyError, match=r"pip install 'ragmeter\[ragas\]'"):
        as_ragas_dataset([SAMPLE])
    with pytest.raises(ImportError, match="'ragas'"):
        as_ragas_dataset([SAMPLE])
    with pytest.raises(RagmeterError):
        as_ragas_dataset([SAMPLE])


def test_fields_copied_unchanged() -> None:
    assert ragas_fields(SAMPLE) == {
        "user_input": "What is the capital of France?",
        "response": "Paris",
        "retrieved_contexts": ["Paris is the capital of France."],
        "reference": "Paris",
        "reference_contexts": ["Paris is the capital of France."],
        "retrieved_context_ids": ["d1"],
        "reference_context_ids": ["d1"],
    }
    older_ragas = ["user_input", "response", "retrieved_contexts", "reference"]
    assert set(ragas_fields(SAMPLE, older_ragas)) == set(older_ragas)
    assert ragas_fields(RagSample(id="x")) == {}
    assert set(RAGAS_FIELDS) <= set(RagSample.model_fields)


def test_real_conversion_when_ragas_is_installed() -> None:
    ragas = pytest.importorskip("ragas")
    dataset = as_ragas_dataset([SAMPLE, {"user_input": "q", "response": "a"}])
    assert isinstance(dataset, ragas.EvaluationDataset)
    first = dataset.samples[0]
    for ours, theirs in RAGAS_FIELDS.items():
        if hasattr(first, theirs):
            assert getattr(first, theirs) == getattr(SAMPLE, ours)
    assert dataset.samples[1].response == "a"
