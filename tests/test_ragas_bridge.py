"""The Ragas bridge: a clear error without ragas; field-for-field conversion with it."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from ragmeter.errors import InvalidInputError, MissingDependencyError, RagmeterError
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


def _ragas() -> Any:
    """The installed Ragas. The ``[test]`` extra installs it (with ``langchain-community<0.4``,
    beside which ragas 0.4 imports), so an import that fails is a failure, never a skip."""
    try:
        import ragas
    except ImportError as exc:
        pytest.fail(
            f"ragas does not import ({exc!r}): the [test] extra installs ragas and "
            "langchain-community<0.4; pip install -e '.[test]'"
        )
    return ragas


@pytest.mark.slow  # importing ragas takes about 2 s
def test_conversion_to_real_ragas_objects_field_for_field() -> None:
    ragas = _ragas()
    fields = set(ragas.SingleTurnSample.model_fields)
    assert set(RAGAS_FIELDS.values()) <= fields  # ids too (ragas >= 0.4, as [test] installs)
    rag_eval = {"id": "s3", "question": "q3", "answer": "a3", "context": ["c3"]}
    dataset = as_ragas_dataset([SAMPLE, {"user_input": "q", "response": "a"}, rag_eval])
    assert isinstance(dataset, ragas.EvaluationDataset)
    assert len(dataset.samples) == 3
    assert all(type(s) is ragas.SingleTurnSample for s in dataset.samples)
    first, second, third = dataset.samples
    for ours, theirs in RAGAS_FIELDS.items():
        assert getattr(first, theirs) == getattr(SAMPLE, ours) is not None, theirs
    assert (second.user_input, second.response) == ("q", "a")
    assert all(
        getattr(second, f) is None for f in set(RAGAS_FIELDS.values()) - {"user_input", "response"}
    )
    assert (third.user_input, third.response, third.retrieved_contexts) == ("q3", "a3", ["c3"])
    # Ragas reads its own objects back: the same rows, in order.
    rows = dataset.to_list()
    assert rows[0] == ragas_fields(SAMPLE)
    assert rows[1] == {"user_input": "q", "response": "a"}
    assert ragas.EvaluationDataset.from_list(rows).samples == dataset.samples


@pytest.mark.slow
def test_a_sample_that_does_not_validate_is_named() -> None:
    _ragas()
    with pytest.raises(InvalidInputError, match=r"sample 1 \(id 'bad'\).*latency_ms"):
        as_ragas_dataset([SAMPLE, {"id": "bad", "latency_ms": "slow"}])
