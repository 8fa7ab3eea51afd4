"""``ragmeter runs`` and ``--save`` end to end from the command line: Cranfield's BM25 run
and a weaker copy saved, listed, shown, diffed, pinned, gated, trended and removed; runs
scored on changed qrels or other settings refused with what differs.

The numbers are checked against trec_eval's own output for the BM25 run
(``tests/data/cranfield_beir/bm25.trec_eval.txt``), against :func:`ragmeter.stats.compare`
on the two reports, and the trend's regression flag against SciPy's paired permutation
test.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ragmeter import cli
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.beir import read_beir_qrels
from ragmeter.io.jsonl import write_jsonl
from ragmeter.io.trec import read_trec_run, write_trec_qrels, write_trec_run
from ragmeter.stats import compare

DATA = Path(__file__).resolve().parents[1] / "data"
CRAN = DATA / "cranfield_beir"
QRELS = CRAN / "qrels" / "test.tsv"
BM25 = CRAN / "bm25.run"
SAVED = re.compile(r"saved run (\S+) as '([^']+)' in (\S+)")


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    code = cli.run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> tuple[str, str]:
    got, out, err = invoke(capsys, *args)
    assert got == code, f"exit {got}\nstdout:\n{out}\nstderr:\n{err}"
    return out, err


def trec_eval_value(measure: str) -> float:
    """trec_eval's own value of ``measure`` over all queries for Cranfield's BM25 run."""
    for line in (CRAN / "bm25.trec_eval.txt").read_text().splitlines():
        name, query, value = line.split()
        if name == measure and query == "all":
            return float(value)
    raise AssertionError(measure)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The BM25 run, a weaker copy (each top 10 shuffled), and Cranfield's qrels with 12
    judgements added in 4 queries."""
    root = tmp_path_factory.mktemp("runs_cli")
    run = read_trec_run(BM25)
    weaker = {}
    for qid, docs in run.items():
        top = list(docs[:10])
        random.Random(qid).shuffle(top)
        weaker[qid] = top + list(docs[10:])
    write_trec_run(weaker, root / "weaker.run")
    qrels = {q: dict(r) for q, r in read_beir_qrels(QRELS).items()}
    for qid in sorted(qrels)[:4]:
        unjudged = [d for d in run[qid][20:] if d not in qrels[qid]][:3]
        assert len(unjudged) == 3
        qrels[qid].update({d: 1 for d in unjudged})
    write_trec_qrels(qrels, root / "changed.qrels")
    return {"weaker": root / "weaker.run", "changed": root / "changed.qrels", "root": root}


def save(
    capsys: pytest.CaptureFixture[str],
    registry: Path,
    name: str,
    run: Path,
    *extra: str,
    qrels: Path = QRELS,
) -> str:
    """Score ``run`` with ``ragmeter retrieval --save NAME``; return the run id printed."""
    out, err = ok(
        capsys,
        "retrieval",
        "--qrels",
        str(qrels),
        "--run",
        str(run),
        "--json",
        "--save",
        name,
        "--registry",
        str(registry),
        *extra,
    )
    json.loads(out)  # stdout is still the report alone
    found = SAVED.search(err)
    assert found is not None, err
    assert found.group(2) == name and Path(found.group(3)) == registry
    return found.group(1)


def runs_json(capsys: pytest.CaptureFixture[str], registry: Path, *args: str) -> Any:
    out, _ = ok(capsys, "runs", *args, "--json", "--registry", str(registry))
    return json.loads(out)


# --------------------------------------------------------------------------- save, list, show


def test_saved_runs_are_listed_newest_first_with_trec_eval_s_numbers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path]
) -> None:
    registry = tmp_path / "runs.sqlite"
    first = save(capsys, registry, "bm25", BM25, "--tag", "model=bm25", "--tag", "split=test")
    second = save(capsys, registry, "bm25", files["weaker"])
    listed = runs_json(capsys, registry, "list")
    assert [r["id"] for r in listed] == [second, first]
    oldest = listed[1]
    assert oldest["tags"] == {"model": "bm25", "split": "test"}
    assert oldest["kind"] == "retrieval" and oldest["name"] == "bm25"
    ndcg = oldest["metrics"]["ndcg@10"]
    assert round(ndcg["mean"], 4) == trec_eval_value("ndcg_cut_10")
    assert ndcg["n"] == 225 and ndcg["ci_low"] < ndcg["mean"] < ndcg["ci_high"]
    assert oldest["dataset"]["items"] == 225  # judged queries
    # the table: one row per run, the main metric and n
    out, _ = ok(capsys, "runs", "list", "--registry", str(registry))
    assert first[:12] in out and second[:12] in out and "ndcg@10" in out and "225" in out
    # filters
    assert [r["id"] for r in runs_json(capsys, registry, "list", "--tag", "model=bm25")] == [first]
    assert runs_json(capsys, registry, "list", "--name", "other") == []
    # show: by name~1, by id prefix
    shown = runs_json(capsys, registry, "show", "bm25~1")
    assert shown["id"] == first and shown == runs_json(capsys, registry, "show", first[:10])
    text, _ = ok(capsys, "runs", "show", "bm25", "--registry", str(registry))
    assert second in text and "ndcg@10" in text and "relevance_level" in text


def test_the_registry_comes_from_the_environment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = tmp_path / "env" / "runs.sqlite"
    monkeypatch.setenv("RAGMETER_REGISTRY", str(registry))
    out, _ = ok(capsys, "runs", "list")
    assert out.startswith("no saved runs in") and "--save NAME" in out
    _, err = ok(capsys, "retrieval", "--qrels", str(QRELS), "--run", str(BM25), "--save", "bm25")
    assert str(registry) in err
    out, _ = ok(capsys, "runs", "list", "--json")
    assert [r["name"] for r in json.loads(out)] == ["bm25"]


def test_every_evaluation_command_saves(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """beir, report, eval and traces keep what they scored, with the per-item scores."""
    registry = ["--registry", str(tmp_path / "runs.sqlite")]
    ok(capsys, "beir", str(CRAN), "--run", str(BM25), "--save", "beir", *registry)
    ok(
        capsys,
        "report",
        "--qrels",
        str(QRELS),
        "--run",
        str(BM25),
        "--html",
        str(tmp_path / "r.html"),
        "--save",
        "page",
        *registry,
    )
    samples = [
        {"id": f"s{i}", "user_input": f"q {i}", "response": a, "reference": "paris"}
        for i, a in enumerate(["paris", "Paris!", "lyon", "the city of paris", "rome"])
    ]
    write_jsonl(samples, tmp_path / "samples.jsonl")
    ok(capsys, "eval", str(tmp_path / "samples.jsonl"), "--save", "rag", *registry)
    traces = DATA / "traces" / "langchain"
    ok(
        capsys,
        "traces",
        str(traces / "hybrid.jsonl"),
        "--qrels",
        str(traces / "qrels.tsv"),
        "--join-key",
        "metadata.query_id",
        "--save",
        "traces",
        *registry,
    )
    listed = {r["name"]: r for r in runs_json(capsys, tmp_path / "runs.sqlite", "list")}
    assert set(listed) == {"beir", "page", "rag", "traces"}
    assert listed["beir"]["metrics"]["ndcg@10"] == listed["page"]["metrics"]["ndcg@10"]
    assert listed["beir"]["dataset"] == listed["page"]["dataset"]  # the same qrels
    rag = listed["rag"]
    assert rag["kind"] == "rag"
    expected = evaluate_rag(samples, k_values=5)
    assert rag["metrics"]["token_f1"]["mean"] == pytest.approx(expected.metrics["token_f1"])
    assert rag["metrics"]["token_f1"]["n"] == 5
    # scores streamed to a file are kept for the registry too, so two saved runs pair
    out_file = tmp_path / "scores.jsonl"
    ok(
        capsys,
        "eval",
        str(tmp_path / "samples.jsonl"),
        "--save",
        "rag",
        "--per-sample-out",
        str(out_file),
        *registry,
    )
    assert len(out_file.read_text(encoding="utf-8").splitlines()) == 5
    diff = runs_json(capsys, tmp_path / "runs.sqlite", "diff", "rag~1", "rag", "-m", "token_f1")
    want = compare(expected, expected, metric="token_f1")
    assert (diff["n"], diff["mean_diff"], diff["p_value"]) == (5, want.mean_diff, want.p_value)


def test_save_options_are_checked_before_scoring(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = ["retrieval", "--qrels", str(QRELS), "--run", str(BM25)]
    for extra, message in (
        (["--tag", "model=bm25"], "--tag labels a saved run: add --save NAME"),
        (["--registry", str(tmp_path / "r.sqlite")], "add --save NAME"),
        (["--save", "x", "--tag", "nokey"], "--tag takes KEY=VALUE"),
        (["--save", "latest", "--registry", str(tmp_path / "r.sqlite")], "latest"),
    ):
        code, _, err = invoke(capsys, *base, *extra)
        assert code == 2, err
        assert err.startswith("ragmeter: error: ") and message in err, err
    assert (
        not (tmp_path / "r.sqlite").exists()
        or runs_json(capsys, tmp_path / "r.sqlite", "list") == []
    )


# --------------------------------------------------------------------------- diff


def _reports(files: dict[str, Path], qrels: Path = QRELS) -> tuple[Any, Any]:
    from ragmeter.io import read_qrels

    judged = read_qrels(qrels)
    return (
        evaluate_run(judged, read_trec_run(BM25), k_values=(1, 3, 5, 10, 100)),
        evaluate_run(judged, read_trec_run(files["weaker"]), k_values=(1, 3, 5, 10, 100)),
    )


def test_diff_gives_compare_s_numbers_on_the_two_reports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path]
) -> None:
    registry = tmp_path / "runs.sqlite"
    first = save(capsys, registry, "bm25", BM25)
    second = save(capsys, registry, "bm25", files["weaker"])
    a, b = _reports(files)
    for metric in ("ndcg@10", "recall@5"):
        got = runs_json(capsys, registry, "diff", "bm25~1", "bm25", "--metric", metric)
        want = compare(a, b, metric=metric).to_dict()
        for key in ("n", "mean_a", "mean_b", "mean_diff", "ci_low", "ci_high", "p_value"):
            assert got[key] == want[key], key
        assert got["wins"] == want["wins"] and got["losses"] == want["losses"]
        assert got["regressed"] == want["regressed"] and got["improved"] == want["improved"]
        assert got["label_a"] == f"bm25@{first[:8]}" and got["label_b"] == f"bm25@{second[:8]}"
        assert (got["run_a"], got["run_b"]) == (first, second)
        assert got["warnings"] == []
    text, _ = ok(capsys, "runs", "diff", first, second, "--registry", str(registry))
    assert "regressed most" in text and "p-value" in text and f"bm25@{second[:8]}" in text
    page = tmp_path / "diff.html"
    ok(capsys, "runs", "diff", first, second, "--html", str(page), "--registry", str(registry))
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_changed_qrels_are_refused_with_the_count_unless_common_queries(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path]
) -> None:
    registry = tmp_path / "runs.sqlite"
    first = save(capsys, registry, "bm25", BM25)
    second = save(capsys, registry, "bm25", files["weaker"], qrels=files["changed"])
    code, out, err = invoke(capsys, "runs", "diff", first, second, "--registry", str(registry))
    assert code == 2 and out == ""
    assert err.startswith("ragmeter: error: ") and "not like for like" in err
    assert "12 judgements added" in err and "--common-queries" in err
    # asked for, the common queries are compared, and the output says so
    out, err = ok(
        capsys, "runs", "diff", first, second, "--common-queries", "--registry", str(registry)
    )
    assert "compared on common queries only" in out and "12 judgements added" in out
    assert "compared on common queries only" in err  # and on stderr, as a note
    got = runs_json(capsys, registry, "diff", first, second, "--common-queries")
    a = evaluate_run(read_beir_qrels(QRELS), read_trec_run(BM25), k_values=(10,))
    from ragmeter.io import read_qrels

    b = evaluate_run(read_qrels(files["changed"]), read_trec_run(files["weaker"]), k_values=(10,))
    want = compare(a.scores("ndcg@10"), b.scores("ndcg@10"))
    assert got["n"] == want.n == 225
    assert got["mean_diff"] == want.mean_diff and got["p_value"] == want.p_value
    assert got["warnings"][0].startswith("compared on common queries only")


def test_other_settings_are_refused_naming_the_setting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    registry = tmp_path / "runs.sqlite"
    save(capsys, registry, "l1", BM25)
    save(capsys, registry, "l2", BM25, "--relevance-level", "2")
    code, _, err = invoke(capsys, "runs", "diff", "l1", "l2", "--registry", str(registry))
    assert code == 2 and "relevance_level" in err and "not like for like" in err


# --------------------------------------------------------------------------- pin and gate


def test_gate_against_the_pinned_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path]
) -> None:
    registry = tmp_path / "runs.sqlite"
    first = save(capsys, registry, "bm25", BM25)
    save(capsys, registry, "bm25", files["weaker"])
    out, _ = ok(capsys, "runs", "pin", "bm25~1", "--registry", str(registry))
    assert first in out
    assert [r["pinned"] for r in runs_json(capsys, registry, "list")] == [False, True]
    a, b = _reports(files)
    for report, name in ((a, "bm25.json"), (b, "weaker.json")):
        (tmp_path / name).write_text(report.to_json(), encoding="utf-8")
    gate = ["gate", "--baseline", "pinned", "--registry", str(registry), "--json"]
    passed, _ = ok(capsys, *gate, "--current", str(tmp_path / "bm25.json"))
    assert json.loads(passed)["passed"] is True
    failed, _ = ok(capsys, *gate, "--current", str(tmp_path / "weaker.json"), code=1)
    verdict = json.loads(failed)
    want = compare(a, b, label_a="baseline", label_b="current")
    assert verdict["passed"] is False and verdict["drop"] == -want.mean_diff
    assert verdict["reason"].startswith("REGRESSION: ndcg@10 dropped")
    # a run id and NAME~1 work as the baseline too
    by_id, _ = ok(capsys, *gate[:2], first, *gate[3:], "--current", str(tmp_path / "bm25.json"))
    assert json.loads(by_id)["passed"] is True
    # a report scored on other qrels is refused before gating, with the difference
    from ragmeter.io import read_qrels

    c = evaluate_run(read_qrels(files["changed"]), read_trec_run(BM25), k_values=(10,))
    (tmp_path / "changed.json").write_text(c.to_json(), encoding="utf-8")
    code, out, err = invoke(capsys, *gate, "--current", str(tmp_path / "changed.json"))
    assert code == 2 and out == "" and "not like for like" in err and "qrels changed" in err
    # a report file that is not there is not taken for a run name
    code, _, err = invoke(capsys, *gate[:2], "typo.json", "--current", str(tmp_path / "bm25.json"))
    assert code == 2 and "baseline report file not found: typo.json" in err
    # unpinned, "pinned" names nothing
    ok(capsys, "runs", "unpin", "--registry", str(registry))
    code, _, err = invoke(capsys, *gate, "--current", str(tmp_path / "bm25.json"))
    assert code == 2 and "pinned" in err


# --------------------------------------------------------------------------- trend and rm


def test_trend_flags_the_significant_drop(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path]
) -> None:
    from scipy.stats import permutation_test

    registry = tmp_path / "runs.sqlite"
    ids = [
        save(capsys, registry, "bm25", BM25),
        save(capsys, registry, "bm25", files["weaker"]),
        save(capsys, registry, "bm25", BM25),
        save(capsys, registry, "bm25", BM25, qrels=files["changed"]),
    ]
    points = runs_json(capsys, registry, "trend", "ndcg@10")
    assert [p["run_id"] for p in points] == ids  # oldest first
    a, b = _reports(files)
    sa, sb = a.scores("ndcg@10"), b.scores("ndcg@10")
    qids = sorted(sa)
    scipy_p = permutation_test(
        ([sa[q] for q in qids], [sb[q] for q in qids]),
        lambda x, y: sum(x) / len(x) - sum(y) / len(y),
        permutation_type="samples",
        n_resamples=9_999,
        random_state=0,
    ).pvalue
    assert scipy_p < 0.05  # the oracle: the drop is significant
    assert [p["regression"] for p in points] == [False, True, False, False]
    assert points[1]["baseline_id"] == ids[0] and points[1]["diff"] < 0
    assert points[2]["diff"] > 0  # back up: not a regression
    # the run on changed qrels is not compared with the ones before it, and says why
    assert points[3]["baseline_id"] is None and "qrels changed" in points[3]["note"]
    assert round(points[0]["mean"], 4) == trec_eval_value("ndcg_cut_10")
    text, err = ok(capsys, "runs", "trend", "ndcg@10", "--registry", str(registry))
    assert "1 regression" in text and "REGRESSION" in text and "qrels changed" in err
    page = tmp_path / "trend.html"
    ok(capsys, "runs", "trend", "ndcg@10", "--html", str(page), "--registry", str(registry))
    assert sorted(p.name for p in (tmp_path / "trend_runs").iterdir()) == sorted(
        f"{i}.html" for i in ids
    )
    code, _, err = invoke(capsys, "runs", "trend", "nope@10", "--registry", str(registry))
    assert code == 2 and "no saved run has the metric 'nope@10'" in err and "map@10" in err


def test_rm_removes_the_run_and_its_scores(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path]
) -> None:
    registry = tmp_path / "runs.sqlite"
    first = save(capsys, registry, "bm25", BM25)
    second = save(capsys, registry, "bm25", files["weaker"])
    scores = Path(runs_json(capsys, registry, "show", first)["scores_path"])
    assert scores.is_file()
    out, _ = ok(capsys, "runs", "rm", first, "--registry", str(registry))
    assert first in out
    assert [r["id"] for r in runs_json(capsys, registry, "list")] == [second]
    assert not scores.exists()
    code, _, err = invoke(capsys, "runs", "show", first, "--registry", str(registry))
    assert code == 2 and first in err


def test_a_corrupt_or_foreign_registry_exits_2_naming_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    for path in (corrupt, foreign):
        for args in (["list"], ["show", "latest"], ["trend", "ndcg@10"], ["diff", "a", "b"]):
            code, _, err = invoke(capsys, "runs", *args, "--registry", str(path))
            assert code == 2, (args, err)
            assert err.startswith("ragmeter: error: ") and str(path) in err, err
        code, _, err = invoke(
            capsys,
            "retrieval",
            "--qrels",
            str(QRELS),
            "--run",
            str(BM25),
            "--save",
            "x",
            "--registry",
            str(path),
        )
        assert code == 2 and str(path) in err


# --------------------------------------------------------------------------- read-only

# Root ignores file modes. Rather than switch to another user (who may not be able to read
# the interpreter, the virtualenv or the checkout: CI puts them in 0700 folders), a root
# child drops the capabilities that override file modes from its bounding set and re-executes
# itself: still uid 0, so it reads what root owns, but a 0444 file or a 0555 folder is
# read-only to it, as it is to an ordinary user.
DROP_OVERRIDES = """
import ctypes, os, sys
if os.geteuid() == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            sys.exit("cannot drop capability %d: %s" % (cap, os.strerror(ctypes.get_errno())))
os.execv(sys.executable, [sys.executable, "-c", sys.argv[1], *sys.argv[2:]])
"""

READ_ONLY_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from ragmeter import cli
print(json.dumps(cli.run(sys.argv[2:])))
"""


def test_a_read_only_registry_is_listed_diffed_and_trended_but_not_changed(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    """On a registry whose file and folder are not writable (for root: with the capabilities
    that override file modes dropped): list, show, diff and trend work; pin, rm and --save
    exit 2 saying the registry is read-only."""
    import shutil
    import subprocess
    import sys
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="ragmeter-cli-ro-"))
    try:
        folder = root / "reg"
        registry = folder / "runs.sqlite"
        save(capsys, registry, "bm25", BM25)
        save(capsys, registry, "bm25", files["weaker"])
        weaker = root / "weaker.run"
        shutil.copy(files["weaker"], weaker)
        weaker.chmod(0o444)
        for p in [registry, *(folder / "scores").iterdir()]:
            p.chmod(0o444)
        (folder / "scores").chmod(0o555)
        folder.chmod(0o555)
        src = str(Path(cli.__file__).resolve().parents[2])

        def child(*args: str) -> tuple[int, str, str]:
            command = [sys.executable, "-c", DROP_OVERRIDES, READ_ONLY_CHILD, src, *args]
            done = subprocess.run(
                [*command, "--registry", str(registry)],
                capture_output=True,
                text=True,
                timeout=300,
                cwd=root,
            )
            lines = done.stdout.strip().splitlines()
            assert lines, f"the child printed nothing (exit {done.returncode}): {done.stderr}"
            return int(lines[-1]), "\n".join(lines[:-1]), done.stderr

        # the child really cannot write there
        code = subprocess.run(
            [
                sys.executable,
                "-c",
                DROP_OVERRIDES,
                "import sys; open(sys.argv[1], 'ab')",
                str(registry),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert code.returncode != 0 and "Permission denied" in code.stderr, code.stderr
        code, out, err = child("runs", "list", "--json")
        assert code == 0, err
        assert [r["name"] for r in json.loads(out)] == ["bm25", "bm25"]
        code, out, err = child("runs", "diff", "bm25~1", "bm25", "--json")
        assert code == 0 and json.loads(out)["mean_diff"] < 0, err
        code, out, err = child("runs", "trend", "ndcg@10", "--json")
        assert code == 0 and [p["regression"] for p in json.loads(out)] == [False, True], err
        for args in (
            ("runs", "pin", "bm25"),
            ("runs", "rm", "bm25"),
            ("retrieval", "--qrels", str(QRELS), "--run", str(weaker), "--save", "x"),
        ):
            code, _, err = child(*args)
            assert code == 2 and "read-only" in err and str(registry) in err, (args, err)
    finally:
        for p in [root, *root.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(root)
