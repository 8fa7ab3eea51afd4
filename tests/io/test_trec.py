"""TREC run and qrels files: trec_eval's ordering, comments, malformed lines, round trips."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import DataFormatError, InvalidInputError
from ragmeter.io.trec import (
    TREC_ORDERING,
    Run,
    parse_trec_run,
    read_trec_qrels,
    read_trec_run,
    write_trec_qrels,
    write_trec_run,
)

TREC = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


def oracle_order(path: Path) -> dict[str, list[str]]:
    """trec_eval's order, computed independently: score descending, then doc id descending."""
    scored: dict[str, list[tuple[float, str]]] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            f = line.split()
            scored.setdefault(f[0], []).append((float(f[4]), f[2]))
    return {q: [d for _, d in sorted(pairs, reverse=True)] for q, pairs in scored.items()}


@pytest.mark.parametrize(
    "name", ["results.test", "results.trunc", "results.comment.test", "results-302.test"]
)
def test_run_files_are_ordered_like_trec_eval(name: str) -> None:
    run = read_trec_run(TREC / name)
    assert dict(run) == oracle_order(TREC / name)
    assert run.ordering == TREC_ORDERING


def test_results_test_is_shuffled_and_has_ties() -> None:
    """The file's lines are not in rank order and a topic has tied scores."""
    lines = [line.split() for line in (TREC / "results.test").read_text().splitlines()]
    run = read_trec_run(TREC / "results.test")
    assert [ln[2] for ln in lines if ln[0] == "301"] != run["301"]
    per_topic = [[float(ln[4]) for ln in lines if ln[0] == q] for q in run]
    assert any(len(set(scores)) < len(scores) for scores in per_topic)


def test_rank_column_is_ignored_and_ties_go_to_the_larger_doc_id() -> None:
    run = parse_trec_run(
        [
            "q1 Q0 a 1 0.5 tag",
            "q1 Q0 b 2 0.9 tag",
            "q1 Q0 c 3 0.5 tag",
            "q1 Q0 B 4 0.5 tag",  # string comparison: 'c' > 'a' > 'B'
            "q2 Q0 z 1 -1 tag extra trailing columns",
        ]
    )
    assert run == {"q1": ["b", "c", "a", "B"], "q2": ["z"]}
    assert run.scores == {"q1": {"a": 0.5, "b": 0.9, "c": 0.5, "B": 0.5}, "q2": {"z": -1.0}}


def test_comments_and_hash_inside_ids() -> None:
    run = parse_trec_run(
        [
            "# a comment line",
            "   ",
            "q1 Q0 doc#1 1 2.0 t",
            "  # indented comment",
            "q1 Q0 doc#2 2 1.0 t",
        ]
    )
    assert run == {"q1": ["doc#1", "doc#2"]}
    qrels = read_trec_qrels(TREC / "qrels.test.with-comments")
    plain = read_trec_qrels(TREC / "qrels.test")
    assert qrels["301"]["CR#93E-1860"] == 0
    del qrels["301"]["CR#93E-1860"]
    del plain["301"]["CR93E-1860"]
    assert qrels == plain


def test_the_five_column_minimum_is_enough() -> None:
    assert parse_trec_run(["q Q0 d 1 3.5"]) == {"q": ["d"]}


@pytest.mark.parametrize(
    ("lines", "pattern"),
    [
        (["q1 Q0 a 1 1.0 t", "q1 Q0 b 2"], r":2: a run line needs at least 5 columns .*got 4"),
        (
            ["q1 Q0 a 1 high t"],
            r":1: score must be a finite number, got 'high' \(query 'q1', doc 'a'\)",
        ),
        (["q1 Q0 a 1 nan t"], r":1: score must be a finite number, got 'nan'"),
        (["q1 Q0 a 1 1.0 t", "q1 Q0 b 2 inf t"], r":2: score must be a finite number, got 'inf'"),
        (["q1 Q0 a 1 -Infinity t"], r":1: score must be a finite number, got '-Infinity'"),
        (
            ["# header", "q1 Q0 a 1 1.0 t", "q2 Q0 a 1 1.0 t", "q1 Q0 a 3 0.2 t"],
            r":4: doc 'a' is listed twice for query 'q1' \(first on line 2\)",
        ),
    ],
)
def test_malformed_run_lines_name_file_and_line(
    lines: list[str], pattern: str, tmp_path: Path
) -> None:
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match="^" + re.escape(str(path)) + pattern) as info:
        read_trec_run(path)
    assert info.value.path == str(path)
    assert isinstance(info.value, ValueError)


def test_parse_trec_run_names_its_source() -> None:
    with pytest.raises(DataFormatError, match=r"^<run>:1: "):
        parse_trec_run(["too few"])
    with pytest.raises(DataFormatError, match=r"^mine:2: ") as info:
        parse_trec_run(["q Q0 d 1 1", "q Q0 d 2 1"], source="mine")
    assert info.value.line == 2


@pytest.mark.parametrize(
    ("line", "pattern"),
    [
        (
            "301 0 doc",
            r"qrels:2: a qrels line needs 4 columns 'query_id iteration doc_id grade', got 3",
        ),
        ("301 0 doc 1 extra", r"got 5"),
        (
            "301 0 doc yes",
            r"qrels:2: grade must be an integer, got 'yes' \(query '301', doc 'doc'\)",
        ),
        ("301 0 doc 1.5", r"grade must be an integer, got '1.5'"),
    ],
)
def test_malformed_qrels_lines_name_file_and_line(line: str, pattern: str, tmp_path: Path) -> None:
    path = tmp_path / "qrels"
    path.write_text(f"301 0 ok 1\n{line}\n")
    with pytest.raises(DataFormatError, match=pattern):
        read_trec_qrels(path)


def test_qrels_grades_are_ints_including_negative_and_integral_floats(tmp_path: Path) -> None:
    path = tmp_path / "qrels"
    path.write_text("q 0 a -1\nq 0 b 2.0\nq 0 c 0\n# q 0 d 5\nr 1 a 3\n")
    qrels = read_trec_qrels(path)
    assert qrels == {"q": {"a": -1, "b": 2, "c": 0}, "r": {"a": 3}}
    assert all(type(g) is int for j in qrels.values() for g in j.values())


def test_rel_level_qrels_reads_every_grade() -> None:
    grades = {g for j in read_trec_qrels(TREC / "qrels.rel_level").values() for g in j.values()}
    assert grades == {-1, 0, 1, 2, 3, 4}


# --------------------------------------------------------------------------- round trips

ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")),
    min_size=1,
    max_size=8,
)
query_ids = ids.filter(lambda s: not s.startswith(("#", "\ufeff")))
list_runs = st.dictionaries(query_ids, st.lists(ids, unique=True, max_size=8), max_size=5)


@settings(max_examples=200, deadline=None)
@given(run=list_runs)
def test_write_trec_run_reads_back_in_list_order(
    run: dict[str, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("w") / "run.txt"
    write_trec_run(run, path)
    back = read_trec_run(path)
    assert back == {q: docs for q, docs in run.items() if docs}


@settings(max_examples=200, deadline=None)
@given(
    scored=st.dictionaries(
        query_ids,
        st.dictionaries(
            ids, st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=8
        ),
        max_size=5,
    )
)
def test_a_scored_run_round_trips_exactly(scored: dict[str, dict[str, float]]) -> None:
    lines = [f"{q} Q0 {d} 0 {s!r} t" for q, docs in scored.items() for d, s in docs.items()]
    run = parse_trec_run(lines)
    buffer = io.StringIO()
    write_trec_run(run, buffer, tag="again")
    again = parse_trec_run(buffer.getvalue().splitlines())
    assert again == run and again.scores == run.scores == scored


def test_write_trec_run_format_and_ranks() -> None:
    buffer = io.StringIO()
    write_trec_run({"q1": ["b", "a"], "q2": []}, buffer)
    assert buffer.getvalue() == "q1 Q0 b 1 2 ragmeter\nq1 Q0 a 2 1 ragmeter\n"


def test_write_trec_run_with_explicit_scores_keeps_trec_eval_semantics(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "run.txt"  # parent directories are created
    write_trec_run({"q": ["a", "b"]}, path, scores={"q": {"a": 1.0, "b": 1.0}})
    assert read_trec_run(path) == {"q": ["b", "a"]}  # a tie reads back in trec_eval's order


@settings(max_examples=200, deadline=None)
@given(
    qrels=st.dictionaries(
        query_ids, st.dictionaries(ids, st.integers(-3, 5), min_size=1, max_size=6), max_size=5
    )
)
def test_write_trec_qrels_round_trips(
    qrels: dict[str, dict[str, int]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("q") / "qrels"
    write_trec_qrels(qrels, path)
    assert read_trec_qrels(path) == qrels


def test_integral_float_grades_are_written_as_ints() -> None:
    buffer = io.StringIO()
    write_trec_qrels({"q": {"a": 2.0, "b": 0}}, buffer)
    assert buffer.getvalue() == "q 0 a 2\nq 0 b 0\n"


@pytest.mark.parametrize(
    ("run", "pattern"),
    [
        ({"q": ["a b"]}, r"cannot write doc id 'a b' \(query 'q'\) to a TREC file"),
        ({"q": [""]}, r"cannot write doc id ''"),
        ({"q 1": ["a"]}, r"cannot write query id 'q 1'"),
        ({"#q": ["a"]}, r"cannot write query id '#q'.*cannot start with '#'"),
    ],
)
def test_write_trec_run_refuses_ids_that_would_not_read_back(
    run: dict[str, list[str]], pattern: str
) -> None:
    buffer = io.StringIO()
    with pytest.raises(InvalidInputError, match=pattern):
        write_trec_run(run, buffer)
    assert buffer.getvalue() == ""  # nothing half-written


def test_write_trec_run_refuses_a_tag_with_whitespace() -> None:
    with pytest.raises(InvalidInputError, match="cannot write tag 'my run'"):
        write_trec_run({"q": ["a"]}, io.StringIO(), tag="my run")


def test_write_trec_qrels_refuses_bad_ids_and_fractional_grades() -> None:
    with pytest.raises(InvalidInputError, match=r"cannot write doc id 'a\\tb'"):
        write_trec_qrels({"q": {"a\tb": 1}}, io.StringIO())
    with pytest.raises(
        InvalidInputError, match=r"cannot write grade 0\.5 \(query 'q', doc 'a'\).*integers"
    ):
        write_trec_qrels({"q": {"a": 0.5}}, io.StringIO())


def test_run_remembers_ordering_and_scores() -> None:
    run = Run({"q": ["a"]})
    assert run.ordering == "list order" and run.scores == {}
    assert Run(ordering="x", scores={"q": {"a": 1.0}}).scores == {"q": {"a": 1.0}}
