"""Shared fixtures: paths to the public test collections copied into tests/data/."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The tests/data directory (trec_eval, cranfield_beir, squad, vaswani)."""
    return DATA
