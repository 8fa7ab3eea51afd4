"""fill_holes end to end on the Cranfield collection with a deterministic judge: the holes,
the augmented qrels, the scores and judged@k before and after (pytrec_eval and ir_measures
as oracles), the agreement statistics (scikit-learn and SciPy as oracles), the cache, the
dry run, bad replies, the budget and missing texts."""

from __future__ import annotations

import hashlib
import math
import random
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import ir_measures
import pytest
import pytrec_eval
from scipy.stats import kendalltau
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion

import ragmeter
from ragmeter.errors import InvalidInputError
from ragmeter.judge import FunctionJudge, JudgeCache, JudgeOptions, Message
from ragmeter.stats import fill_holes

DEPTH = 10
CRANFIELD_SCALE = {0: 0, 1: 2, 2: 3, 3: 4}  # the judge's 0-3 onto Cranfield's 1-4 (0 = not)


@pytest.fixture(scope="module")
def cranfield() -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, float]]]:
    corpus, queries, qrels = ragmeter.load_cranfield()
    return dict(corpus), dict(queries), {q: dict(d) for q, d in qrels.items()}


@pytest.fixture(scope="module")
def bm25() -> dict[str, list[str]]:
    return {q: list(docs) for q, docs in ragmeter.load_cranfield_bm25_run().items()}


def _parts(messages: Sequence[Message]) -> tuple[str, str]:
    """The query and the passage back out of the prompt."""
    text = messages[-1].content
    found = re.search(r"\nQuery: (.*?)\n\nPassage: (.*?)\n\nReply with only", text, re.S)
    assert found is not None, text
    return found.group(1), found.group(2)


def _hashed_grade(query: str, passage: str) -> int:
    digest = hashlib.sha256(f"{query}\x00{passage}".encode()).digest()
    return digest[0] % 4


class TruthJudge:
    """Knows the human grades (on the judge's scale) and gets a share of them wrong; a
    stable hash of query and passage grades what nobody judged."""

    def __init__(
        self,
        corpus: Mapping[str, str],
        queries: Mapping[str, str],
        qrels: Mapping[str, Mapping[str, float]],
    ) -> None:
        by_text = {v: k for k, v in corpus.items()}
        by_query = {v: k for k, v in queries.items()}
        self.ids = (by_query, by_text)
        self.qrels = qrels
        self.calls = 0
        self.lock = threading.Lock()

    def grade(self, query: str, passage: str) -> int:
        qid, doc = self.ids[0][query], self.ids[1][passage]
        human = self.qrels.get(qid, {}).get(doc)
        hashed = _hashed_grade(query, passage)
        if human is None:
            return hashed
        truth = {1: 1, 2: 1, 3: 2, 4: 3}.get(int(human), 0)
        return truth if hashed != 0 else (truth + 1) % 4  # a quarter of them off

    def __call__(self, messages: Sequence[Message]) -> str:
        with self.lock:
            self.calls += 1
        return f'{{"grade": {self.grade(*_parts(messages))}}}'


def _judge(fn: object, name: str) -> FunctionJudge:
    return FunctionJudge(fn, model=name)  # type: ignore[arg-type]


def _systems(run: Mapping[str, list[str]]) -> dict[str, dict[str, list[str]]]:
    """Five systems of unequal quality made from the BM25 run (seeded)."""
    rng = random.Random(7)
    out = {"bm25": dict(run)}
    for name, drop in (("skip1", 1), ("skip3", 3), ("skip6", 6)):
        out[name] = {q: docs[drop:] + docs[:drop] for q, docs in run.items()}
    shuffled = {}
    for q, docs in run.items():
        top = docs[:15]
        rng.shuffle(top)
        shuffled[q] = top + docs[15:]
    out["shuffled"] = shuffled
    return out


def _trec_mean(
    qrels: Mapping[str, Mapping[str, float]], run: Mapping[str, list[str]], measure: str
) -> float:
    """pytrec_eval's mean over queries with a relevant judgement (a missing one scores 0)."""
    ints = {q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items()}
    scored = [q for q, docs in ints.items() if any(g > 0 for g in docs.values())]
    ranked = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items()}
    per = pytrec_eval.RelevanceEvaluator(ints, {measure}).evaluate(ranked)
    return math.fsum(per.get(q, {}).get(measure, 0.0) for q in scored) / len(scored)


def _judged_at(
    qrels: Mapping[str, Mapping[str, float]], run: Mapping[str, list[str]], k: int
) -> float:
    """ir_measures' Judged@k, over the judged queries the run ranks."""
    qrels_i = {q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items() if docs}
    ranked = {
        q: {d: float(len(docs) - i) for i, d in enumerate(docs)}
        for q, docs in run.items()
        if q in qrels_i
    }
    return float(
        ir_measures.calc_aggregate([ir_measures.Judged @ k], qrels_i, ranked)[
            ir_measures.Judged @ k
        ]
    )


@pytest.fixture(scope="module")
def filled(cranfield, bm25):  # type: ignore[no-untyped-def]
    corpus, queries, qrels = cranfield
    truth = TruthJudge(corpus, queries, qrels)
    systems = _systems(bm25)
    result = fill_holes(
        systems,
        qrels,
        judge=_judge(truth, "truth-judge"),
        corpus=corpus,
        queries=queries,
        depth=DEPTH,
        sample_size=120,
        seed=3,
        grade_map=CRANFIELD_SCALE,
        judge_cache=None,
    )
    return result, truth, systems


def test_the_holes_are_the_unjudged_top_documents_and_only_they_are_added(
    cranfield, filled
) -> None:  # type: ignore[no-untyped-def]
    _, _, qrels = cranfield
    result, truth, systems = filled
    expected: dict[str, set[str]] = {}
    for run in systems.values():
        for q, docs in run.items():
            if qrels.get(q):
                expected.setdefault(q, set()).update(d for d in docs[:DEPTH] if d not in qrels[q])
    expected = {q: docs for q, docs in expected.items() if docs}
    assert {q: set(d) for q, d in result.holes.items()} == expected
    assert result.n_filled == result.n_holes == sum(map(len, expected.values()))
    assert result.calls == result.n_holes + 120 == truth.calls
    assert result.bad_replies == 0 and not result.failed and not result.incomplete
    for q, docs in qrels.items():  # the human grades are untouched
        assert all(result.qrels[q][d] == g for d, g in docs.items())
    for q, docs in result.judged_by_model.items():
        for d, grade in docs.items():
            assert d not in qrels[q]
            assert result.qrels[q][d] == grade
    added = sum(len(d) for d in result.qrels.values()) - sum(len(d) for d in qrels.values())
    assert added == result.n_filled


def test_the_added_grades_are_what_the_judge_said(cranfield, filled) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, _ = cranfield
    result, _, _ = filled
    for q, docs in result.judged_by_model.items():
        for d, grade in docs.items():
            assert grade == CRANFIELD_SCALE[_hashed_grade(queries[q], corpus[d])]


def test_scores_and_judged_before_and_after_match_pytrec_eval_and_ir_measures(
    cranfield, filled
) -> None:  # type: ignore[no-untyped-def]
    _, _, qrels = cranfield
    result, _, systems = filled
    assert [s.name for s in result.systems] == list(systems)
    for row in result.systems:
        run = systems[row.name]
        assert row.before == pytest.approx(_trec_mean(qrels, run, "ndcg_cut_10"), abs=1e-12)
        assert row.after == pytest.approx(_trec_mean(result.qrels, run, "ndcg_cut_10"), abs=1e-12)
        assert row.judged_before == pytest.approx(_judged_at(qrels, run, 10), abs=1e-12)
        assert row.judged_after == pytest.approx(_judged_at(result.qrels, run, 10), abs=1e-12)
        assert row.judged_after == pytest.approx(1.0)
        assert row.judged_before < 0.5
    bm25 = result.systems[0]
    assert bm25.before == pytest.approx(0.3457976728968338, abs=1e-15)  # trec_eval's 0.3458


def test_agreement_matches_scikit_learn_on_a_stratified_sample(cranfield, filled) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, qrels = cranfield
    result, truth, _ = filled
    a = result.agreement
    assert a is not None and a.n == a.asked == 120 and a.failed == 0
    counts: dict[float, int] = {}
    for q, d, human, judge in a.pairs:
        assert qrels[q][d] == human
        assert judge == CRANFIELD_SCALE[truth.grade(queries[q], corpus[d])]
        counts[human] = counts.get(human, 0) + 1
    assert counts == {1: 30, 2: 30, 3: 30, 4: 30}  # stratified: even over the four grades
    human = [p[2] for p in a.pairs]
    judge = [p[3] for p in a.pairs]
    scale = sorted(set(CRANFIELD_SCALE.values()) | set(human))  # the whole ordinal scale
    assert a.labels == scale
    assert a.kappa == pytest.approx(cohen_kappa_score(human, judge, labels=scale), abs=1e-12)
    assert a.kappa_linear == pytest.approx(
        cohen_kappa_score(human, judge, weights="linear", labels=scale), abs=1e-12
    )
    assert a.kappa_quadratic == pytest.approx(
        cohen_kappa_score(human, judge, weights="quadratic", labels=scale), abs=1e-12
    )
    assert a.confusion == sk_confusion(human, judge, labels=scale).tolist()
    assert a.exact == pytest.approx(
        sum(h == j for h, j in zip(human, judge, strict=True)) / len(human)
    )
    assert 0.3 < a.kappa_quadratic < 1.0


def test_ranking_agreement_matches_scipy_on_pytrec_eval_scores(filled) -> None:  # type: ignore[no-untyped-def]
    result, _, systems = filled
    a = result.agreement
    by_human: dict[str, dict[str, float]] = {}
    by_judge: dict[str, dict[str, float]] = {}
    for q, d, human, judge in a.pairs:
        by_human.setdefault(q, {})[d] = human
        by_judge.setdefault(q, {})[d] = judge
    human_scores = [_trec_mean(by_human, systems[n], "ndcg_cut_10") for n in systems]
    judge_scores = [_trec_mean(by_judge, systems[n], "ndcg_cut_10") for n in systems]
    assert [a.system_scores[n] for n in systems] == [
        pytest.approx((h, j), abs=1e-12) for h, j in zip(human_scores, judge_scores, strict=True)
    ]
    assert a.tau == pytest.approx(kendalltau(human_scores, judge_scores).statistic, abs=1e-12)


def test_a_rerun_is_served_from_the_cache(cranfield, bm25, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, qrels = cranfield
    truth = TruthJudge(corpus, queries, qrels)
    cache = JudgeCache(tmp_path / "cache.sqlite")
    args = dict(
        judge=_judge(truth, "truth"),
        corpus=corpus,
        queries=queries,
        depth=5,
        grade_map=CRANFIELD_SCALE,
        sample_size=20,
    )
    first = fill_holes(bm25, qrels, judge_cache=cache, **args)  # type: ignore[arg-type]
    asked = truth.calls
    assert first.calls == asked == first.n_holes + 20 and first.cache_hits == 0
    again = fill_holes(bm25, qrels, judge_cache=tmp_path / "cache.sqlite", **args)  # type: ignore[arg-type]
    assert truth.calls == asked and again.calls == 0 and again.cache_hits == asked
    assert again.qrels == first.qrels and again.judged_by_model == first.judged_by_model
    assert again.agreement.to_dict() == first.agreement.to_dict()
    cache.close()


def test_a_dry_run_calls_nothing_and_estimates(cranfield, bm25, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, qrels = cranfield
    truth = TruthJudge(corpus, queries, qrels)
    result = fill_holes(
        bm25,
        qrels,
        judge=_judge(truth, "truth"),
        corpus=corpus,
        queries=queries,
        depth=5,
        sample_size=20,
        dry_run=True,
        judge_cache=None,
    )
    assert truth.calls == 0 and result.calls == 0 and result.dry_run
    assert result.estimate is not None and result.estimate.calls == result.n_holes + 20
    assert result.estimate.input_tokens > 0
    assert result.qrels == qrels and result.judged_by_model == {} and result.agreement is None
    assert result.systems[0].after is None and "nothing was sent" in str(result)


def test_bad_replies_are_counted_never_a_zero(cranfield, bm25) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, qrels = cranfield

    def moody(messages: Sequence[Message]) -> str:
        query, passage = _parts(messages)
        grade = _hashed_grade(query, passage)
        return "This passage looks relevant." if grade == 0 else f'{{"grade": {grade}}}'

    result = fill_holes(
        bm25,
        qrels,
        judge=_judge(moody, "moody"),
        corpus=corpus,
        queries=queries,
        depth=5,
        sample_size=0,
        judge_cache=None,
    )
    bad = [
        (q, d)
        for q, docs in result.holes.items()
        for d in docs
        if _hashed_grade(queries[q], corpus[d]) == 0
    ]
    assert bad and result.bad_replies == len(bad) == result.n_failed
    for q, d in bad:
        assert d not in result.qrels[q] and d not in result.judged_by_model.get(q, {})
        assert result.failed[q][d].startswith("unparseable verdict")
    assert 0 not in {g for docs in result.judged_by_model.values() for g in docs.values()}
    assert f"{len(bad)} bad replies" in result.to_text()


def test_the_budget_stops_the_run_and_says_so(cranfield, bm25) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, qrels = cranfield
    truth = TruthJudge(corpus, queries, qrels)
    result = fill_holes(
        bm25,
        qrels,
        judge=_judge(truth, "truth"),
        corpus=corpus,
        queries=queries,
        depth=5,
        sample_size=0,
        judge_cache=None,
        judge_options=JudgeOptions(max_calls=7, concurrency=2),
    )
    assert truth.calls == result.calls == 7 and result.n_filled == 7
    assert result.incomplete and "call budget of 7" in (result.stop_reason or "")
    assert result.n_failed == result.n_holes - 7
    assert {why for docs in result.failed.values() for why in docs.values()} == {"budget exhausted"}
    assert "incomplete: call budget of 7 reached" in str(result)


def test_missing_texts_raise_naming_query_and_doc_or_are_skipped(cranfield, bm25) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, qrels = cranfield
    holes = ragmeter.judge.find_holes([bm25], qrels, depth=5)
    qid, docs = next(iter(holes.items()))
    partial = {d: t for d, t in corpus.items() if d != docs[0]}
    judge = _judge(lambda m: '{"grade": 1}', "one")
    with pytest.raises(
        InvalidInputError, match=rf"doc {docs[0]!r} for query {qid!r}: doc {docs[0]!r} has no text"
    ):
        fill_holes(
            bm25, qrels, judge=judge, corpus=partial, queries=queries, depth=5, judge_cache=None
        )
    result = fill_holes(
        bm25,
        qrels,
        judge=judge,
        corpus=partial,
        queries=queries,
        depth=5,
        sample_size=0,
        judge_cache=None,
        missing_text="skip",
    )
    skipped = sum(1 for q, ds in holes.items() for d in ds if d == docs[0])
    assert result.n_skipped == skipped and docs[0] in result.skipped[qid]
    assert docs[0] not in result.qrels[qid]
    assert result.n_holes == sum(map(len, holes.values())) - skipped == result.n_filled
    no_query = {q: t for q, t in queries.items() if q != qid}
    with pytest.raises(InvalidInputError, match=rf"query {qid!r} has no text"):
        fill_holes(
            bm25, qrels, judge=judge, corpus=corpus, queries=no_query, depth=5, judge_cache=None
        )


def test_report_forms(filled) -> None:  # type: ignore[no-untyped-def]
    import json

    result, _, systems = filled
    data = json.loads(json.dumps(result.to_dict()))
    assert data["holes"] == result.n_holes and data["metric"] == "ndcg@10"
    assert [s["name"] for s in data["systems"]] == list(systems)
    assert data["agreement"]["kappa_quadratic"] == pytest.approx(result.agreement.kappa_quadratic)
    text = str(result)
    for needle in ("ndcg@10 before", "judged@10 after", "kappa", "Kendall's tau-b", "confusion"):
        assert needle in text


def test_bad_arguments_are_refused(cranfield, bm25) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, qrels = cranfield
    judge = _judge(lambda m: "1", "one")
    common = dict(judge=judge, corpus=corpus, queries=queries, judge_cache=None)
    with pytest.raises(InvalidInputError, match="depth must be an int >= 1, got 0"):
        fill_holes(bm25, qrels, depth=0, **common)  # type: ignore[arg-type]
    with pytest.raises(
        InvalidInputError, match=r"grade_map must give a qrels grade .* missing \[3\]"
    ):
        fill_holes(bm25, qrels, grade_map={0: 0, 1: 1, 2: 2}, **common)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"needs a judge with \.identity"):
        fill_holes(bm25, qrels, judge=object(), corpus=corpus, queries=queries)  # type: ignore[arg-type]
    truth = TruthJudge(corpus, queries, qrels)
    with pytest.raises(ragmeter.UnknownMetricError, match="nope"):  # before any judge call
        fill_holes(
            bm25,
            qrels,
            judge=_judge(truth, "t"),
            corpus=corpus,
            queries=queries,
            metric="nope",
            judge_cache=None,
        )
    assert truth.calls == 0
    with pytest.raises(InvalidInputError, match="needs the query texts"):
        fill_holes(bm25, qrels, judge=judge, corpus=corpus, judge_cache=None)


def test_a_grade_nobody_gave_still_sets_the_distances_and_before_after_share_queries() -> None:
    """Review findings: (1) weighted kappa is over the whole 0-3 scale, even when the
    sample has no 2 (sklearn with labels= as the oracle); (2) a query with no relevant human
    grade stays out of "after" even when the judge grades a hole relevant; (3) a doc graded
    below 0 is a hole (pooled, not judged), never in the agreement sample."""
    from ragmeter.judge import FunctionJudge

    qrels = {"q1": {"d1": 3, "d2": 0, "d3": 0, "d4": 3, "neg": -1}, "q2": {"e1": 0}}
    run = {"q1": ["d1", "neg", "d2", "x1", "d3", "d4"], "q2": ["e1", "y1"]}
    texts = {d: f"text {d}" for d in ["d1", "d2", "d3", "d4", "neg", "x1", "e1", "y1"]}
    queries = {"q1": "question one", "q2": "question two"}
    grade_of = {"d1": 3, "d2": 0, "d3": 1, "d4": 3, "neg": 3, "x1": 3, "e1": 0, "y1": 3}

    def reply(messages):  # type: ignore[no-untyped-def]
        passage = messages[-1].content.split("Passage:", 1)[1]
        doc = next(d for d in grade_of if passage.split()[:2] == ["text", d])
        return f'{{"grade": {grade_of[doc]}}}'

    result = ragmeter.fill_holes(
        run, qrels, judge=FunctionJudge(reply, model="table"), corpus=texts, queries=queries,
        depth=6, k=6, sample_size=10, judge_cache=None,
    )  # fmt: skip
    a = result.agreement
    assert a is not None
    human = [p[2] for p in a.pairs]
    judge = [p[3] for p in a.pairs]
    assert -1 not in human and a.labels == [0, 1, 2, 3]
    assert a.kappa_quadratic == pytest.approx(
        cohen_kappa_score(human, judge, weights="quadratic", labels=[0, 1, 2, 3]), abs=1e-12
    )
    assert "neg" in result.judged_by_model["q1"] and "y1" in result.judged_by_model["q2"]
    system = result.systems[0]
    only_q1 = ragmeter.evaluate_run(
        {"q1": result.qrels["q1"]}, {"q1": run["q1"]}, k_values=[6], metrics=["ndcg"]
    )
    assert system.after == pytest.approx(only_q1.metrics["ndcg@6"], abs=1e-15)
