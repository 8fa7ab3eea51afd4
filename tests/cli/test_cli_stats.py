"""`ragmeter compare` and `ragmeter gate`, driven through typer's CliRunner."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ragmeter.cli.stats import register
from ragmeter.datasets import load_cranfield_bm25_run
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.beir import read_beir_qrels
from ragmeter.io.trec import read_trec_run, write_trec_qrels, write_trec_run
from ragmeter.stats import compare

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Path]:
    """BM25 on Cranfield, a weaker copy (top 10 shuffled) and qrels in both formats."""
    root = tmp_path_factory.mktemp("cli_stats")
    run = load_cranfield_bm25_run()
    weaker = {}
    for qid, docs in run.items():
        top = list(docs[:10])
        random.Random(qid).shuffle(top)
        weaker[qid] = top + list(docs[10:])
    beir_qrels = data_dir / "cranfield_beir" / "qrels" / "test.tsv"
    write_trec_run(run, root / "bm25.run")
    write_trec_run(weaker, root / "weaker.run")
    write_trec_run({q: d[:50] for q, d in run.items()}, root / "short.run")
    write_trec_qrels(read_beir_qrels(beir_qrels), root / "qrels.trec")
    return {
        "bm25": root / "bm25.run",
        "weaker": root / "weaker.run",
        "short": root / "short.run",
        "beir": beir_qrels,
        "beir_dir": data_dir / "cranfield_beir",
        "trec": root / "qrels.trec",
        "root": root,
    }


def _ok(app: typer.Typer, args: list[str], code: int = 0) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    return result.stdout


def test_compare_two_runs_text(app: typer.Typer, files: dict[str, Path]) -> None:
    out = _ok(
        app, ["compare", str(files["bm25"]), str(files["weaker"]), "--qrels", str(files["beir"])]
    )
    assert "ndcg@10: weaker vs bm25 over 225 paired queries" in out
    assert "weaker is significantly worse than bm25" in out


def test_compare_json_equals_the_library_and_qrels_formats_agree(
    app: typer.Typer, files: dict[str, Path]
) -> None:
    outs = [
        json.loads(
            _ok(
                app,
                [
                    "compare",
                    str(files["bm25"]),
                    str(files["weaker"]),
                    "--qrels",
                    str(files[q]),
                    "--json",
                    "--test",
                    "t-test",
                    "-n",
                    "2000",
                    "--seed",
                    "3",
                ],
            )
        )
        for q in ("beir", "trec", "beir_dir")
    ]
    assert outs[0] == outs[1] == outs[2]
    qrels = read_beir_qrels(files["beir"])
    expected = compare(
        evaluate_run(qrels, read_trec_run(files["bm25"])),
        evaluate_run(qrels, read_trec_run(files["weaker"])),
        test="t-test",
        n=2000,
        seed=3,
        label_a="bm25",
        label_b="weaker",
    )
    assert outs[0] == json.loads(json.dumps(expected.to_dict()))


def test_compare_other_metric_and_many_runs(app: typer.Typer, files: dict[str, Path]) -> None:
    data = json.loads(
        _ok(
            app,
            [
                "compare",
                str(files["bm25"]),
                str(files["weaker"]),
                "--qrels",
                str(files["beir"]),
                "--metric",
                "recall@5",
                "--json",
            ],
        )
    )
    assert data["metric"] == "recall@5"
    out = _ok(
        app,
        [
            "compare",
            str(files["bm25"]),
            str(files["weaker"]),
            str(files["short"]),
            "--qrels",
            str(files["beir"]),
            "--metric",
            "map",
        ],
    )
    assert "map against 'bm25'" in out and "Holm–Bonferroni over 2 comparisons" in out
    assert "weaker" in out and "short" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "--qrels is required"),
        (["--qrels", "QRELS", "--metric", "nope@10"], "no metric named 'nope'"),
        (["--qrels", "QRELS", "--test", "wilcoxon"], "test must be one of"),
        (["--qrels", "QRELS", "--metric", "ndcg @10"], "--metric must look like"),
        (["--qrels", "QRELS", "--pair-by", "name"], "--pair-by must be 'id' or 'order'"),
    ],
)
def test_compare_bad_input_exits_1_with_one_line(
    app: typer.Typer, files: dict[str, Path], extra: list[str], message: str
) -> None:
    args = ["compare", str(files["bm25"]), str(files["weaker"])]
    args += [str(files["beir"]) if a == "QRELS" else a for a in extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert result.stderr.startswith("ragmeter: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_compare_needs_two_runs_and_existing_files(
    app: typer.Typer, files: dict[str, Path]
) -> None:
    one = runner.invoke(app, ["compare", str(files["bm25"]), "--qrels", str(files["beir"])])
    assert one.exit_code == 1 and "at least two runs" in one.stderr
    missing = runner.invoke(
        app, ["compare", str(files["bm25"]), "nope.run", "--qrels", str(files["beir"])]
    )
    assert missing.exit_code == 1 and "nope.run" in missing.stderr
    empty_dir = files["root"] / "empty"
    empty_dir.mkdir(exist_ok=True)
    no_qrels = runner.invoke(
        app, ["compare", str(files["bm25"]), str(files["weaker"]), "--qrels", str(empty_dir)]
    )
    assert no_qrels.exit_code == 1 and "without a BEIR qrels file" in no_qrels.stderr


# --------------------------------------------------------------------------- gate


@pytest.fixture(scope="module")
def reports(files: dict[str, Path]) -> dict[str, Path]:
    qrels = read_beir_qrels(files["beir"])
    out = {}
    for name in ("bm25", "weaker"):
        path = files["root"] / f"{name}.json"
        path.write_text(evaluate_run(qrels, read_trec_run(files[name])).to_json())
        out[name] = path
    return out


def test_gate_fails_with_exit_1_and_says_why(app: typer.Typer, reports: dict[str, Path]) -> None:
    args = ["gate", "--baseline", str(reports["bm25"]), "--current", str(reports["weaker"])]
    out = _ok(app, [*args, "--metric", "ndcg@10", "--max-drop", "0.01"], code=1)
    assert out.startswith("REGRESSION: ndcg@10 dropped by 0.0500 (0.3458 -> 0.2958)")
    data = json.loads(_ok(app, [*args, "--json"], code=1))
    assert data["passed"] is False and data["comparison"]["n"] == 225


def test_gate_passes_with_exit_0_and_a_reason(app: typer.Typer, reports: dict[str, Path]) -> None:
    same = ["gate", "--baseline", str(reports["bm25"]), "--current", str(reports["bm25"])]
    assert _ok(app, same).startswith("ok: ndcg@10 did not get worse")
    loose = ["gate", "--baseline", str(reports["bm25"]), "--current", str(reports["weaker"])]
    assert "within the allowed 0.1" in _ok(app, [*loose, "--max-drop", "0.1"])
    # read as a lower-is-better metric, the same change is an improvement
    assert "did not get worse" in _ok(app, [*loose, "--lower-is-better"])


def test_gate_on_plain_score_json(app: typer.Typer, tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    now = tmp_path / "now.json"
    base.write_text(json.dumps({f"q{i}": 100.0 + i for i in range(40)}))
    now.write_text(json.dumps({f"q{i}": 130.0 + i for i in range(40)}))
    args = ["gate", "--baseline", str(base), "--current", str(now), "--lower-is-better"]
    out = _ok(app, [*args, "--max-drop", "5"], code=1)
    assert out.startswith("REGRESSION: the score rose by 30.0000")


def test_gate_bad_input_exits_2(app: typer.Typer, reports: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"kind": "retrieval", "per_query": {}}))
    for path, message in (
        (broken, "not valid JSON"),
        (listed, "expected a report saved with to_dict()"),
        (partial, "a retrieval report that cannot be read back"),
        (tmp_path / "absent.json", "absent.json"),
    ):
        result = runner.invoke(
            app, ["gate", "--baseline", str(reports["bm25"]), "--current", str(path)]
        )
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("ragmeter: error: ") and message in result.stderr
    bad_drop = runner.invoke(
        app,
        [
            "gate",
            "--baseline",
            str(reports["bm25"]),
            "--current",
            str(reports["bm25"]),
            "--max-drop",
            "-1",
        ],
    )
    assert bad_drop.exit_code == 2 and "max_drop must be" in bad_drop.stderr


# --------------------------------------------------------------------------- unranked queries


def test_compare_and_gate_say_when_a_run_lacks_judged_queries(
    app: typer.Typer, files: dict[str, Path]
) -> None:
    """A run ranking 168 of Cranfield's 225 judged queries: its 57 zeros are named."""
    run = read_trec_run(files["bm25"])
    fewer = files["root"] / "fewer.run"
    write_trec_run({q: d for i, (q, d) in enumerate(run.items()) if i % 4}, fewer)
    args = ["compare", str(files["bm25"]), str(fewer), "--qrels", str(files["beir"])]
    text = _ok(app, args)
    assert "fewer is significantly worse than bm25" in text
    (line,) = [ln for ln in text.splitlines() if "warning:" in ln]
    assert line.startswith(
        "  warning: fewer's run has no ranking for 57 of the 225 paired queries that bm25 ranks"
    )
    assert "scored them 0 (missing_queries='zero', = trec_eval -c)" in line
    assert "over the 168 paired queries both rank, the mean difference is +0.0000" in line
    data = json.loads(_ok(app, [*args, "--json"]))
    assert data["warnings"] == [line.removeprefix("  warning: ")]
    # the queries both rank only: the same system, no difference, and what was left out
    skip = [*args, "--missing-queries", "skip", "--on-missing", "intersect", "--json"]
    data = json.loads(_ok(app, skip))
    assert (data["n"], data["mean_diff"], data["significant"]) == (168, 0.0, False)
    (left,) = data["warnings"]
    assert left.startswith("left out 57 queries only in bm25 and 0 only in fewer")
    assert "fewer's run has no ranking for 57 of them, which its report left out" in left
    bad = runner.invoke(app, [*args, "--missing-queries", "drop"])
    assert bad.exit_code == 1 and "missing_queries must be 'zero' or 'skip'" in bad.stderr
    # more than two runs: each row's warning under the table
    table = _ok(app, [*args, str(files["weaker"])])
    assert "warning: fewer: fewer's run has no ranking for 57" in table
    assert "warning: weaker" not in table
    # the gate on saved reports: the reason points at the warning, JSON carries it
    report = files["root"] / "fewer.json"
    qrels = read_beir_qrels(files["beir"])
    report.write_text(evaluate_run(qrels, read_trec_run(fewer)).to_json())
    baseline = files["root"] / "bm25-gate.json"
    baseline.write_text(evaluate_run(qrels, run).to_json())
    gate_args = ["gate", "--baseline", str(baseline), "--current", str(report)]
    out = _ok(app, gate_args, code=1)
    first = out.splitlines()[0]
    assert first.startswith("REGRESSION: ndcg@10 dropped by ")
    assert first.endswith("see the warning below.")
    assert "  warning: current's run has no ranking for 57 of the 225 paired queries" in out
    data = json.loads(_ok(app, [*gate_args, "--json"], code=1))
    assert data["warnings"] == data["comparison"]["warnings"] and len(data["warnings"]) == 1


# --------------------------------------------------------------------------- samples


def _write_samples(path: Path, answers: list[str], *, ids: bool = True) -> None:
    refs = ["paris", "four", "blue whale", "mercury", "oxygen", "seven", "tokyo", "einstein"]
    with path.open("w", encoding="utf-8") as fh:
        for i, (ref, answer) in enumerate(zip(refs, answers, strict=True)):
            row = {"user_input": f"question {i}", "response": answer, "reference": ref}
            if ids:
                row["id"] = f"s{i}"
            fh.write(json.dumps(row) + "\n")


def test_compare_samples(app: typer.Typer, tmp_path: Path) -> None:
    pytest.importorskip("ragmeter.io.jsonl")
    good = ["paris", "four", "blue whale", "mercury", "oxygen", "seven", "tokyo", "einstein"]
    poor = ["paris", "five", "a whale", "venus", "oxygen", "six", "kyoto", "newton"]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write_samples(a, good)
    _write_samples(b, poor)
    data = json.loads(
        _ok(app, ["compare", str(a), str(b), "--samples", "--metric", "token_f1", "--json"])
    )
    assert data["metric"] == "token_f1" and data["n"] == 8 and data["losses"] == 6
    assert data["label_a"] == "a" and data["mean_diff"] < 0
    # without ids every sample gets a fresh id: pair them by line order instead
    _write_samples(a, good, ids=False)
    _write_samples(b, poor, ids=False)
    by_order = json.loads(
        _ok(
            app,
            [
                "compare",
                str(a),
                str(b),
                "--samples",
                "--metric",
                "token_f1",
                "--json",
                "--pair-by",
                "order",
            ],
        )
    )
    assert {k: by_order[k] for k in ("n", "wins", "losses", "mean_diff", "p_value")} == {
        k: data[k] for k in ("n", "wins", "losses", "mean_diff", "p_value")
    }


# --------------------------------------------------------------------------- main app


def test_registered_on_the_ragmeter_cli(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cli = pytest.importorskip("ragmeter.cli")
    code = cli.run(
        ["compare", str(files["bm25"]), str(files["weaker"]), "--qrels", str(files["beir"])]
    )
    assert code == 0 and "weaker is significantly worse" in capsys.readouterr().out


def test_the_commands_in_their_own_modules_never_vanish_silently() -> None:
    """compare, gate and stages are registered; a broken import of their module is an
    error, not a CLI without them."""
    import subprocess
    import sys

    from typer.main import get_command

    from ragmeter.cli import app

    names = set(get_command(app).commands)  # type: ignore[attr-defined]
    assert {"compare", "gate", "stages"} <= names
    hide = "import sys; sys.modules['ragmeter.cli.stats'] = None; import ragmeter.cli"
    done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True)
    assert done.returncode != 0
    assert "ModuleNotFoundError: import of ragmeter.cli.stats halted" in done.stderr
