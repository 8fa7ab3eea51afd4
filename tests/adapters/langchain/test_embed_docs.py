"""docs/semantic.md: its Python examples run and print exactly the text the page shows."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "semantic.md"


def test_each_example_prints_what_the_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = DOC.read_text(encoding="utf-8")
    codes = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    shown = re.findall(r"```text\n(.*?)```", text, flags=re.S)
    assert len(codes) == len(shown) == 2
    monkeypatch.chdir(tmp_path)
    for code, expected in zip(codes, shown, strict=True):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), {})
        assert out.getvalue() == expected
    assert (tmp_path / "embed-cache.sqlite").exists()


def test_the_conventions_table_cites_sources_that_exist() -> None:
    # The side-by-side table names the frameworks' files and functions it was read from.
    # (import_module: ``ragas.metrics`` has attributes that shadow its submodules' names)
    text = DOC.read_text(encoding="utf-8")
    for name, qualname in [
        ("haystack.components.evaluators.sas_evaluator", "SASEvaluator.run"),
        (
            "llama_index.core.evaluation.semantic_similarity",
            "SemanticSimilarityEvaluator.aevaluate",
        ),
        ("ragas.metrics._answer_similarity", "SemanticSimilarity._ascore"),
        ("ragas.metrics.collections._semantic_similarity", "SemanticSimilarity.ascore"),
    ]:
        module = importlib.import_module(name)
        cls, method = qualname.split(".")
        assert callable(getattr(getattr(module, cls), method))
        assert module.__name__.replace(".", "/") + ".py" in text
        assert qualname in text
