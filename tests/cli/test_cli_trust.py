"""Issue 12 through the installed ``ragmeter`` console script: every case that used to exit 0
with a wrong number, print a traceback or lose the output now gives the right number with
its warning, or one ``ragmeter: error:`` line and a non-zero exit."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = shutil.which("ragmeter", path=os.path.dirname(sys.executable))
DATA = Path(__file__).parents[1] / "data"
TREC = DATA / "trec_eval"

pytestmark = pytest.mark.skipif(SCRIPT is None, reason="the ragmeter console script is missing")


def ragmeter(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    assert SCRIPT is not None
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=120, **kwargs
    )


def one_error_line(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ragmeter: error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def files(tmp_path: Path, run: bytes, qrels: bytes) -> tuple[Path, Path]:
    (tmp_path / "run").write_bytes(run)
    (tmp_path / "qrels").write_bytes(qrels)
    return tmp_path / "run", tmp_path / "qrels"


RUN = b"q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq2 Q0 c 1 1.0 t\n"
QRELS = b"q1 0 a 1\nq2 0 c 1\n"


def test_a_bom_gives_the_right_ndcg_not_a_phantom_query(tmp_path: Path) -> None:
    run, qrels = files(tmp_path, b"\xef\xbb\xbf" + RUN, b"\xef\xbb\xbf" + QRELS)
    result = ragmeter("retrieval", "--qrels", qrels, "--run", run, "--json", "-k", "10")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["metrics"]["ndcg@10"] == 1.0 and report["missing_queries"] == []


def test_missing_queries_are_counted_on_stderr_and_skip_averages_the_run(tmp_path: Path) -> None:
    """trec_eval -c by default, its default with --missing-queries skip; the count shows."""
    qrels = TREC / "qrels.test"
    run = TREC / "results.trunc"
    zero = ragmeter("retrieval", "--qrels", qrels, "--run", run, "-k", "10", "--trec")
    assert zero.returncode == 0, zero.stderr
    assert "num_q                 \tall\t3" in zero.stdout
    assert "1 of 3 judged queries have no ranking in the run" in zero.stderr
    skip = ragmeter(
        "retrieval", "--qrels", qrels, "--run", run, "--missing-queries", "skip", "--trec"
    )
    assert skip.returncode == 0, skip.stderr
    assert "num_q                 \tall\t2" in skip.stdout
    assert "left out of the mean" in skip.stderr
    as_json = json.loads(ragmeter("retrieval", "--qrels", qrels, "--run", run, "--json").stdout)
    assert as_json["missing_queries"] == ["302"]
    bad = ragmeter("retrieval", "--qrels", qrels, "--run", run, "--missing-queries", "drop")
    one_error_line(bad, "--missing-queries must be 'zero' or 'skip'")
    assert bad.returncode == 2


def test_a_run_sharing_no_query_id_with_the_qrels_is_an_error(tmp_path: Path) -> None:
    run, qrels = files(tmp_path, RUN.replace(b"q", b"Q"), QRELS)
    one_error_line(
        ragmeter("retrieval", "--qrels", qrels, "--run", run),
        "none of the 2 judged queries has a ranking in the run",
        "'Q1'",
    )


@pytest.mark.parametrize("grade", ["nan", "inf", "1.7e308"])
def test_non_finite_grades_never_reach_the_json(grade: str, tmp_path: Path) -> None:
    """Used to print ``"ndcg": NaN`` (invalid JSON) with exit 0."""
    (tmp_path / "qrels.tsv").write_text(f"q1\ta\t{grade}\nq2\tc\t1\n")
    run, _ = files(tmp_path, RUN, QRELS)
    one_error_line(
        ragmeter("retrieval", "--qrels", tmp_path / "qrels.tsv", "--run", run, "--json"),
        "qrels.tsv:1:",
        "finite number",
    )


def test_a_truncated_gzip_run_is_one_error_line_not_aborted(tmp_path: Path) -> None:
    """Used to print 'aborted' and exit 130 (click turns EOFError into Abort)."""
    many = b"".join(b"q%d Q0 d%d 1 1.0 t\n" % (i % 7, i) for i in range(5000))
    packed = gzip.compress(many)
    (tmp_path / "run.gz").write_bytes(packed[: len(packed) // 2])
    _, qrels = files(tmp_path, RUN, QRELS)
    result = ragmeter("retrieval", "--qrels", qrels, "--run", tmp_path / "run.gz")
    one_error_line(result, "run.gz:", "the compressed file ends early")
    assert result.returncode == 1


def test_corrupt_gzip_and_invalid_utf8_are_one_error_line(tmp_path: Path) -> None:
    packed = bytearray(gzip.compress(QRELS * 100))
    packed[20:40] = bytes(20)
    (tmp_path / "qrels.gz").write_bytes(bytes(packed))
    run, _ = files(tmp_path, RUN, QRELS)
    one_error_line(
        ragmeter("retrieval", "--qrels", tmp_path / "qrels.gz", "--run", run),
        "qrels.gz:",
        "compressed file is corrupt",
    )
    (tmp_path / "bad.run").write_bytes(RUN + b"q2 Q0 \xff 2 0.5 t\n")
    one_error_line(
        ragmeter("retrieval", "--qrels", tmp_path / "qrels", "--run", tmp_path / "bad.run"),
        "bad.run:4: not valid UTF-8",
    )


def test_deep_json_is_one_error_line_and_skip_errors_skips_it(tmp_path: Path) -> None:
    good = json.dumps({"id": "a", "response": "x", "reference": "x"})
    deep = '{"id": "b", "metadata": ' + "[" * 3000 + "]" * 3000 + "}"
    data = tmp_path / "deep.jsonl"
    data.write_text(f"{good}\n{deep}\n")
    one_error_line(ragmeter("eval", data), "deep.jsonl:2:", "nested too deeply")
    skipped = ragmeter("eval", data, "--skip-errors", "--json")
    assert skipped.returncode == 0, skipped.stderr
    report = json.loads(skipped.stdout)
    assert report["skipped_lines"] == 1 and report["metrics"]["exact_match"] == 1.0


def test_an_empty_jsonl_names_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    one_error_line(ragmeter("eval", empty), str(empty), "no samples to score")


def test_a_json_array_or_csv_says_what_jsonl_is(tmp_path: Path) -> None:
    array = tmp_path / "data.json"
    array.write_text(json.dumps([{"response": "x"}, {"response": "y"}]))
    one_error_line(ragmeter("eval", array), "data.json:1:", "JSONL = one JSON object per line")
    csv = tmp_path / "data.csv"
    csv.write_text("response,reference\nx,x\n")
    one_error_line(ragmeter("eval", csv), "data.csv:1:", "JSONL = one JSON object per line")


def test_a_typo_in_a_field_name_is_named_with_the_field_it_meant(tmp_path: Path) -> None:
    """``respones`` used to vanish into metadata; exact_match then scored only the rest."""
    data = tmp_path / "typo.jsonl"
    data.write_text(
        json.dumps({"id": "1", "response": "x", "reference": "x"})
        + "\n"
        + json.dumps({"id": "2", "respones": "y", "reference": "y"})
        + "\n"
    )
    result = ragmeter("eval", data)
    assert result.returncode == 0, result.stderr
    assert (
        "1 sample(s) have a key 'respones', which is not a field: it was kept in metadata "
        "and not scored. Did you mean 'response'?"
    ) in result.stderr
    as_json = json.loads(ragmeter("eval", data, "--json").stdout)
    assert any("Did you mean 'response'?" in w for w in as_json["warnings"])
    only_typos = tmp_path / "only.jsonl"
    only_typos.write_text(json.dumps({"respones": "y", "refrence": "y"}) + "\n")
    one_error_line(ragmeter("eval", only_typos), "no metric could be computed", "'respones'")


def test_cost_usd_without_prices_names_the_cli_options(tmp_path: Path) -> None:
    data = tmp_path / "ops.jsonl"
    data.write_text(json.dumps({"response": "x", "input_tokens": 3, "output_tokens": 2}) + "\n")
    result = ragmeter("eval", data, "--metrics", "cost_usd")
    line = one_error_line(result, "--input-price", "--output-price")
    assert "prices={" not in line


def test_gate_with_a_missing_file_names_it_without_errno(tmp_path: Path) -> None:
    demo = ragmeter("demo", "--json")
    (tmp_path / "base.json").write_text(demo.stdout)
    result = ragmeter("gate", "--baseline", tmp_path / "base.json", "--current", "nope.json")
    line = one_error_line(result, "nope.json: No such file or directory")
    assert "Errno" not in line


def test_closed_stdout_is_not_success() -> None:
    """`ragmeter demo >&-` used to exit 0 with the output lost."""
    assert ragmeter("demo").returncode == 0
    closed = subprocess.run(
        f"exec {SCRIPT} demo >&-",
        shell=True,
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert closed.returncode == 1
    assert "standard output is closed" in closed.stderr


def test_a_reader_that_goes_away_is_not_success() -> None:
    read, write = os.pipe()
    os.close(read)  # nobody will read: the first write fails with EPIPE
    try:
        assert SCRIPT is not None
        result = subprocess.run(
            [SCRIPT, "demo", "--json"], stdout=write, stderr=subprocess.PIPE, timeout=120
        )
    finally:
        os.close(write)
    assert result.returncode != 0
    assert b"Traceback" not in result.stderr
