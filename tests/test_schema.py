"""RagSample: Ragas field names, rag-eval aliases, no lost data, errors that name the field."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import InvalidInputError
from ragmeter.schema import RagSample, coerce_sample, samples_to_qrels, samples_to_run


def test_rag_eval_names_load_unchanged() -> None:
    s = coerce_sample(
        {
            "id": "sample-1",
            "question": "What is the capital of France?",
            "answer": "Paris is the capital of France.",
            "context": ["Paris is the capital and largest city of France."],
            "golden_documents": ["Paris is the capital and largest city of France."],
            "retrieved": ["Paris is the capital and largest city of France."],
        }
    )
    assert s.id == "sample-1"
    assert s.user_input == "What is the capital of France?"
    assert s.response == "Paris is the capital of France."
    assert s.retrieved_contexts == ["Paris is the capital and largest city of France."]
    assert s.reference_contexts == s.retrieved_texts == s.retrieved_contexts


@pytest.mark.parametrize(
    "data",
    [{"question": "a", "user_input": "b"}, {"user_input": "b", "question": "a"}],
)
def test_conflicting_alias_and_name_refused_in_either_order(data: dict[str, str]) -> None:
    with pytest.raises(InvalidInputError, match="both 'question' and 'user_input'"):
        coerce_sample(data)


def test_same_value_under_both_names_is_fine() -> None:
    assert coerce_sample({"question": "a", "user_input": "a"}).user_input == "a"


def test_unknown_keys_are_kept_in_metadata() -> None:
    s = coerce_sample({"user_input": "q", "category": "geo", "metadata": {"run": 3}})
    assert s.metadata == {"run": 3, "category": "geo"}


def test_id_is_generated_and_unique_when_absent() -> None:
    a, b = RagSample(), RagSample()
    assert a.id != b.id and len(a.id) == 32
    assert coerce_sample({"id": 7}).id == "7"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"question": 5}, r"field 'user_input' \(rag-eval: 'question'\)"),
        ({"retrieved_ids": "d1"}, "field 'retrieved_ids'"),
        ({"latency_ms": -1}, "field 'latency_ms'.*greater than or equal to 0"),
        ({"relevance": {"d": float("nan")}}, "grade of doc 'd' is NaN"),
        ({"relevance": {"d": float("inf")}}, "grade of doc 'd' is inf; grades must be finite"),
        ({"latency_ms": float("inf")}, "field 'latency_ms'.*finite number"),
        ({"id": "s9", "input_tokens": "many"}, r"sample 4 \(id 's9'\): field 'input_tokens'"),
    ],
)
def test_validation_errors_name_the_field(data: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        coerce_sample(data, index=4)


def test_non_mapping_refused() -> None:
    with pytest.raises(InvalidInputError, match="sample 2 must be a RagSample or a mapping"):
        coerce_sample(["not", "a", "sample"], index=2)  # type: ignore[arg-type]


def test_relevance_wins_over_reference_ids() -> None:
    s = RagSample(reference_ids=["a"], relevance={"b": 2})
    assert s.relevance_map() == {"b": 2}
    assert RagSample(reference_ids=["a", "c"]).relevance_map() == {"a": 1, "c": 1}
    assert RagSample().relevance_map() is None


def test_samples_to_run_and_qrels() -> None:
    samples = [
        {"id": "q1", "retrieved_ids": ["d1", "d2"], "reference_ids": ["d2"]},
        {"id": "q2", "retrieved_ids": ["d3"]},
        {"id": "q3", "relevance": {"d9": 3}},
    ]
    assert samples_to_run(samples) == {"q1": ["d1", "d2"], "q2": ["d3"]}
    assert samples_to_qrels(samples) == {"q1": {"d2": 1}, "q3": {"d9": 3}}


def test_all_references() -> None:
    assert RagSample(reference="a", references=["b", "c"]).all_references() == ["a", "b", "c"]


_values = st.none() | st.text(max_size=5) | st.integers(-2, 3) | st.floats(allow_nan=False)
_values = _values | st.lists(st.text(max_size=4) | st.integers(0, 2), max_size=2)
_values = _values | st.dictionaries(st.text(max_size=3), st.integers(0, 2), max_size=2)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([*sorted(RagSample.model_fields), "question", "answer", "topic"]),
        _values,
        max_size=6,
    )
)
def test_plain_dicts_validate_exactly_like_other_mappings(data: dict[str, Any]) -> None:
    # plain dicts in field names take a fast path; any other mapping the general one
    outcomes = []
    for mapping in (data, MappingProxyType(data)):
        try:
            outcomes.append(coerce_sample(mapping, index=0).model_dump(exclude={"id"}))
        except InvalidInputError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]
    if isinstance(outcomes[0], dict) and data.get("id") is not None:
        assert coerce_sample(data).id == str(data["id"])
