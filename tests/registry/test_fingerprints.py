"""Dataset and config fingerprints: order-independent, sensitive to one judgement, carried
by every driver's report, surviving to_dict/from_dict, and saying what differs in words."""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import pytest

import ragmeter
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.rag import rag_partial, rag_report
from ragmeter.report import (
    ConfigFingerprint,
    DatasetFingerprint,
    RagEvalReport,
    RetrievalEvalReport,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


def _shuffled(qrels: dict[str, dict[str, float]], seed: int) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    queries = list(qrels)
    rng.shuffle(queries)
    out = {}
    for q in queries:
        docs = list(qrels[q].items())
        rng.shuffle(docs)
        out[q] = {d: int(g) if g == int(g) else g for d, g in docs}  # 1 for 1.0
    return out


def test_the_same_qrels_in_another_order_have_the_same_digest(
    qrels: dict[str, dict[str, float]], run: dict[str, list[str]]
) -> None:
    a = ragmeter.evaluate_run(qrels, run).dataset_fingerprint
    b = ragmeter.evaluate_run(_shuffled(qrels, 7), run).dataset_fingerprint
    assert a is not None and b is not None
    assert a.digest == b.digest and a == b and a.differences(b) == []
    assert a.kind == "qrels" and a.items == len(qrels)
    assert a.entries == sum(len(j) for j in qrels.values())
    assert (DATA / "qrels.test").read_text().count("\n") == a.entries  # one line each


def test_one_judgement_added_is_named(
    qrels: dict[str, dict[str, float]], run: dict[str, list[str]]
) -> None:
    first = sorted(qrels)[0]
    more = {q: dict(j) for q, j in qrels.items()}
    more[first]["a-new-doc"] = 1
    a = ragmeter.evaluate_run(qrels, run).dataset_fingerprint
    b = ragmeter.evaluate_run(more, run).dataset_fingerprint
    assert a is not None and b is not None and a.digest != b.digest
    assert a.differences(b) == [f"qrels changed: 1 judgement added in 1 query ({first})"]
    assert b.differences(a) == [f"qrels changed: 1 judgement removed in 1 query ({first})"]
    regraded = {q: dict(j) for q, j in qrels.items()}
    doc = sorted(regraded[first])[0]
    regraded[first][doc] = regraded[first][doc] + 1
    c = DatasetFingerprint.of_qrels(regraded)
    assert a.differences(c) == [f"qrels changed: 1 query with other grades or doc ids ({first})"]
    fewer = {q: j for q, j in qrels.items() if q != first}
    d = DatasetFingerprint.of_qrels(fewer)
    assert a.differences(d) == [f"qrels changed: 1 query removed ({first})"]
    # read back from JSON (no per-query digests): the counts and digests
    assert a.differences(DatasetFingerprint.from_dict(b.to_dict())) == [
        f"qrels changed: queries {a.items} vs {b.items}, judgements {a.entries} vs "
        f"{b.entries} (digest {a.digest[:12]} vs {b.digest[:12]})"
    ]


def test_relevance_level_and_metrics_are_named_in_the_config_differences(
    run: dict[str, list[str]],
) -> None:
    # trec_eval's graded test qrels (grades -1 to 4), scored at -l1 and -l2
    qrels = {q: dict(j) for q, j in ragmeter.read_trec_qrels(DATA / "qrels.rel_level").items()}
    one = ragmeter.evaluate_run(qrels, run, k_values=(10,), relevance_level=1)
    two = ragmeter.evaluate_run(qrels, run, k_values=(10, 20), relevance_level=2)
    assert one.config_fingerprint.digest != two.config_fingerprint.digest
    differences = one.config_fingerprint.differences(two.config_fingerprint)
    assert "relevance_level 1 vs 2" in differences
    assert "k_values [10] vs [10, 20]" in differences
    metrics = next(d for d in differences if d.startswith("metrics: "))
    assert metrics.endswith(" only in b") and "only in a" not in metrics
    assert "ndcg@20" in metrics.split(": ", 1)[1].removesuffix(" only in b").split(", ")
    same = ragmeter.evaluate_run(_shuffled(qrels, 3), run, k_values=(10,), relevance_level=1)
    assert same.config_fingerprint == one.config_fingerprint
    skip = ragmeter.evaluate_run(qrels, run, k_values=(10,), relevance_level=1,
                                 missing_queries="skip")  # fmt: skip
    assert [d.split(" ", 1)[0] for d in one.config_fingerprint.differences(
        skip.config_fingerprint)] == ["averaging"]  # fmt: skip
    assert "ragmeter_version" not in one.config_fingerprint.settings


def test_every_retrieval_driver_carries_the_fingerprints(
    qrels: dict[str, dict[str, float]], run: dict[str, list[str]]
) -> None:
    in_memory = ragmeter.evaluate_run(qrels, run)
    from_file = ragmeter.evaluate_run_file(qrels, DATA / "results.test")
    measures = ragmeter.evaluate_run(qrels, run, measures=["P.5", "map"])
    assert in_memory.dataset_fingerprint == from_file.dataset_fingerprint
    assert measures.dataset_fingerprint == in_memory.dataset_fingerprint
    assert measures.config_fingerprint.settings["measures"]
    queries = {q: f"text of {q}" for q in qrels}
    docs = {q: r[:10] for q, r in run.items()}
    retrieved = ragmeter.evaluate_retrieval(lambda text: docs[text[8:]], qrels, queries)
    fp = retrieved.dataset_fingerprint
    assert fp is not None and fp.items == len(qrels)
    assert fp.digest != in_memory.dataset_fingerprint.digest  # type: ignore[union-attr]
    other_text = dict(queries, **{sorted(qrels)[0]: "another text"})
    again = ragmeter.evaluate_retrieval(lambda text: docs.get(text[8:], []), qrels, other_text)
    assert again.dataset_fingerprint is not None
    assert fp.differences(again.dataset_fingerprint) == [
        f"qrels changed: 1 query with other grades or doc ids ({sorted(qrels)[0]})"
    ]


SAMPLES = [
    {"id": "s1", "user_input": "capital of France?", "response": "Paris", "reference": "Paris",
     "retrieved_contexts": ["Paris is the capital of France."]},
    {"id": "s2", "user_input": "2 + 2?", "response": "five", "reference": "four",
     "retrieved_contexts": []},
    {"id": "s3", "user_input": "largest ocean?", "response": "Pacific",
     "references": ["Pacific", "the Pacific Ocean"], "retrieved_ids": ["d1", "d2"],
     "reference_ids": ["d2"]},
]  # fmt: skip


def test_rag_reports_fingerprint_the_ground_truth_not_the_answers() -> None:
    listed = ragmeter.evaluate_rag(SAMPLES)
    streamed = ragmeter.evaluate_rag(iter(SAMPLES))
    reordered = ragmeter.evaluate_rag(SAMPLES[::-1])
    answers = [dict(s, response="something else", retrieved_contexts=["x"]) for s in SAMPLES]
    other_answers = ragmeter.evaluate_rag(answers)
    fp = listed.dataset_fingerprint
    assert fp is not None and fp.kind == "samples" and fp.items == 3
    assert fp.entries == 1 + 1 + 2 + 1  # references and judged ids
    assert streamed.dataset_fingerprint == fp and reordered.dataset_fingerprint == fp
    assert other_answers.dataset_fingerprint == fp
    assert streamed.dataset_fingerprint.per_item == {}  # type: ignore[union-attr]
    changed = [dict(SAMPLES[0]), dict(SAMPLES[1], reference="4"), dict(SAMPLES[2])]
    other = ragmeter.evaluate_rag(changed).dataset_fingerprint
    assert other is not None and fp.differences(other) == [
        "samples changed: 1 sample with other content (s2)"
    ]
    first, second = rag_partial(SAMPLES[:2], keep=True), rag_partial(SAMPLES[2:], keep=True)
    first.merge(second)
    assert rag_report(first).dataset_fingerprint == fp


def test_fingerprints_survive_to_dict_and_from_dict(
    qrels: dict[str, dict[str, float]], run: dict[str, list[str]]
) -> None:
    report = ragmeter.evaluate_run(qrels, run)
    data = json.loads(report.to_json())
    assert data["fingerprints"] == report.to_dict()["fingerprints"]
    assert data["fingerprints"]["dataset"] == report.dataset_fingerprint.to_dict()  # type: ignore[union-attr]
    back = RetrievalEvalReport.from_dict(data)
    assert back.dataset_fingerprint == report.dataset_fingerprint
    assert back.config_fingerprint == report.config_fingerprint
    rag = ragmeter.evaluate_rag(SAMPLES)
    rag_back = RagEvalReport.from_dict(json.loads(rag.to_json()))
    assert rag_back.dataset_fingerprint == rag.dataset_fingerprint
    assert rag_back.config_fingerprint == rag.config_fingerprint
    hand = RetrievalEvalReport(metrics={"ndcg@10": 0.5}, per_query={}, n_queries=1, k_values=(10,))
    assert hand.dataset_fingerprint is None and hand.to_dict()["fingerprints"]["dataset"] is None
    assert RetrievalEvalReport.from_dict(hand.to_dict()).dataset_fingerprint is None


def test_a_loaded_config_keeps_the_settings_it_was_made_under(
    qrels: dict[str, dict[str, float]], run: dict[str, list[str]]
) -> None:
    data = ragmeter.evaluate_run(qrels, run).to_dict()
    settings = dict(data["fingerprints"]["config"]["settings"], metric_definitions="0")
    data["fingerprints"]["config"] = ConfigFingerprint.of(settings).to_dict()
    back = RetrievalEvalReport.from_dict(data)
    assert back.config_fingerprint.settings["metric_definitions"] == "0"
    tampered = dict(data["fingerprints"]["config"], digest="0" * 64)
    with pytest.raises(InvalidInputError, match="does not match its settings"):
        ConfigFingerprint.from_dict(tampered)
    with pytest.raises(InvalidInputError, match="not a dataset fingerprint"):
        DatasetFingerprint.from_dict({"kind": "qrels"})


def test_fingerprinting_is_lazy(
    qrels: dict[str, dict[str, float]], run: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = DatasetFingerprint.of_qrels.__func__  # type: ignore[attr-defined]

    def counting(cls: type[DatasetFingerprint], *args: object) -> DatasetFingerprint:
        calls.append(1)
        return real(cls, *args)  # type: ignore[no-any-return]

    monkeypatch.setattr(DatasetFingerprint, "of_qrels", classmethod(counting))
    report = ragmeter.evaluate_run(qrels, run)
    assert calls == []
    assert report.dataset_fingerprint is report.dataset_fingerprint
    assert calls == [1]


def test_a_pickled_report_carries_its_fingerprint_not_the_qrels(
    qrels: dict[str, dict[str, float]], run: dict[str, list[str]]
) -> None:
    report = ragmeter.evaluate_run(qrels, run)
    blob = pickle.dumps(report)
    assert b"CR93E-10279" not in blob  # a judged doc of query 301
    back = pickle.loads(blob)
    assert back.dataset_fingerprint == report.dataset_fingerprint
    assert back.dataset_fingerprint.per_item == report.dataset_fingerprint.per_item
    rag = ragmeter.evaluate_rag(SAMPLES)
    assert b"capital of France" not in pickle.dumps(rag)
    assert pickle.loads(pickle.dumps(rag)).dataset_fingerprint == rag.dataset_fingerprint
