"""The block-at-a-time TREC run reader and the streamed one give the line reader's answers.

The reference is :func:`parse_trec_run` (one line at a time, the rules documented in
``ragmeter.io.trec``); files are made large enough to span many 1 MiB blocks, with the
irregular lines (comments, blank lines, CRLF, short lines, extra columns) landing inside
blocks and across their edges.
"""

from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import DataFormatError
from ragmeter.io import trec
from ragmeter.io.trec import (
    UngroupedRunError,
    iter_trec_run,
    parse_trec_run,
    read_trec_run,
)


def _lines(n_queries: int, depth: int, seed: int = 0, *, ties: bool = True) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for q in range(n_queries):
        docs = rng.sample(range(10_000), depth)
        for rank, d in enumerate(docs, 1):
            score = float(rng.randint(0, 5)) if ties else float(depth - rank) + 0.5
            lines.append(f"q{q} Q0 doc{d} {rank} {score} tag")
    return lines


def _write(path: Path, lines: list[str], *, end: str = "\n") -> Path:
    path.write_bytes(end.join(lines).encode() + end.encode())
    return path


def _same(a: trec.Run, b: trec.Run) -> None:
    assert a == b and list(a) == list(b)
    assert a.scores == b.scores
    assert a.ordering == b.ordering == trec.TREC_ORDERING


@pytest.mark.parametrize("ties", [True, False])
def test_block_reader_equals_line_reader_on_a_multi_block_file(tmp_path: Path, ties: bool) -> None:
    lines = _lines(5000, 20, ties=ties)  # ~2.7 MiB: several blocks, queries across their edges
    lines.insert(12345, "# a comment in the middle of a block")
    lines.insert(40000, "")
    lines.insert(50001, "q7 Q0 extra 1 3.0 tag more columns")  # q7 again, further down
    path = _write(tmp_path / "run.txt", lines)
    assert path.stat().st_size > 2 * trec._CHUNK
    _same(read_trec_run(path), parse_trec_run(lines))


def test_crlf_bom_and_gzip_read_the_same(tmp_path: Path) -> None:
    lines = _lines(500, 30)
    plain = read_trec_run(_write(tmp_path / "run.txt", lines))
    _same(read_trec_run(_write(tmp_path / "crlf.txt", lines, end="\r\n")), plain)
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")
    _same(read_trec_run(bom), plain)
    gz = tmp_path / "run.gz"
    gz.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    _same(read_trec_run(gz), plain)
    no_newline = tmp_path / "last.txt"
    no_newline.write_text("\n".join(lines))
    _same(read_trec_run(no_newline), plain)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["q1", "q2", "10", "q#3"]),
            st.sampled_from(["a", "b", "c", "d", "e"]),
            st.sampled_from(["1", "1.0", "0.5", "-2", "1e3", "7"]),
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(0, 200),
)
def test_any_small_run_reads_as_the_line_reader_does(
    rows: list[tuple[str, str, str]], filler: int
) -> None:
    lines = [f"{q} Q0 {d} {i} {s} t" for i, (q, d, s) in enumerate(rows, 1)]
    try:
        expected = parse_trec_run(lines, source="x")
    except DataFormatError as exc:
        expected_error = re.sub(r"^x", "", str(exc))
    else:
        expected_error = None
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x"
        path.write_text("\n".join(lines) + "\n")
        if expected_error is None:
            _same(read_trec_run(path), expected)
        else:
            with pytest.raises(DataFormatError) as info:
                read_trec_run(path)
            assert str(info.value).removeprefix(str(path)) == expected_error


@pytest.mark.parametrize(
    ("bad", "pattern"),
    [
        ("q5 Q0 x 1 nan t", r":(\d+): score must be a finite number, got 'nan'"),
        ("q5 Q0 x 1", r":(\d+): a run line needs at least 5 columns"),
        ("q5 Q0 doc1 1 high t", r":(\d+): score must be a finite number, got 'high'"),
    ],
)
def test_a_bad_line_deep_in_a_big_file_is_named(tmp_path: Path, bad: str, pattern: str) -> None:
    lines = _lines(2000, 30)
    lines.insert(45_000, bad)
    path = _write(tmp_path / "run.txt", lines)
    with pytest.raises(DataFormatError, match=re.escape(str(path)) + pattern) as info:
        read_trec_run(path)
    assert info.value.line == 45_001
    with pytest.raises(DataFormatError) as streamed:
        list(iter_trec_run(path))
    assert str(streamed.value) == str(info.value)


def test_a_doc_listed_twice_names_both_lines_across_blocks(tmp_path: Path) -> None:
    lines = _lines(2000, 30, ties=False)
    lines.append(lines[0].replace(" 1 ", " 31 "))  # q0's first doc again, at the very end
    path = _write(tmp_path / "run.txt", lines)
    with pytest.raises(
        DataFormatError,
        match=r":60001: doc '.*' is listed twice for query 'q0' "
        r"\(first on line 1\)",
    ):
        read_trec_run(path)


def test_not_utf8_is_named_by_line(tmp_path: Path) -> None:
    lines = _lines(1500, 30)
    data = ("\n".join(lines) + "\n").encode()
    cut = data.index(b"\n", 1_000_000) + 1
    path = tmp_path / "run.txt"
    path.write_bytes(data[:cut] + b"q1 Q0 \xff 1 1 t\n" + data[cut:])
    line = data[:cut].count(b"\n") + 1
    with pytest.raises(DataFormatError, match=rf":{line}: not valid UTF-8"):
        read_trec_run(path)


def test_iter_trec_run_streams_grouped_files_and_refuses_scattered_ones(tmp_path: Path) -> None:
    lines = _lines(1500, 40)
    path = _write(tmp_path / "run.txt", lines)
    whole = read_trec_run(path)
    streamed = list(iter_trec_run(path))
    assert [q.query_id for q in streamed] == list(whole)
    for q in streamed:
        assert q.doc_ids == whole[q.query_id]
        assert q.scores == [whole.scores[q.query_id][d] for d in q.doc_ids]
    assert streamed[1].line == 41
    scattered = _write(tmp_path / "scattered.txt", [*lines, "q3 Q0 late 1 1.0 t"])
    with pytest.raises(UngroupedRunError, match=r":60001: query 'q3' comes back after other") as e:
        list(iter_trec_run(scattered))
    assert isinstance(e.value, DataFormatError)
    assert read_trec_run(scattered)["q3"][-1] == "late" or "late" in read_trec_run(scattered)["q3"]


def test_scores_are_materialised_only_when_read(tmp_path: Path) -> None:
    run = read_trec_run(_write(tmp_path / "r", ["q Q0 a 1 0.5 t", "q Q0 b 2 0.7 t"]))
    assert run._scores is None and set(run._packed) == {"q"}
    assert run.scores == {"q": {"b": 0.7, "a": 0.5}}
    run.scores = {}
    assert run.scores == {}
