"""Unjudged documents on the command line and in the HTML page (issue 21): the ``judged`` row
and note, the warning with its counts on stderr, the JSON, ``--judged-only`` against
pytrec_eval's ``judged_docs_only_flag`` and ``--judged-threshold``.

The counts are checked against ir_measures' ``Judged@10`` per query, the ``-J`` scores
against pytrec_eval; the collections are read here with a few lines of independent code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import ir_measures
import pytest
import pytrec_eval

from ragmeter import cli

DATA = Path(__file__).parents[1] / "data"
TREC = DATA / "trec_eval"
CRAN = DATA / "cranfield_beir"


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    code = cli.run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """TREC qrels (``q iter doc grade``) or a BEIR TSV with a header."""
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) == 4:
            q, _, d, g = fields
        elif len(fields) == 3 and fields[2].lstrip("-").isdigit():
            q, d, g = fields
        else:
            continue
        qrels.setdefault(q, {})[d] = int(g)
    return qrels


def read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        q, _, d, _, score, _ = line.split()
        run.setdefault(q, {})[d] = float(score)
    return run


def counts(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]], k: int
) -> tuple[int, int, int, int]:
    """(top-k docs, unjudged, rankings, rankings with an unjudged doc) over the judged
    queries with a relevant doc, from ir_measures' Judged@k."""
    scored = {q: r for q, r in run.items() if any(g > 0 for g in qrels.get(q, {}).values())}
    shares = {
        m.query_id: m.value
        for m in ir_measures.iter_calc([ir_measures.parse_measure(f"Judged@{k}")], qrels, scored)
    }
    docs = {q: min(k, len(scored[q])) for q in shares}
    unjudged = {q: docs[q] - round(shares[q] * docs[q]) for q in shares}
    affected = sum(1 for u in unjudged.values() if u)
    return sum(docs.values()), sum(unjudged.values()), len(shares), affected


def cran_args() -> list[str]:
    return ["--qrels", str(CRAN / "qrels" / "test.tsv"), "--run", str(CRAN / "bm25.run")]


def trec_args() -> list[str]:
    """trec_eval's test collection at k=1000: half the docs of its rankings are unjudged."""
    args = ["--qrels", str(TREC / "qrels.test"), "--run", str(TREC / "results.test")]
    return [*args, "-k", "1000"]


def trec_counts() -> tuple[int, int, int, int]:
    return counts(read_qrels(TREC / "qrels.test"), read_run(TREC / "results.test"), 1000)


def test_retrieval_prints_the_judged_row_note_and_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(capsys, "retrieval", *trec_args())
    assert code == 0
    docs, unjudged, queries, affected = trec_counts()
    assert re.search(r"judged\s+│\s+\d\.\d{4}", out)  # the table's row
    share = f"{1 - unjudged / docs:.1%}"
    assert f"judged@1000: {share} of the {docs:,} top-1000 docs are judged" in out
    assert f"{unjudged:,} unjudged (counted non-relevant) in {affected:,} of {queries:,}" in out
    warning = next(line for line in err.splitlines() if "(judged@1000)" in line)
    assert f"{unjudged:,} of the {docs:,} docs in the top 1000 of {queries:,} rankings" in warning
    assert f"in {affected:,} of those queries" in warning
    assert "lower bound" in warning and "--judged-only" in warning


def test_qrels_of_relevant_docs_only_get_the_note_not_the_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(capsys, "retrieval", *cran_args())
    assert code == 0 and "(judged@10)" not in err
    docs, unjudged, _, _ = counts(
        read_qrels(CRAN / "qrels" / "test.tsv"), read_run(CRAN / "bm25.run"), 10
    )
    assert f"judged@10: {1 - unjudged / docs:.1%} of the {docs:,} top-10 docs" in out
    assert "(the qrels list relevant docs only: judged@k is precision@k)" in out


def test_retrieval_json_carries_the_counts_and_the_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = invoke(capsys, "retrieval", *trec_args(), "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    docs, unjudged, queries, affected = trec_counts()
    judged = data["judged"]
    assert (judged["k"], judged["documents"], judged["unjudged"]) == (1000, docs, unjudged)
    assert (judged["queries"], judged["queries_with_unjudged"]) == (queries, affected)
    assert judged["relevant_only"] is False
    assert set(judged["means"]) == {f"judged@{k}" for k in data["k_values"]}
    assert not any(key.startswith("judged") for key in data["metrics"])  # metrics as asked
    assert any("(judged@1000)" in w for w in data["warnings"])


def test_the_threshold_option_silences_or_keeps_the_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, _, err = invoke(capsys, "retrieval", *trec_args(), "--judged-threshold", "0")
    assert "(judged@1000)" not in err
    code, _, err = invoke(capsys, "retrieval", *trec_args(), "--judged-threshold", "1.5")
    assert code == 2 and "--judged-threshold" in err


def test_judged_only_is_trec_eval_dash_j(capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = read_qrels(TREC / "qrels.test"), read_run(TREC / "results.test")
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "P.5", "map", "recip_rank"}, judged_docs_only_flag=True
    )
    oracle = evaluator.evaluate(run)
    args = ["--qrels", str(TREC / "qrels.test"), "--run", str(TREC / "results.test")]
    code, out, _ = invoke(capsys, "retrieval", *args, "-k", "5,10", "-J", "--json", "-q")
    assert code == 0
    data = json.loads(out)
    assert data["conventions"]["unjudged"].startswith("judged_only (trec_eval -J)")
    assert data["judged"]["judged_only"] is True
    pairs = {"ndcg@10": "ndcg_cut_10", "precision@5": "P_5", "map": "map", "mrr": "recip_rank"}
    checked = 0
    for qid, row in data["per_query"].items():
        for key, name in pairs.items():
            assert row[key] == pytest.approx(oracle[qid][name], abs=1e-9), (qid, key)
            checked += 1
    assert checked == 4 * len(data["per_query"]) > 0
    _, plain, _ = invoke(capsys, "retrieval", *args, "-k", "5,10", "--json")
    assert json.loads(plain)["metrics"] != data["metrics"]  # the run holds unjudged docs


def test_beir_command_takes_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    args = [str(CRAN), "--run", str(CRAN / "bm25.run"), "--json"]
    code, out, _ = invoke(capsys, "beir", *args, "-J", "--judged-threshold", "0.5")
    judged = json.loads(out)["judged"]
    assert code == 0 and judged["judged_only"] is True and judged["threshold"] == 0.5


def test_html_report_shows_the_counts_and_the_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "r.html"
    code, _, err = invoke(capsys, "report", *trec_args(), "--html", str(page))
    assert code == 0 and "(judged@1000)" in err
    html = page.read_text()
    docs, unjudged, queries, affected = trec_counts()
    fact = (
        f"<dt>judged@1000</dt><dd>{1 - unjudged / docs:.1%} of the {docs:,} top-1000 docs: "
        f"{unjudged:,} unjudged, in {affected:,} of {queries:,} queries</dd>"
    )
    assert fact in html
    assert "counted non-relevant: scores are lower bounds" in html
    assert "(judged@1000): only" in html  # the warning, in the page's warnings
    j = tmp_path / "j.html"
    assert invoke(capsys, "report", *trec_args(), "--html", str(j), "-J")[0] == 0
    assert "removed before scoring (judged_only, trec_eval -J)" in j.read_text()
    code, _, err = invoke(capsys, "report", str(tmp_path / "s.jsonl"), "--html", str(j), "-J")
    assert code != 0 and "--judged-only is for a retrieval report" in err


def test_compare_scores_both_runs_judged_only(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    reversed_run = tmp_path / "reversed.txt"  # each ranking upside down
    lines = (TREC / "results.test").read_text().splitlines()
    reversed_run.write_text(
        "".join(f"{q} Q0 {d} {r} {-float(s)} rev\n" for q, _, d, r, s, _ in map(str.split, lines))
    )
    qrels = read_qrels(TREC / "qrels.test")
    runs = [TREC / "results.test", reversed_run]
    means = []
    for path in runs:
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"map"}, judged_docs_only_flag=True)
        scored = evaluator.evaluate(read_run(path))
        means.append(sum(v["map"] for v in scored.values()) / len(scored))
    args = ["compare", "--qrels", str(TREC / "qrels.test"), *map(str, runs), "--json"]
    args += ["--metric", "map"]
    code, out, _ = invoke(capsys, *args, "-J")
    data = json.loads(out)
    assert code == 0
    assert (data["mean_a"], data["mean_b"]) == (pytest.approx(means[0]), pytest.approx(means[1]))
    _, plain, _ = invoke(capsys, *args)
    assert json.loads(plain)["mean_a"] != data["mean_a"]
