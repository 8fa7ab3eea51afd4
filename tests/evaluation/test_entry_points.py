"""Every retrieval entry point takes the same options with the same defaults (issue 19).

``evaluate_run``, ``evaluate_run_file``, ``evaluate_retrieval`` and ``ragmeter.dask.evaluate_run``
score through one loop; a user who moves from one to another keeps their option names and
gets the same numbers from the same defaults.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import ragmeter
from ragmeter._types import DEFAULT_K_VALUES
from ragmeter.evaluation.retrieval import evaluate_retrieval, evaluate_run, evaluate_run_file
from ragmeter.metrics.registry import BUILTIN_METRICS

SHARED = {
    "k_values": DEFAULT_K_VALUES,
    "metrics": BUILTIN_METRICS,
    "relevance_level": None,
    "missing_queries": "zero",
    "warnings": None,
    "per_query": True,
}


def _entry_points() -> list[object]:
    dask = pytest.importorskip("ragmeter.dask")
    return [evaluate_run, evaluate_run_file, evaluate_retrieval, dask.evaluate_run]


def test_every_retrieval_entry_point_has_the_same_options_and_defaults() -> None:
    for fn in _entry_points():
        params = inspect.signature(fn).parameters  # type: ignore[arg-type]
        got = {name: params[name].default for name in SHARED if name in params}
        assert got == SHARED, getattr(fn, "__module__", fn)


QRELS = {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 1}, "q3": {"d4": 1}}
RUN = {"q1": ["d2", "d9", "d1"], "q2": ["d8", "d3"]}


def test_the_defaults_give_the_same_report_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "run.txt"
    path.write_text(
        "".join(f"{q} Q0 {d} {r} {10 - r} t\n" for q, ds in RUN.items() for r, d in enumerate(ds))
    )
    rankings = {f"text {q}": ds for q, ds in RUN.items()}
    queries = {q: f"text {q}" for q in QRELS}
    expected = evaluate_run(QRELS, RUN)
    assert expected.per_query and expected.missing_queries == ["q3"]
    from_file = evaluate_run_file(QRELS, path)
    from_retriever = evaluate_retrieval(lambda text: rankings.get(text, []), QRELS, queries)
    for got in (from_file, from_retriever):
        assert got.metrics == expected.metrics
        assert got.per_query == expected.per_query
    assert from_file.missing_queries == ["q3"]
    assert from_retriever.metrics == ragmeter.evaluate_run(QRELS, RUN).metrics


def test_per_query_false_or_a_path_work_in_memory_too(tmp_path: Path) -> None:
    kept = evaluate_run(QRELS, RUN)
    bare = evaluate_run(QRELS, RUN, per_query=False)
    assert bare.metrics == kept.metrics and bare.per_query == {}
    assert bare.extra == {"per_query": "not kept"}
    assert bare.summary("ndcg@10") == kept.summary("ndcg@10")
    out = tmp_path / "scores.jsonl"
    written = evaluate_run(QRELS, RUN, per_query=out)
    assert written.extra == {"per_query_file": str(out)}
    assert ragmeter.read_scores(out) == kept.per_query
    with pytest.raises(ragmeter.InvalidInputError, match="per_query must be True, False"):
        evaluate_run(QRELS, RUN, per_query=3)  # type: ignore[arg-type]
