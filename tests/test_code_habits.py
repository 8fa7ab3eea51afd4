"""The habits that keep the code in shape, run by the README's test command (so CI runs
them): ruff's lint and format check over the repository, and mypy (strict on ``src/``,
as configured in ``pyproject.toml``) over the core and the three adapters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ADAPTER_SOURCES = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "adapters").glob("*/src"))]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_code_is_ruff_formatted() -> None:
    done = _run("ruff", "format", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_core_and_the_adapters() -> None:
    assert len(ADAPTER_SOURCES) == 3, ADAPTER_SOURCES
    done = _run("mypy", "src", *ADAPTER_SOURCES)
    assert done.returncode == 0, done.stdout + done.stderr
