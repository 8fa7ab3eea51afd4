"""The runnable python blocks of docs/langchain.md run and print what the text says (a python
block followed by a text block prints exactly that text)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "langchain.md"
SHOWN = re.compile(r"```python\n((?:(?!```).)*)```\n\n```text\n((?:(?!```).)*)```", re.S)


def run_shown(marker: str, ns: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """Run the python block containing ``marker``; it prints the text block shown after it."""
    code, shown = next((c, t) for c, t in SHOWN.findall(DOC.read_text("utf-8")) if marker in c)
    exec(compile(code, f"langchain.md:{marker}", "exec"), ns)
    assert capsys.readouterr().out == shown


def test_doc_example_blocks_run(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    example = next(b for b in blocks if "class KeywordRetriever" in b)
    ns: dict[str, Any] = {}
    exec(compile(example, "langchain.md:example", "exec"), ns)
    out = capsys.readouterr().out
    assert "Retrieval evaluation: 5 queries scored" in out
    assert ns["sample"].id == "6" and ns["sample"].response == "Use a heated model."
    assert ns["report"].retrieval.n_queries == 5 and len(ns["handler"].samples) == 6
    pytest.importorskip("langchain_classic")  # the stage example's EnsembleRetriever
    run_shown("EnsembleRetriever(retrievers=", ns, capsys)  # the stage table
    assert [s.name for s in ns["staged"].samples[0].stages] == [
        "KeywordRetriever",
        "PrefixRetriever",
        "EnsembleRetriever",
        "reorder",
        "context",
    ]
    run_shown('stage("rrf", rrf)', ns, capsys)  # a marked fusion is the context
    note = ns["side"].samples[0].metadata["capture_errors"][0]  # the text quotes it
    assert note.startswith(
        "context: 2 stages produced rankings (KeywordRetriever, PrefixRetriever) and none can "
        "be identified as what reached the generator (they ran concurrently, "
    )
    run_shown("audit = RagmeterCallbackHandler(", ns, capsys)  # several observers
    assert ns["audit"].samples[0].retrieved_ids == ns["audit"].to_run(stage="KeywordRetriever")["7"]
    scored = next(b for b in blocks if "as_retriever_fn(KeywordRetriever())" in b)
    ns["qrels"] = {q: ns["qrels"][q] for q in ["1", "2", "3"]}  # the doc scores all 225
    exec(compile(scored, "langchain.md:retriever", "exec"), ns)
    assert ns["report"].n_queries == 3
