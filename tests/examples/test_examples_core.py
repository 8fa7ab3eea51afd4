"""The core examples run offline and print what the README says they print."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_quickstart_prints_trec_eval_ndcg(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    runpy.run_path(str(EXAMPLES / "quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    expected = json.loads((data_dir / "cranfield_beir" / "bm25.expected.fullprec.json").read_text())
    assert f"NDCG@10 = {expected['mean']['ndcg_cut_10']:.4f}" in out
    assert "term-overlap NDCG@10 = " in out
