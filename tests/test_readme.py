"""The README's commands and Python examples are true."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def _block(marker: str) -> str:
    (code,) = [b for b in BLOCKS if marker in b]
    return code


def _run(code: str) -> tuple[str, dict[str, Any]]:
    namespace: dict[str, Any] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), namespace)
    return out.getvalue(), namespace


def test_first_bash_block_is_the_two_commands() -> None:
    block = re.search(r"```bash\n(.*?)```", README, flags=re.S)
    assert block is not None
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    assert lines[0] == "pip install . && ragmeter demo"
    assert len(lines) == 2 and "pytest" in lines[1]


def test_quickstart_runs_and_gives_trec_eval_ndcg() -> None:
    _, ns = _run(_block("print(report.primary)"))
    assert round(ns["report"].primary, 4) == 0.3458
    assert ns["report"].primary == pytest.approx(0.3457976728968338, abs=1e-15)


@pytest.mark.parametrize(
    "marker",
    [
        'metrics=["exact_match", "token_f1"',
        "big_chunk = Chunk",
        "ragmeter.traces.read(",
        'measures=["ndcg_cut.10"',
        'metrics = ["token_f1", "semantic_similarity"',
    ],
)
def test_printed_values_match_the_comments(marker: str) -> None:
    code = _block(marker)
    out, _ = _run(code)
    expected = [
        line.split("# ", 1)[1].strip()
        for line in code.splitlines()
        if line.lstrip().startswith("print(") and "# " in line
    ]
    printed = [line.strip() for line in out.splitlines() if line.strip()]
    # Comments may trail with an explanation after two spaces; compare the value part.
    assert [p for p in printed] == [e.split("  ")[0] for e in expected]
