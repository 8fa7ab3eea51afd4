"""The registry tests' shared data: trec_eval's own test collection as plain dicts."""

from __future__ import annotations

from pathlib import Path

import pytest

import ragmeter

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


@pytest.fixture(scope="module")
def qrels() -> dict[str, dict[str, float]]:
    return {q: dict(j) for q, j in ragmeter.read_trec_qrels(DATA / "qrels.test").items()}


@pytest.fixture(scope="module")
def run() -> dict[str, list[str]]:
    return {q: list(r) for q, r in ragmeter.read_trec_run(DATA / "results.test").items()}
