"""Properties of the dataset fingerprint over generated qrels and samples: any order gives
one digest, and any one judgement more is found and named."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.report import DatasetFingerprint, SampleDigests

ids = st.text(min_size=1, max_size=6)
grades = st.one_of(st.integers(-1, 4), st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]))
qrels_st = st.dictionaries(ids, st.dictionaries(ids, grades, min_size=1, max_size=6), max_size=8)


def _permuted(qrels: dict[str, dict[str, float]], seed: int) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    queries = list(qrels)
    rng.shuffle(queries)
    out = {}
    for q in queries:
        docs = list(qrels[q].items())
        rng.shuffle(docs)
        out[q] = {d: float(g) for d, g in docs}
    return out


@settings(max_examples=150, deadline=None)
@given(qrels_st, st.integers(0, 10**6))
def test_any_order_gives_the_same_digest(qrels: dict[str, dict[str, float]], seed: int) -> None:
    a = DatasetFingerprint.of_qrels(qrels)
    b = DatasetFingerprint.of_qrels(_permuted(qrels, seed))
    assert a == b and a.per_item == b.per_item and a.differences(b) == []


@settings(max_examples=150, deadline=None)
@given(qrels_st.filter(bool), st.data())
def test_one_judgement_more_is_named(
    qrels: dict[str, dict[str, float]], data: st.DataObject
) -> None:
    query = data.draw(st.sampled_from(sorted(qrels)))
    doc = data.draw(ids.filter(lambda d: d not in qrels[query]))
    more = {q: dict(j) for q, j in qrels.items()}
    more[query][doc] = data.draw(grades)
    a, b = DatasetFingerprint.of_qrels(qrels), DatasetFingerprint.of_qrels(more)
    assert a.digest != b.digest and b.entries == a.entries + 1
    assert a.differences(b) == [f"qrels changed: 1 judgement added in 1 query ({query})"]


samples_st = st.lists(
    st.fixed_dictionaries(
        {
            "id": ids,
            "user_input": st.text(max_size=8),
            "reference": st.none() | st.text(max_size=8),
        },
        optional={"reference_ids": st.lists(ids, max_size=4)},
    ),
    max_size=8,
)


@settings(max_examples=100, deadline=None)
@given(samples_st, st.integers(0, 10**6))
def test_samples_in_any_order_or_split_give_the_same_digest(
    samples: list[dict[str, object]], seed: int
) -> None:
    whole = SampleDigests()
    for sample in samples:
        whole.add(sample)
    shuffled = list(samples)
    random.Random(seed).shuffle(shuffled)
    cut = len(shuffled) // 2
    first, second = SampleDigests(keep_items=False), SampleDigests(keep_items=False)
    for sample in shuffled[:cut]:
        first.add(sample)
    for sample in shuffled[cut:]:
        second.add(sample)
    first.merge(second)
    assert first.fingerprint() == whole.fingerprint()
    assert first.fingerprint().per_item == {}
