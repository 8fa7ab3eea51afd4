"""evaluate_run_file, streamed JSON and lazy summaries: evaluate_run's numbers at any size.

The oracle is ``evaluate_run(qrels, read_trec_run(path))`` (itself checked against
pytrec_eval and trec_eval in tests/evaluation) and ``json.dumps(report.to_dict(), indent=2)``.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
import pytrec_eval

from ragmeter.errors import DataFormatError, InvalidInputError, NoScorableQueriesError
from ragmeter.evaluation.retrieval import evaluate_run, evaluate_run_file
from ragmeter.io import read_qrels
from ragmeter.io.scores import read_scores
from ragmeter.io.trec import UngroupedRunError, read_trec_run, write_trec_run
from ragmeter.metrics.registry import METRICS
from ragmeter.report import RetrievalEvalReport

DATA = Path(__file__).parents[1] / "data"
CASES = [
    ("trec_eval/qrels.test", "trec_eval/results.test"),
    ("trec_eval/qrels.test", "trec_eval/results.trunc"),
    ("trec_eval/qrels.rel_level", "trec_eval/results.test"),
    ("cranfield_beir/qrels/test.tsv", "cranfield_beir/bm25.run"),
    ("vaswani/qrels.tsv", "vaswani/bm25.run"),
]


def _grouped(source: Path, target: Path) -> Path:
    """``source`` with each query's lines together (a stable sort by first appearance)."""
    lines = [line for line in source.read_text().splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("#")]
    first: dict[str, int] = {}
    for line in lines:
        first.setdefault(line.split()[0], len(first))
    lines.sort(key=lambda line: first[line.split()[0]])
    target.write_text("\n".join(lines) + "\n")
    return target


@pytest.mark.parametrize(("qrels_name", "run_name"), CASES)
@pytest.mark.parametrize("mode", ["zero", "skip"])
def test_file_scoring_is_evaluate_run_exactly(
    tmp_path: Path, qrels_name: str, run_name: str, mode: str
) -> None:
    qrels = read_qrels(DATA / qrels_name)
    path = _grouped(DATA / run_name, tmp_path / "run")
    level = 2 if "rel_level" in qrels_name else None
    expected = evaluate_run(
        qrels, read_trec_run(DATA / run_name), missing_queries=mode, relevance_level=level
    )  # type: ignore[arg-type]
    kept = evaluate_run_file(qrels, path, missing_queries=mode, relevance_level=level)  # type: ignore[arg-type]
    assert kept.to_json() == expected.to_json()
    streamed = evaluate_run_file(
        qrels, path, missing_queries=mode, relevance_level=level, per_query=False
    )  # type: ignore[arg-type]
    assert streamed.metrics == expected.metrics
    assert streamed.missing_queries == expected.missing_queries
    assert streamed.warnings == expected.warnings
    assert streamed.per_query == {} and streamed.extra == {"per_query": "not kept"}
    for key in expected.metrics:
        exact, merged = expected.summary(key), streamed.summary(key)
        assert merged.mean == exact.mean == expected.metrics[key]
        assert (merged.count, merged.missing, merged.std, merged.min, merged.max) == (
            exact.count,
            exact.missing,
            exact.std,
            exact.min,
            exact.max,
        )
        if merged.exact:
            assert merged == exact
    out = tmp_path / "per_query.parquet"
    written = evaluate_run_file(
        qrels, path, missing_queries=mode, relevance_level=level, per_query=out
    )  # type: ignore[arg-type]
    assert written.extra["per_query_file"] == str(out)
    assert read_scores(out) == expected.per_query


def test_cranfield_per_query_file_agrees_with_pytrec_eval(tmp_path: Path) -> None:
    qrels = read_qrels(DATA / "cranfield_beir/qrels/test.tsv")
    path = _grouped(DATA / "cranfield_beir/bm25.run", tmp_path / "run")
    out = tmp_path / "scores.jsonl"
    evaluate_run_file(qrels, path, k_values=(10,), metrics=["ndcg"], per_query=out)
    oracle = pytrec_eval.RelevanceEvaluator(
        {q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items()}, {"ndcg_cut.10"}
    ).evaluate(read_trec_run(DATA / "cranfield_beir/bm25.run").scores)
    ours = read_scores(out)
    assert {q: row["ndcg@10"] for q, row in ours.items() if q in oracle} == pytest.approx(
        {q: row["ndcg_cut_10"] for q, row in oracle.items()}, abs=1e-12
    )


def test_a_scattered_file_is_refused_with_the_fix(tmp_path: Path) -> None:
    qrels = read_qrels(DATA / "trec_eval/qrels.test")
    lines = (DATA / "trec_eval/results.test").read_text().splitlines()
    scattered = tmp_path / "in" / "run"
    scattered.parent.mkdir()
    scattered.write_text("\n".join([*lines, lines[0].replace(" Q0 ", " Q0 late-")]) + "\n")
    with pytest.raises(UngroupedRunError, match=r"sort -s -k1,1"):
        evaluate_run_file(qrels, scattered)
    out = tmp_path / "out" / "scores.jsonl"
    with pytest.raises(DataFormatError):
        evaluate_run_file(qrels, scattered, per_query=out)
    assert list(out.parent.iterdir()) == []  # the partial file is removed


def test_refusals_match_evaluate_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.write_text("x Q0 a 1 1.0 t\n")
    with pytest.raises(InvalidInputError, match=r"none of the 1 judged queries .* e\.g\. 'x'"):
        evaluate_run_file({"q": {"a": 1}}, run)
    with pytest.raises(NoScorableQueriesError):
        evaluate_run_file({"x": {"a": 0}}, run)
    with pytest.raises(InvalidInputError, match="per_query must be"):
        evaluate_run_file({"x": {"a": 1}}, run, per_query=2)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        evaluate_run_file({"x": {"a": 1}}, tmp_path / "nope")
    zero = evaluate_run_file({"x": {"b": 1}}, run, k_values=[1], metrics=["recall"])
    assert any("none of the 1 retrieved doc ids (e.g. 'a')" in w for w in zero.warnings)
    assert (
        zero.warnings
        == evaluate_run(
            {"x": {"b": 1}}, read_trec_run(run), k_values=[1], metrics=["recall"]
        ).warnings
    )


def test_custom_metrics_stream_too(tmp_path: Path) -> None:
    @METRICS.register("half_recall_stream")
    def half(judgements: dict[str, float], ranked: list[str], k: int) -> float:
        hits = sum(1 for d in ranked[:k] if judgements.get(d, 0) > 0)
        return hits / (2 * sum(1 for g in judgements.values() if g > 0))

    try:
        qrels = read_qrels(DATA / "trec_eval/qrels.test")
        path = _grouped(DATA / "trec_eval/results.test", tmp_path / "run")
        names = ["recall", "half_recall_stream", "map"]
        expected = evaluate_run(qrels, read_trec_run(path), k_values=[5, 10], metrics=names)
        for keep in (True, False):
            got = evaluate_run_file(qrels, path, k_values=[5, 10], metrics=names, per_query=keep)
            assert got.metrics == expected.metrics
            assert list(got.metrics) == list(expected.metrics)
    finally:
        METRICS._metrics.pop("half_recall_stream", None)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- JSON and summaries


def _big_report(n: int = 3000) -> RetrievalEvalReport:
    rng = random.Random(1)
    qrels = {f"q{i}": {f"d{j}": rng.randint(0, 2) for j in range(5)} for i in range(n)}
    run = {f"q{i}": [f"d{j}" for j in rng.sample(range(8), 6)] for i in range(n)}
    return evaluate_run(qrels, run)


def test_streamed_json_is_json_dumps_to_the_byte(tmp_path: Path) -> None:
    report = _big_report()
    expected = json.dumps(report.to_dict(), indent=2, allow_nan=False)
    assert report.to_json() == expected
    buffer = io.StringIO()
    assert report.to_json(buffer) is None
    assert buffer.getvalue() == expected
    report.to_json(tmp_path / "r.json")
    assert (tmp_path / "r.json").read_text(encoding="utf-8") == expected
    assert report.to_json(indent=None) == json.dumps(report.to_dict())
    assert RetrievalEvalReport.from_dict(json.loads(expected)).to_dict() == report.to_dict()


def test_streamed_json_refuses_a_nan_a_caller_put_in() -> None:
    report = RetrievalEvalReport(
        metrics={"x@1": 0.5}, per_query={"q": {"x@1": float("nan")}}, n_queries=1, k_values=(1,)
    )
    with pytest.raises(ValueError, match="not finite numbers"):
        report.to_json()
    no_metrics = RetrievalEvalReport(
        metrics={}, per_query={"q": {"x@1": float("nan")}}, n_queries=1, k_values=(1,)
    )
    with pytest.raises(ValueError, match="not JSON compliant"):
        no_metrics.to_json()


def test_one_summary_is_computed_alone() -> None:
    report = _big_report(500)
    summaries = report.summaries
    assert summaries.__class__.__name__ == "_Summaries"
    ndcg = report.summary("ndcg@10")
    assert list(summaries._done) == ["ndcg@10"]  # type: ignore[attr-defined]
    assert ndcg.mean == report.metrics["ndcg@10"]
    assert set(report.summaries) == set(report.metrics)
    with pytest.raises(KeyError):
        report.summary("nope@1")


def test_loaded_streamed_report_keeps_its_summaries(tmp_path: Path) -> None:
    qrels = read_qrels(DATA / "vaswani/qrels.tsv")
    path = _grouped(DATA / "vaswani/bm25.run", tmp_path / "run")
    report = evaluate_run_file(qrels, path, per_query=False)
    back = RetrievalEvalReport.from_dict(json.loads(report.to_json()))
    assert dict(back.summaries) == dict(report.summaries)


def test_write_trec_run_round_trips_through_the_block_reader(tmp_path: Path) -> None:
    run = read_trec_run(DATA / "cranfield_beir/bm25.run")
    write_trec_run(run, tmp_path / "again")
    assert read_trec_run(tmp_path / "again") == run
