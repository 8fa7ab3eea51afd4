"""The runnable python blocks of docs/langchain.md run and print what the text says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "langchain.md"


def test_doc_example_blocks_run(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    example = next(b for b in blocks if "class KeywordRetriever" in b)
    ns: dict[str, Any] = {}
    exec(compile(example, "langchain.md:example", "exec"), ns)
    out = capsys.readouterr().out
    assert "Retrieval evaluation: 5 queries scored" in out
    assert ns["sample"].id == "6" and ns["sample"].response == "Use a heated model."
    assert ns["report"].retrieval.n_queries == 5 and len(ns["handler"].samples) == 6
    scored = next(b for b in blocks if "as_retriever_fn(KeywordRetriever())" in b)
    ns["qrels"] = {q: ns["qrels"][q] for q in ["1", "2", "3"]}  # the doc scores all 225
    exec(compile(scored, "langchain.md:retriever", "exec"), ns)
    assert ns["report"].n_queries == 3
