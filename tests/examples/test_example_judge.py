"""examples/judge_cranfield.py: each framework's model judges Cranfield RAG samples, and a
second run is served entirely from the cache."""

from __future__ import annotations

import runpy
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "judge_cranfield.py"
FRAMEWORKS = ("LangChain", "LlamaIndex", "Haystack")
JUDGE_KEYS = ("judge_faithfulness", "judge_answer_relevancy", "judge_correctness")


def test_script_prints_a_cold_run_then_a_fully_cached_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "judge.sqlite"
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), "--cache", str(cache)])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "Cranfield RAG samples: 5 queries, top-3 BM25 contexts" in out
    n = 5 * 3  # samples x judge metrics
    blocks = out.split("\n=== ")[1:]
    assert [b.split(" ", 1)[0] for b in blocks] == list(FRAMEWORKS)
    for block in blocks:
        assert f"--- run 1: judge_calls={n} judge_cache_hits=0" in block
        assert f"--- run 2: judge_calls=0 judge_cache_hits={n}" in block
        assert "second run served entirely from the cache: True; same numbers: True" in block
        for key in JUDGE_KEYS:
            assert block.count(f"\n{key} ") == 2  # in both reports, ...
        assert block.count("5/5") == 2 * 5  # ... every metric covering all 5 samples
    assert "all three frameworks' judges agree: True" in out
    # The frameworks' identities differ, so each has its own 15 entries in the one cache.
    with sqlite3.connect(cache) as conn:
        assert conn.execute("SELECT COUNT(*) FROM judge_calls").fetchone()[0] == 3 * n


def test_cache_persists_across_invocations_and_scores_are_sane(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module: dict[str, Any] = runpy.run_path(str(EXAMPLE))  # not __main__: nothing runs
    cache = str(tmp_path / "c.sqlite")
    first = module["main"](["--queries", "3", "--cache", cache])
    again = module["main"](["--queries", "3", "--cache", cache])
    capsys.readouterr()
    for name, reports in again.items():
        assert reports[0].judge_calls == 0 and reports[0].judge_cache_hits == 9, name
        assert reports[0].per_sample == first[name][0].per_sample
    for reports in first.values():
        report = reports[0]
        assert report.judge_calls == 9 and not report.incomplete
        assert set(report.per_sample) == {"cranfield-1", "cranfield-2", "cranfield-3"}
        for row in report.per_sample.values():
            # Extractive answers are sentences of the retrieved contexts: fully supported.
            assert row["judge_faithfulness"] == 1.0
            for key in JUDGE_KEYS:
                value = row[key]
                assert value is not None and 0.0 <= value <= 1.0
