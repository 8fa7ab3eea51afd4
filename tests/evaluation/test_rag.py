"""evaluate_rag: seed 000's numbers, ef and rag-eval parity, coverage, refusals, the report."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import contextgrid as cg
import pytest
from ef import evaluation as ef
from hypothesis import given, settings
from hypothesis import strategies as st
from rag_eval.faithfulness import faithfulness as rag_eval_faithfulness
from rag_eval.loader import load as rag_eval_load
from rag_eval.retrieval import precision_at_k as rag_eval_precision_at_k

from ragmeter.capture import SampleStore
from ragmeter.errors import InvalidInputError, UnknownMetricError
from ragmeter.evaluation._rag_rules import _exact_mean
from ragmeter.evaluation.rag import DEFAULT_METRICS, SEED_METRICS, evaluate_rag
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.jsonl import read_jsonl
from ragmeter.metrics.base import RagMetric
from ragmeter.report import RagEvalReport
from ragmeter.schema import RagSample, coerce_sample

SEED_SAMPLES = [
    {
        "user_input": "capital of France?",
        "response": "Paris",
        "reference": "Paris",
        "retrieved_contexts": ["Paris is the capital of France."],
    },
    {"user_input": "2 + 2?", "response": "five", "reference": "four", "retrieved_contexts": []},
]


def test_seed_000_doctest_numbers() -> None:
    report = evaluate_rag(SEED_SAMPLES)
    assert report.metrics["exact_match"] == 0.5
    assert report.metrics["non_empty_rate"] == 0.5
    ef_report = ef.evaluate_rag(SEED_SAMPLES)
    for key in SEED_METRICS:
        assert report.metrics[key] == ef_report.metrics[key]
        assert report.coverage[key] == ef_report.coverage[key]
    assert report.n_samples == 2
    assert set(DEFAULT_METRICS) - set(report.metrics) == {"precision"}
    assert "precision@5" in report.extra["not_computed"]


# --------------------------------------------------------------------------- ef parity

_phrase = st.lists(
    st.sampled_from(["Paris", "paris.", "France", "the", "an", "capital", "4", "four", "x"]),
    max_size=6,
).map(" ".join)


@st.composite
def _ef_sample(draw: st.DrawFn) -> dict[str, Any]:
    sample: dict[str, Any] = {"user_input": draw(_phrase)}
    if draw(st.booleans()):
        sample["response"] = draw(_phrase)
    if draw(st.integers(0, 3)):
        sample["reference"] = draw(_phrase)
    if draw(st.integers(0, 3)):
        sample["retrieved_contexts"] = draw(st.lists(_phrase, max_size=3))
    return sample


@settings(max_examples=100, deadline=None)
@given(st.lists(_ef_sample(), min_size=1, max_size=12))
def test_parity_with_ef_evaluate_rag(samples: list[dict[str, Any]]) -> None:
    expected = ef.evaluate_rag(samples)
    has = {
        "reference": any("reference" in s for s in samples),
        "response": any(s.get("response") for s in samples),
        "retrieved_contexts": any("retrieved_contexts" in s for s in samples),
    }
    if not has["retrieved_contexts"] and not (has["reference"] and has["response"]):
        # ef reports five numbers that measure nothing; ragmeter says why it has none
        with pytest.raises(InvalidInputError, match="no metric could be computed"):
            evaluate_rag(samples, metrics=None)
        return
    report = evaluate_rag(samples, metrics=None)
    assert report.n_samples == expected.n_samples
    for key in SEED_METRICS:
        if key in report.metrics:
            assert report.metrics[key] == expected.metrics[key], key
            assert report.coverage[key] == expected.coverage[key], key
        else:
            # the documented difference: ef reports a number that measures nothing (0.0 over
            # zero samples, or every sample scored as empty); ragmeter leaves the metric out
            reason = report.extra["not_computed"][key]
            if key == "non_empty_rate":
                assert not has["retrieved_contexts"]
            elif not has["reference"]:
                assert expected.coverage[key] == 0 and "reference" in reason
            elif key in ("exact_match", "token_f1"):
                assert not has["response"] and "response" in reason
            else:
                assert not has["retrieved_contexts"] and "retrieved_contexts" in reason


def test_exact_mean_matches_statistics_mean() -> None:
    values = [0.1, 0.2, 0.7, 1 / 3, 2 / 3, 0.0, 1.0] * 7
    assert _exact_mean(values) == statistics.mean(values)
    assert _exact_mean([1e308, 1e308, -1e308]) == statistics.mean([1e308, 1e308, -1e308])
    assert _exact_mean([0.0, 0.0]) == 0.0
    assert _exact_mean([math.inf, 2.0]) == math.inf
    assert math.isnan(_exact_mean([math.inf, -math.inf]))  # as statistics.mean: undefined


class _Signed(RagMetric):
    name: ClassVar[str] = "signed_infinity"

    def score(self, sample: RagSample) -> float | None:
        return math.inf if sample.response == "Paris" else -math.inf


def test_infinite_scores_are_left_out_with_a_warning_never_a_nan_mean() -> None:
    """Issue 12: a report never holds NaN or an infinity (its JSON must stay valid)."""
    report = evaluate_rag(SEED_SAMPLES, metrics=[_Signed(), "exact_match"])
    assert "signed_infinity" not in report.metrics
    assert any(
        "'signed_infinity' metric raised ValueError('returned inf')" in w for w in report.warnings
    )
    assert all(math.isfinite(v) for v in report.metrics.values())
    json.loads(report.to_json())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1) | st.floats(0, 1e6), min_size=1, max_size=60))
def test_exact_mean_is_correctly_rounded(values: list[float]) -> None:
    assert _exact_mean(values) == statistics.mean(values)


# --------------------------------------------------------------------------- rag-eval parity


def test_rag_eval_readme_quickstart_through_evaluate_rag() -> None:
    retrieved = ["Paris is the capital of France.", "Lyon is in France."]
    golden = ["Paris is the capital of France."]
    answer = "Paris is the capital of France."
    context = ["Paris is the capital and largest city of France."]
    sample = {
        "question": "What is the capital of France?",
        "answer": answer,
        "context": context,
        "golden_documents": golden,
        "retrieved": retrieved,
    }
    report = evaluate_rag([sample], metrics=["precision", "faithfulness"], k_values=1)
    assert report.metrics["precision@1"] == rag_eval_precision_at_k(retrieved, golden, k=1) == 1.0
    assert report.metrics["faithfulness"] == rag_eval_faithfulness(answer, context)[0] == 1.0


def test_rag_eval_server_payload_through_evaluate_rag() -> None:
    payload = {
        "samples": [
            {
                "question": "What is the capital of France?",
                "answer": "Paris is the capital of France.",
                "context": ["Paris is the capital and largest city of France."],
                "golden_documents": ["Paris is the capital and largest city of France."],
                "retrieved": ["Paris is the capital and largest city of France."],
                "id": "sample-1",
            }
        ],
        "k": 5,
    }
    report = evaluate_rag(payload["samples"], k_values=payload["k"])  # type: ignore[arg-type]
    assert report.metrics == {"non_empty_rate": 1.0, "faithfulness": 1.0, "precision@5": 0.2}
    assert report.per_sample["sample-1"]["precision@5"] == 0.2
    assert report.details["sample-1"]["faithfulness"]["unsupported_claims"] == []


def test_rag_eval_jsonl_file_gives_rag_eval_numbers(tmp_path: Path) -> None:
    lines = [
        {
            "id": "s1",
            "question": "q1",
            "answer": "Paris is in France. Lyon is big.",
            "context": ["Paris is in France."],
            "golden_documents": ["g1", "g2"],
            "retrieved": ["g1", "x", "g2"],
        },
        {
            "id": "s2",
            "question": "q2",
            "answer": "The river is long",
            "context": ["The river Seine is long."],
            "retrieved": ["g3"],
        },
        {"id": "s3", "question": "q3", "answer": "Nothing here", "context": ["other"]},
    ]
    path = tmp_path / "rag_eval.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    samples = rag_eval_load(path)
    precisions = [
        rag_eval_precision_at_k(s.retrieved, s.golden_documents, k=2)
        for s in samples
        if s.retrieved is not None and s.golden_documents is not None
    ]
    faith = [rag_eval_faithfulness(s.answer, s.context)[0] for s in samples]
    report = evaluate_rag(
        read_jsonl(path), metrics=["precision", "faithfulness"], k_values=2, per_sample=True
    )
    assert report.metrics["precision@2"] == sum(precisions) / len(precisions)
    assert report.metrics["faithfulness"] == sum(faith) / len(faith)
    assert report.coverage == {"precision@2": 1, "faithfulness": 3}
    assert report.details["s1"]["faithfulness"] == {
        "supported_claims": ["Paris is in France"],
        "unsupported_claims": ["Lyon is big"],
    }


# --------------------------------------------------------------------------- coverage and refusals


def test_coverage_and_per_sample() -> None:
    samples = [
        RagSample(id="a", response="Paris", reference="Paris", retrieved_contexts=["Paris"]),
        RagSample(id="b", response="Lyon", retrieved_contexts=["Paris"]),
    ]
    report = evaluate_rag(samples, metrics=["exact_match", "faithfulness"])
    assert report.coverage == {"exact_match": 1, "faithfulness": 2}
    assert report.per_sample == {
        "a": {"exact_match": 1.0, "faithfulness": 1.0},
        "b": {"exact_match": None, "faithfulness": 0.0},
    }
    assert report.metrics == {"exact_match": 1.0, "faithfulness": 0.5}
    assert report.higher_is_better == {"exact_match": True, "faithfulness": True}
    assert report.summary("faithfulness").count == 2


def test_explicit_metric_no_sample_can_satisfy_is_refused() -> None:
    no_ref = [RagSample(response="Paris", retrieved_contexts=["Paris"])]
    with pytest.raises(InvalidInputError, match="exact_match needs a reference answer"):
        evaluate_rag(no_ref, metrics=["exact_match"])
    no_contexts = [RagSample(response="Paris", reference="Paris")]
    with pytest.raises(InvalidInputError, match="context_recall reads retrieved_contexts"):
        evaluate_rag(no_contexts, metrics=["context_recall"])
    no_answer = [RagSample(reference="Paris", retrieved_contexts=["x"])]
    with pytest.raises(InvalidInputError, match="token_f1 reads a non-empty response"):
        evaluate_rag(no_answer, metrics=["token_f1"])
    with pytest.raises(InvalidInputError, match="faithfulness needs a non-empty response"):
        evaluate_rag(no_answer, metrics=["faithfulness"])
    with pytest.raises(InvalidInputError, match="non_empty_rate reads retrieved_contexts"):
        evaluate_rag([RagSample(response="x")], metrics=["non_empty_rate"])


def test_default_metrics_left_out_say_why() -> None:
    report = evaluate_rag([RagSample(id="x", response="Paris", retrieved_ids=["d1"])])
    assert list(report.metrics) == ["non_empty_rate"]
    reasons = report.extra["not_computed"]
    assert set(reasons) == {
        "exact_match",
        "token_f1",
        "context_recall",
        "context_precision",
        "faithfulness",
        "precision@5",
    }
    assert "reference" in reasons["exact_match"]
    assert "retrieved_contexts" in reasons["faithfulness"]
    assert report.per_sample == {"x": {"non_empty_rate": 1.0}}


# --------------------------------------------------------------------------- doc ids

CHUNK_IDS = [  # a retriever returning chunk ids where the samples judge source ids
    {"id": "a", "retrieved_ids": ["c-1", "c-2"], "reference_ids": ["doc-1"]},
    {"id": "b", "retrieved_ids": ["c-3"], "relevance": {"doc-2": 2, "doc-9": 0}},
    {"id": "c", "retrieved_ids": ["c-4", "c-1", "c-5"], "reference_ids": ["doc-3"]},
    {"id": "d", "retrieved_ids": ["c-6"], "relevance": {"doc-4": 0}},  # nothing relevant
    {"id": "e", "retrieved_texts": ["t"], "reference_contexts": ["u"]},  # texts, not ids
]


def test_retrieved_ids_that_never_match_their_judgements_warn_with_the_count() -> None:
    metrics = ["precision", "ndcg"]
    for samples in (CHUNK_IDS, iter(CHUNK_IDS)):
        report = evaluate_rag(samples, metrics=metrics, k_values=3)
        assert report.metrics == {"precision@3": 0.0, "ndcg@3": 0.0}
        assert report.coverage == {"precision@3": 4, "ndcg@3": 4}
        (warning,) = report.warnings
        assert warning.startswith("CAUTION [samples] (doc_ids): every retrieval score ")
        assert "(precision@3, ndcg@3) of the 3 sample(s) scored on retrieved_ids is 0" in warning
        assert "none of the 6 retrieved doc ids (e.g. 'c-1', 'c-2', 'c-3', ...)" in warning
        assert "appears in their relevance/reference_ids" in warning
        assert f"warning: {warning}" in report.to_text()
        assert json.loads(report.to_json())["warnings"] == [warning]
    # the count and the examples are evaluate_run's on the same rankings and judgements
    ids = CHUNK_IDS[:3]
    run = {s["id"]: s["retrieved_ids"] for s in ids}
    qrels = {s["id"]: s.get("relevance") or dict.fromkeys(s["reference_ids"], 1) for s in ids}
    (expected,) = evaluate_run(qrels, run, k_values=[3]).warnings
    assert "none of the 6 retrieved doc ids (e.g. 'c-1', 'c-2', 'c-3', ...)" in expected


def test_a_matching_or_judged_non_relevant_doc_is_not_a_doc_id_problem() -> None:
    one_hit = [*CHUNK_IDS, {"id": "f", "retrieved_ids": ["x", "doc-7"], "reference_ids": ["doc-7"]}]
    report = evaluate_rag(one_hit, metrics=["precision"], k_values=3)
    assert report.metrics["precision@3"] > 0 and report.warnings == []
    judged_zero = [*CHUNK_IDS, {"id": "g", "retrieved_ids": ["n"], "relevance": {"r": 1, "n": 0}}]
    report = evaluate_rag(judged_zero, metrics=["precision"], k_values=3)
    assert report.metrics["precision@3"] == 0.0 and report.warnings == []
    # rag-eval's texts: no ids
    texts = evaluate_rag([CHUNK_IDS[4]], metrics=["precision"], k_values=3)
    assert texts.metrics["precision@3"] == 0.0 and texts.warnings == []


def test_input_errors() -> None:
    with pytest.raises(
        UnknownMetricError, match=r"no metric named 'bleu'\. Available: .*exact_match"
    ):
        evaluate_rag(SEED_SAMPLES, metrics=["bleu"])
    with pytest.raises(ValueError, match="no metric named 'bleu'"):
        evaluate_rag(SEED_SAMPLES, metrics=["bleu"])
    with pytest.raises(InvalidInputError, match="evaluate_rag got no samples"):
        evaluate_rag([])
    with pytest.raises(ValueError, match="evaluate_rag got no samples"):
        evaluate_rag(iter([]))
    with pytest.raises(InvalidInputError, match="metrics is empty"):
        evaluate_rag(SEED_SAMPLES, metrics=[])
    with pytest.raises(
        InvalidInputError, match="each metric must be a registered name or a RagMetric, got int"
    ):
        evaluate_rag(SEED_SAMPLES, metrics=[3])  # type: ignore[list-item]
    with (
        pytest.warns(DeprecationWarning, match="k_values"),
        pytest.raises(InvalidInputError, match="k must be an int >= 1, got 0"),
    ):
        evaluate_rag(SEED_SAMPLES, k=0)
    with pytest.raises(InvalidInputError, match="skipped_lines must be an int >= 0"):
        evaluate_rag(SEED_SAMPLES, skipped_lines=-1)
    bad = [SEED_SAMPLES[0], {"response": "x", "latency_ms": -5}]
    with pytest.raises(InvalidInputError, match="sample 1: field 'latency_ms'"):
        evaluate_rag(bad)
    with pytest.raises(
        InvalidInputError, match="sample 0 must be a RagSample or a mapping, got str"
    ):
        evaluate_rag(["not a sample"])  # type: ignore[list-item]


# --------------------------------------------------------------------------- k_values

RANKED = [
    {
        "id": "a",
        "retrieved_ids": ["d1", "d2", "d3", "d4"],
        "relevance": {"d2": 1, "d4": 2, "d8": 1},
        "response": "Paris",
        "reference": "Paris",
    },
    {"id": "b", "retrieved_ids": ["d5", "d1"], "reference_ids": ["d1", "d9"], "response": "x"},
    {"id": "c", "retrieved": ["t1", "t2", "t3"], "golden_documents": ["t3"], "answer": "y"},
    {"id": "d", "retrieved_ids": ["d1"], "reference_ids": ["d7"], "reference": "z"},
    {"id": "e", "response": "no ranking", "reference": "no ranking"},
]
RANK_METRICS = ["ndcg", "recall", "precision", "mrr", "map", "hit_rate", "token_f1"]


def test_an_int_k_values_is_what_k_was() -> None:
    report = evaluate_rag(RANKED, metrics=RANK_METRICS, k_values=3)
    assert list(report.metrics) == [
        *(f"{name}@3" for name in RANK_METRICS[:-1]),
        "token_f1",
    ]
    assert report.extra["k"] == 3
    with pytest.warns(DeprecationWarning, match=r"evaluate_rag\(k=\.\.\.\) is deprecated"):
        old = evaluate_rag(RANKED, metrics=RANK_METRICS, k=3)
    assert old == report and old.to_json() == report.to_json()
    default = evaluate_rag(RANKED, metrics=RANK_METRICS)
    assert default == evaluate_rag(RANKED, metrics=RANK_METRICS, k_values=5)
    assert default.extra["k"] == 5 and type(default.extra["k"]) is int
    assert json.loads(default.to_json())["extra"]["k"] == 5


def test_several_cut_offs_are_each_one_scored_alone() -> None:
    ks = (1, 2, 3, 10)
    for samples in (RANKED, iter(RANKED)):
        report = evaluate_rag(samples, metrics=RANK_METRICS, k_values=[10, 2, 1, 3, 2])
        names = RANK_METRICS[:-1]
        assert list(report.metrics) == [
            *(f"{name}@{k}" for name in names for k in ks),
            "token_f1",
        ]
        assert report.extra["k"] == list(ks)
        for k in ks:
            alone = evaluate_rag(RANKED, metrics=RANK_METRICS, k_values=k)
            for key in alone.metrics:
                assert report.metrics[key] == alone.metrics[key], key
                assert report.coverage[key] == alone.coverage[key], key
                assert report.summary(key) == alone.summary(key), key
            if isinstance(samples, list):
                for sid, row in alone.per_sample.items():
                    assert {key: report.per_sample[sid][key] for key in row} == row
    assert evaluate_rag(RANKED, metrics=["ndcg"], k_values=range(1, 3)).extra["k"] == [1, 2]


def test_k_values_with_metric_objects_and_the_defaults() -> None:
    from ragmeter.evaluation.sample_retrieval import PrecisionAtK

    report = evaluate_rag(RANKED, metrics=["precision", PrecisionAtK(k=2)], k_values=(1, 3))
    assert list(report.metrics) == ["precision@1", "precision@3", "precision@2"]
    assert (
        report.metrics["precision@2"]
        == evaluate_rag(RANKED, metrics=["precision"], k_values=2).metrics["precision@2"]
    )
    defaults = evaluate_rag(RANKED, k_values=(1, 5))
    assert {"precision@1", "precision@5"} <= set(defaults.metrics)
    assert "precision@10" not in defaults.metrics
    with pytest.raises(InvalidInputError, match="precision@1 needs retrieved_ids"):
        evaluate_rag(SEED_SAMPLES, metrics=["precision"], k_values=(1, 2))


def test_k_values_are_checked_and_k_is_not_taken_with_them() -> None:
    for bad, match in [
        (0, "every k in k_values must be an int >= 1, got 0"),
        ([5, 0], "every k in k_values must be an int >= 1, got 0"),
        ((2.5,), "every k in k_values must be an int >= 1, got 2.5"),
        (True, "every k in k_values must be an int >= 1, got True"),
        ([], "k_values is empty"),
        ("5", "k_values must be an int >= 1 or an iterable of them, got '5'"),
        (2.5, "k_values must be an int >= 1 or an iterable of them, got 2.5"),
        (None, "k_values must be an int >= 1 or an iterable of them, got None"),
    ]:
        with pytest.raises(InvalidInputError, match=re.escape(match)):
            evaluate_rag(RANKED, metrics=["ndcg"], k_values=bad)  # type: ignore[arg-type]
    for k_values in (3, 5, (5,)):  # an explicit 5 too: only the default is no k_values
        with (
            pytest.warns(DeprecationWarning, match="k_values"),
            pytest.raises(InvalidInputError, match=r"deprecated name of k_values.*k_values only"),
        ):
            evaluate_rag(RANKED, metrics=["ndcg"], k_values=k_values, k=3)


def test_rag_partial_and_rag_report_take_k_values() -> None:
    from ragmeter.evaluation.rag import rag_partial, rag_report

    expected = evaluate_rag(RANKED, metrics=RANK_METRICS, k_values=(1, 3))
    partial = rag_partial(RANKED[:2], metrics=RANK_METRICS, k_values=(1, 3), keep=True)
    partial.merge(rag_partial(RANKED[2:], metrics=RANK_METRICS, k_values=(3, 1), keep=True))
    assert rag_report(partial, metrics=RANK_METRICS, k_values=[1, 3]) == expected
    with pytest.warns(DeprecationWarning, match=r"rag_partial\(k=\.\.\.\)"):
        old = rag_partial(RANKED, metrics=RANK_METRICS, k=3, keep=True)
    with pytest.warns(DeprecationWarning, match=r"rag_report\(k=\.\.\.\)"):
        report = rag_report(old, metrics=RANK_METRICS, k=3)
    assert report == evaluate_rag(RANKED, metrics=RANK_METRICS, k_values=3)
    partial = rag_partial(RANKED, metrics=RANK_METRICS, k_values=(1, 3), keep=True)
    with pytest.raises(InvalidInputError, match="metrics, k_values and prices"):
        rag_report(partial, metrics=RANK_METRICS, k_values=3)


# --------------------------------------------------------------------------- driver behaviour


def test_single_pass_over_a_generator() -> None:
    consumed: list[int] = []

    def gen() -> Iterator[dict[str, Any]]:
        for i, s in enumerate(SEED_SAMPLES * 3):
            consumed.append(i)
            yield s

    report = evaluate_rag(gen(), metrics=["exact_match"])
    assert consumed == list(range(6))
    assert report.n_samples == 6
    assert report.metrics == {"exact_match": 0.5}


def test_repeated_ids_are_disambiguated() -> None:
    samples = [RagSample(id="q", response="a", reference="a")] * 3
    report = evaluate_rag(samples, metrics=["exact_match"])
    assert list(report.per_sample) == ["q", "q#2", "q#3"]
    assert any("repeat an earlier one" in w for w in report.warnings)


class _Boom(RagMetric):
    name: ClassVar[str] = "boom"

    def score(self, sample: RagSample) -> float | None:
        raise ZeroDivisionError("bad metric")


class _NaN(RagMetric):
    name: ClassVar[str] = "nan_metric"

    def score(self, sample: RagSample) -> float | None:
        return float("nan")


class _Inf(RagMetric):
    name: ClassVar[str] = "inf_metric"

    def score(self, sample: RagSample) -> float | None:
        return -float("inf")


class _Length(RagMetric):
    name: ClassVar[str] = "answer_length"
    needs: ClassVar[frozenset[str]] = frozenset({"response"})
    higher_is_better: ClassVar[bool] = False

    def score(self, sample: RagSample) -> float | None:
        return float(len(sample.response or ""))

    def detail(self, sample: RagSample) -> dict[str, Any] | None:
        return {"chars": len(sample.response or "")}


def test_custom_metrics_and_a_failing_one() -> None:
    report = evaluate_rag(
        SEED_SAMPLES,
        metrics=[_Length(), _Boom(), _NaN(), _Inf(), "exact_match"],
        warnings=["from caller"],
    )
    assert report.metrics == {"answer_length": 4.5, "exact_match": 0.5}
    assert report.higher_is_better["answer_length"] is False
    assert report.warnings[0] == "from caller"
    assert any("'boom' metric raised ZeroDivisionError" in w for w in report.warnings)
    assert any(
        "'nan_metric' metric raised ValueError('returned NaN')" in w for w in report.warnings
    )
    assert any(
        "'inf_metric' metric raised ValueError('returned -inf')" in w for w in report.warnings
    )
    json.loads(report.to_json())
    assert all("boom" not in row for row in report.per_sample.values())
    first = next(iter(report.per_sample))
    assert report.details[first]["answer_length"] == {"chars": 5}


def test_skipped_lines_of_a_reader_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps(SEED_SAMPLES[0]) + "\nnot json\n[1, 2]\n" + json.dumps(SEED_SAMPLES[1]) + "\n",
        encoding="utf-8",
    )
    report = evaluate_rag(read_jsonl(path, skip_errors=True), metrics=["exact_match"])
    assert report.skipped_lines == 2
    assert report.n_samples == 2
    assert evaluate_rag(SEED_SAMPLES, skipped_lines=7).skipped_lines == 7
    broken = tmp_path / "broken.jsonl"
    broken.write_text("oops\n[]\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"no samples.*\(2 malformed lines were skipped\)"):
        evaluate_rag(read_jsonl(broken, skip_errors=True))


def test_report_round_trip_and_rendering() -> None:
    report = evaluate_rag(SEED_SAMPLES)
    again = RagEvalReport.from_dict(json.loads(report.to_json()))
    assert again.metrics == report.metrics
    assert again.per_sample == report.per_sample
    assert again.details == report.details
    assert again.extra == report.extra
    assert "exact_match" in report.to_text()
    assert "| faithfulness |" in report.to_markdown()


def test_sample_store_evaluate() -> None:
    store = SampleStore()
    store.extend(RagSample.model_validate(s) for s in SEED_SAMPLES)
    assert store.evaluate(metrics=["exact_match"]).metrics == {"exact_match": 0.5}


# --------------------------------------------------------------------------- character level


def _cg_scores(gold: tuple[int, int], chunk: tuple[int, int]) -> tuple[float, float, float]:
    item = cg.EvalItem(id="q", question="q?", gold=(cg.GoldSpan(cg.Span("doc1", *gold)),))
    chunks = [cg.Chunk(id="c", span=cg.Span("doc1", *chunk), text="")]
    return (
        cg.character_recall(item, chunks),
        cg.character_precision(item, chunks),
        cg.character_f1(item, chunks),
    )


def test_character_metrics_reported_by_default_when_samples_carry_spans() -> None:
    def spans(gold: tuple[int, int], chunk: tuple[int, int]) -> dict[str, Any]:
        return {
            "gold_spans": [{"span": {"doc_id": "doc1", "start": gold[0], "end": gold[1]}}],
            "retrieved_spans": [{"doc_id": "doc1", "start": chunk[0], "end": chunk[1]}],
        }

    samples = [
        {"id": "big", "response": "x", "retrieved_contexts": ["x"], **spans((100, 270), (0, 2000))},
        {"id": "small", **spans((100, 270), (100, 270))},
        {"id": "none", "response": "x", "retrieved_contexts": ["x"]},
    ]
    report = evaluate_rag(samples)
    big, small = _cg_scores((100, 270), (0, 2000)), _cg_scores((100, 270), (100, 270))
    assert big[:2] == (1.0, 0.085) and small == (1.0, 1.0, 1.0)  # seed 004's numbers
    for i, key in enumerate(("character_recall", "character_precision", "character_f1")):
        assert report.coverage[key] == 2
        assert report.metrics[key] == pytest.approx(statistics.mean([big[i], small[i]]))
        assert report.per_sample["big"][key] == pytest.approx(big[i])
        assert report.per_sample["none"][key] is None
    # without spans the defaults say nothing about them
    plain = evaluate_rag([samples[2]])
    assert not any(k.startswith("character") for k in plain.metrics)
    assert not any(k.startswith("character") for k in plain.extra.get("not_computed", {}))
    # asked for by name on samples without spans: refused, naming the fields
    with pytest.raises(InvalidInputError, match="character_f1 needs gold_spans, retrieved_spans"):
        evaluate_rag([samples[2]], metrics=["character_f1"])


def test_character_metrics_match_contextgrid_through_evaluate_rag() -> None:
    pairs = [((100, 200), (80, 150)), ((0, 50), (60, 90)), ((10, 20), (0, 1000)), ((5, 9), (5, 9))]
    samples = [
        coerce_sample(
            {
                "id": f"s{i}",
                "gold_spans": [{"span": {"doc_id": "doc1", "start": g[0], "end": g[1]}}],
                "retrieved_spans": [{"doc_id": "doc1", "start": c[0], "end": c[1]}],
            }
        )
        for i, (g, c) in enumerate(pairs)
    ]
    report = evaluate_rag(samples, metrics=["character_recall", "character_precision"])
    for i, (g, c) in enumerate(pairs):
        recall, precision, _ = _cg_scores(g, c)
        assert report.per_sample[f"s{i}"] == {
            "character_recall": recall,
            "character_precision": precision,
        }
