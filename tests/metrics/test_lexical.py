"""Lexical answer metrics: seed 000 numbers, the official SQuAD rules, ef parity, properties."""

from __future__ import annotations

import json
import random
import re
import string
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from unittest.mock import patch

import pytest
from ef import evaluation as ef
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.metrics import lexical
from ragmeter.metrics.base import RAG_METRICS
from ragmeter.metrics.lexical import (
    context_precision,
    context_recall,
    exact_match,
    token_f1,
)
from ragmeter.schema import RagSample
from ragmeter.spans import Span
from ragmeter.text import answer_token_set, answer_tokens, clear_caches, normalize_answer

FinishesWithin = Callable[[int], AbstractContextManager[None]]

# --------------------------------------------------------------------------- the oracle
# The official SQuAD v1.1 evaluation logic, written out independently from its published
# rules (lower, remove punctuation, remove articles, fix whitespace; bag-of-tokens F1 with
# 0 when nothing overlaps; max over the ground truths).


def squad_normalize(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def squad_f1(prediction: str, truth: str) -> float:
    pred = squad_normalize(prediction).split()
    gold = squad_normalize(truth).split()
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    p = same / len(pred)
    r = same / len(gold)
    return 2 * p * r / (p + r)


def squad_em(prediction: str, truth: str) -> float:
    return float(squad_normalize(prediction) == squad_normalize(truth))


# Text that exercises the normalisation: articles, ASCII and Unicode punctuation, control
# characters, odd whitespace, letters whose lower-case form changes length.
_ALPHABET = st.sampled_from(
    list("abcdefxyz ATHEN")
    + list(".,!?'\"-_()")
    + ["\t", "\n", "\x1c", "\x00", "\x7f", "\u00a0", "\u2014", "\u201c", "\u0130", "é", "ß"]
)
texts = st.one_of(
    st.text(_ALPHABET, max_size=30),
    st.lists(
        st.sampled_from(["a", "an", "the", "The", "cat", "an.", "(the)", "x—the"]), max_size=8
    ).map(" ".join),
    st.text(max_size=20),
)


# --------------------------------------------------------------------------- seed 000 numbers


def test_seed_doctest_numbers() -> None:
    assert exact_match("The Eiffel Tower", "eiffel tower") == 1.0
    assert exact_match("Paris", "London") == 0.0
    assert token_f1("the quick brown fox", "a quick brown fox") == 1.0
    assert round(token_f1("quick brown fox", "quick brown dog"), 4) == 0.6667
    assert context_recall("paris france", ["Paris is the capital of France."]) == 1.0
    assert context_recall("paris france", ["London is in England."]) == 0.0
    assert context_precision("paris", ["Paris is in France.", "Unrelated text."]) == 0.5


# --------------------------------------------------------------------------- hand-computed


def test_token_f1_counts_repeated_tokens_as_a_bag() -> None:
    # overlap = min(2, 1) + min(1, 1) = 2; precision 2/3, recall 1 -> 0.8
    assert token_f1("x x y", "x y") == pytest.approx(0.8)
    assert token_f1("x x", "x x") == 1.0


def test_token_f1_empty_sides() -> None:
    assert token_f1("the", "a an") == 1.0  # both normalise to nothing
    assert token_f1("", "paris") == 0.0
    assert token_f1("paris", "!!!") == 0.0


def test_several_references_take_the_maximum() -> None:
    assert exact_match("Paris", ["London", "paris."]) == 1.0
    assert token_f1("quick brown fox", ["dog", "brown fox"]) == pytest.approx(0.8)
    assert context_recall(["zzz", "paris france"], ["Paris, France"]) == 1.0
    assert context_precision(["zzz", "paris"], ["Paris", "x"]) == 0.5


def test_context_metrics_edge_cases() -> None:
    assert context_recall("paris", []) == 0.0
    assert context_precision("paris", []) == 0.0
    assert context_recall("the", ["the"]) == 0.0  # empty normalised reference
    assert context_precision("a", ["a"]) == 0.0
    # recall counts distinct reference tokens, anywhere in the contexts
    assert context_recall("paris paris lyon", ["Paris only"]) == 0.5
    assert context_recall("paris lyon", ["Paris", "and Lyon"]) == 1.0


def test_normalisation_matches_the_official_recipe_on_examples() -> None:
    assert normalize_answer("  The Eiffel  Tower. ") == "eiffel tower"
    assert normalize_answer("x—the end") == "x— end"  # em dash is not ASCII punctuation
    assert normalize_answer("the\x00x") == "\x00x"  # control characters are not word chars
    assert answer_tokens("An apple, a day.") == ("apple", "day")
    assert answer_token_set("the cat the dog") == frozenset({"cat", "dog"})


# --------------------------------------------------------------------------- SQuAD v1.1


def _squad_pairs(path: Path) -> list[tuple[str, list[str]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    pairs = []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [a["text"] for a in qa["answers"]]
                if qa.get("is_impossible") or len(answers) < 2:
                    continue
                pairs.append((answers[0], answers[1:]))
    return pairs


def test_squad_em_f1_match_the_official_rules(data_dir: Path) -> None:
    pairs = _squad_pairs(data_dir / "squad" / "small.json")
    assert len(pairs) == 293
    em_total = f1_total = 0.0
    ours_em = ours_f1 = 0.0
    both_empty = 0
    for prediction, truths in pairs:
        oracle_em = max(squad_em(prediction, t) for t in truths)
        oracle_f1 = max(squad_f1(prediction, t) for t in truths)
        em = exact_match(prediction, truths)
        f1 = token_f1(prediction, truths)
        assert em == oracle_em, prediction
        if not squad_normalize(prediction) and any(not squad_normalize(t) for t in truths):
            both_empty += 1  # the one documented difference (v1.1 gives 0, we give 1)
            assert f1 == 1.0
        else:
            assert f1 == oracle_f1, (prediction, truths)
        em_total += oracle_em
        f1_total += oracle_f1
        ours_em += em
        ours_f1 += f1
    assert both_empty == 0
    assert 100 * ours_em / len(pairs) == pytest.approx(100 * em_total / len(pairs))
    assert 100 * ours_f1 / len(pairs) == pytest.approx(100 * f1_total / len(pairs))


def test_both_empty_differs_from_squad_v11_deliberately() -> None:
    # SQuAD v1.1's f1_score returns 0 when nothing overlaps, even for two empty answers;
    # ragmeter (like ef and SQuAD v2.0) scores two empty answers as a perfect match.
    assert squad_f1("the", "an") == 0.0
    assert token_f1("the", "an") == 1.0
    assert exact_match("the", "an") == squad_em("the", "an") == 1.0


@settings(max_examples=300, deadline=None)
@given(texts)
def test_normalize_answer_equals_the_official_one(text: str) -> None:
    assert normalize_answer(text) == squad_normalize(text)
    assert answer_tokens(text) == tuple(squad_normalize(text).split())
    assert answer_token_set(text) == frozenset(squad_normalize(text).split())


@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_em_and_f1_equal_the_official_ones(prediction: str, truth: str) -> None:
    assert exact_match(prediction, truth) == squad_em(prediction, truth)
    if squad_normalize(prediction) or squad_normalize(truth):
        assert token_f1(prediction, truth) == squad_f1(prediction, truth)


# --------------------------------------------------------------------------- ef parity

_WORDS = st.sampled_from(["Paris", "paris,", "France", "the", "a", "capital", "of", "x", "é", "42"])
phrases = st.lists(_WORDS, max_size=8).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(phrases, phrases, st.lists(phrases, max_size=4))
def test_parity_with_ef(response: str, reference: str, contexts: list[str]) -> None:
    assert exact_match(response, reference) == ef.exact_match(response, reference)
    assert token_f1(response, reference) == ef.token_f1(response, reference)
    assert context_recall(reference, contexts) == ef.context_recall(reference, contexts)
    assert context_precision(reference, contexts) == ef.context_precision(reference, contexts)


@settings(max_examples=100, deadline=None)
@given(texts, texts, st.lists(texts, max_size=3))
def test_parity_with_ef_on_arbitrary_text(
    response: str, reference: str, contexts: list[str]
) -> None:
    assert token_f1(response, reference) == ef.token_f1(response, reference)
    assert context_recall(reference, contexts) == ef.context_recall(reference, contexts)
    assert context_precision(reference, contexts) == ef.context_precision(reference, contexts)


# --------------------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None)
@given(texts, texts, st.lists(texts, max_size=3))
def test_scores_are_in_the_unit_interval(a: str, b: str, contexts: list[str]) -> None:
    for value in (
        exact_match(a, b),
        token_f1(a, b),
        context_recall(b, contexts),
        context_precision(b, contexts),
    ):
        assert 0.0 <= value <= 1.0


@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_token_f1_is_symmetric_and_bounds_exact_match(a: str, b: str) -> None:
    assert token_f1(a, b) == token_f1(b, a)
    assert exact_match(a, b) == exact_match(b, a)
    if exact_match(a, b) == 1.0:
        assert token_f1(a, b) == 1.0
    assert token_f1(a, a) == 1.0


@settings(max_examples=100, deadline=None)
@given(texts, st.lists(texts, min_size=1, max_size=4), st.lists(texts, max_size=3))
def test_list_of_references_is_the_max(response: str, refs: list[str], contexts: list[str]) -> None:
    assert token_f1(response, refs) == max(token_f1(response, r) for r in refs)
    assert exact_match(response, refs) == max(exact_match(response, r) for r in refs)
    assert context_recall(refs, contexts) == max(context_recall(r, contexts) for r in refs)
    assert context_precision(refs, contexts) == max(context_precision(r, contexts) for r in refs)
    assert token_f1(response, refs[:1]) == token_f1(response, refs[0])


def test_token_f1_on_very_long_texts_is_linear_and_exact(finishes_within: FinishesWithin) -> None:
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(20_000)]
    a = " ".join(rng.choice(vocabulary) for _ in range(100_000))
    b = " ".join(rng.choice(vocabulary) for _ in range(100_000))
    with finishes_within(30):
        value = token_f1(a, b)
    assert value == squad_f1(a, b) == ef.token_f1(a, b)


@settings(max_examples=100, deadline=None)
@given(texts, texts)
def test_token_f1_long_text_path_equals_the_short_one(prediction: str, truth: str) -> None:
    short = token_f1(prediction, truth)
    with patch.object(lexical, "_COUNT_LIMIT", -1):  # always count with Counter
        assert token_f1(prediction, truth) == short


@settings(max_examples=100, deadline=None)
@given(
    st.text(st.characters(categories=["Cs", "Ll", "Zs"]) | st.sampled_from([".", "a"])),
    st.lists(st.text(st.characters(categories=["Cs", "Ll", "Zs"]), max_size=10), max_size=3),
)
def test_lone_surrogates_are_text_like_any_other(reference: str, contexts: list[str]) -> None:
    # JSON may carry "\ud800"; Python strs hold it, and ef scores it as a normal character
    assert context_recall(reference, contexts) == ef.context_recall(reference, contexts)
    assert context_precision(reference, contexts) == ef.context_precision(reference, contexts)
    assert token_f1(reference, " ".join(contexts)) == ef.token_f1(reference, " ".join(contexts))


# --------------------------------------------------------------------------- long references
# A reference with more than _SEARCH_MAX distinct tokens is matched in one pass over the
# contexts' tokens instead of one substring search per token (linear instead of tokens x
# contexts); both paths must give ef's numbers.

_MANY = st.lists(
    _WORDS | st.sampled_from(["rome", "lyon", "3.14", "été", "The", "an"]), max_size=60
)


def _both_paths(reference: str | list[str], contexts: list[str]) -> tuple[float, float]:
    """(recall, precision), asserting that the substring search and the token pass agree."""
    clear_caches()
    with patch.object(lexical, "_SEARCH_MAX", 10**9):
        searched = context_recall(reference, contexts), context_precision(reference, contexts)
    clear_caches()
    with patch.object(lexical, "_SEARCH_MAX", 0):
        passed = context_recall(reference, contexts), context_precision(reference, contexts)
    clear_caches()
    assert searched == passed
    return searched


@settings(max_examples=200, deadline=None)
@given(_MANY.map(" ".join), st.lists(_MANY.map(" ".join), max_size=5))
def test_long_references_match_ef(reference: str, contexts: list[str]) -> None:
    expected = ef.context_recall(reference, contexts), ef.context_precision(reference, contexts)
    assert (context_recall(reference, contexts), context_precision(reference, contexts)) == expected
    assert _both_paths(reference, contexts) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, min_size=1, max_size=3), st.lists(texts, max_size=4))
def test_token_pass_gives_the_substring_search_results(
    references: list[str], contexts: list[str]
) -> None:
    _both_paths(references, contexts)


def test_token_pass_on_squad(data_dir: Path) -> None:
    articles = json.loads((data_dir / "squad" / "small.json").read_text())["data"]
    paragraphs = [p["context"] for a in articles for p in a["paragraphs"]]
    rng = random.Random(4)
    long_ones = 0
    for i, paragraph in enumerate(paragraphs):
        sentences = paragraph.split(". ")
        long_reference = ". ".join(rng.sample(sentences, min(3, len(sentences))))
        long_ones += len(answer_token_set(long_reference)) > lexical._SEARCH_MAX
        contexts = [paragraph, *rng.sample(paragraphs, 3)][: 1 + i % 4]
        for reference in (long_reference, sentences[0][:40], [long_reference, "zzz"]):
            refs = [reference] if isinstance(reference, str) else reference
            assert _both_paths(reference, contexts) == (
                max(ef.context_recall(r, contexts) for r in refs),
                max(ef.context_precision(r, contexts) for r in refs),
            )
    assert long_ones > len(paragraphs) // 2  # most take the token pass by default


def test_huge_reference_costs_one_pass_over_the_contexts(
    monkeypatch: pytest.MonkeyPatch, finishes_within: FinishesWithin
) -> None:
    # A 100k-word reference against ~1.5 MB of contexts used to be 40k substring scans of
    # the contexts (minutes); now each context is split into tokens once, in chunks.
    rng = random.Random(11)
    vocabulary = [f"w{i}" for i in range(50_000)]
    reference = " ".join(rng.choice(vocabulary) for _ in range(100_000))
    contexts = [" ".join(rng.choice(vocabulary) for _ in range(60_000)) for _ in range(4)]
    contexts.append("Nothing in common here.")
    passes: list[int] = []
    real = lexical._hits

    def counting(tokens: frozenset[str], hay: str) -> frozenset[str] | set[str]:
        passes.append(len(hay))
        return real(tokens, hay)

    monkeypatch.setattr(lexical, "_hits", counting)
    clear_caches()
    with finishes_within(60):
        recall = context_recall(reference, contexts)
        precision = context_precision(reference, contexts)
    assert len(passes) == len(contexts)  # once per context, for both metrics together
    assert recall == ef.context_recall(reference, contexts)
    assert precision == ef.context_precision(reference, contexts) == 0.8
    # chunks of a few characters, cut at spaces, keep every token whole
    with patch.object(lexical, "_CHUNK", 5):
        clear_caches()
        small = contexts[0][:3000], "w1 w2 w3 " * 40 + reference[:500]
        assert _both_paths(reference[:2000], list(small)) == (
            ef.context_recall(reference[:2000], small),
            ef.context_precision(reference[:2000], small),
        )


# --------------------------------------------------------------------------- errors


def test_errors_name_the_argument() -> None:
    with pytest.raises(InvalidInputError, match="response must be a str, got NoneType"):
        exact_match(None, "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="reference is an empty list"):
        token_f1("x", [])
    with pytest.raises(InvalidInputError, match=r"reference\[1\] must be a str, got int"):
        token_f1("x", ["a", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="reference must be a str or a list of str"):
        token_f1("x", 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"got a single str .* wrap it"):
        context_recall("paris", "Paris is nice")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"retrieved_contexts\[0\] must be a str"):
        context_precision("paris", [None])  # type: ignore[list-item]
    with pytest.raises(
        InvalidInputError, match="retrieved_contexts must be a list of str, got int"
    ):
        context_precision("paris", 3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- metric objects


def test_registered_metric_objects() -> None:
    em = RAG_METRICS["exact_match"]
    f1 = RAG_METRICS["token_f1"]
    recall = RAG_METRICS["context_recall"]
    precision = RAG_METRICS["context_precision"]
    rate = RAG_METRICS["non_empty_rate"]
    no_ref = RagSample(response="Paris", retrieved_contexts=["Paris"])
    for metric in (em, f1, recall, precision):
        assert metric.higher_is_better
        assert not metric.applies_to(no_ref)
        assert metric.score(no_ref) is None
    # a missing response is an empty answer, missing contexts retrieved nothing (ef, SQuAD)
    unanswered = RagSample(reference="Paris")
    assert em.applies_to(unanswered)
    assert em.score(unanswered) == 0.0
    assert f1.score(unanswered) == 0.0
    assert recall.score(unanswered) == 0.0
    assert precision.score(unanswered) == 0.0
    several = RagSample(response="Lutetia", reference="Paris", references=["lutetia"])
    assert em.score(several) == 1.0
    only_extra = RagSample(response="Lutetia", references=["lutetia"])
    assert f1.applies_to(only_extra) and f1.score(only_extra) == 1.0
    assert rate.score(RagSample()) == 0.0
    assert rate.score(RagSample(retrieved_contexts=[])) == 0.0
    assert rate.score(RagSample(retrieved_contexts=["x"])) == 1.0
    # deliberate difference from ef, which looks at retrieved_contexts only
    assert rate.score(RagSample(retrieved_ids=["d1"])) == 1.0
    assert rate.score(RagSample(retrieved=["chunk"])) == 1.0
    assert rate.score(RagSample(retrieved_spans=[Span("doc1", 0, 5)])) == 1.0
    assert rate.score(RagSample(retrieved_spans=[])) == 0.0


@settings(max_examples=300, deadline=None)
@given(texts)
def test_passage_haystack_holds_exactly_the_normalised_tokens(text: str) -> None:
    # internal fast path: the space-padded haystack's tokens, articles aside, are SQuAD's
    from ragmeter.text import _passage

    hay = _passage(text)
    assert hay.startswith(" ") and hay.endswith(" ")
    tokens = {t for t in hay.split(" ") if t} - {"a", "an", "the"}  # tokens hold no " "
    assert tokens == set(squad_normalize(text).split())


@pytest.mark.slow
def test_memory_retained_after_scoring_long_texts_is_bounded() -> None:
    # memo caches keep short texts only: a stream of long passages must not pile up
    rng = random.Random(3)
    vocabulary = [f"w{i}" for i in range(5000)]

    def samples() -> Iterator[dict[str, object]]:
        for i in range(25):
            long_text = " ".join(rng.choice(vocabulary) for _ in range(6000))  # ~35 kB
            yield {
                "id": str(i),
                "response": long_text,
                "reference": long_text,
                "retrieved_contexts": [long_text + " a", long_text + " b"],
            }

    clear_caches()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        report = evaluate_rag(samples(), metrics=["exact_match", "token_f1", "context_recall"])
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert report.metrics == {"exact_match": 1.0, "token_f1": 1.0, "context_recall": 1.0}
    assert retained < 2_000_000, f"{retained} bytes kept after scoring ~3.5 MB of text"
