"""Groundedness, abstention and score_answer: seed 004 cases, contextgrid parity, properties."""

from __future__ import annotations

import contextgrid as cg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.metrics.grounding import (
    DEFAULT_ABSTENTION_PHRASES,
    Answer,
    AnswerScore,
    AssembledContext,
    groundedness,
    is_abstention,
    score_answer,
)
from ragmeter.schema import RagSample
from ragmeter.spans import Chunk, EvalItem, GoldSpan, Span

TEXT = "Refunds are available within 30 days of purchase."
ITEM = EvalItem(
    id="q1",
    question="What is the refund window?",
    gold=(GoldSpan(Span("refund.md", 0, 46)),),
)
GOLD_CHUNK = Chunk(id="g1", span=Span("refund.md", 0, 46), text=TEXT)
CONTEXT = AssembledContext(text=TEXT, chunks=(GOLD_CHUNK,), tokens=12)

CG_ITEM = cg.EvalItem(
    id="q1", question="What is the refund window?", gold=(cg.GoldSpan(cg.Span("refund.md", 0, 46)),)
)
CG_CHUNK = cg.Chunk(id="g1", span=cg.Span("refund.md", 0, 46), text=TEXT)
CG_CONTEXT = cg.AssembledContext(text=TEXT, chunks=(CG_CHUNK,), tokens=12)


def _same_as_contextgrid(ours: AnswerScore, theirs: object) -> None:
    for name in (
        "item_id",
        "groundedness",
        "citation_accuracy",
        "evidence_overlap",
        "abstained",
        "should_have_abstained",
        "warnings",
        "abstention_correct",
    ):
        assert getattr(ours, name) == getattr(theirs, name), name


# -- the three seed cases -----------------------------------------------------------------------


def test_good_answer() -> None:
    good = Answer(text="Refunds are available within 30 days.", citations=(1,))
    score = score_answer(ITEM, good, CONTEXT, gold_chunks=[GOLD_CHUNK])
    assert repr(score) == (
        "AnswerScore(item_id='q1', groundedness=1.0, citation_accuracy=1.0, "
        "evidence_overlap=0.75, abstained=False, should_have_abstained=False, warnings=[])"
    )
    assert score.abstention_correct
    theirs = cg.score_answer(
        CG_ITEM, cg.Answer(text=good.text, citations=(1,)), CG_CONTEXT, [CG_CHUNK]
    )
    _same_as_contextgrid(score, theirs)


def test_invented_answer_with_a_bad_citation() -> None:
    invented = Answer(text="Contact the vendor by fax immediately.", citations=(1, 4))
    score = score_answer(ITEM, invented, CONTEXT, gold_chunks=[GOLD_CHUNK])
    assert (score.groundedness, score.citation_accuracy) == (0.0, 0.5)
    assert score.warnings == [
        "only 0% of the answer's words appear in the context it was given, so most of it "
        "came from somewhere else",
        "cited passage(s) that were not in the context: [4]",
    ]
    assert score.evidence_overlap == 0.0
    theirs = cg.score_answer(
        CG_ITEM, cg.Answer(text=invented.text, citations=(1, 4)), CG_CONTEXT, [CG_CHUNK]
    )
    _same_as_contextgrid(score, theirs)


def test_correct_refusal_on_empty_context() -> None:
    empty = AssembledContext(text="", chunks=(), tokens=0)
    declined = score_answer(ITEM, Answer(text="The passages do not contain the answer."), empty)
    assert (declined.abstained, declined.should_have_abstained, declined.abstention_correct) == (
        True,
        True,
        True,
    )
    assert declined.groundedness == 0.0 and declined.citation_accuracy is None
    assert declined.warnings == []
    theirs = cg.score_answer(
        CG_ITEM,
        cg.Answer(text="The passages do not contain the answer."),
        cg.AssembledContext(text="", chunks=(), tokens=0),
    )
    _same_as_contextgrid(declined, theirs)


# -- further behaviour --------------------------------------------------------------------------


def test_should_have_abstained_uses_is_resolved_not_is_answerable() -> None:
    lost = EvalItem("q2", "Refund window?", anchors=("within 30 days",))
    assert lost.is_answerable
    refusal = score_answer(lost, Answer("I don't know."), CONTEXT)
    assert refusal.should_have_abstained and refusal.abstained and refusal.abstention_correct
    guess = score_answer(lost, Answer("Refunds are available within 30 days."), CONTEXT)
    assert guess.should_have_abstained and not guess.abstention_correct
    # a resolved item answered from a real context: answering is right, refusing is wrong
    wrong_refusal = score_answer(ITEM, Answer("I do not know."), CONTEXT)
    assert not wrong_refusal.should_have_abstained and not wrong_refusal.abstention_correct


def test_empty_answer_warns_and_stops() -> None:
    score = score_answer(ITEM, Answer(" ... ", citations=(9,)), CONTEXT, [GOLD_CHUNK])
    assert score.warnings == ["the generator returned nothing"]
    assert score.citation_accuracy is None and score.evidence_overlap == 0.0


def test_low_groundedness_warning_is_suppressed_when_abstaining() -> None:
    s = score_answer(ITEM, Answer("Sorry, not enough information here, friend."), CONTEXT)
    assert s.abstained and s.groundedness < 0.5 and s.warnings == []


def test_citation_accuracy_counts_each_citation() -> None:
    s = score_answer(ITEM, Answer("Refunds.", citations=(0, 1, 2)), CONTEXT)
    assert s.citation_accuracy == pytest.approx(1 / 3)
    assert s.warnings == ["cited passage(s) that were not in the context: [0, 2]"]


def test_custom_abstention_phrases() -> None:
    text = "Keine Angabe in den Quellen."
    assert not is_abstention(text)
    assert is_abstention(text, phrases=["keine angabe"])
    s = score_answer(ITEM, Answer(text), CONTEXT, phrases=("keine angabe",))
    assert s.abstained


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The passages do not contain the answer.", True),
        ("I DON'T KNOW", True),
        ("I don\u2019t know.", True),  # typographic apostrophe
        ("That is   not\nmentioned in the documents.", True),  # whitespace collapsed
        ("It cannot be determined from the context.", True),
        ("Refunds are available within 30 days.", False),
        ("The drug does not contain aspirin.", False),
        ("", False),
    ],
)
def test_is_abstention(text: str, expected: bool) -> None:
    assert is_abstention(text) is expected


def test_every_default_phrase_is_detected() -> None:
    for phrase in DEFAULT_ABSTENTION_PHRASES:
        assert is_abstention(f"Well, {phrase.upper()}, sorry.")


def test_abstention_phrases_differ_from_contextgrid_only_by_being_broader() -> None:
    # documented difference: ragmeter detects every contextgrid refusal, and some more
    for phrase in ("i don't know", "not enough information", "passages do not"):
        assert is_abstention(phrase) and cg.Answer(text=phrase).is_abstention
    for text in ("I'm not sure.", "I can\u2019t answer that.", "The documents do not say."):
        assert is_abstention(text) and not cg.Answer(text=text).is_abstention


def test_groundedness_examples() -> None:
    assert groundedness("Refunds are available within 30 days.", TEXT) == 1.0
    assert groundedness("Paris, obviously", "The capital of France is Paris.") == 0.5
    assert groundedness("PARIS paris Paris", "paris") == 1.0  # distinct words, case-folded
    assert groundedness("", TEXT) == 0.0
    assert groundedness("words", "") == 0.0


# -- properties -----------------------------------------------------------------------------------

words = st.lists(
    st.sampled_from(["refunds", "are", "30", "days", "fax", "Vendor", "the", "é", "x_1"]),
    max_size=8,
).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(words, words, words, st.lists(st.integers(-1, 4), max_size=4))
def test_score_answer_matches_contextgrid(
    answer: str, context: str, gold: str, citations: list[int]
) -> None:
    n = len(context) % 3
    chunks = tuple(Chunk(f"c{i}", Span("d", 0, 1), context) for i in range(n))
    gold_chunks = [Chunk("g", Span("d", 0, 1), gold)]
    ours = score_answer(
        ITEM, Answer(answer, tuple(citations)), AssembledContext(context, chunks, 0), gold_chunks
    )
    cg_chunks = tuple(cg.Chunk(c.id, cg.Span("d", 0, 1), c.text) for c in chunks)
    theirs = cg.score_answer(
        CG_ITEM,
        cg.Answer(answer, citations=tuple(citations)),
        cg.AssembledContext(context, cg_chunks, 0),
        [cg.Chunk("g", cg.Span("d", 0, 1), gold)],
    )
    _same_as_contextgrid(ours, theirs)
    for value in (ours.groundedness, ours.evidence_overlap, ours.citation_accuracy or 0.0):
        assert 0.0 <= value <= 1.0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_groundedness_in_unit_interval(answer: str, context: str) -> None:
    g = groundedness(answer, context)
    assert 0.0 <= g <= 1.0
    if groundedness(answer, answer) > 0:
        assert groundedness(answer, answer) == 1.0
        assert groundedness(answer, context + " " + answer) == 1.0


# -- sample-level metrics -------------------------------------------------------------------------


def test_rag_metrics_are_registered_and_score_samples() -> None:
    g, a = RAG_METRICS["groundedness"], RAG_METRICS["abstained"]
    assert g.needs == {"response", "retrieved_contexts"} and a.needs == {"response"}
    s = RagSample(response="Paris, obviously", retrieved_contexts=["The capital", "is Paris."])
    assert g.score(s) == 0.5 and a.score(s) == 0.0
    refusal = RagSample(answer="I don't know.", context=[])
    assert g.score(refusal) == 0.0 and a.score(refusal) == 1.0
    assert g.score(RagSample(response="Paris")) is None  # no contexts: skipped
    assert a.score(RagSample(response="")) is None  # empty response: skipped
    assert not g.applies_to(RagSample(retrieved_contexts=["x"]))


@pytest.mark.parametrize("answer", ["Refunds are available within 30 days.", "I don't know."])
@pytest.mark.parametrize("gold", [(), ((0, 46, 2),), ((0, 46, 0),)])
@pytest.mark.parametrize("retrieved", ["nothing", "contexts", "spans"])
def test_abstention_correct_metric_matches_contextgrid(
    answer: str, gold: tuple[tuple[int, int, int], ...], retrieved: str
) -> None:
    metric = RAG_METRICS["abstention_correct"]
    assert metric.needs == {"response", "gold_spans"} and metric.higher_is_better
    sample = RagSample(
        response=answer,
        gold_spans=[GoldSpan(Span("refund.md", a, b), g) for a, b, g in gold],
        retrieved_contexts=[TEXT] if retrieved == "contexts" else [],
        retrieved_spans=[Span("refund.md", 0, 46)] if retrieved == "spans" else None,
    )
    item = cg.EvalItem(
        id="q1",
        question="Refund window?",
        gold=tuple(cg.GoldSpan(cg.Span("refund.md", a, b), g) for a, b, g in gold),
    )
    chunks = () if retrieved == "nothing" else (CG_CHUNK,)
    context = cg.AssembledContext(text=TEXT if chunks else "", chunks=chunks, tokens=0)
    expected = cg.score_answer(item, cg.Answer(text=answer), context).abstention_correct
    assert metric.score(sample) == float(expected)


def test_abstention_correct_skips_samples_without_gold_spans() -> None:
    metric = RAG_METRICS["abstention_correct"]
    assert metric.score(RagSample(response="I don't know.", retrieved_contexts=["x"])) is None
    assert metric.score(RagSample(response="", gold_spans=[])) is None


# -- validation errors ----------------------------------------------------------------------------


def test_validation_errors() -> None:
    with pytest.raises(InvalidInputError, match=r"answer must be a str, got NoneType"):
        groundedness(None, "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"context must be a str, got list"):
        groundedness("x", ["x"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"text must be a str, got bytes"):
        is_abstention(b"I don't know")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"phrases must be a sequence of strings, not one"):
        is_abstention("x", phrases="i don't know")
    with pytest.raises(InvalidInputError, match=r"every abstention phrase must be a non-empty"):
        is_abstention("x", phrases=["ok", " "])
    with pytest.raises(InvalidInputError, match=r"Answer.citations must hold ints .* got '1'"):
        Answer("x", citations=("1",))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"Answer.citations must be a tuple of ints"):
        Answer("x", citations=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"Answer.text must be a str"):
        Answer(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"AssembledContext.tokens must be an int >= 0"):
        AssembledContext("x", (), -1)
    with pytest.raises(InvalidInputError, match=r"AssembledContext.chunks\[0\] must be a Chunk"):
        AssembledContext("x", ("c1",), 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"item must be an EvalItem, got str"):
        score_answer("q1", Answer("x"), CONTEXT)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"answer must be an Answer, got str"):
        score_answer(ITEM, "x", CONTEXT)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"context must be an AssembledContext, got str"):
        score_answer(ITEM, Answer("x"), "ctx")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"gold_chunks\[0\] must be a Chunk, got str"):
        score_answer(ITEM, Answer("x"), CONTEXT, ["g1"])  # type: ignore[list-item]
