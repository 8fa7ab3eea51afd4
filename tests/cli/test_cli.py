"""The ``ragmeter`` command line: output against trec_eval's own outputs, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragmeter import cli
from ragmeter.cli import _progress
from ragmeter.io.beir import read_beir_qrels
from ragmeter.io.trec import write_trec_qrels

DATA = Path(__file__).parents[1] / "data"
TREC = DATA / "trec_eval"
CRAN = DATA / "cranfield_beir"


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    code = cli.run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def trec_eval_file(path: Path) -> dict[tuple[str, str], str]:
    """``{(measure, query): value text}`` from a trec_eval output file."""
    values: dict[tuple[str, str], str] = {}
    for line in path.read_text().splitlines():
        measure, query, value = line.split()
        values[(measure, query)] = value
    return values


def trec_lines(out: str) -> dict[tuple[str, str], str]:
    values: dict[tuple[str, str], str] = {}
    for line in out.splitlines():
        fields = line.split("\t")
        assert len(fields) == 3, line
        values[(fields[0].strip(), fields[1])] = fields[2]
    return values


def table_cell(out: str, row: str, column: str) -> str:
    """The text of one cell of a rich table printed to ``out``."""
    header = next(line for line in out.splitlines() if "metric" in line and "@" in line)
    names = [c.strip() for c in header.strip("┃│ ").split("┃" if "┃" in header else "│")]
    line = next(ln for ln in out.splitlines() if ln.strip("│ ").startswith(row + " "))
    cells = [c.strip() for c in line.strip("│ ").split("│")]
    return cells[names.index(column)]


# ---------------------------------------------------------------- light import


def test_import_ragmeter_loads_no_cli_or_server_library() -> None:
    code = (
        "import sys, ragmeter\n"
        "heavy = ('typer', 'rich', 'click', 'fastapi', 'starlette', 'uvicorn', 'ragmeter.cli')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


# ---------------------------------------------------------------- demo


def test_demo_prints_trec_evals_ndcg_at_10(capsys: pytest.CaptureFixture[str]) -> None:
    expected = trec_eval_file(CRAN / "bm25.trec_eval.txt")
    code, out, err = invoke(capsys, "demo")
    assert code == 0, err
    assert "225 queries" in out
    assert table_cell(out, "ndcg", "@10") == expected[("ndcg_cut_10", "all")] == "0.3458"
    assert table_cell(out, "recall", "@100") == expected[("recall_100", "all")]
    assert table_cell(out, "mrr", "all") == expected[("recip_rank", "all")]


def test_demo_trec_output_matches_trec_eval(capsys: pytest.CaptureFixture[str]) -> None:
    expected = trec_eval_file(CRAN / "bm25.trec_eval.txt")
    code, out, _ = invoke(capsys, "demo", "--trec")
    assert code == 0
    got = trec_lines(out)
    shared = set(got) & set(expected)
    assert len(shared) >= 15
    assert {k: got[k] for k in shared} == {k: expected[k] for k in shared}


def test_python_dash_m_ragmeter_cli_runs_the_cli() -> None:
    """``python -m ragmeter.cli`` keeps working now that the CLI is a package."""
    result = subprocess.run(
        [sys.executable, "-m", "ragmeter.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ragmeter ")


def test_python_dash_m_runs_the_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ragmeter", "demo", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["kind"] == "retrieval"
    assert f"{report['metrics']['ndcg@10']:.4f}" == "0.3458"


# ---------------------------------------------------------------- retrieval


def test_retrieval_trec_matches_trec_eval_default_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    expected = trec_eval_file(TREC / "out.test")
    code, out, err = invoke(
        capsys,
        "retrieval",
        "--qrels", str(TREC / "qrels.test"),
        "--run", str(TREC / "results.test"),
        "--k", "5,10,15,20,30,100,200,500,1000",
        "--metrics", "map,mrr",
        "--metrics", "precision",
        "--trec",
    )  # fmt: skip
    assert code == 0, err
    got = trec_lines(out)
    wanted = ["num_q", "map", "recip_rank"] + [
        f"P_{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)
    ]
    for measure in wanted:
        assert got[(measure, "all")] == expected[(measure, "all")], measure
    # trec_eval's format: measure padded to 22 columns, then tab-separated fields.
    assert "map                   \tall\t0.1785" in out.splitlines()


def test_retrieval_per_query_trec_matches_trec_eval_q(capsys: pytest.CaptureFixture[str]) -> None:
    expected = trec_eval_file(CRAN / "bm25.trec_eval.perquery.txt")
    code, out, err = invoke(
        capsys,
        "retrieval",
        "--qrels", str(CRAN / "qrels" / "test.tsv"),
        "--run", str(CRAN / "bm25.run"),
        "--k", "1,3,5,10,100",
        "--trec",
        "-q",
    )  # fmt: skip
    assert code == 0, err
    got = trec_lines(out)
    shared = set(got) & set(expected)
    per_query = {k for k in shared if k[1] != "all"}
    assert len(per_query) >= 15 * 225
    assert {k: got[k] for k in shared} == {k: expected[k] for k in shared}
    # per-query rows first (queries in string order), then the 'all' rows
    queries = [line.split("\t")[1] for line in out.splitlines()]
    first_all = queries.index("all")
    assert set(queries[first_all:]) == {"all"}
    assert queries[:first_all] == sorted(queries[:first_all])


def test_relevance_level_matches_trec_eval_l2(capsys: pytest.CaptureFixture[str]) -> None:
    expected = trec_eval_file(TREC / "out.test.aql")
    code, out, err = invoke(
        capsys,
        "retrieval",
        "--qrels", str(TREC / "qrels.rel_level"),
        "--run", str(TREC / "results.test"),
        "--k", "5,10,100",
        "-m", "map,mrr,precision,recall,ndcg",
        "-l", "2",
        "--trec",
    )  # fmt: skip
    assert code == 0, err
    got = trec_lines(out)
    for measure in ("map", "recip_rank", "P_5", "P_10", "recall_100"):
        assert got[(measure, "all")] == expected[(measure, "all")], measure


def test_trec_and_beir_qrels_are_detected_and_agree(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trec_qrels = tmp_path / "qrels.trec"
    write_trec_qrels(read_beir_qrels(CRAN / "qrels" / "test.tsv"), trec_qrels)
    reports = []
    for qrels in (CRAN / "qrels" / "test.tsv", trec_qrels, CRAN):  # CRAN: a BEIR directory
        code, out, err = invoke(
            capsys, "retrieval", "--qrels", str(qrels), "--run", str(CRAN / "bm25.run"), "--json"
        )
        assert code == 0, err
        reports.append(json.loads(out))
    assert reports[0]["metrics"] == reports[1]["metrics"] == reports[2]["metrics"]
    assert reports[0]["per_query"] == reports[2]["per_query"]
    assert reports[2]["n_queries"] == 225
    expected = trec_eval_file(CRAN / "bm25.trec_eval.txt")
    assert f"{reports[2]['metrics']['ndcg@10']:.4f}" == expected[("ndcg_cut_10", "all")]
    # the table, as `ragmeter beir DIR` prints it
    code, out, err = invoke(capsys, "retrieval", "--qrels", str(CRAN), "-r", str(CRAN / "bm25.run"))
    assert code == 0, err
    assert table_cell(out, "ndcg", "@10") == "0.3458"


def test_retrieval_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--qrels", str(TREC / "qrels.test"), "--run", str(TREC / "results.test")]
    code, out, _ = invoke(capsys, "retrieval", *args, "--json", "--k", "10", "-m", "precision")
    assert code == 0
    report = json.loads(out)
    assert list(report["metrics"]) == ["precision@10"]
    assert set(report["per_query"]) == {"301", "302", "303"}
    code, out, _ = invoke(capsys, "retrieval", *args, "--per-query", "-k", "10")
    assert code == 0
    assert table_cell(out, "precision", "@10") == "0.3000"  # out.test's P_10
    assert "Per-query scores" in out and "302" in out


def test_wide_tables_are_never_cropped(capsys: pytest.CaptureFixture[str]) -> None:
    expected = trec_eval_file(TREC / "out.test")
    ks = "5,10,15,20,30,100,200,500,1000"
    code, out, _ = invoke(
        capsys, "retrieval", "--qrels", str(TREC / "qrels.test"),
        "--run", str(TREC / "results.test"), "--k", ks, "--per-query",
    )  # fmt: skip
    assert code == 0
    for k in ks.split(","):
        assert table_cell(out, "precision", f"@{k}") == expected[(f"P_{k}", "all")]
    assert "…" not in out


def test_beir_command_reads_the_directory_qrels(capsys: pytest.CaptureFixture[str]) -> None:
    expected = trec_eval_file(CRAN / "bm25.trec_eval.txt")
    code, out, err = invoke(capsys, "beir", str(CRAN), "--run", str(CRAN / "bm25.run"), "--json")
    assert code == 0, err
    metrics = json.loads(out)["metrics"]
    assert f"{metrics['ndcg@10']:.4f}" == expected[("ndcg_cut_10", "all")]
    code, out, err = invoke(
        capsys, "beir", str(CRAN), "--qrels-file", "qrels/test.tsv", "-r", str(CRAN / "bm25.run")
    )
    assert code == 0, err
    assert table_cell(out, "ndcg", "@10") == "0.3458"


# ---------------------------------------------------------------- bad input


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code != 0
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ragmeter: error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def run_args() -> list[str]:
    return ["retrieval", "--qrels", str(TREC / "qrels.test"), "--run", str(TREC / "results.test")]


def test_missing_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.txt")
    code, _, err = invoke(capsys, "retrieval", "--qrels", missing, "--run", str(CRAN / "bm25.run"))
    assert_one_line_error(code, err, "qrels file not found", "nope.txt")
    assert code == 2  # a command-line problem
    code, _, err = invoke(
        capsys, "retrieval", "--qrels", str(TREC / "qrels.test"), "--run", missing
    )
    assert_one_line_error(code, err, "run file not found", "nope.txt")
    code, _, err = invoke(capsys, "beir", str(tmp_path / "nodir"), "--run", missing)
    assert_one_line_error(code, err, "BEIR directory not found")
    code, _, err = invoke(capsys, "beir", str(tmp_path), "--run", str(CRAN / "bm25.run"))
    assert_one_line_error(code, err, "no qrels file under", "--qrels-file")
    code, _, err = invoke(capsys, "retrieval", "--qrels", str(tmp_path), "--run", missing)
    assert_one_line_error(code, err, "is a directory without a BEIR qrels file (qrels/test.tsv")


def test_malformed_lines_name_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = tmp_path / "bad.run"
    run.write_text("301 Q0 d1 1 2.0 tag\n301 Q0 d2 1\n")
    code, _, err = invoke(
        capsys, "retrieval", "--qrels", str(TREC / "qrels.test"), "--run", str(run)
    )
    assert_one_line_error(code, err, "bad.run:2", "at least 5 columns")
    assert code == 1  # a data problem
    qrels = tmp_path / "bad.qrels"
    qrels.write_text("301 0 d1 1\n301 0 d2 high\n")
    code, _, err = invoke(capsys, "retrieval", "--qrels", str(qrels), "--run", str(run))
    assert_one_line_error(code, err, "bad.qrels:2", "grade must be an integer")
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\tx\n")
    code, _, err = invoke(capsys, "retrieval", "--qrels", str(tsv), "--run", str(run))
    assert_one_line_error(code, err, "bad.tsv:3", "score must be a number")
    binary = tmp_path / "binary.run"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = invoke(
        capsys, "retrieval", "--qrels", str(TREC / "qrels.test"), "--run", str(binary)
    )
    assert_one_line_error(code, err, "binary.run", "not valid UTF-8")


def test_unknown_metric(capsys: pytest.CaptureFixture[str], run_args: list[str]) -> None:
    code, _, err = invoke(capsys, *run_args, "--metrics", "ndcg,bleu")
    assert_one_line_error(code, err, "no metric named 'bleu'", "Available: hit_rate")
    assert code == 1
    code, _, err = invoke(capsys, *run_args, "--metrics", "ndcg@10")
    assert_one_line_error(code, err, "Registry names are bare")


@pytest.mark.parametrize(
    ("k", "needle"),
    [
        ("0", "every cut-off must be an int >= 1, got 0"),
        ("-3", "got -3"),
        ("ten", "'ten' is not an int"),
        (",", "--k is empty"),
    ],
)
def test_bad_cutoffs(
    capsys: pytest.CaptureFixture[str], run_args: list[str], k: str, needle: str
) -> None:
    code, _, err = invoke(capsys, *run_args, f"--k={k}")
    assert_one_line_error(code, err, needle)
    assert code == 2


def test_command_line_usage_errors(capsys: pytest.CaptureFixture[str], run_args: list[str]) -> None:
    code, _, err = invoke(capsys, "retrieval", "--qrels", str(TREC / "qrels.test"))
    assert code == 2
    assert_one_line_error(code, err, "Missing option '--run'")
    code, _, err = invoke(capsys, *run_args, "--bogus")
    assert code == 2
    assert_one_line_error(code, err, "No such option: --bogus")
    code, _, err = invoke(capsys, *run_args, "--json", "--trec")
    assert_one_line_error(code, err, "choose one")
    code, _, err = invoke(capsys, "nonsense")
    assert_one_line_error(code, err, "No such command 'nonsense'")


def test_no_qrels_relevant_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    qrels = tmp_path / "q.trec"
    qrels.write_text("q1 0 d1 0\n")
    run = tmp_path / "r.run"
    run.write_text("q1 Q0 d1 1 1.0 t\n")
    code, _, err = invoke(capsys, "retrieval", "--qrels", str(qrels), "--run", str(run))
    assert_one_line_error(code, err, "no query in qrels has a relevant judgement")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from ragmeter._version import __version__

    code, out, _ = invoke(capsys, "--version")
    assert code == 0
    assert out.strip() == f"ragmeter {__version__}"


def test_help_and_no_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = invoke(capsys, "--help")
    assert code == 0
    for command in ("demo", "eval", "retrieval", "beir", "serve"):
        assert command in out
    code, out, _ = invoke(capsys)
    assert code == 2
    assert "retrieval" in out
    assert out.count("Usage:") == 1  # the help once, not once by typer and once by us
    code, out, _ = invoke(capsys, "runs")
    assert code == 2
    assert "trend" in out and out.count("Usage:") == 1


def test_serve_without_the_server_extra_names_the_pip_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("fastapi", "uvicorn", "ragmeter.server"):
        monkeypatch.setitem(sys.modules, name, None)
    code, _, err = invoke(capsys, "serve")
    assert_one_line_error(code, err, "pip install 'ragmeter[server]'")


def test_progress_wrapper_yields_every_item(capsys: pytest.CaptureFixture[str]) -> None:
    items = list(range(1000))
    assert list(_progress.with_progress(iter(items), total=1000, enabled=True)) == items
    assert list(_progress.with_progress(iter(items), total=None, enabled=False)) == items


# ---------------------------------------------------------------- eval

RAG_EVAL_SAMPLES = [
    {
        "question": "What is the capital of France?",
        "answer": "Paris is the capital of France.",
        "context": ["Paris is the capital and largest city of France."],
        "golden_documents": ["Paris is the capital and largest city of France."],
        "retrieved": ["Paris is the capital and largest city of France."],
        "id": "sample-1",
    },
    {
        "question": "Who wrote Hamlet?",
        "answer": "Hamlet was written by Marlowe. It is a tragedy.",
        "context": ["Hamlet is a tragedy by William Shakespeare."],
        "golden_documents": ["Hamlet is a tragedy by William Shakespeare."],
        "retrieved": ["Macbeth is a play.", "Hamlet is a tragedy by William Shakespeare."],
        "id": "sample-2",
    },
    {
        "question": "How tall is the Eiffel Tower?",
        "answer": "It is 330 metres tall, but it was built in 1999.",
        "context": ["The Eiffel Tower is 330 metres tall.", "It opened in 1889."],
        "id": "sample-3",
    },
]


def write_lines(path: Path, records: list[Any], *, extra: Sequence[str] = ()) -> Path:
    lines = [json.dumps(r) for r in records] + list(extra)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def rag_eval_file(tmp_path: Path) -> Path:
    return write_lines(tmp_path / "data.jsonl", RAG_EVAL_SAMPLES)


def test_eval_json_agrees_with_rag_eval(
    capsys: pytest.CaptureFixture[str], rag_eval_file: Path
) -> None:
    from rag_eval.faithfulness import faithfulness
    from rag_eval.retrieval import precision_at_k

    code, out, err = invoke(
        capsys, "eval", str(rag_eval_file), "--json", "--k", "2", "--per-sample"
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["kind"] == "rag"
    assert report["n_samples"] == 3
    assert report["skipped_lines"] == 0
    for sample in RAG_EVAL_SAMPLES:
        row = report["per_sample"][sample["id"]]
        score, _, _ = faithfulness(sample["answer"], sample["context"])
        assert row["faithfulness"] == pytest.approx(score)
        if "retrieved" in sample:
            expected = precision_at_k(sample["retrieved"], sample["golden_documents"], k=2)
            assert row["precision@2"] == pytest.approx(expected)
        else:
            assert row["precision@2"] is None
    assert report["coverage"]["precision@2"] == 2


def test_eval_table(capsys: pytest.CaptureFixture[str], rag_eval_file: Path) -> None:
    from rag_eval.faithfulness import faithfulness

    code, out, err = invoke(capsys, "eval", str(rag_eval_file))
    assert code == 0, err
    assert "RAG evaluation: 3 samples" in out
    mean = sum(faithfulness(s["answer"], s["context"])[0] for s in RAG_EVAL_SAMPLES) / 3
    line = next(ln for ln in out.splitlines() if "faithfulness" in ln)
    cells = [c.strip() for c in line.strip("│ ").split("│")]
    assert cells[1] == f"{mean:.4f}"
    assert cells[3] == "3/3"
    assert "precision@5" in out
    assert "not computed" in err  # no sample has a reference answer: exact_match etc.


def test_eval_claims_only_and_metrics(
    capsys: pytest.CaptureFixture[str], rag_eval_file: Path
) -> None:
    code, out, _ = invoke(capsys, "eval", str(rag_eval_file), "--claims-only", "--json")
    assert code == 0
    assert list(json.loads(out)["metrics"]) == ["faithfulness"]
    code, out, _ = invoke(
        capsys, "eval", str(rag_eval_file), "-m", "faithfulness,ndcg", "-m", "mrr", "--json"
    )
    assert code == 0
    assert list(json.loads(out)["metrics"]) == ["faithfulness", "ndcg@5", "mrr@5"]


def test_eval_says_when_retrieved_ids_never_match_the_judged_ids(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    samples = [
        {"id": "a", "retrieved_ids": ["c-1", "c-2"], "reference_ids": ["doc-1"]},
        {"id": "b", "retrieved_ids": ["c-3"], "relevance": {"doc-2": 1}},
    ]
    path = write_lines(tmp_path / "chunks.jsonl", samples)
    code, out, err = invoke(capsys, "eval", str(path), "-m", "precision,recall", "--k", "2")
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if "recall@2" in ln)
    assert [c.strip() for c in line.strip("│ ").split("│")][1:4] == ["0.0000", "0.0000", "2/2"]
    (line,) = [ln for ln in err.splitlines() if "(doc_ids)" in ln]
    assert line.startswith("warning: CAUTION [samples] (doc_ids): every retrieval score")
    assert "of the 2 sample(s) scored on retrieved_ids is 0" in line
    assert "none of the 3 retrieved doc ids (e.g. 'c-1', 'c-2', 'c-3')" in line
    code, out, _ = invoke(capsys, "eval", str(path), "-m", "precision", "--json")
    assert code == 0
    (warning,) = json.loads(out)["warnings"]
    assert "none of the 3 retrieved doc ids" in warning
    fixed = [dict(samples[0], retrieved_ids=["doc-1"]), samples[1]]
    path = write_lines(tmp_path / "ids.jsonl", fixed)
    code, _, err = invoke(capsys, "eval", str(path), "-m", "precision")
    assert code == 0 and "warning" not in err


def test_eval_skip_errors_counts_skipped_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write_lines(
        tmp_path / "mixed.jsonl", RAG_EVAL_SAMPLES[:2], extra=["{not json", '{"question": 3}']
    )
    code, _, err = invoke(capsys, "eval", str(path))
    assert_one_line_error(code, err, "mixed.jsonl:3", "not valid JSON")
    code, out, err = invoke(capsys, "eval", str(path), "--skip-errors", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["skipped_lines"] == 2
    assert report["n_samples"] == 2
    code, out, err = invoke(capsys, "eval", str(path), "--skip-errors")
    assert code == 0
    assert "2 malformed lines skipped" in out
    assert "skipped line 3" in err and "skipped line 4" in err


def test_eval_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rag_eval_file: Path
) -> None:
    code, _, err = invoke(capsys, "eval", str(tmp_path / "missing.jsonl"))
    assert_one_line_error(code, err, "data file not found", "missing.jsonl")
    bad = write_lines(
        tmp_path / "bad.jsonl", [RAG_EVAL_SAMPLES[0], {"answer": "a", "latency_ms": -5}]
    )
    code, _, err = invoke(capsys, "eval", str(bad))
    assert_one_line_error(code, err, "bad.jsonl:2", "latency_ms")
    code, _, err = invoke(capsys, "eval", str(rag_eval_file), "--metrics", "bleu")
    assert_one_line_error(code, err, "no metric named 'bleu'")
    code, _, err = invoke(capsys, "eval", str(rag_eval_file), "--k", "0")
    assert_one_line_error(code, err, "'--k'")
    code, _, err = invoke(capsys, "eval", str(rag_eval_file), "--metrics", "exact_match")
    assert_one_line_error(code, err, "exact_match needs a reference answer")
    code, _, err = invoke(capsys, "eval", str(rag_eval_file), "--claims-only", "-m", "token_f1")
    assert_one_line_error(code, err, "--claims-only scores faithfulness only")
    code, _, err = invoke(capsys, "eval", str(rag_eval_file), "--input-price", "3")
    assert_one_line_error(code, err, "--output-price")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    code, _, err = invoke(capsys, "eval", str(empty))
    assert_one_line_error(code, err, "no samples")


def test_eval_cost_with_prices(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "ops.jsonl",
        [
            {"id": "a", "response": "x", "input_tokens": 1000, "output_tokens": 200},
            {"id": "b", "response": "y", "input_tokens": 3000, "output_tokens": 0},
        ],
    )
    code, out, err = invoke(
        capsys, "eval", str(path), "-m", "cost_usd,total_tokens", "--json",
        "--input-price", "3", "--output-price", "15",
    )  # fmt: skip
    assert code == 0, err
    metrics = json.loads(out)["metrics"]
    # a: (1000*3 + 200*15) / 1e6 = 0.006; b: 3000*3 / 1e6 = 0.009
    assert metrics["cost_usd"] == pytest.approx((0.006 + 0.009) / 2)
    assert metrics["total_tokens"] == pytest.approx((1200 + 3000) / 2)


def test_eval_with_progress_bar_gives_the_same_report(
    capsys: pytest.CaptureFixture[str], rag_eval_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, plain, _ = invoke(capsys, "eval", str(rag_eval_file), "-m", "faithfulness")
    monkeypatch.setattr(_progress, "wanted", lambda path, as_json: True)
    code, shown, _ = invoke(capsys, "eval", str(rag_eval_file), "-m", "faithfulness")
    assert code == 0
    assert shown == plain


def test_progress_only_on_a_terminal_for_large_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * cli.PROGRESS_MIN_BYTES)
    small = tmp_path / "small.jsonl"
    small.write_text("{}\n")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert _progress.wanted(big, as_json=False)
    assert not _progress.wanted(big, as_json=True)
    assert not _progress.wanted(small, as_json=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not _progress.wanted(big, as_json=False)


def test_display_order_lists_every_builtin_metric() -> None:
    from ragmeter.cli._options import DISPLAY_METRICS
    from ragmeter.metrics.registry import BUILTIN_METRICS

    assert sorted(DISPLAY_METRICS) == sorted(BUILTIN_METRICS)
