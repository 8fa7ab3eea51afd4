"""BEIR datasets: read_beir against seed 000's ef.read_beir, qrels lookup order, round trips."""

from __future__ import annotations

import json
import re
from pathlib import Path

import ef.evaluation as ef
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import DataFormatError, InvalidInputError
from ragmeter.io.beir import (
    DEFAULT_QRELS_PATHS,
    BeirDataset,
    read_beir,
    read_beir_qrels,
    write_beir,
)

CRANFIELD = Path(__file__).resolve().parents[1] / "data" / "cranfield_beir"


def test_cranfield_matches_seed_000_ef_read_beir() -> None:
    ours = read_beir(CRANFIELD)
    corpus, queries, qrels = ef.read_beir(str(CRANFIELD))
    assert isinstance(ours, BeirDataset)
    assert ours.corpus == corpus and ours.queries == queries and ours.qrels == qrels
    assert (len(ours.corpus), len(ours.queries), len(ours.qrels)) == (1400, 225, 225)


def test_title_and_text_are_joined_by_a_newline(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "Wings", "text": "Lift and drag."})
        + "\n\n"  # blank lines are skipped
        + json.dumps({"_id": "d2", "title": "", "text": "No title."})
        + "\n"
        + json.dumps({"_id": 3, "text": "Numeric id, no title key."})
        + "\n"
    )
    (tmp_path / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "lift?"}) + "\n")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\n")
    corpus, queries, qrels = read_beir(tmp_path)
    assert corpus == {
        "d1": "Wings\nLift and drag.",
        "d2": "No title.",
        "3": "Numeric id, no title key.",
    }
    assert queries == {"q1": "lift?"}
    assert qrels == {"q1": {"d1": 2}}
    assert (corpus, queries, qrels) == ef.read_beir(str(tmp_path))


def write_minimal(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text('{"_id": "d", "text": "t"}\n')
    (root / "queries.jsonl").write_text('{"_id": "q", "text": "t"}\n')


@pytest.mark.parametrize("present", [[0, 1, 2, 3], [1, 2, 3], [2, 3], [3], [1, 3], [0, 3]])
def test_default_qrels_paths_are_tried_in_order(present: list[int], tmp_path: Path) -> None:
    assert DEFAULT_QRELS_PATHS == (
        "qrels/test.tsv",
        "qrels/dev.tsv",
        "qrels/train.tsv",
        "qrels.tsv",
    )
    write_minimal(tmp_path)
    for i in present:
        path = tmp_path / DEFAULT_QRELS_PATHS[i]
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"query-id\tcorpus-id\tscore\nq\td\t{i + 1}\n")
    assert read_beir(tmp_path).qrels == {"q": {"d": present[0] + 1}}


def test_explicit_qrels_path(tmp_path: Path) -> None:
    write_minimal(tmp_path)
    (tmp_path / "qrels.tsv").write_text("q\td\t1\n")
    (tmp_path / "mine.tsv").write_text("q\td\t7\n")
    assert read_beir(tmp_path, qrels="mine.tsv").qrels == {"q": {"d": 7}}
    with pytest.raises(FileNotFoundError, match=r"qrels file not found: .*other\.tsv"):
        read_beir(tmp_path, qrels="other.tsv")


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"BEIR file not found: .*corpus\.jsonl"):
        read_beir(tmp_path)
    write_minimal(tmp_path)
    with pytest.raises(
        FileNotFoundError,
        match=r"no qrels file under .*qrels/test\.tsv, qrels/dev\.tsv, qrels/train\.tsv, qrels\.",
    ):
        read_beir(tmp_path)


@pytest.mark.parametrize(
    ("corpus_line", "pattern"),
    [
        ("{not json", r"corpus\.jsonl:2: not valid JSON"),
        ("[1, 2]", r"corpus\.jsonl:2: a record must be a JSON object"),
        ('{"text": "no id"}', r"corpus\.jsonl:2: record has no '_id' field"),
    ],
)
def test_malformed_jsonl_names_file_and_line(
    corpus_line: str, pattern: str, tmp_path: Path
) -> None:
    write_minimal(tmp_path)
    (tmp_path / "corpus.jsonl").write_text('{"_id": "ok", "text": "x"}\n' + corpus_line + "\n")
    (tmp_path / "qrels.tsv").write_text("q\td\t1\n")
    with pytest.raises(DataFormatError, match=pattern):
        read_beir(tmp_path)


@pytest.mark.parametrize(
    ("rows", "pattern"),
    [
        (
            "query-id\tcorpus-id\tscore\nq\td\n",
            r"qrels\.tsv:2: a qrels row needs 3 tab-separated columns",
        ),
        (
            "query-id\tcorpus-id\tscore\nq\td\thigh\n",
            r"qrels\.tsv:2: score must be a number, got 'high' \(query 'q'\)",
        ),
        ("q d 1\n", r"qrels\.tsv:1: a qrels row needs 3 tab-separated columns .*got 1"),
    ],
)
def test_malformed_qrels_rows_name_file_and_line(rows: str, pattern: str, tmp_path: Path) -> None:
    (tmp_path / "qrels.tsv").write_text(rows)
    with pytest.raises(DataFormatError, match=pattern):
        read_beir_qrels(tmp_path / "qrels.tsv")


def test_qrels_header_is_optional_and_grades_keep_their_type(tmp_path: Path) -> None:
    (tmp_path / "qrels.tsv").write_text("q\ta\t1\nq\tb\t0.5\nr\ta\t-1\n\n")
    qrels = read_beir_qrels(tmp_path / "qrels.tsv")
    assert qrels == {"q": {"a": 1, "b": 0.5}, "r": {"a": -1}}
    assert type(qrels["q"]["a"]) is int and type(qrels["q"]["b"]) is float


# --------------------------------------------------------------------------- write_beir

tsv_ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r"),
    min_size=1,
    max_size=10,
)
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
grades = st.one_of(st.integers(-2, 5), st.floats(-(2.0**53), 2.0**53, width=64))
triples = st.tuples(
    st.dictionaries(tsv_ids, texts, max_size=6),
    st.dictionaries(tsv_ids, texts, max_size=6),
    st.dictionaries(tsv_ids, st.dictionaries(tsv_ids, grades, min_size=1, max_size=5), max_size=5),
)


@settings(max_examples=200, deadline=None)
@given(triple=triples)
def test_write_beir_is_the_exact_inverse_of_read_beir(
    triple: tuple[dict[str, str], dict[str, str], dict[str, dict[str, float]]],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    corpus, queries, qrels = triple
    root = tmp_path_factory.mktemp("beir") / "nested" / "dir"
    assert write_beir(root, corpus, queries, qrels) == root
    back = read_beir(root)
    assert back == (corpus, queries, qrels)
    for qid, judgements in qrels.items():  # ints stay ints, floats stay floats
        assert [type(g) for g in back.qrels[qid].values()] == [type(g) for g in judgements.values()]
        assert list(back.qrels[qid]) == list(judgements)
    assert list(back.corpus) == list(corpus)


@settings(max_examples=100, deadline=None)
@given(triple=triples)
def test_seed_000_ef_reads_what_write_beir_writes(
    triple: tuple[dict[str, str], dict[str, str], dict[str, dict[str, float]]],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    corpus, queries, qrels = triple
    root = tmp_path_factory.mktemp("beir")
    write_beir(root, corpus, queries, qrels)
    theirs = ef.read_beir(str(root))
    assert theirs[2] == qrels
    # ef strips surrounding whitespace from corpus text; ragmeter keeps text exactly
    assert theirs[0] == {d: t.strip() for d, t in corpus.items()}


def test_read_beir_reads_what_seed_000_ef_writes(tmp_path: Path) -> None:
    corpus = {"d1": "Über die Strömung", "d2": "x" * 300}
    queries = {"q1": "what is lift?", "q2": "drag"}
    qrels = {"q1": {"d1": 2, "d2": 0}, "q2": {"d2": 1}}
    ef.write_beir(str(tmp_path), corpus, queries, qrels)
    assert read_beir(tmp_path) == (corpus, queries, qrels)


def test_a_query_with_no_judgements_writes_no_row(tmp_path: Path) -> None:
    write_beir(tmp_path, {"d": "t"}, {"q": "t"}, {"q": {}, "r": {"d": 1}})
    assert read_beir(tmp_path).qrels == {"r": {"d": 1}}


@pytest.mark.parametrize(
    ("qrels", "pattern"),
    [
        ({"q\t1": {"d": 1}}, r"cannot write query id 'q\\t1' to qrels\.tsv"),
        ({"q": {"d\n": 1}}, r"cannot write doc id 'd\\n' \(query 'q'\) to qrels\.tsv"),
        ({"": {"d": 1}}, r"cannot write query id ''"),
        (
            {"q": {"d": "2"}},
            r"cannot write grade '2' \(query 'q', doc 'd'\): a grade must be a finite number",
        ),
        ({"q": {"d": True}}, r"cannot write grade True"),
        ({"q": {"d": float("nan")}}, r"cannot write grade nan"),
    ],
)
def test_write_beir_refuses_what_would_not_read_back(
    qrels: dict[str, dict[str, object]], pattern: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidInputError, match=pattern):
        write_beir(tmp_path / "out", {}, {}, qrels)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()  # checked before anything is written


def test_written_files_are_beir_shaped(tmp_path: Path) -> None:
    write_beir(tmp_path, {"d1": "text"}, {"q1": "query"}, {"q1": {"d1": 1, "d2": 0.5}})
    assert json.loads((tmp_path / "corpus.jsonl").read_text()) == {
        "_id": "d1",
        "title": "",
        "text": "text",
    }
    assert json.loads((tmp_path / "queries.jsonl").read_text()) == {"_id": "q1", "text": "query"}
    assert (
        tmp_path / "qrels.tsv"
    ).read_text() == "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0.5\n"
    assert re.fullmatch(r"(.*\n){1}", (tmp_path / "corpus.jsonl").read_text())
