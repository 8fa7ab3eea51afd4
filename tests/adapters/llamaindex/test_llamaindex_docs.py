"""The runnable python blocks of docs/llamaindex.md run and print what the text says (a python
block followed by a text block prints exactly that text)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "llamaindex.md"
SHOWN = re.compile(r"```python\n((?:(?!```).)*)```\n\n```text\n((?:(?!```).)*)```", re.S)


def run_shown(marker: str, ns: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """Run the python block containing ``marker``; it prints the text block shown after it."""
    code, shown = next((c, t) for c, t in SHOWN.findall(DOC.read_text("utf-8")) if marker in c)
    exec(compile(code, f"llamaindex.md:{marker}", "exec"), ns)
    assert capsys.readouterr().out == shown


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
    run_shown("QueryFusionRetriever([dense, prefix]", ns, capsys)  # the stage table
    sample = ns["staged"].samples[0]
    assert [(s.name, s.kind, s.inputs) for s in sample.stages or []] == [
        ("dense", "retriever", None),
        ("prefix", "retriever", None),
        ("fusion", "fusion", ["dense", "prefix"]),
        ("Reorder", "reranker", ["fusion"]),
        ("context", "context", ["Reorder"]),
    ]
    run_shown("audit = RagmeterEventHandler(", ns, capsys)  # several observers
    assert not ns["audit"].attached and not ns["staged"].attached
    run_shown("FaithfulnessEvaluator(llm=", ns, capsys)  # queries that belong to others
