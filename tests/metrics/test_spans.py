"""Character-level evidence (ragmeter.spans): seed 004 examples, contextgrid parity, properties."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import contextgrid as cg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.spans import (
    Chunk,
    EvalItem,
    GoldSpan,
    Span,
    character_f1,
    character_precision,
    character_recall,
    coverage_fraction,
    gold_coverage_by_chunk,
    merge_spans,
    retrieved_character_count,
    span_qrels,
)

# -- seed 004 worked examples ------------------------------------------------------------------

ITEM = EvalItem(
    id="q1",
    question="What was the settlement amount?",
    gold=(GoldSpan(Span("doc1", 100, 270)),),
)
BIG = Chunk(id="c1", span=Span("doc1", 0, 2000), text="x" * 2000)
SMALL = Chunk(id="c2", span=Span("doc1", 100, 270), text="x" * 170)


def test_big_chunk_vs_small_chunk() -> None:
    assert (character_recall(ITEM, [BIG]), character_precision(ITEM, [BIG])) == (1.0, 0.085)
    assert (character_recall(ITEM, [SMALL]), character_precision(ITEM, [SMALL])) == (1.0, 1.0)
    assert character_f1(ITEM, [BIG]) == pytest.approx(2 * 0.085 / 1.085)
    assert character_f1(ITEM, [SMALL]) == 1.0


def test_retrieved_character_count_merges_contained_chunk() -> None:
    assert retrieved_character_count([BIG, SMALL]) == 2000
    assert retrieved_character_count([SMALL]) == 170
    assert retrieved_character_count([]) == 0


def test_gold_coverage_by_chunk() -> None:
    assert gold_coverage_by_chunk(ITEM, [BIG, SMALL]) == {"c1": 1.0, "c2": 1.0}
    half = Chunk("h", Span("doc1", 0, 185))
    assert gold_coverage_by_chunk(ITEM, [half]) == {"h": 0.5}


def test_coverage_fraction_seed_examples() -> None:
    gold = Span("refund.md", 100, 200)
    first = Span("refund.md", 80, 150)
    second = Span("refund.md", 150, 190)
    assert coverage_fraction(gold, [first, second]) == 0.9
    assert coverage_fraction(gold, [first]) == 0.5
    assert coverage_fraction(gold, [Span("other.md", 100, 200)]) == 0.0


def test_coverage_fraction_edges() -> None:
    assert coverage_fraction(Span("d", 5, 5), [Span("d", 0, 10)]) == 0.0  # empty target
    # overlaps among the others count once
    assert coverage_fraction(Span("d", 0, 10), [Span("d", 0, 6), Span("d", 2, 6)]) == 0.6
    assert coverage_fraction(Span("d", 0, 10), []) == 0.0


def test_seed_examples_match_contextgrid() -> None:
    cg_item = cg.EvalItem(id="q1", question="q?", gold=(cg.GoldSpan(cg.Span("doc1", 100, 270)),))
    cg_big = cg.Chunk(id="c1", span=cg.Span("doc1", 0, 2000), text="x" * 2000)
    cg_small = cg.Chunk(id="c2", span=cg.Span("doc1", 100, 270), text="x" * 170)
    for ours, theirs in ((BIG, cg_big), (SMALL, cg_small)):
        assert character_precision(ITEM, [ours]) == cg.character_precision(cg_item, [theirs])
        assert character_recall(ITEM, [ours]) == cg.character_recall(cg_item, [theirs])
    assert gold_coverage_by_chunk(ITEM, [BIG, SMALL]) == cg.gold_coverage_by_chunk(
        cg_item, [cg_big, cg_small]
    )


def test_no_gold_and_no_retrieval() -> None:
    empty = EvalItem("q0", "unanswerable?")
    assert character_recall(empty, [BIG]) == 0.0
    assert character_precision(empty, [BIG]) == 0.0
    assert character_f1(empty, [BIG]) == 0.0
    assert gold_coverage_by_chunk(empty, [BIG]) == {}
    assert character_precision(ITEM, []) == 0.0
    assert character_recall(ITEM, []) == 0.0
    # a zero-length chunk retrieves no character
    assert character_precision(ITEM, [Chunk("z", Span("doc1", 150, 150))]) == 0.0


def test_gold_split_across_chunks_is_recalled_by_union() -> None:
    a, b = Chunk("a", Span("doc1", 0, 185)), Chunk("b", Span("doc1", 185, 400))
    assert character_recall(ITEM, [a]) == 0.5
    assert character_recall(ITEM, [a, b]) == 1.0
    assert character_recall(ITEM, [Chunk("o", Span("doc2", 100, 270))]) == 0.0


def test_grade_zero_gold_is_not_evidence() -> None:
    # Documented difference from contextgrid, which counts grade-0 spans as gold.
    item = EvalItem("q", "q?", gold=(GoldSpan(Span("doc1", 0, 50), grade=0),))
    assert item.is_resolved and item.is_answerable
    assert character_recall(item, [BIG]) == 0.0
    assert gold_coverage_by_chunk(item, [BIG]) == {}
    mixed = EvalItem(
        "q", "q?", gold=(GoldSpan(Span("doc1", 0, 50), grade=0), GoldSpan(Span("doc1", 60, 70)))
    )
    assert character_recall(mixed, [Chunk("c", Span("doc1", 0, 65))]) == 0.5


def test_is_resolved_and_is_answerable() -> None:
    assert ITEM.is_resolved and ITEM.is_answerable
    lost = EvalItem("q2", "Refund window?", anchors=("within 30 days",))
    assert lost.is_answerable and not lost.is_resolved
    none = EvalItem("q3", "Unanswerable?")
    assert not none.is_answerable and not none.is_resolved
    listy = EvalItem("q4", "q?", gold=[GoldSpan(Span("d", 0, 1))])  # type: ignore[arg-type]
    assert isinstance(listy.gold, tuple)


def test_merge_spans() -> None:
    spans = [Span("d", 5, 9), Span("d", 0, 5), Span("e", 3, 4), Span("d", 20, 30), Span("e", 1, 1)]
    assert merge_spans(spans) == [Span("d", 0, 9), Span("d", 20, 30), Span("e", 3, 4)]


# -- validation errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("d", -1, 5), r"start must be an int >= 0, got -1"),
        (("d", 0, -2), r"end must be an int >= 0, got -2"),
        (("d", 7, 3), r"Span\('d', 7, 3\): start must be <= end"),
        (("d", 1.5, 3), r"start must be an int >= 0, got 1.5"),
        (("d", True, 3), r"start must be an int >= 0, got True"),
        ((3, 0, 1), r"doc_id must be a str, got int"),
    ],
)
def test_span_validation(args: tuple[object, object, object], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        Span(*args)  # type: ignore[arg-type]


def test_goldspan_chunk_evalitem_validation() -> None:
    with pytest.raises(InvalidInputError, match=r"covers no character"):
        GoldSpan(Span("d", 3, 3))
    with pytest.raises(InvalidInputError, match=r"grade must be an int >= 0, got -1"):
        GoldSpan(Span("d", 0, 3), grade=-1)
    with pytest.raises(InvalidInputError, match=r"GoldSpan.span must be a Span"):
        GoldSpan(("d", 0, 3))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"Chunk.id must be a non-empty str"):
        Chunk("", Span("d", 0, 3))
    with pytest.raises(InvalidInputError, match=r"chunk 'c': span must be a Span"):
        Chunk("c", (0, 3))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"chunk 'c': text must be a str"):
        Chunk("c", Span("d", 0, 3), None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"eval item 'q' has an empty question"):
        EvalItem("q", "  ")
    with pytest.raises(InvalidInputError, match=r"EvalItem.id must be a non-empty str"):
        EvalItem("", "q?")
    with pytest.raises(InvalidInputError, match=r"gold\[0\] must be a GoldSpan"):
        EvalItem("q", "q?", gold=(Span("d", 0, 3),))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"anchors\[0\] must be a non-empty quote"):
        EvalItem("q", "q?", anchors=("",))


def test_function_argument_validation() -> None:
    with pytest.raises(InvalidInputError, match=r"target must be a Span"):
        coverage_fraction("d", [])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"others must be an iterable of Span, not one"):
        coverage_fraction(Span("d", 0, 1), Span("d", 0, 1))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"others\[1\] must be a Span, got tuple"):
        coverage_fraction(Span("d", 0, 1), [Span("d", 0, 1), ("d", 0, 1)])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match=r"retrieved must be an iterable of Chunk, not one"):
        character_recall(ITEM, BIG)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"retrieved\[0\] must be a Chunk, got Span"):
        character_precision(ITEM, [Span("doc1", 0, 5)])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match=r"item must be an EvalItem, got str"):
        character_f1("q1", [BIG])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"chunk id 'c1' is used for two different spans"):
        gold_coverage_by_chunk(ITEM, [BIG, Chunk("c1", Span("doc1", 0, 10))])
    with pytest.raises(InvalidInputError, match=r"spans\[0\] must be a Span"):
        merge_spans([(0, 1)])  # type: ignore[list-item]


# -- span-level qrels ----------------------------------------------------------------------------


def _fixed_chunks(doc: str, length: int, size: int) -> list[Chunk]:
    return [
        Chunk(f"{doc}:{size}:{i}", Span(doc, start, min(start + size, length)))
        for i, start in enumerate(range(0, length, size))
    ]


def test_span_qrels_grades_and_threshold() -> None:
    items = [
        EvalItem("q1", "q?", gold=(GoldSpan(Span("doc1", 100, 270)),)),
        EvalItem(
            "q2",
            "q?",
            gold=(GoldSpan(Span("doc1", 390, 420), grade=1), GoldSpan(Span("doc1", 395, 405))),
        ),
        EvalItem("q3", "unanswerable?"),
        EvalItem("q4", "q?", gold=(GoldSpan(Span("doc1", 0, 10), grade=0),)),
    ]
    chunks = _fixed_chunks("doc1", 1000, 200)
    # q1: 100-200 and 200-270 -> chunk 0 holds 100/170, chunk 1 holds 70/170 (< 0.5)
    # q2: 390-420 straddles 400 -> chunk 1 holds 10/30, chunk 2 holds 20/30 (grade 1);
    #     395-405 (grade 2) is split exactly in half -> both chunks clear 0.5 -> max grade 2
    assert span_qrels(items, chunks) == {
        "q1": {"doc1:200:0": 2},
        "q2": {"doc1:200:1": 2, "doc1:200:2": 2},
    }
    assert span_qrels(items, chunks, min_coverage=0.4) == {
        "q1": {"doc1:200:0": 2, "doc1:200:1": 2},
        "q2": {"doc1:200:1": 2, "doc1:200:2": 2},
    }
    assert span_qrels(items, chunks, min_coverage=1.0) == {}
    # the mapping form gives the same result
    as_map = {it.id: it.gold for it in items}
    assert span_qrels(as_map, chunks) == span_qrels(items, chunks)


def test_span_qrels_chunk_size_sweep_feeds_evaluate_run() -> None:
    gold = {
        "q1": [GoldSpan(Span("doc1", 100, 270))],
        "q2": [GoldSpan(Span("doc2", 1200, 1260))],
    }

    def chunk_at(chunks: list[Chunk], doc: str, pos: int) -> str:
        return next(
            c.id for c in chunks if c.span.doc_id == doc and c.span.start <= pos < c.span.end
        )

    recall = {}
    for size in (100, 250, 2000):
        chunks = _fixed_chunks("doc1", 2000, size) + _fixed_chunks("doc2", 2000, size)
        qrels = span_qrels(gold, chunks)
        assert set(qrels) == {"q1", "q2"}  # the same gold survives every chunking
        # a retriever that returns the chunk holding character 150 of doc1 for q1 and the
        # chunk holding character 1000 of doc2 for q2
        run = {"q1": [chunk_at(chunks, "doc1", 150)], "q2": [chunk_at(chunks, "doc2", 1000)]}
        recall[size] = evaluate_run(qrels, run, k_values=[1], metrics=["recall"]).metrics
    # 100-char chunks: doc2's 1000-1100 holds none of 1200-1260; 250: 1000-1250 holds 50/60
    assert recall == {100: {"recall@1": 0.5}, 250: {"recall@1": 1.0}, 2000: {"recall@1": 1.0}}
    # q1's gold (100-270) is split across 100-char chunks: only 100-200 clears 0.5
    assert span_qrels(gold, _fixed_chunks("doc1", 2000, 100))["q1"] == {"doc1:100:1": 2}


def test_span_qrels_validation() -> None:
    chunks = [BIG]
    for bad in (0, 0.0, -0.1, 1.5, True, "0.5"):
        with pytest.raises(InvalidInputError, match=r"min_coverage must be a number in \(0, 1\]"):
            span_qrels([ITEM], chunks, min_coverage=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"item id 'q1' appears more than once"):
        span_qrels([ITEM, ITEM], chunks)
    with pytest.raises(InvalidInputError, match=r"items\['q1'\]\[0\] must be a GoldSpan"):
        span_qrels({"q1": [Span("doc1", 0, 5)]}, chunks)  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match=r"chunk id 'c1' is used for two different spans"):
        span_qrels([ITEM], [BIG, Chunk("c1", Span("doc1", 5, 9))])
    with pytest.raises(InvalidInputError, match=r"item must be an EvalItem"):
        span_qrels(["q1"], chunks)  # type: ignore[list-item]


# -- properties, with contextgrid as the oracle ------------------------------------------------

DOCS = st.sampled_from(["a", "b"])


@st.composite
def spans(draw: st.DrawFn, *, min_size: int = 0) -> Span:
    start = draw(st.integers(0, 300))
    length = draw(st.integers(min_size, 200))
    return Span(draw(DOCS), start, start + length)


gold_spans = st.builds(GoldSpan, spans(min_size=1), st.integers(1, 3))
items = st.builds(
    lambda gold: EvalItem("q", "q?", gold=tuple(gold)), st.lists(gold_spans, max_size=4)
)
chunk_lists = st.lists(spans(), max_size=6).map(
    lambda ss: [Chunk(f"c{i}", s) for i, s in enumerate(ss)]
)


def _cg_span(s: Span) -> cg.Span:
    return cg.Span(s.doc_id, s.start, s.end)


def _cg_item(item: EvalItem) -> cg.EvalItem:
    gold = tuple(cg.GoldSpan(_cg_span(g.span), g.grade) for g in item.gold)
    return cg.EvalItem(id=item.id, question=item.question, gold=gold)


def _cg_chunks(chunks: Iterable[Chunk]) -> list[cg.Chunk]:
    return [cg.Chunk(id=c.id, span=_cg_span(c.span), text=c.text) for c in chunks]


def _chars(ss: Iterable[Span]) -> set[tuple[str, int]]:
    """Brute-force union oracle: the set of (doc, position) characters."""
    return {(s.doc_id, p) for s in ss for p in range(s.start, s.end)}


@settings(max_examples=150, deadline=None)
@given(items, chunk_lists)
def test_character_scores_match_contextgrid_and_lie_in_unit_interval(
    item: EvalItem, chunks: list[Chunk]
) -> None:
    theirs_item, theirs_chunks = _cg_item(item), _cg_chunks(chunks)
    for ours_fn, theirs_fn in (
        (character_recall, cg.character_recall),
        (character_precision, cg.character_precision),
        (character_f1, cg.character_f1),
    ):
        ours = ours_fn(item, chunks)
        assert 0.0 <= ours <= 1.0
        assert ours == pytest.approx(theirs_fn(theirs_item, theirs_chunks), abs=1e-12)
    assert retrieved_character_count(chunks) == cg.retrieved_character_count(theirs_chunks)
    coverage = gold_coverage_by_chunk(item, chunks)
    assert coverage == pytest.approx(cg.gold_coverage_by_chunk(theirs_item, theirs_chunks))
    assert all(0.0 <= v <= 1.0 for v in coverage.values())
    # brute-force oracle for the union arithmetic
    gold_chars = _chars(item.gold_spans)
    got_chars = _chars(c.span for c in chunks)
    if gold_chars:
        assert character_recall(item, chunks) == pytest.approx(
            len(gold_chars & got_chars) / len(gold_chars)
        )


@settings(max_examples=150, deadline=None)
@given(spans(), st.lists(spans(), max_size=6))
def test_coverage_fraction_matches_contextgrid(target: Span, others: list[Span]) -> None:
    ours = coverage_fraction(target, others)
    assert 0.0 <= ours <= 1.0
    assert ours == pytest.approx(
        cg.coverage_fraction(_cg_span(target), [_cg_span(o) for o in others]), abs=1e-12
    )


@settings(max_examples=150, deadline=None)
@given(chunk_lists)
def test_merging_overlapping_spans_never_changes_count_beyond_union(chunks: list[Chunk]) -> None:
    count = retrieved_character_count(chunks)
    assert count == len(_chars(c.span for c in chunks))
    merged = [Chunk(f"m{i}", s) for i, s in enumerate(merge_spans(c.span for c in chunks))]
    assert retrieved_character_count(merged) == count
    assert sum(c.span.length for c in merged) == count  # merged spans are disjoint
    assert count <= sum(c.span.length for c in chunks)
    assert count >= max((c.span.length for c in chunks), default=0)


@settings(max_examples=150, deadline=None)
@given(items, chunk_lists.filter(bool), st.data())
def test_splitting_a_chunk_never_changes_character_recall(
    item: EvalItem, chunks: list[Chunk], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(chunks) - 1))
    victim = chunks[i].span
    cut = data.draw(st.integers(victim.start, victim.end))
    halves = [
        Chunk("left", Span(victim.doc_id, victim.start, cut)),
        Chunk("right", Span(victim.doc_id, cut, victim.end)),
    ]
    split = chunks[:i] + halves + chunks[i + 1 :]
    assert character_recall(item, split) == character_recall(item, chunks)
    assert character_precision(item, split) == character_precision(item, chunks)
    assert retrieved_character_count(split) == retrieved_character_count(chunks)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(gold_spans, min_size=1, max_size=4),
    st.integers(20, 400),
    st.sampled_from([0.25, 0.5, 0.75, 1.0]),
)
def test_span_qrels_match_contextgrid_resolver(
    gold: Sequence[GoldSpan], size: int, threshold: float
) -> None:
    chunks = _fixed_chunks("a", 600, size) + _fixed_chunks("b", 600, size)
    item = EvalItem("q", "q?", gold=tuple(gold))
    resolver = cg.SpanResolver(threshold=threshold)
    theirs = resolver.qrels(cg.EvalSet(id="s", items=(_cg_item(item),)), _cg_chunks(chunks))
    assert span_qrels([item], chunks, min_coverage=threshold) == theirs
