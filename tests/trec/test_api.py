"""The Python API's inputs and options, against pytrec_eval (trec_eval 9's C code)."""

from __future__ import annotations

import pytest

from ragmeter.errors import DuplicateDocumentError, InvalidInputError, UnknownMetricError
from ragmeter.metrics.trec import evaluate, parse_measures

pytrec_eval = pytest.importorskip("pytrec_eval")

QRELS = {
    "q1": {"a": 2, "b": 0, "c": 1, "d": -1, "e": 3},
    "q2": {"a": 0, "x": 1},
    "q3": {"z": 0},
}
RUN = {
    "q1": {"a": 0.3, "u": 0.9, "c": 0.5, "d": 0.5, "b": 0.5, "e": 0.1, "v": 0.2},
    "q2": {"x": 1.0, "a": 2.0, "w": 1.0},
    "q3": {"z": 1.0, "y": 4.0},
}
MEASURES = ["map", "P.1,3,5", "ndcg_cut.3", "bpref", "infAP", "recip_rank", "ndcg", "Rprec"]


def _trec_order(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda d: (-scores[d], [-ord(c) for c in d]))


def _pytrec(run: dict[str, dict[str, float]], **options: object) -> dict[str, dict[str, float]]:
    evaluator = pytrec_eval.RelevanceEvaluator(QRELS, set(MEASURES), **options)
    return dict(evaluator.evaluate(run))


def _assert_same(got: dict[str, dict[str, object]], want: dict[str, dict[str, float]]) -> None:
    assert set(got) == set(want)
    for qid, values in want.items():
        for name, value in values.items():
            assert got[qid][name] == pytest.approx(value, abs=1e-12), (qid, name)


def test_ranked_lists_score_as_their_order() -> None:
    lists = {q: _trec_order(s) for q, s in RUN.items()}
    positional = {
        q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in lists.items()
    }
    _assert_same(evaluate(QRELS, lists, MEASURES).per_query, _pytrec(positional))


def test_max_retrieved_keeps_the_top_n_in_trec_order() -> None:
    cut = {q: {d: s[d] for d in _trec_order(s)[:3]} for q, s in RUN.items()}
    _assert_same(evaluate(QRELS, RUN, MEASURES, max_retrieved=3).per_query, _pytrec(cut))


def test_judged_only_and_relevance_level() -> None:
    got = evaluate(QRELS, RUN, MEASURES, judged_only=True, relevance_level=2).per_query
    _assert_same(got, _pytrec(RUN, judged_docs_only_flag=True, relevance_level=2))


def test_query_missing_from_the_run_is_skipped_unless_complete() -> None:
    run = {"q1": RUN["q1"], "q9": {"a": 1.0}}
    assert list(evaluate(QRELS, run, ["map"]).per_query) == ["q1"]
    full = evaluate(QRELS, run, ["map", "num_ret", "num_q"], complete=True)
    assert list(full.per_query) == ["q1", "q2", "q3"]
    assert full.per_query["q2"]["num_ret"] == 0.0
    assert full.aggregate["num_q"] == 3
    assert full.aggregate["map"] == pytest.approx(_pytrec({"q1": RUN["q1"]})["q1"]["map"] / 3)


def test_repeated_doc_in_a_list_is_refused() -> None:
    with pytest.raises(DuplicateDocumentError, match="'q1'"):
        evaluate(QRELS, {"q1": ["a", "b", "a"]}, ["map"])


@pytest.mark.parametrize("grade", [1.5, "1", None])
def test_a_grade_that_is_not_an_integer_is_named(grade: object) -> None:
    with pytest.raises(InvalidInputError, match=r"qrels\['q'\]\['d'\]"):
        evaluate({"q": {"d": grade}}, {"q": ["d"]}, ["map"])  # type: ignore[dict-item]


def test_unknown_measure_lists_the_known_ones() -> None:
    with pytest.raises(UnknownMetricError, match="no metric named 'nDGC@10'"):
        evaluate(QRELS, RUN, ["nDGC@10"])


def test_first_parameters_of_a_measure_win_as_in_trec_eval() -> None:
    assert parse_measures(["P.5", "P.10"])[0].names == ("P_5",)
    assert parse_measures(["P", "P.7"])[0].names == ("P_7",)
