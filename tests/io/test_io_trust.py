"""Issue 12: odd files that used to give a silently wrong number or a bare traceback.

Every reader (TREC run and qrels, BEIR qrels/corpus/queries, JSONL samples) strips a BOM,
names the file and line of bytes it cannot decode, reads gzip by content and reports a
truncated or corrupt one with file and line, and refuses what it cannot read exactly.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragmeter.errors import DataFormatError
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.beir import read_beir, read_beir_qrels
from ragmeter.io.jsonl import read_jsonl
from ragmeter.io.trec import read_trec_qrels, read_trec_run

BOM = b"\xef\xbb\xbf"
RUN = b"q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq2 Q0 c 1 1.0 t\n"
QRELS = b"q1 0 a 1\nq2 0 c 1\n"
BEIR_QRELS = b"q1\ta\t1\nq2\tc\t1\n"


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- BOM


def test_a_bom_does_not_make_a_phantom_query(tmp_path: Path) -> None:
    """Used to create query '\\ufeffq1': NDCG 0.54 instead of 1.0, exit 0."""
    run = read_trec_run(write(tmp_path / "run", BOM + RUN))
    qrels = read_trec_qrels(write(tmp_path / "qrels", BOM + QRELS))
    beir = read_beir_qrels(write(tmp_path / "qrels.tsv", BOM + BEIR_QRELS))
    assert sorted(run) == sorted(qrels) == sorted(beir) == ["q1", "q2"]
    for judged in (qrels, beir):
        report = evaluate_run(judged, run, k_values=[10])
        assert report.metrics["ndcg@10"] == 1.0 and report.missing_queries == []


def test_a_bom_before_a_beir_header_and_in_beir_jsonl(tmp_path: Path) -> None:
    root = tmp_path / "beir"
    root.mkdir()
    write(root / "corpus.jsonl", BOM + b'{"_id": "a", "text": "alpha"}\n')
    write(root / "queries.jsonl", BOM + b'{"_id": "q1", "text": "what"}\n')
    write(root / "qrels.tsv", BOM + b"query-id\tcorpus-id\tscore\n" + BEIR_QRELS)
    corpus, queries, qrels = read_beir(root)
    assert list(corpus) == ["a"] and list(queries) == ["q1"] and sorted(qrels) == ["q1", "q2"]


# --------------------------------------------------------------------------- decoding


READERS: dict[str, tuple[Callable[[Path], Any], bytes]] = {
    "trec run": (read_trec_run, RUN),
    "trec qrels": (read_trec_qrels, QRELS),
    "beir qrels": (read_beir_qrels, BEIR_QRELS),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_invalid_utf8_names_the_file_and_line(name: str, tmp_path: Path) -> None:
    read, data = READERS[name]
    lines = data.splitlines(keepends=True)
    path = write(tmp_path / "in", lines[0] + b"q\xff\xfe" + lines[1][1:] + b"".join(lines[2:]))
    with pytest.raises(DataFormatError, match=re.escape(f"{path}:2: not valid UTF-8")):
        read(path)


@pytest.mark.parametrize("name", sorted(READERS))
def test_gzip_is_read_by_content(name: str, tmp_path: Path) -> None:
    read, data = READERS[name]
    plain = read(write(tmp_path / "plain", data))
    assert read(write(tmp_path / "packed.txt", gzip.compress(data))) == plain


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_truncated_gzip_names_the_file_and_where_it_stopped(name: str, tmp_path: Path) -> None:
    """Used to abort the CLI with 'aborted', exit 130 (click turns EOFError into Abort)."""
    read, data = READERS[name]
    packed = gzip.compress(data * 200)
    path = write(tmp_path / "cut.gz", packed[: len(packed) // 2])
    with pytest.raises(DataFormatError, match=r"cut\.gz:\d+: the compressed file ends early"):
        read(path)


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_corrupt_gzip_names_the_file(name: str, tmp_path: Path) -> None:
    read, data = READERS[name]
    packed = bytearray(gzip.compress(data * 50))
    packed[20:40] = b"\x00" * 20
    path = write(tmp_path / "bad.gz", bytes(packed))
    with pytest.raises(DataFormatError, match=r"bad\.gz:\d+: the compressed file is corrupt"):
        read(path)


def test_jsonl_truncated_and_corrupt_gzip(tmp_path: Path) -> None:
    line = json.dumps({"id": "s", "user_input": "q", "response": "a"}).encode() + b"\n"
    packed = gzip.compress(line * 2000)
    path = write(tmp_path / "cut.jsonl.gz", packed[: len(packed) // 2])
    with pytest.raises(DataFormatError, match=r"cut\.jsonl\.gz:\d+: the compressed file ends"):
        list(read_jsonl(path))
    with pytest.raises(DataFormatError, match="compressed file ends early"):
        list(read_jsonl(path, skip_errors=True))  # not a line: nothing after it can be read


# --------------------------------------------------------------------------- deep JSON


def test_deeply_nested_json_is_a_line_error_in_jsonl_and_can_be_skipped(tmp_path: Path) -> None:
    """Used to raise RecursionError, even with skip_errors."""
    deep = '{"id": "x", "metadata": {"a": ' + "[" * 5000 + "]" * 5000 + "}}\n"
    good = json.dumps({"id": "ok", "user_input": "q", "response": "a"}) + "\n"
    path = tmp_path / "deep.jsonl"
    path.write_text(good + deep + good.replace('"ok"', '"ok2"'))
    with pytest.raises(DataFormatError, match=r"deep\.jsonl:2: .*nested too deeply"):
        list(read_jsonl(path))
    reader = read_jsonl(path, skip_errors=True)
    assert [s.id for s in reader] == ["ok", "ok2"]
    assert [line for line, _ in reader.skipped] == [2]


def test_deeply_nested_json_in_beir_is_a_data_format_error(tmp_path: Path) -> None:
    root = tmp_path / "beir"
    root.mkdir()
    (root / "corpus.jsonl").write_text('{"_id": "a", "text": ' + "[" * 5000 + "]" * 5000 + "}\n")
    (root / "queries.jsonl").write_text('{"_id": "q", "text": "t"}\n')
    (root / "qrels.tsv").write_text("q\ta\t1\n")
    with pytest.raises(DataFormatError, match=r"corpus\.jsonl:1: .*nested too deeply"):
        read_beir(root)


def test_json_array_or_csv_given_as_jsonl_says_what_jsonl_is(tmp_path: Path) -> None:
    array = tmp_path / "samples.json"
    array.write_text(json.dumps([{"user_input": "q", "response": "a"}], indent=None) + "\n")
    with pytest.raises(DataFormatError, match="JSONL = one JSON object per line"):
        list(read_jsonl(array))
    csv = tmp_path / "samples.csv"
    csv.write_text("user_input,response\nq,a\n")
    with pytest.raises(DataFormatError, match=r"samples\.csv:1: .*JSONL = one JSON object"):
        list(read_jsonl(csv))


# --------------------------------------------------------------------------- BEIR qrels rows


def test_a_bad_first_beir_row_is_an_error_not_a_header(tmp_path: Path) -> None:
    """A one-row file with a bad score used to give {} silently."""
    path = write(tmp_path / "qrels.tsv", b"q1\ta\thigh\n")
    with pytest.raises(DataFormatError, match=r"qrels\.tsv:1: score must be a number, got 'high'"):
        read_beir_qrels(path)


@pytest.mark.parametrize(
    "header", ["query-id\tcorpus-id\tscore", "qid\tdocid\trel", "query_id\tdoc_id\tlabel"]
)
def test_a_header_is_recognised_by_its_text(header: str, tmp_path: Path) -> None:
    path = write(tmp_path / "qrels.tsv", header.encode() + b"\n" + BEIR_QRELS)
    assert read_beir_qrels(path) == {"q1": {"a": 1}, "q2": {"c": 1}}


def test_repeated_judgements_conflicting_are_refused_identical_are_counted(tmp_path: Path) -> None:
    conflict = write(tmp_path / "c.tsv", b"q1\ta\t1\nq2\tc\t1\nq1\ta\t2\n")
    with pytest.raises(
        DataFormatError, match=r"c\.tsv:3: doc 'a' is judged twice for query 'q1'.*\(line 1\)"
    ):
        read_beir_qrels(conflict)
    trec_conflict = write(tmp_path / "c.qrels", b"q1 0 a 1\nq1 0 a 0\n")
    with pytest.raises(DataFormatError, match=r"c\.qrels:2: doc 'a' is judged twice"):
        read_trec_qrels(trec_conflict)
    same = read_beir_qrels(write(tmp_path / "s.tsv", b"q1\ta\t1\nq1\ta\t1\nq1\tb\t1\nq1\tb\t1\n"))
    assert same == {"q1": {"a": 1, "b": 1}}
    assert same.warnings == [
        "2 qrels line(s) repeat an earlier judgement with the same score; each was counted once"
    ]
    trec_same = read_trec_qrels(write(tmp_path / "s.qrels", b"q1 0 a 1\nq1 0 a 1\n"))
    assert len(trec_same.warnings) == 1
    report = evaluate_run(same, {"q1": ["a", "b"]}, k_values=[2])
    assert any("2 qrels line(s) repeat" in w and "s.tsv" in w for w in report.warnings)


def test_repeated_corpus_ids_conflicting_are_refused_identical_are_counted(tmp_path: Path) -> None:
    root = tmp_path / "beir"
    root.mkdir()
    (root / "queries.jsonl").write_text('{"_id": "q", "text": "t"}\n{"_id": "q", "text": "t"}\n')
    (root / "qrels.tsv").write_text("q\ta\t1\n")
    (root / "corpus.jsonl").write_text(
        '{"_id": "a", "text": "one"}\n{"_id": "b", "text": "x"}\n{"_id": "a", "text": "two"}\n'
    )
    with pytest.raises(
        DataFormatError, match=r"corpus\.jsonl:3: corpus _id 'a' occurs twice \(first on line 1\)"
    ):
        read_beir(root)
    (root / "corpus.jsonl").write_text('{"_id": "a", "text": "one"}\n' * 3)
    dataset = read_beir(root)
    assert dataset.corpus == {"a": "one"}
    assert dataset.warnings == [
        "corpus.jsonl: 2 record(s) repeat an earlier _id with the same text; each was kept once",
        "queries.jsonl: 1 record(s) repeat an earlier _id with the same text; each was kept once",
    ]


@pytest.mark.parametrize("grade", ["nan", "inf", "-inf", "1.7e308", "9007199254740994"])
def test_non_finite_or_huge_grades_are_refused_by_every_reader(grade: str, tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"qrels\.tsv:1: score must be a finite number"):
        read_beir_qrels(write(tmp_path / "qrels.tsv", f"q1\ta\t{grade}\n".encode()))
    with pytest.raises(DataFormatError, match=r"qrels:1: grade"):
        read_trec_qrels(write(tmp_path / "qrels", f"q1 0 a {grade}\n".encode()))
