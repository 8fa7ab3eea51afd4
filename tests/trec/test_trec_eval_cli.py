"""``ragmeter trec_eval`` against trec_eval 10.0's own test outputs, byte for byte.

Each case is a command line from trec_eval's ``Makefile`` (target ``quicktest``) and the file
that command produced, both from trec_eval's repository (``tests/data/trec_eval``). The
comparison is of the whole output, the ``runid`` line included (its value comes from the
results file, as in trec_eval).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragmeter import cli
from ragmeter.metrics.trec import evaluate, format_trec_eval, parse_qrels, parse_results

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"

META_PARAMS = (
    "-q -miprec_at_recall..10,.20,.25,.75,.50 -m P.5,7,3 -m recall.20,2000 "
    "-m Rprec_mult.5.0,0.2,0.35 -mutility.2,-1,0,0 -m 11pt_avg..25,.5,.75 "
    "-mndcg.1=3,2=9,4=4.5 -mndcg_cut.10,20,23.4 -msuccess.2,5,20"
)
# (expected output, trec_eval's arguments before the two files, qrels, results)
CASES = [
    ("out.test", "", "qrels.test", "results.test"),
    ("out.test", "", "qrels.test.with-comments", "results.test"),
    ("out.comment.test", "", "qrels.comment.test", "results.comment.test"),
    ("out.test.a", "-m all_trec", "qrels.test", "results.test"),
    ("out.test.aq", "-m all_trec -q", "qrels.test", "results.test"),
    ("out.test.aqc", "-m all_trec -q -c", "qrels.test", "results.trunc"),
    ("out.test.aqcM", "-m all_trec -q -c -M100", "qrels.test", "results.trunc"),
    ("out.test.aql", "-m all_trec -mrelstring.20 -q -l2", "qrels.rel_level", "results.test"),
    ("out.test.meas_params", META_PARAMS, "qrels.test", "results.test"),
]


def _invoke(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    code = cli.run(["trec_eval", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("expected", "options", "qrels", "results"), CASES)
def test_output_is_trec_evals_byte_for_byte(
    capsys: pytest.CaptureFixture[str], expected: str, options: str, qrels: str, results: str
) -> None:
    args = [*options.split(), str(DATA / qrels), str(DATA / results)]
    code, out, err = _invoke(capsys, args)
    assert (code, err) == (0, "")
    assert out.encode() == (DATA / expected).read_bytes()


def test_results_from_standard_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO((DATA / "results.test").read_text()))
    code, out, _ = _invoke(capsys, ["-m", "all_trec", str(DATA / "qrels.test"), "-"])
    assert code == 0
    assert out == (DATA / "out.test.a").read_text()


def test_long_options_and_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(DATA / "qrels.test"), str(DATA / "results.test")]
    code, out, _ = _invoke(capsys, ["-a", "--query_eval_wanted", *files])
    assert code == 0
    assert out == (DATA / "out.test.aq").read_text()


def test_nosummary_prints_only_query_lines(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(DATA / "qrels.test"), str(DATA / "results.test")]
    code, out, _ = _invoke(capsys, ["-q", "-n", "-m", "all_trec", *files])
    expected = [
        line
        for line in (DATA / "out.test.aq").read_text().splitlines(keepends=True)
        if "\tall\t" not in line
    ]
    assert code == 0
    assert out == "".join(expected)


def test_python_api_gives_the_same_text() -> None:
    qrels = parse_qrels((DATA / "qrels.test").read_text())
    results = parse_results((DATA / "results.trunc").read_text())
    result = evaluate(
        qrels, results.scores, ["all_trec"], complete=True, max_retrieved=100, runid=results.runid
    )
    assert format_trec_eval(result, per_query=True) == (DATA / "out.test.aqcM").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m", "nosuch"], "no metric named 'nosuch'"),
        (["-m", "P."], "Nothing follows"),
        (["-m", "P.0,5"], "positive"),
        (["-m", "P.5,5"], "Duplicate"),
        (["-m", "ndcg.1=2,"], "Malformed pair"),
        (["-M", "-1"], "-M must be >= 0"),
    ],
)
def test_bad_options_say_what_is_wrong(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = _invoke(capsys, [*args, str(DATA / "qrels.test"), str(DATA / "results.test")])
    assert code != 0
    assert out == ""
    assert message in err


def test_bad_lines_are_named_by_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 a 1\n1 0 b\n")
    code, _, err = _invoke(capsys, [str(qrels), str(DATA / "results.test")])
    assert code == 1
    assert f"{qrels}:2:" in err and "expected 4 fields" in err
    run = tmp_path / "run"
    run.write_text("1 Q0 a 1 2.0 x\n1 Q0 a 2 1.0 x\n")
    qrels.write_text("1 0 a 1\n")
    code, _, err = _invoke(capsys, [str(qrels), str(run)])
    assert code == 1
    assert f"{run}:2:" in err and "'a' is retrieved twice for query '1'" in err


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _invoke(capsys, [str(DATA / "qrels.test"), os.devnull + "x"])
    assert code == 2
    assert "does not exist" in err


def test_a_grade_or_score_that_is_not_a_number_is_read_as_trec_eval_reads_it_and_said(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """trec_eval reads "abc" as 0 (C atof) without a word: stdout stays its bytes, and
    stderr names each such field by file and line."""
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 d1 1\n1 0 d2 x\n")
    run = tmp_path / "run"
    run.write_text("1 Q0 d1 1 abc r\n1 Q0 d2 2 0.5 r\n")
    clean = tmp_path / "clean"
    clean.write_text("1 Q0 d1 1 0 r\n1 Q0 d2 2 0.5 r\n")
    cleanq = tmp_path / "cleanq"
    cleanq.write_text("1 0 d1 1\n1 0 d2 0\n")
    code, out, err = _invoke(capsys, ["-m", "map", str(qrels), str(run)])
    assert code == 0
    _, same, quiet = _invoke(capsys, ["-m", "map", str(cleanq), str(clean)])
    assert out == same and quiet == ""
    assert "2 grades or scores are not plain numbers" in err
    assert f"{qrels} line 2: grade 'x'" in err and f"{run} line 1: score 'abc'" in err
