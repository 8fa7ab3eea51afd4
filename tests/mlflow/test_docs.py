"""The examples of docs/mlflow.md run, in a temp folder, and print what the page says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import mlflow
import pytest

pytestmark = pytest.mark.slow  # a real MLflow store: ~8 s to create its tables

DOC = (Path(__file__).resolve().parents[2] / "docs" / "mlflow.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)


def _printed_as_documented(code: str) -> tuple[list[str], list[str]]:
    """What the block prints, and what its comments say it prints (a ``# `` line after a
    ``print(...)``, continued by ``#  `` lines; or a ``  # value`` on the print line)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/mlflow.md", "exec"), {})
    said: list[str] = []
    lines = code.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("print("):
            continue
        if "  # " in line:
            said.append(line.split("  # ", 1)[1])
            continue
        text = ""
        for follow in lines[i + 1 :]:
            if not follow.startswith("#"):
                break
            text += (" " if text else "") + follow[1:].strip()
        said.append(text)
    return out.getvalue().splitlines(), said


@pytest.mark.parametrize("index", range(2))
def test_the_examples_print_what_the_page_says(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(BLOCKS) == 2
    monkeypatch.chdir(tmp_path)  # the examples' sqlite:///mlflow.db and ./mlruns
    before = mlflow.get_tracking_uri()
    try:
        printed, said = _printed_as_documented(BLOCKS[index])
    finally:
        mlflow.set_tracking_uri(before)
    assert said and printed[-len(said) :] == said  # mlflow.genai.evaluate prints a banner first
