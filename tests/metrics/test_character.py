"""character_recall/precision/f1 as RAG_METRICS on RagSample.gold_spans vs retrieved_spans."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragmeter.metrics.character  # noqa: F401  (registers the metrics)
from ragmeter.errors import InvalidInputError
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.schema import RagSample, coerce_sample
from ragmeter.spans import (
    Chunk,
    EvalItem,
    GoldSpan,
    Span,
    character_f1,
    character_precision,
    character_recall,
)

NAMES = ("character_recall", "character_precision", "character_f1")
GOLD = [GoldSpan(Span("doc1", 100, 270))]


def _scores(sample: RagSample) -> tuple[float | None, ...]:
    return tuple(RAG_METRICS[name].score(sample) for name in NAMES)


def test_registered_with_needs() -> None:
    for name in NAMES:
        metric = RAG_METRICS[name]
        assert metric.name == name
        assert metric.needs == {"gold_spans", "retrieved_spans"}
        assert metric.higher_is_better


def test_big_and_small_chunk_on_samples() -> None:
    big = RagSample(gold_spans=GOLD, retrieved_spans=[Span("doc1", 0, 2000)])
    small = RagSample(gold_spans=GOLD, retrieved_spans=[Span("doc1", 100, 270)])
    assert _scores(big) == (1.0, 0.085, pytest.approx(2 * 0.085 / 1.085))
    assert _scores(small) == (1.0, 1.0, 1.0)


def test_samples_from_plain_mappings() -> None:
    sample = coerce_sample(
        {
            "gold_spans": [{"span": {"doc_id": "refund.md", "start": 100, "end": 200}}],
            "retrieved_spans": [
                {"doc_id": "refund.md", "start": 80, "end": 150},
                {"doc_id": "refund.md", "start": 150, "end": 190},
            ],
        }
    )
    recall, precision, f1 = _scores(sample)
    assert recall == 0.9 and precision == 90 / 110
    assert f1 == pytest.approx(2 * 0.9 * (90 / 110) / (0.9 + 90 / 110))


def test_skipped_and_zero_cases() -> None:
    assert _scores(RagSample(gold_spans=GOLD)) == (None, None, None)
    assert _scores(RagSample(retrieved_spans=[Span("doc1", 0, 5)])) == (None, None, None)
    # no gold of grade > 0: nothing to find, left out like a query with no relevant doc
    assert _scores(RagSample(gold_spans=[], retrieved_spans=[Span("doc1", 0, 5)])) == (None,) * 3
    zero_grade = [GoldSpan(Span("doc1", 0, 5), grade=0)]
    assert _scores(RagSample(gold_spans=zero_grade, retrieved_spans=[])) == (None,) * 3
    # gold but nothing retrieved: a real miss
    assert _scores(RagSample(gold_spans=GOLD, retrieved_spans=[])) == (0.0, 0.0, 0.0)
    assert not RAG_METRICS["character_recall"].applies_to(RagSample(gold_spans=GOLD))


def test_invalid_spans_in_samples_are_rejected_naming_the_field() -> None:
    with pytest.raises(InvalidInputError, match=r"field 'retrieved_spans.0.*start must be <= end"):
        coerce_sample(
            {"gold_spans": [], "retrieved_spans": [{"doc_id": "d", "start": 9, "end": 2}]}
        )
    with pytest.raises(InvalidInputError, match=r"field 'gold_spans.0.*covers no character"):
        coerce_sample({"gold_spans": [{"span": {"doc_id": "d", "start": 3, "end": 3}}]})


spans = st.builds(
    lambda doc, start, length: Span(doc, start, start + length),
    st.sampled_from(["a", "b"]),
    st.integers(0, 200),
    st.integers(0, 150),
)
golds = st.builds(
    lambda s, g: GoldSpan(Span(s.doc_id, s.start, s.end + 1), g), spans, st.integers(0, 2)
)


@settings(max_examples=150, deadline=None)
@given(st.lists(golds, max_size=4), st.lists(spans, max_size=5))
def test_sample_metrics_agree_with_span_functions(
    gold: list[GoldSpan], retrieved: list[Span]
) -> None:
    sample = RagSample(gold_spans=gold, retrieved_spans=retrieved)
    item = EvalItem("q", "q?", gold=tuple(gold))
    chunks = [Chunk(f"c{i}", s) for i, s in enumerate(retrieved)]
    scores = _scores(sample)
    if not item.gold_spans:
        assert scores == (None, None, None)
        return
    expected = (
        character_recall(item, chunks),
        character_precision(item, chunks),
        character_f1(item, chunks),
    )
    assert scores == expected
    assert all(0.0 <= s <= 1.0 for s in expected)
