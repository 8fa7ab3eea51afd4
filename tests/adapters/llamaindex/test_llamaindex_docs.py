"""The runnable python block of docs/llamaindex.md runs and prints what the text says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "llamaindex.md"


def test_doc_example_block_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    example = next(b for b in blocks if "class Hashed(BaseEmbedding)" in b)
    ns: dict[str, Any] = {}
    exec(compile(example, "llamaindex.md:example", "exec"), ns)
    out = capsys.readouterr().out
    assert "Retrieval evaluation: 5 queries scored" in out
    handler = ns["handler"]
    assert sorted(s.id for s in handler.samples) == ["1", "2", "3", "4", "5", "6"]
    assert [s.id for s in ns["report"].samples] == ["1", "2", "3", "4", "5"]  # dataset order
    assert len(handler.samples[-1].retrieved_ids) == 10 and not handler.attached
