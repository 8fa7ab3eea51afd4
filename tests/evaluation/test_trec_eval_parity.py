"""evaluate_run against trec_eval: pytrec_eval as a live oracle, trec_eval's own outputs as files.

Every comparison is per query and for the mean, to 1e-9 against pytrec_eval and the
full-precision JSON files, and to trec_eval's printed 4 decimals against its text outputs.
The oracles' inputs are parsed here with a few lines of independent code, not with ragmeter.

Conventions the comparisons account for (trec_eval's own, see tests/data/README.md):

* pytrec_eval only reports queries that are in the run; a judged query absent from the
  run counts as 0 in ragmeter's mean (trec_eval ``-c``).
* pytrec_eval also reports queries with judgements but nothing relevant (all zeros);
  ragmeter leaves them out of the mean.
* ragmeter's uncut ``mrr`` is ``recip_rank``; ``mrr@k`` has no trec_eval measure and is
  checked as ``recip_rank`` if the first relevant rank is within k, else 0.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmeter.errors import InvalidInputError, NoScorableQueriesError
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.beir import read_beir_qrels
from ragmeter.io.trec import TREC_ORDERING, parse_trec_run, read_trec_qrels, read_trec_run
from ragmeter.report import RetrievalEvalReport

DATA = Path(__file__).resolve().parents[1] / "data"
TREC = DATA / "trec_eval"
KS = (1, 3, 5, 10, 15, 20, 30, 100, 200, 500, 1000)
METRICS = ("ndcg", "precision", "recall", "map", "mrr", "hit_rate")
TOL = 1e-9

# ragmeter key prefix -> trec_eval measure prefix (``_k`` appended for cut-offs)
CUT = {
    "ndcg": "ndcg_cut",
    "precision": "P",
    "recall": "recall",
    "map": "map_cut",
    "hit_rate": "success",
}
UNCUT = {"map": "map", "mrr": "recip_rank"}


def oracle_measures(ks: Sequence[int]) -> set[str]:
    """The pytrec_eval measure spec for every ragmeter key at these cut-offs."""
    cut = ",".join(str(k) for k in ks)
    return {f"{m}.{cut}" for m in CUT.values()} | set(UNCUT.values())


def trec_name(key: str) -> str | None:
    """trec_eval's name of a ragmeter result key (``None`` for ``mrr@k``)."""
    name, _, k = key.partition("@")
    if not k:
        return UNCUT[name]
    return f"{CUT[name]}_{k}" if name in CUT else None


# --------------------------------------------------------------------------- oracle inputs


def oracle_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            q, _, d, g = line.split()
            qrels.setdefault(q, {})[d] = int(g)
    return qrels


def oracle_beir_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines()[1:]:
        q, d, g = line.split("\t")
        qrels.setdefault(q, {})[d] = int(g)
    return qrels


def oracle_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            f = line.split()
            run.setdefault(f[0], {})[f[2]] = float(f[4])
    return run


ORACLE_KS = tuple(sorted(set(KS) | set(range(1, 15))))
"""One measure set for every evaluator (it covers every k the tests use; the comparisons
read only the keys ragmeter computed)."""


def pytrec(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    level: int | None,
) -> dict[str, dict[str, float]]:
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, oracle_measures(ORACLE_KS), relevance_level=1 if level is None else level
    )
    return evaluator.evaluate(run)


def has_relevant(judgements: Mapping[str, float], level: int | None) -> bool:
    return any((g > 0 if level is None else g >= level) for g in judgements.values())


# --------------------------------------------------------------------------- comparison


def expected_value(key: str, oracle_row: Mapping[str, float]) -> float:
    name = trec_name(key)
    if name is not None:
        return oracle_row[name]
    k = int(key.split("@")[1])  # mrr@k
    rr = oracle_row["recip_rank"]
    return rr if rr > 0 and round(1 / rr) <= k else 0.0


def assert_matches_oracle(
    report: RetrievalEvalReport,
    oracle: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, float]],
    level: int | None,
    *,
    tol: float = TOL,
) -> None:
    scored = {q for q, j in qrels.items() if has_relevant(j, level)}
    assert set(report.per_query) == scored
    assert report.n_queries == len(scored)
    for qid, row in report.per_query.items():
        for key, value in row.items():
            want = expected_value(key, oracle[qid]) if qid in oracle else 0.0
            assert value == pytest.approx(want, abs=tol), (qid, key)
    for qid in set(oracle) - scored:
        # pytrec_eval scores a query with nothing relevant; every relevance-based measure
        # is 0 there (NDCG may not be: its gains ignore the relevance level).
        assert not has_relevant(qrels[qid], level)
        for key in ("recip_rank", "map", "P_1", "recall_1", "success_1"):
            if key in oracle[qid]:
                assert oracle[qid][key] == 0.0
    for key, mean in report.metrics.items():
        values = [expected_value(key, oracle[q]) if q in oracle else 0.0 for q in report.per_query]
        assert mean == pytest.approx(math.fsum(values) / len(values), abs=tol), key


def check_both_averagings(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Sequence[str]],
    oracle: Mapping[str, Mapping[str, float]],
    level: int | None,
    ks: Sequence[int],
) -> RetrievalEvalReport | None:
    """Score ``run`` both ways and check each against pytrec_eval.

    ``missing_queries="zero"`` is trec_eval -c (judged queries missing from the run count
    as 0); ``"skip"`` is trec_eval's default (means over the run's queries only). A run in
    which no judged query has a ranking is refused; returns the "zero" report.
    """
    scorable = [q for q, j in qrels.items() if has_relevant(j, level)]
    if not scorable:
        with pytest.raises(NoScorableQueriesError, match="no query in qrels has a relevant"):
            evaluate_run(qrels, run, k_values=ks, metrics=METRICS, relevance_level=level)
        return None
    if not set(scorable) & set(run):
        with pytest.raises(InvalidInputError, match=r"judged quer(y|ies) ha(s|ve) a ranking"):
            evaluate_run(qrels, run, k_values=ks, metrics=METRICS, relevance_level=level)
        return None
    report = evaluate_run(qrels, run, k_values=ks, metrics=METRICS, relevance_level=level)
    assert_matches_oracle(report, oracle, qrels, level)
    missing = [q for q in scorable if q not in run]
    assert report.missing_queries == missing
    assert any("judged queries have no ranking" in w for w in report.warnings) == bool(missing)
    skipped = evaluate_run(
        qrels, run, k_values=ks, metrics=METRICS, relevance_level=level, missing_queries="skip"
    )
    in_run = {q: j for q, j in qrels.items() if q in run or q not in scorable}
    assert_matches_oracle(skipped, {q: v for q, v in oracle.items() if q in in_run}, in_run, level)
    assert skipped.missing_queries == missing
    for key in skipped.metrics:
        assert skipped.summary(key).missing == len(missing)
    return report


# --------------------------------------------------------------------------- real collections

CASES = {
    "trec_eval results.test": (TREC / "qrels.test", TREC / "results.test", None),
    "trec_eval rel_level -l2": (TREC / "qrels.rel_level", TREC / "results.test", 2),
    "trec_eval rel_level -l1": (TREC / "qrels.rel_level", TREC / "results.test", None),
    "trec_eval rel_level -l3": (TREC / "qrels.rel_level", TREC / "results.test", 3),
    "trec_eval results.trunc": (TREC / "qrels.test", TREC / "results.trunc", None),
    "trec_eval with comments": (TREC / "qrels.test.with-comments", TREC / "results.test", None),
    "trec_eval '#' in ids": (TREC / "qrels.comment.test", TREC / "results.comment.test", None),
    "trec_eval topic 302": (TREC / "qrels-302.test", TREC / "results-302.test", None),
    "cranfield bm25": (
        DATA / "cranfield_beir/qrels/test.tsv",
        DATA / "cranfield_beir/bm25.run",
        None,
    ),
    "vaswani bm25": (DATA / "vaswani/qrels.tsv", DATA / "vaswani/bm25.run", None),
}


def load_case(
    name: str,
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]], int | None]:
    qrels_path, run_path, level = CASES[name]
    if qrels_path.suffix == ".tsv":
        return oracle_beir_qrels(qrels_path), oracle_run(run_path), level
    return oracle_qrels(qrels_path), oracle_run(run_path), level


def read_case(name: str) -> tuple[Mapping[str, Mapping[str, float]], Mapping[str, list[str]]]:
    qrels_path, run_path, _ = CASES[name]
    qrels = (
        read_beir_qrels(qrels_path) if qrels_path.suffix == ".tsv" else read_trec_qrels(qrels_path)
    )
    return qrels, read_trec_run(run_path)


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_file_matches_pytrec_eval_per_query_and_mean(case: str) -> None:
    oracle_qrels_, oracle_run_, level = load_case(case)
    qrels, run = read_case(case)
    assert qrels == oracle_qrels_
    report = evaluate_run(qrels, run, k_values=KS, metrics=METRICS, relevance_level=level)
    assert report.conventions.ties == TREC_ORDERING
    assert report.conventions.relevance_level == level
    assert_matches_oracle(report, pytrec(oracle_qrels_, oracle_run_, level), qrels, level)


@pytest.mark.parametrize("case", ["trec_eval results.test", "cranfield bm25", "vaswani bm25"])
def test_list_run_in_trec_order_matches_pytrec_eval(case: str) -> None:
    """A plain ``{qid: [doc, ...]}`` list in trec_eval's order scores exactly like the file."""
    oracle_qrels_, oracle_run_, level = load_case(case)
    ranked = {
        q: [d for d, _ in sorted(docs.items(), key=lambda p: (p[1], p[0]), reverse=True)]
        for q, docs in oracle_run_.items()
    }
    report = evaluate_run(oracle_qrels_, ranked, k_values=KS, metrics=METRICS)
    assert report.conventions.ties == "list order"
    assert_matches_oracle(report, pytrec(oracle_qrels_, oracle_run_, level), oracle_qrels_, level)


# ---------------------------------------------------------------- trec_eval's own outputs


def parse_trec_eval_output(path: Path) -> dict[str, dict[str, float]]:
    """``trec_eval [-q]`` text output -> ``{query_id or 'all': {measure: value}}``."""
    out: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        measure, qid, value = line.split()
        if measure == "runid" or measure.startswith("relstring"):
            continue
        out.setdefault(qid, {})[measure] = float(value)
    return out


def assert_matches_printed(
    report: RetrievalEvalReport, printed: Mapping[str, Mapping[str, float]], *, per_query: bool
) -> int:
    """Compare every key trec_eval printed (4 decimals); returns how many were compared."""
    half_ulp = 0.5e-4 + 1e-12
    compared = 0
    rows: dict[str, Mapping[str, float]] = {"all": report.metrics}
    if per_query:
        rows.update(report.per_query)
    for qid, row in rows.items():
        for key, value in row.items():
            name = trec_name(key)
            if name is not None and name in printed.get(qid, {}):
                assert abs(value - printed[qid][name]) <= half_ulp, (qid, key)
                compared += 1
    assert int(printed["all"]["num_q"]) == report.n_queries
    return compared


def test_out_test_means() -> None:
    report = evaluate_run(
        read_trec_qrels(TREC / "qrels.test"),
        read_trec_run(TREC / "results.test"),
        k_values=KS,
        metrics=METRICS,
    )
    printed = parse_trec_eval_output(TREC / "out.test")
    assert assert_matches_printed(report, printed, per_query=False) == 11  # map, recip_rank, 9 P_k


def test_a_truncated_run_is_trec_eval_c_by_default_and_its_default_with_skip() -> None:
    """``out.test.aqc`` = ``trec_eval -a -q -c qrels.test results.trunc``: the run ranks 2 of
    the 3 judged topics. ``missing_queries="zero"`` (the default) prints trec_eval -c's
    numbers; ``"skip"`` averages over the run's 2 topics, as trec_eval does without -c."""
    qrels = read_trec_qrels(TREC / "qrels.test")
    run = read_trec_run(TREC / "results.trunc")
    printed = parse_trec_eval_output(TREC / "out.test.aqc")
    report = evaluate_run(qrels, run, k_values=KS, metrics=METRICS)
    assert report.missing_queries == sorted(set(qrels) - set(run)) and report.n_missing == 1
    assert assert_matches_printed(report, printed, per_query=True) >= 11 + 2 * 11
    assert [w for w in report.warnings if "no ranking in the run" in w] == [
        f"CAUTION [run] (missing_queries): 1 of 3 judged queries have no ranking in the run "
        f"(e.g. {report.missing_queries[0]!r}); they score 0 and count in the mean "
        "(missing_queries='zero', = trec_eval -c); pass missing_queries='skip' to average "
        "over the run's queries only"
    ]
    assert report.summary("precision@10").missing == 0
    skipped = evaluate_run(qrels, run, k_values=KS, metrics=METRICS, missing_queries="skip")
    assert skipped.n_queries == 2 and set(skipped.per_query) == set(run)
    assert skipped.summary("precision@10").missing == 1
    assert "= trec_eval's default" in skipped.conventions.averaging
    for key, mean in skipped.metrics.items():
        name = trec_name(key)
        if name is None or name not in printed["all"]:
            continue
        per_topic = [printed[q][name] for q in run]  # trec_eval's own per-topic values
        assert abs(mean - math.fsum(per_topic) / 2) <= 0.5e-4 + 1e-12, key
        assert abs(report.metrics[key] - math.fsum(per_topic) / 3) <= 0.5e-4 + 1e-12, key


def test_out_test_aq_per_query() -> None:
    report = evaluate_run(
        read_trec_qrels(TREC / "qrels.test"),
        read_trec_run(TREC / "results.test"),
        k_values=KS,
        metrics=METRICS,
    )
    printed = parse_trec_eval_output(TREC / "out.test.aq")
    assert assert_matches_printed(report, printed, per_query=True) >= 4 * 40


def test_out_test_aql_relevance_level_2_per_query() -> None:
    """``trec_eval -a -q -l2 qrels.rel_level results.test`` (grades -1..4)."""
    report = evaluate_run(
        read_trec_qrels(TREC / "qrels.rel_level"),
        read_trec_run(TREC / "results.test"),
        k_values=KS,
        metrics=METRICS,
        relevance_level=2,
    )
    printed = parse_trec_eval_output(TREC / "out.test.aql")
    assert assert_matches_printed(report, printed, per_query=True) >= 4 * 40


def test_out_comment_test_means() -> None:
    """Doc ids containing ``#`` (MS MARCO v2.1 segments): 301 run topics, 31 judged.

    One judged topic, 2024-36302, has only grade-0 judgements. trec_eval evaluates it (it
    is in both files), scores it 0 and divides by 31; ragmeter leaves a query with nothing
    relevant out of the mean (the issue's convention, `{}` == `{"d": 0}`), so trec_eval's
    printed mean is ragmeter's sum over its 30 queries divided by 31.
    """
    qrels = read_trec_qrels(TREC / "qrels.comment.test")
    report = evaluate_run(
        qrels, read_trec_run(TREC / "results.comment.test"), k_values=KS, metrics=METRICS
    )
    printed = parse_trec_eval_output(TREC / "out.comment.test")["all"]
    no_relevant = [q for q, j in qrels.items() if not any(g > 0 for g in j.values())]
    assert no_relevant == ["2024-36302"]
    assert "2024-36302" not in report.per_query
    assert report.n_queries == 30 and printed["num_q"] == 31
    compared = 0
    for key, mean in report.metrics.items():
        name = trec_name(key)
        if name in printed:
            assert abs(mean * 30 / 31 - printed[name]) <= 0.5e-4 + 1e-12, key
            compared += 1
    assert compared == 11  # map, recip_rank, 9 P_k


def test_cranfield_trec_eval_text_outputs() -> None:
    cran = DATA / "cranfield_beir"
    report = evaluate_run(
        read_beir_qrels(cran / "qrels/test.tsv"),
        read_trec_run(cran / "bm25.run"),
        k_values=KS,
        metrics=METRICS,
    )
    assert (
        assert_matches_printed(
            report, parse_trec_eval_output(cran / "bm25.trec_eval.txt"), per_query=False
        )
        >= 15
    )
    per_q = parse_trec_eval_output(cran / "bm25.trec_eval.perquery.txt")
    per_q["all"] = {"num_q": float(report.n_queries)}
    assert assert_matches_printed(report, per_q, per_query=True) >= 225 * 15
    assert round(report.metrics["ndcg@10"], 4) == 0.3458


FULLPREC = {
    "results.test": (
        TREC / "results.test.expected.fullprec.json",
        TREC / "qrels.test",
        TREC / "results.test",
        None,
    ),
    "results.test -l2": (
        TREC / "results.test.rel_level_l2.expected.fullprec.json",
        TREC / "qrels.rel_level",
        TREC / "results.test",
        2,
    ),
    "cranfield": (
        DATA / "cranfield_beir/bm25.expected.fullprec.json",
        DATA / "cranfield_beir/qrels/test.tsv",
        DATA / "cranfield_beir/bm25.run",
        None,
    ),
    "vaswani": (
        DATA / "vaswani/bm25.expected.fullprec.json",
        DATA / "vaswani/qrels.tsv",
        DATA / "vaswani/bm25.run",
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(FULLPREC))
def test_full_precision_expected_json(case: str) -> None:
    expected_path, qrels_path, run_path, level = FULLPREC[case]
    expected = json.loads(expected_path.read_text())
    assert expected["options"].get("relevance_level", 1) == (level or 1)
    qrels = (
        read_beir_qrels(qrels_path) if qrels_path.suffix == ".tsv" else read_trec_qrels(qrels_path)
    )
    report = evaluate_run(
        qrels, read_trec_run(run_path), k_values=KS, metrics=METRICS, relevance_level=level
    )
    assert report.n_queries == expected["num_q_evaluated"]
    compared = 0
    for qid, row in [("mean", report.metrics), *report.per_query.items()]:
        want = expected["mean"] if qid == "mean" else expected["per_query"][qid]
        for key, value in row.items():
            name = trec_name(key)
            if name in want:
                assert value == pytest.approx(want[name], abs=TOL), (qid, key)
                compared += 1
    assert compared >= 15 * (report.n_queries + 1)


# --------------------------------------------------------------------------- generated data

DOC_IDS = ["d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "a#1", "b#2", "Z"]
QUERY_IDS = ["q0", "q1", "q2", "q3", "q4", "q5"]

# trec_eval (and so pytrec_eval) indexes per-grade arrays from -1: a grade below -1 in the
# qrels overruns a heap buffer and crashes the process, so the oracle only sees -1..4.
grades = st.integers(min_value=-1, max_value=4)
judgements = st.dictionaries(st.sampled_from(DOC_IDS), grades, max_size=8)
qrels_strategy = st.dictionaries(st.sampled_from(QUERY_IDS[:5]), judgements, min_size=1, max_size=5)
# a run may rank unjudged queries (q5) and leave judged ones out
scored_ranking = st.dictionaries(
    st.sampled_from(DOC_IDS), st.integers(min_value=0, max_value=4), max_size=13
)
run_strategy = st.dictionaries(st.sampled_from(QUERY_IDS), scored_ranking, max_size=6)
levels = st.sampled_from([None, 1, 2, 3])
ks_strategy = st.lists(st.integers(min_value=1, max_value=14), min_size=1, max_size=4)


def trec_lines(run: Mapping[str, Mapping[str, float]]) -> list[str]:
    return [f"{q} Q0 {d} 1 {s} tag" for q, docs in run.items() for d, s in docs.items()]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(qrels=qrels_strategy, run=run_strategy, level=levels, ks=ks_strategy)
def test_generated_tied_runs_match_pytrec_eval(
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]],
    level: int | None,
    ks: list[int],
) -> None:
    """Integer scores make ties; read through the TREC reader they follow trec_eval's order."""
    ours = parse_trec_run(trec_lines(run))
    oracle = pytrec(
        qrels, {q: {d: float(s) for d, s in docs.items()} for q, docs in run.items()}, level
    )
    check_both_averagings(qrels, ours, oracle, level, ks)


@settings(max_examples=300, deadline=None)
@given(
    qrels=qrels_strategy,
    run=st.dictionaries(
        st.sampled_from(QUERY_IDS), st.lists(st.sampled_from(DOC_IDS), unique=True), max_size=6
    ),
    level=levels,
    ks=ks_strategy,
)
def test_generated_list_runs_match_pytrec_eval(
    qrels: dict[str, dict[str, int]],
    run: dict[str, list[str]],
    level: int | None,
    ks: list[int],
) -> None:
    """A list is scored in list order: pytrec_eval gets strictly decreasing scores."""
    scored = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items()}
    report = check_both_averagings(qrels, run, pytrec(qrels, scored, level), level, ks)
    assert report is None or report.conventions.ties == "list order"


@settings(max_examples=100, deadline=None)
@given(qrels=qrels_strategy, level=levels, ks=ks_strategy)
def test_generated_empty_and_missing_rankings_score_zero(
    qrels: dict[str, dict[str, int]], level: int | None, ks: list[int]
) -> None:
    """Empty rankings and judged queries absent from the run count as 0 in the mean."""
    run: dict[str, list[str]] = {q: [] for q in list(qrels)[::2]}
    oracle = pytrec(qrels, {q: {} for q in run}, level)
    report = check_both_averagings(qrels, run, oracle, level, ks)
    assert report is None or all(v == 0.0 for v in report.metrics.values())


def test_mrr_at_k_rule_is_checked_on_a_known_rank() -> None:
    """The ``mrr@k`` oracle rule itself: first relevant doc at rank 3."""
    report = evaluate_run({"q": {"c": 1}}, {"q": ["a", "b", "c"]}, k_values=(2, 3), metrics=["mrr"])
    assert report.metrics == {
        "mrr@2": 0.0,
        "mrr@3": pytest.approx(1 / 3),
        "mrr": pytest.approx(1 / 3),
    }
    assert expected_value("mrr@2", {"recip_rank": 1 / 3}) == 0.0
    assert expected_value("mrr@3", {"recip_rank": 1 / 3}) == pytest.approx(1 / 3)


def test_key_names_map_to_trec_eval() -> None:
    assert [
        trec_name(k) for k in ("ndcg@10", "precision@5", "recall@100", "map@5", "hit_rate@1")
    ] == [
        "ndcg_cut_10",
        "P_5",
        "recall_100",
        "map_cut_5",
        "success_1",
    ]
    assert trec_name("map") == "map" and trec_name("mrr") == "recip_rank"
    assert re.fullmatch(
        r"P\.[0-9,]+", next(m for m in oracle_measures([1, 2]) if m.startswith("P."))
    )
