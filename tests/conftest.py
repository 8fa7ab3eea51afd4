"""Shared fixtures: paths to the public test collections copied into tests/data/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# No telemetry from the frameworks under test (and no network here anyway).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The tests/data directory (trec_eval, cranfield_beir, squad, vaswani)."""
    return DATA
