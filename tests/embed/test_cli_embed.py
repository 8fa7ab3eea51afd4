"""``ragmeter eval --metrics semantic_similarity``: the user's embedder (``--embedder``), the
embedding cache options, the counts printed, and the errors (exit codes 1 and 2)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from ragmeter import cli

SAMPLES = [
    {
        "id": "1",
        "response": "The capital is Paris",
        "reference": "Paris is the capital",
        "retrieved_contexts": ["Paris is the capital of France."],
    },
    {"id": "2", "response": "", "reference": "four"},
]

FACTORY = """
from pathlib import Path
from ragmeter.embed import FunctionEmbedder

LOG = Path(__file__).with_name("calls.log")


def vectors(texts):
    with LOG.open("a") as log:
        log.write(str(len(texts)) + "\\n")
    return [[1.0, float(len(t) % 3), float("a" in t)] for t in texts]


def make():
    return FunctionEmbedder(vectors, model="toy3")


def not_an_embedder():
    return 42
"""


@click.command(context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def entry(args: tuple[str, ...]) -> None:
    sys.exit(cli.run(list(args)))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "emb.py").write_text(textwrap.dedent(FACTORY))
    (tmp_path / "data.jsonl").write_text("\n".join(json.dumps(s) for s in SAMPLES) + "\n")
    return tmp_path


def run(work: Path, *args: str) -> Result:
    return CliRunner().invoke(entry, ["eval", str(work / "data.jsonl"), *args])


def calls(work: Path) -> int:
    log = work / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_the_users_embedder_scores_and_the_counts_are_printed(work: Path) -> None:
    spec = f"{work / 'emb.py'}:make"
    cache = work / "e.sqlite"
    first = run(
        work, "-m", "token_f1,semantic_similarity", "--embedder", spec, "--embed-cache", str(cache)
    )
    assert first.exit_code == 0, first.output
    assert "semantic_similarity" in first.output
    assert (
        f"embeddings (toy3): 3 texts embedded in 1 model calls, 0 served from the cache "
        f"(cache {cache})" in first.output
    )
    assert calls(work) == 1
    again = run(
        work, "-m", "semantic_similarity", "--embedder", spec, "--embed-cache", str(cache), "--json"
    )
    assert again.exit_code == 0, again.output
    assert calls(work) == 1  # served from the cache
    data = json.loads(again.stdout)
    assert data["extra"]["embed_calls"] == 0 and data["extra"]["embed_cache_hits"] == 3
    assert data["extra"]["embed_models"] == [{"model": "toy3"}]
    assert (
        data["metrics"]["semantic_similarity"]
        == json.loads(
            run(
                work, "-m", "semantic_similarity", "--embedder", spec, "--no-embed-cache", "--json"
            ).stdout
        )["metrics"]["semantic_similarity"]
    )
    assert calls(work) == 2  # --no-embed-cache embedded again


def test_batch_size_reaches_the_model(work: Path) -> None:
    spec = f"{work / 'emb.py'}:make"
    result = run(
        work,
        "-m",
        "semantic_similarity",
        "--embedder",
        spec,
        "--no-embed-cache",
        "--embed-batch-size",
        "1",
        "--embed-concurrency",
        "2",
    )
    assert result.exit_code == 0, result.output
    assert (work / "calls.log").read_text().split() == ["1", "1", "1"]


def test_the_embedding_cache_is_the_user_cache_dir_by_default(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(work / "cachedir"))
    result = run(work, "-m", "semantic_similarity", "--embedder", f"{work / 'emb.py'}:make")
    assert result.exit_code == 0, result.output
    assert (work / "cachedir" / "embed-cache.sqlite").exists()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--embed-cache", "x.sqlite"], 2, "--embed-cache only applies to embedding metrics"),
        (
            ["-m", "token_f1", "--embedder", "emb.py:make"],
            2,
            "--embedder only applies to embedding metrics",
        ),
        (
            ["-m", "semantic_similarity", "--embedder", "nowhere.py:make"],
            2,
            "--embedder nowhere.py:make: file not found",
        ),
        (
            ["-m", "semantic_similarity", "--embedder", "EMB:not_an_embedder"],
            1,
            "the factory returned a int object, which is not an embedder",
        ),
        (
            ["-m", "semantic_similarity", "--embed-cache", "C", "--no-embed-cache"],
            2,
            "contradict each other",
        ),
    ],
)
def test_option_errors_are_one_clear_line(
    work: Path, args: list[str], code: int, message: str
) -> None:
    args = [
        a.replace("EMB", str(work / "emb.py")).replace("C", str(work / "c.sqlite"))
        if a in ("EMB:not_an_embedder", "C")
        else a
        for a in args
    ]
    result = run(work, *args)
    assert result.exit_code == code, result.output
    assert message in result.output


def test_a_file_that_is_not_an_embedding_cache_is_refused(work: Path) -> None:
    bad = work / "bad.sqlite"
    bad.write_text("not a database, " * 50)
    result = run(
        work,
        "-m",
        "semantic_similarity",
        "--embedder",
        f"{work / 'emb.py'}:make",
        "--embed-cache",
        str(bad),
    )
    assert result.exit_code == 1
    assert f"--embed-cache {bad}: not a usable embedding cache" in result.output
    assert calls(work) == 0


def test_without_the_extra_the_default_embedder_names_the_install(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ragmeter.embed.default", None)
    result = run(work, "-m", "semantic_similarity", "--no-embed-cache")
    assert result.exit_code == 1
    assert "pip install 'ragmeter[semantic]'" in result.output


def test_dry_run_counts_the_texts_to_embed_and_embeds_nothing(work: Path) -> None:
    spec = f"{work / 'emb.py'}:make"
    cache = work / "new.sqlite"
    args = ["-m", "semantic_similarity", "--embedder", spec, "--embed-cache", str(cache)]
    before = run(work, *args, "--dry-run", "--json")
    assert before.exit_code == 0, before.output
    data = json.loads(before.stdout)["embeddings"]
    assert (data["texts"], data["distinct"], data["cached"], data["calls"]) == (3, 3, 0, 1)
    assert calls(work) == 0 and not cache.exists()
    assert run(work, *args).exit_code == 0
    after = run(work, *args, "--dry-run")
    assert after.exit_code == 0, after.output
    assert "already cached:         3" in after.output
    assert "texts to embed:         0 in 0 model calls" in after.output
    assert calls(work) == 1


def test_dry_run_with_a_judge_reports_both_estimates(work: Path) -> None:
    (work / "judges.py").write_text(
        "from ragmeter.judge import FunctionJudge\n"
        "def make():\n"
        "    return FunctionJudge(lambda m: '{\"score\": 1}', model='one')\n"
    )
    result = run(
        work,
        "-m",
        "semantic_similarity",
        "--embedder",
        f"{work / 'emb.py'}:make",
        "--judge",
        f"{work / 'judges.py'}:make",
        "--dry-run",
        "--json",
        "--no-embed-cache",
        "--no-judge-cache",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["calls"] >= 1 and data["embeddings"]["to_embed"] == 3
    assert calls(work) == 0
