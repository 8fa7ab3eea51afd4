"""``ragmeter fill-holes QRELS RUN... --judge MODULE:FACTORY``: the Cranfield BEIR copy in
tests/data, a judge factory written to tmp_path, the augmented qrels read back by
pytrec_eval."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import pytrec_eval
from click.testing import CliRunner, Result

from ragmeter import cli
from ragmeter.io.trec import read_trec_qrels

DATA = Path(__file__).resolve().parents[1] / "data" / "cranfield_beir"
RUN = DATA / "bm25.run"

FACTORY_SOURCE = """
import hashlib
import re

from ragmeter.judge import FunctionJudge

CALLS = []


def grade(messages):
    CALLS.append(messages)
    passage = re.search(r"\\nPassage: (.*?)\\n\\nReply with only", messages[-1].content, re.S)
    return '{"grade": %d}' % (hashlib.sha256(passage.group(1).encode()).digest()[0] % 4)


def make_judge():
    return FunctionJudge(grade, model="hashed-grades")


def langchain_model():
    from langchain_core.language_models import FakeListChatModel

    return FakeListChatModel(responses=['{"grade": 1}'])
"""


@click.command(context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def entry(args: tuple[str, ...]) -> None:
    """The console script: ``cli.run`` owns error handling and exit codes."""
    sys.exit(cli.run(list(args)))


class Env:
    def __init__(self, root: Path, module: str) -> None:
        self.root = root
        self.module = module

    @property
    def calls(self) -> list[Any]:
        calls: list[Any] = sys.modules[self.module].CALLS
        return calls

    def run(self, *args: str) -> Result:
        return CliRunner().invoke(entry, ["fill-holes", *map(str, args)])


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    module = f"holes_judges_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{module}.py").write_text(FACTORY_SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / "user-cache"))
    yield Env(tmp_path, module)
    sys.modules.pop(module, None)


def _ndcg5(qrels: dict[str, dict[str, int]], run_path: Path) -> float:
    run: dict[str, dict[str, float]] = {}
    for line in run_path.read_text().splitlines():
        q, _, d, _, score, _ = line.split()
        run.setdefault(q, {})[d] = float(score)
    scored = [q for q, docs in qrels.items() if any(g > 0 for g in docs.values())]
    per = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_5"}).evaluate(run)
    return sum(per.get(q, {}).get("ndcg_cut_5", 0.0) for q in scored) / len(scored)


def test_fill_holes_writes_augmented_qrels_and_reports_side_by_side(env: Env) -> None:
    out = env.root / "augmented.qrels"
    result = env.run(
        DATA,
        RUN,
        "--judge",
        f"{env.module}:make_judge",
        "--depth",
        "5",
        "--sample-size",
        "40",
        "--grade-map",
        "0:0,1:2,2:3,3:4",
        "--out",
        out,
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["calls"] == len(env.calls) == data["holes"] + 40
    assert data["out"] == str(out) and data["agreement"]["n"] == 40
    written = read_trec_qrels(out)
    augmented = {q: {d: int(g) for d, g in docs.items()} for q, docs in written.items()}
    added = sum(len(d) for d in data["judged_by_model"].values())
    assert added == data["filled"] == data["holes"]
    for q, docs in data["judged_by_model"].items():
        assert all(augmented[q][d] == g for d, g in docs.items())
    (system,) = data["systems"]
    assert system["name"] == "bm25"
    assert system["after"] == pytest.approx(_ndcg5(augmented, RUN), abs=1e-12)
    assert system["judged_after"] == pytest.approx(1.0)

    table = env.run(
        DATA,
        RUN,
        "--judge",
        f"{env.module}:make_judge",
        "--depth",
        "5",
        "--sample-size",
        "40",
        "--grade-map",
        "0:0,1:2,2:3,3:4",
    )
    assert table.exit_code == 0, table.stderr
    assert len(env.calls) == data["calls"]  # the second run came from the cache
    assert f"judge calls: 0 sent, {data['calls']} from the cache" in table.stdout
    for needle in ("ndcg@5 before", "judged@5 after", "bm25", "quadratic", "confusion"):
        assert needle in table.stdout


def test_dry_run_sends_nothing_and_writes_nothing(env: Env) -> None:
    out = env.root / "augmented.qrels"
    result = env.run(
        DATA,
        RUN,
        "--judge",
        f"{env.module}:make_judge",
        "--dry-run",
        "--out",
        out,
        "--no-judge-cache",
    )
    assert result.exit_code == 0, result.stderr
    assert env.calls == [] and not out.exists()
    assert "Dry run:" in result.stdout and "nothing was sent" in result.stdout
    assert "augmented qrels: not written (dry run)" in result.stdout


def test_a_langchain_model_from_the_factory_is_wrapped(env: Env) -> None:
    result = env.run(
        DATA,
        RUN,
        "--judge",
        f"{env.module}:langchain_model",
        "--depth",
        "2",
        "--sample-size",
        "0",
        "--no-judge-cache",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    grades = {g for docs in data["judged_by_model"].values() for g in docs.values()}
    assert grades == {1} and data["agreement"] is None


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--grade-map", "0:0,1"], 2, "--grade-map takes JUDGE:QRELS pairs"),
        (["--grade-map", "0:0,1:1"], 1, r"grade_map must give a qrels grade .* missing \[2, 3\]"),
        (["--judge-cache", "x.sqlite", "--no-judge-cache"], 2, "contradict each other"),
    ],
)
def test_bad_options_are_one_line_errors(
    env: Env, args: list[str], code: int, message: str
) -> None:
    result = env.run(DATA, RUN, "--judge", f"{env.module}:make_judge", "--dry-run", *args)
    assert result.exit_code == code
    assert result.stderr.startswith("ragmeter: error: ")
    assert len(result.stderr.strip().splitlines()) == 1
    import re

    assert re.search(message, result.stderr), result.stderr


def test_missing_corpus_text_names_query_and_doc(env: Env) -> None:
    corpus = env.root / "corpus.tsv"
    corpus.write_text("1\tonly one document\n")
    result = env.run(
        DATA / "qrels" / "test.tsv",
        RUN,
        "--judge",
        f"{env.module}:make_judge",
        "--queries",
        DATA / "queries.jsonl",
        "--corpus",
        corpus,
        "--dry-run",
    )
    assert result.exit_code == 1
    assert "has no text" in result.stderr and "for query" in result.stderr
    skipped = env.run(
        DATA / "qrels" / "test.tsv",
        RUN,
        "--judge",
        f"{env.module}:make_judge",
        "--queries",
        DATA / "queries.jsonl",
        "--corpus",
        corpus,
        "--dry-run",
        "--skip-missing-text",
        "--json",
    )
    assert skipped.exit_code == 0, skipped.stderr
    assert json.loads(skipped.stdout)["skipped_no_text"] > 0
