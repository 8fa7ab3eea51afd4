"""The python blocks of docs/haystack.md run, in order, and print what the text says (a
python block followed by a text block prints exactly that text)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("haystack")
try:
    from haystack.components.generators.chat import MockChatGenerator  # noqa: F401
except ImportError:  # the doc's example uses Haystack 3's mock generator
    pytest.skip("MockChatGenerator needs Haystack >= 3", allow_module_level=True)

DOC = Path(__file__).resolve().parents[3] / "docs" / "haystack.md"
SHOWN = re.compile(r"```python\n((?:(?!```).)*)```\n\n```text\n((?:(?!```).)*)```", re.S)


def shown_after(code: str) -> str:
    """The text block shown right after the python block ``code``."""
    return next(t for c, t in SHOWN.findall(DOC.read_text(encoding="utf-8")) if c == code)


def test_doc_blocks_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 7
    ns: dict[str, Any] = {}
    exec(compile(blocks[0], "haystack.md:tracer", "exec"), ns)
    out = capsys.readouterr().out
    assert out.startswith("['184', '486', '1268']")  # what the text shows
    assert "Retrieval evaluation: 5 queries scored" in out
    assert ns["tracer"].to_run() == {q: ns["tracer"].to_run()[q] for q in "12345"}
    assert not ns["tracer"].attached  # the capture() blocks attached it while they ran
    exec(compile(blocks[1], "haystack.md:recorder", "exec"), ns)
    out = capsys.readouterr().out
    assert "['184', '486', '1268']" in out and ns["recorder"].to_run() == ns["tracer"].to_run()
    assert "Retrieval evaluation: 5 queries scored" in out
    exec(compile(blocks[2], "haystack.md:stages", "exec"), ns)
    assert capsys.readouterr().out == shown_after(blocks[2])  # the stage table
    sample = ns["staged"].samples[0]
    assert [(s.name, s.kind, s.inputs) for s in sample.stages or []] == [
        ("bm25", "retriever", None),
        ("prefix", "retriever", None),
        ("rrf", "fusion", ["bm25", "prefix"]),
        ("litm", "reranker", ["rrf"]),
        ("context", "context", ["litm"]),
    ]
    from haystack import tracing

    before = tracing.tracer.actual_tracer
    exec(compile(blocks[3], "haystack.md:observers", "exec"), ns)
    assert capsys.readouterr().out == shown_after(blocks[3])  # several observers
    assert tracing.tracer.actual_tracer is before and not ns["audit"].attached
    # the pipeline_retriever block scores all 225 queries; keep the test small
    ns["qrels"] = {q: ns["qrels"][q] for q in ["1", "2", "3"]}
    exec(compile(blocks[4], "haystack.md:retriever", "exec"), ns)
    assert ns["report"].n_queries == 3
    exec(compile(blocks[5], "haystack.md:components", "exec"), ns)
    out = capsys.readouterr().out
    assert round(ns["scores"]["retrieval"]["score"], 4) == 0.6697  # the value the text shows
    assert "0.0\n" in out
    assert "recall@10" in ns["result"].aggregated_report(output_format="json")["metrics"]
    # allow_deserialization() is process-wide; the real call is tested in a subprocess
    # (test_haystack_serialisation.py), here it must not leak into later tests
    import ragmeter_haystack

    calls: list[str] = []
    monkeypatch.setattr(ragmeter_haystack, "allow_deserialization", lambda: calls.append("x"))
    exec(compile(blocks[6], "haystack.md:yaml", "exec"), ns)
    assert ns["loaded"].to_dict() == ns["evaluation"].to_dict()
    assert calls == ["x"]
