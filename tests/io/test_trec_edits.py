"""A run read from a file and then edited is written as it is now, and re-scores the same.

``read_trec_run`` remembers each doc's score; once the lists are edited (truncated,
re-ordered, queries deleted or added, docs appended, lists replaced, in place or not),
``write_trec_run`` and ``run_to_arrow`` must write the edited lists, in their order, with
the file's scores only where they still give that order. Checked on Cranfield's BM25 run
against ``evaluate_run`` on the edited run in memory and against pytrec_eval.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
import pytrec_eval

from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.arrow import run_from_arrow, run_to_arrow
from ragmeter.io.trec import Run, parse_trec_run, read_trec_run, write_trec_run

Edit = Callable[[Run], None]

QRELS = load_cranfield()[2]
FIRST, SECOND = "1", "2"  # judged queries of the run


def _truncate_all(run: Run) -> None:
    for qid in run:
        run[qid] = run[qid][:10]


def _truncate_all_in_place(run: Run) -> None:
    for docs in run.values():
        del docs[20:]


def _rerank_all(run: Run) -> None:
    for qid in run:  # the top 20, shuffled: what a re-ranker does
        run[qid] = random.Random(qid).sample(run[qid][:20], 20)


def _reverse_in_place(run: Run) -> None:
    for docs in run.values():
        docs.reverse()


def _delete_and_add(run: Run) -> None:
    docs = run.pop(FIRST)
    run["extra-q"] = docs[:5]  # a query the qrels do not judge: ignored, but written
    run[FIRST] = docs[5:15]  # back, without its top 5, after the other queries


def _append_a_doc(run: Run) -> None:
    run[FIRST].append("not-in-the-file")
    run[SECOND].insert(0, run[SECOND].pop(3))  # moved up: out of score order


def _replace_lists(run: Run) -> None:
    judged = sorted(QRELS[FIRST], key=lambda d: -QRELS[FIRST][d])
    run[FIRST] = judged  # the relevant docs first: a perfect ranking
    run[SECOND] = run[FIRST][:3] + run[SECOND][:3]


def _drop_docs_in_the_middle(run: Run) -> None:
    for docs in run.values():
        del docs[1:40:3]


EDITS: dict[str, Edit] = {
    "truncate": _truncate_all,
    "truncate in place": _truncate_all_in_place,
    "re-rank": _rerank_all,
    "reverse in place": _reverse_in_place,
    "delete and add queries": _delete_and_add,
    "append and move docs": _append_a_doc,
    "replace lists": _replace_lists,
    "drop docs in the middle": _drop_docs_in_the_middle,
}
KEEP_SCORES = {"truncate", "truncate in place", "drop docs in the middle"}
"""Edits after which every query's remembered scores still give its order."""


@pytest.fixture(scope="module")
def bm25_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("edits") / "bm25.run"
    write_trec_run(load_cranfield_bm25_run(), path)
    return path


def _pytrec(run: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """pytrec_eval on ``run`` in list order (scores ``n - rank``): the oracle."""
    measures = {"ndcg_cut.10", "map", "P.5", "recall.100", "recip_rank"}
    evaluator = pytrec_eval.RelevanceEvaluator(QRELS, measures)
    scored = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items()}
    return evaluator.evaluate({q: s for q, s in scored.items() if s})


def _file_scores(path: Path) -> dict[tuple[str, str], float]:
    rows = (line.split() for line in path.read_text().splitlines())
    return {(f[0], f[2]): float(f[4]) for f in rows}


@pytest.mark.parametrize("scores_read_first", [False, True], ids=["packed", "scores read"])
@pytest.mark.parametrize("name", list(EDITS))
def test_an_edited_run_is_written_as_it_is_now(
    name: str, scores_read_first: bool, bm25_file: Path, tmp_path: Path
) -> None:
    run = read_trec_run(bm25_file)
    original = {q: dict(s) for q, s in read_trec_run(bm25_file).scores.items()}
    if scores_read_first:
        assert run.scores[FIRST] == original[FIRST]
    EDITS[name](run)
    edited = {q: list(docs) for q, docs in run.items()}
    expected = evaluate_run(QRELS, run)
    # the remembered scores stay with their docs, whatever happened to the lists
    for qid, row in run.scores.items():
        assert row == original[qid]
    assert "extra-q" not in run.scores

    path = tmp_path / "edited.run"
    write_trec_run(run, path)
    back = read_trec_run(path)
    assert back == edited and list(back) == list(edited)
    got = evaluate_run(QRELS, back)
    assert got.metrics == expected.metrics  # float ==: the same numbers
    assert got.per_query == expected.per_query
    table = run_to_arrow(run)
    from_table = run_from_arrow(table)
    assert from_table == edited
    assert evaluate_run(QRELS, from_table).metrics == expected.metrics

    oracle = _pytrec(edited)
    for qid, row in got.per_query.items():
        assert row["ndcg@10"] == pytest.approx(oracle[qid]["ndcg_cut_10"], abs=1e-12), qid
        assert row["precision@5"] == pytest.approx(oracle[qid]["P_5"], abs=1e-12), qid
        assert row["recall@100"] == pytest.approx(oracle[qid]["recall_100"], abs=1e-12), qid
        assert row["map"] == pytest.approx(oracle[qid]["map"], abs=1e-12), qid
        assert row["mrr"] == pytest.approx(oracle[qid]["recip_rank"], abs=1e-12), qid

    # which scores were written: the file's where they still give the order, else n - rank
    written = _file_scores(path)
    columns = [table.column(c).to_pylist() for c in ("query_id", "doc_id", "score")]
    assert {(q, d): v for q, d, v in zip(*columns, strict=True)} == written
    for qid, docs in edited.items():
        values = [written[(qid, d)] for d in docs]
        kept = values == [original.get(qid, {}).get(d) for d in docs]
        ranks = values == [float(len(docs) - i) for i in range(len(docs))]
        assert kept or ranks, qid
        if name in KEEP_SCORES:
            assert kept, qid


def test_the_edits_change_the_numbers_the_writer_must_keep(bm25_file: Path) -> None:
    """Each edit really moves NDCG@10 or the lists, so the test above can fail."""
    base = evaluate_run(QRELS, read_trec_run(bm25_file)).metrics["ndcg@10"]
    moved = 0
    for edit in EDITS.values():
        run = read_trec_run(bm25_file)
        edit(run)
        moved += evaluate_run(QRELS, run).metrics["ndcg@10"] != base
    assert moved >= 5


def test_scores_that_no_longer_give_the_order_are_not_written() -> None:
    run = parse_trec_run(["q Q0 a 1 3.5 t", "q Q0 b 2 2.5 t", "q Q0 c 3 2.5 t"])
    assert run == {"q": ["a", "c", "b"]}  # the tie: doc id descending
    run["q"][1:] = ["b", "c"]  # the tie the other way round: trec_eval would undo it
    assert run.scores_to_write("q") is None
    run["q"] = ["a", "c"]
    assert run.scores_to_write("q") == [3.5, 2.5]
    run["q"].append("new")
    assert run.scores_to_write("q") is None
