"""The HTML report without a browser: what the page holds, its size, escaping, light imports.

The browser tests (tests/browser/) check that the page works; these check what it says.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from html import escape
from pathlib import Path
from typing import Any

import pytest

import ragmeter
from ragmeter.errors import DataFormatError, InvalidInputError
from ragmeter.html import (
    render_comparison,
    render_rag_report,
    render_retrieval_report,
    write_comparison,
    write_rag_report,
    write_retrieval_report,
)
from ragmeter.html._inputs import load_texts
from ragmeter.html._payload import num
from ragmeter.html._svg import histogram
from ragmeter.report import RagEvalReport
from ragmeter.stats import compare

DATA_RE = re.compile(r'<script type="application/json" id="ragmeter-data">(.*?)</script>', re.S)


def page_data(page: str) -> dict[str, Any]:
    """The JSON the page's script reads."""
    found = DATA_RE.search(page)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    return data


@pytest.fixture(scope="module")
def cran() -> dict[str, Any]:
    corpus, queries, qrels = ragmeter.load_cranfield()
    run = ragmeter.load_cranfield_bm25_run()
    report = ragmeter.evaluate_run(qrels, run)
    return {"corpus": corpus, "queries": queries, "qrels": qrels, "run": run, "report": report}


@pytest.fixture(scope="module")
def cran_page(cran: dict[str, Any]) -> str:
    return render_retrieval_report(
        cran["report"],
        run=cran["run"],
        qrels=cran["qrels"],
        queries=cran["queries"],
        corpus=cran["corpus"],
        dataset="Cranfield",
        system="BM25",
    )


# --------------------------------------------------------------------------- light imports


PLOTTING = ("plotly", "matplotlib", "bokeh", "altair", "playwright", "jinja2")


def _modules_after(code: str) -> tuple[set[str], set[str]]:
    """Top-level modules (plus ``ragmeter.html``) loaded by ``import ragmeter``, and those
    loaded after ``code`` runs, in a fresh interpreter."""
    probe = (
        "import sys, json; "
        "names = lambda: sorted({m.split('.')[0] for m in sys.modules} | "
        "({'ragmeter.html'} & set(sys.modules))); "
        f"import ragmeter; first = names(); {code}; print(json.dumps([first, names()]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    first, after = json.loads(out.stdout)
    return set(first), set(after)


def test_import_ragmeter_loads_no_html_machinery_or_plotting_library() -> None:
    loaded, _ = _modules_after("pass")
    assert "ragmeter.html" not in loaded
    assert not loaded & set(PLOTTING)


def test_writing_a_page_loads_no_plotting_library(tmp_path: Path) -> None:
    code = (
        "r = ragmeter.evaluate_run({'q': {'d': 1}}, {'q': ['d', 'e']}, k_values=(1,)); "
        "from ragmeter.html import write_retrieval_report; "
        f"write_retrieval_report(r, {str(tmp_path / 'p.html')!r}, run={{'q': ['d', 'e']}})"
    )
    before, after = _modules_after(code)
    assert "ragmeter.html" in after
    # what rendering adds: the package itself and standard-library modules, nothing heavy
    assert not after & {*PLOTTING, "numpy", "typer", "rich", "pandas", "pydantic_core"} - before
    assert (tmp_path / "p.html").stat().st_size > 10_000


# --------------------------------------------------------------------------- retrieval page


def test_page_is_one_self_contained_offline_file(cran_page: str) -> None:
    assert cran_page.startswith("<!DOCTYPE html>")
    for needle in ("<link", " src=", "http://", "https://", "url(", "@import", "<iframe"):
        assert needle not in cran_page
    assert cran_page.count("<script") == 2  # the embedded data and the embedded script
    assert "default-src 'none'" in cran_page  # the page may fetch nothing at all
    assert cran_page.count("<svg") == 38  # a histogram per metric key


def test_page_data_is_the_report_and_the_run(cran: dict[str, Any], cran_page: str) -> None:
    report, run, qrels, queries = (cran[k] for k in ("report", "run", "qrels", "queries"))
    data = page_data(cran_page)
    assert data["ids"] == list(report.per_query)
    assert data["texts"] == [queries[q] for q in data["ids"]]
    system = data["systems"][0]
    assert system["label"] == "BM25"
    assert system["scores"]["ndcg@10"] == [num(row["ndcg@10"]) for row in report.per_query.values()]
    assert [label for label, _ in data["colsets"]] == ["@1", "@3", "@5", "@10", "@20", "@100"]
    assert data["colsets"][data["col"]][1] == [
        "ndcg@10", "recall@10", "precision@10", "map@10", "mrr@10", "hit_rate@10", "map", "mrr",
    ]  # fmt: skip
    docs = data["docs"]
    for i, q in enumerate(data["ids"]):
        detail = data["detail"][0][i]
        top = [docs[d] for d in detail["r"]]
        assert top == list(run[q][:10])
        assert detail["g"] == [qrels[q].get(d) for d in top]
        assert detail["n"] == len(run[q])
        missed = {docs[d]: (grade, rank) for d, grade, rank in detail["m"]}
        relevant_rest = {d: g for d, g in qrels[q].items() if g > 0 and d not in top}
        assert set(missed) == set(relevant_rest)
        for d, (grade, rank) in missed.items():
            assert grade == relevant_rest[d]
            assert rank == (list(run[q]).index(d) + 1 if d in run[q] else None)
    assert data["snips"][0] == cran["corpus"][docs[0]][:300] + "…"


def test_relevance_level_decides_what_is_marked_relevant() -> None:
    qrels = {"q": {"a": 1, "b": 2, "c": 2}}
    run = {"q": ["a", "x"]}
    report = ragmeter.evaluate_run(qrels, run, k_values=(1,), relevance_level=2)
    detail = page_data(render_retrieval_report(report, run=run, qrels=qrels, depth=1))
    assert detail["level"] == 2
    rows = detail["detail"][0][0]
    assert rows["g"] == [1]
    # grade-1 'a' is ranked but not relevant at level 2; 'b' and 'c' are missed
    assert sorted(detail["docs"][d] for d, _, _ in rows["m"]) == ["b", "c"]


def test_query_missing_from_the_run_says_so() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    report = ragmeter.evaluate_run(qrels, {"q1": ["a"]}, k_values=(1,))
    data = page_data(render_retrieval_report(report, run={"q1": ["a"]}, qrels=qrels))
    by_id = dict(zip(data["ids"], data["detail"][0], strict=True))
    assert by_id["q2"] == {"x": 1, "m": [[data["docs"].index("b"), 1, None]]}
    page = render_retrieval_report(report, run={"q1": ["a"]}, qrels=qrels)
    assert "judged queries missing from the run" in page and "q2" in page


def test_user_strings_are_escaped_everywhere(tmp_path: Path) -> None:
    evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
    report = RagEvalReport(
        metrics={evil: 0.5},
        coverage={evil: 1},
        n_samples=1,
        per_sample={evil: {evil: 0.5}},
        warnings=[evil],
        details={evil: {"faithfulness": {"unsupported_claims": [evil], "supported_claims": []}}},
        extra={evil: evil},
    )
    page = render_rag_report(
        report,
        samples=[{"id": evil, "user_input": evil, "response": evil}],
        title=evil,
        dataset=evil,
        system=evil,
    )
    assert "<img" not in page and "alert(1)</script>" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in page  # static parts: HTML-escaped
    data = page_data(page)  # the data: JSON with every <, > and & escaped, read back exactly
    assert data["ids"] == [evil] and data["texts"] == [evil]
    assert data["detail"][0][0]["un"] == [evil]


# --------------------------------------------------------------------------- size budget


def _big_report(n: int, text_len: int) -> tuple[Any, dict[str, Any]]:
    import random

    rng = random.Random(3)
    queries = {f"q{i}": "word " * (text_len // 5) for i in range(n)}
    run = {q: [f"d{rng.randrange(50_000)}" for _ in range(100)] for q in queries}
    run = {q: list(dict.fromkeys(docs)) for q, docs in run.items()}
    qrels = {q: {docs[j]: 1 + j % 3 for j in (0, 7, 30)} | {"zz": 2} for q, docs in run.items()}
    corpus = {f"d{j}": "text " * 200 for j in range(50_000)}
    report = ragmeter.evaluate_run(qrels, run)
    return report, {"run": run, "qrels": qrels, "queries": queries, "corpus": corpus}


@pytest.mark.slow
def test_ten_thousand_queries_fit_in_ten_megabytes() -> None:
    report, inputs = _big_report(10_000, 100)
    page = render_retrieval_report(report, **inputs)
    size = len(page.encode("utf-8"))
    assert size < 10_000_000
    data = page_data(page)
    assert len(data["ids"]) == 10_000 and len(data["systems"][0]["scores"]) == 38
    assert data["detail"][0][0]["r"]  # the rankings are all there


def test_long_texts_are_cut_to_fit_the_budget_and_the_page_says_so(cran: dict[str, Any]) -> None:
    inputs = {k: cran[k] for k in ("run", "qrels", "queries", "corpus")}
    full = render_retrieval_report(cran["report"], **inputs)
    assert "To keep this page under" not in full
    budget = len(full.encode("utf-8")) - 100_000
    cut = render_retrieval_report(cran["report"], **inputs, max_bytes=budget)
    assert len(cut.encode("utf-8")) <= budget
    note = re.search(r"To keep this page under [^<]*document snippets are cut to (\d+) ", cut)
    assert note is not None and "retrieved context" not in note.group(0)
    snips = [t for t in page_data(cut)["snips"] if t]
    assert max(len(t) for t in snips) == int(note.group(1)) + 1  # + the ellipsis
    assert page_data(cut)["systems"] == page_data(full)["systems"]  # scores never cut
    tiny = render_retrieval_report(cran["report"], **inputs, max_bytes=50_000)
    assert "over the 0.05 MB budget even without texts" in tiny
    assert "its texts are left out (the scores are all there)" in tiny
    assert page_data(tiny)["texts"] is None


# --------------------------------------------------------------------------- RAG page


SAMPLES = [
    {
        "id": "s1",
        "user_input": "capital of France?",
        "response": "Paris is the capital of France. It has 90 million people.",
        "reference": "Paris",
        "retrieved_contexts": ["Paris is the capital of France."],
        "retrieved_ids": ["d1", "d2"],
        "relevance": {"d1": 2},
    },
    {"id": "s2", "question": "2 + 2?", "answer": "four", "reference": "four", "context": ["4"]},
    {"id": "s1", "user_input": "again?", "response": "yes", "reference": "yes"},
]


def test_rag_page_matches_samples_by_id_with_repeats() -> None:
    report = ragmeter.evaluate_rag(SAMPLES)
    data = page_data(render_rag_report(report, samples=SAMPLES, system="demo"))
    assert data["ids"] == ["s1", "s2", "s1#2"]
    assert data["texts"] == ["capital of France?", "2 + 2?", "again?"]
    first = data["detail"][0][0]
    assert first["un"] == ["It has 90 million people"]
    assert first["su"] == ["Paris is the capital of France"]
    assert first["a"] == SAMPLES[0]["response"]
    assert first["rid"] == ["d1", "d2"] and first["rg"] == [2, None]
    assert data["detail"][0][2]["a"] == "yes"


def test_rag_page_matches_samples_without_ids_by_position() -> None:
    plain = [{k: v for k, v in s.items() if k != "id"} for s in SAMPLES]
    report = ragmeter.evaluate_rag(plain)
    data = page_data(render_rag_report(report, samples=plain))
    assert data["texts"] == ["capital of France?", "2 + 2?", "again?"]


def test_rag_page_without_samples_still_shows_the_claims() -> None:
    report = ragmeter.evaluate_rag(SAMPLES)
    data = page_data(render_rag_report(report))
    assert data["texts"] is None
    assert data["detail"][0][0] == {
        "un": ["It has 90 million people"],
        "su": ["Paris is the capital of France"],
    }


def test_rag_header_shows_judge_calls_coverage_and_what_was_not_computed() -> None:
    report = ragmeter.evaluate_rag(
        [{k: v for k, v in s.items() if k != "reference"} for s in SAMPLES]
    )
    assert "exact_match" in report.extra["not_computed"]
    report.extra.update(judge_calls=12, judge_cache_hits=30)
    page = render_rag_report(report)
    assert "<dt>judge calls</dt><dd>12</dd>" in page
    assert "<dt>judge cache hits</dt><dd>30</dd>" in page
    assert escape(f"not computed: {report.extra['not_computed']['exact_match']}") in page
    covered = report.summary("faithfulness").count
    assert covered == report.coverage["faithfulness"] == 2
    assert "<td>faithfulness</td><td>higher</td>" in page
    assert page_data(page)["systems"][0]["scores"]["faithfulness"][2] is None  # not scored
    assert "<dt>judge calls</dt><dd>none (no judged metric)</dd>" in render_rag_report(
        ragmeter.evaluate_rag(SAMPLES)
    )


def test_samples_that_match_nothing_are_refused() -> None:
    report = ragmeter.evaluate_rag(SAMPLES[:2])
    assert page_data(render_rag_report(report, samples=[]))["texts"] is None
    strangers = [dict(s, id=f"other-{i}") for i, s in enumerate(SAMPLES[:2])]
    with pytest.raises(InvalidInputError, match="none of the 2 samples matches"):
        render_rag_report(report, samples=strangers)
    half = [SAMPLES[0], strangers[1]]  # one matches: shown, and the header counts it
    assert "<dt>samples with text</dt><dd>1 of 2</dd>" in render_rag_report(report, samples=half)


# --------------------------------------------------------------------------- comparison


def test_comparison_page_pairs_every_query(cran: dict[str, Any], tmp_path: Path) -> None:
    report, run, qrels = cran["report"], cran["run"], cran["qrels"]
    shorter = {q: docs[::-1] for q, docs in run.items()}
    other = ragmeter.evaluate_run(qrels, shorter)
    result = compare(report, other, label_a="bm25", label_b="reversed")
    path = write_comparison(
        result, tmp_path / "cmp.html", a=report, b=other, run_a=run, run_b=shorter, qrels=qrels
    )
    page = path.read_text(encoding="utf-8")
    data = page_data(page)
    outcomes = data["cmp"]["o"]
    assert len(outcomes) == len(data["ids"]) == result.n
    assert (outcomes.count("w"), outcomes.count("t"), outcomes.count("l")) == (
        result.wins,
        result.ties,
        result.losses,
    )
    assert page.count('<circle class="') == result.n
    assert [s["label"] for s in data["systems"]] == ["bm25", "reversed"]
    assert escape(result.verdict()) in page
    for change in (*result.improved, *result.regressed):
        assert f'data-item="{change.query_id}"' in page
    detail_b = data["detail"][1][0]
    assert [data["docs"][d] for d in detail_b["r"]] == shorter[data["ids"][0]][:10]


def test_comparison_of_plain_score_mappings_and_a_gate_note(tmp_path: Path) -> None:
    a = {"q1": 0.2, "q2": 0.5, "q3": 0.4, "q4": 0.1}
    b = {"q1": 0.6, "q2": 0.5, "q3": 0.9, "q4": 0.3}
    result = compare(a, b)
    path = write_comparison(result, tmp_path / "ab.html", a=a, b=b, note="ok: <fine>")
    page = path.read_text(encoding="utf-8")
    assert "<b>ok: &lt;fine&gt;</b>" in page
    data = page_data(page)
    assert data["cmp"] == {"metric": "score", "hib": True, "o": "wtww"}
    assert data["detail"][0] is None


def test_comparison_page_shows_the_unranked_queries_warning(cran: dict[str, Any]) -> None:
    report, run, qrels = cran["report"], cran["run"], cran["qrels"]
    fewer = {q: docs for i, (q, docs) in enumerate(run.items()) if i % 4}
    other = ragmeter.evaluate_run(qrels, fewer)
    result = compare(report, other, label_a="bm25", label_b="fewer")
    (warning,) = result.warnings
    page = render_comparison(result, a=report, b=other)
    assert '<h2 class="warn-title">Warnings (1)</h2>' in page and escape(warning) in page
    assert "Warnings (" not in render_comparison(compare(report, report), a=report, b=report)


def test_comparison_with_other_reports_is_refused(cran: dict[str, Any]) -> None:
    a = {"q1": 0.2, "q2": 0.5, "q3": 0.4}
    result = compare(a, {"q1": 0.3, "q2": 0.1, "q3": 0.4})
    with pytest.raises(InvalidInputError, match=r"pair 0 queries on 'score'.* paired 3"):
        render_comparison(result, a=cran["report"], b=cran["report"])
    with pytest.raises(InvalidInputError, match="two reports or two"):
        render_comparison(result, a=[0.2], b=a)


# --------------------------------------------------------------------------- input checks


def test_bad_options_are_refused(cran: dict[str, Any]) -> None:
    report = cran["report"]
    with pytest.raises(InvalidInputError, match="depth must be an int >= 1, got 0"):
        render_retrieval_report(report, depth=0)
    with pytest.raises(InvalidInputError, match="max_bytes must be an int >= 1"):
        render_retrieval_report(report, max_bytes=0)
    with pytest.raises(InvalidInputError, match="run: none of its 1 query ids"):
        render_retrieval_report(report, run={"nope": ["d"]})
    with pytest.raises(InvalidInputError, match="must be a RetrievalEvalReport"):
        render_retrieval_report(ragmeter.evaluate_rag(SAMPLES))  # type: ignore[arg-type]


def test_write_writes_what_render_returns(cran: dict[str, Any], tmp_path: Path) -> None:
    report = ragmeter.evaluate_rag(SAMPLES)
    path = write_rag_report(report, tmp_path / "rag.html", samples=SAMPLES, title="T")
    assert path == tmp_path / "rag.html"
    assert path.read_text(encoding="utf-8") == render_rag_report(report, samples=SAMPLES, title="T")
    with pytest.raises(FileNotFoundError):
        write_rag_report(report, tmp_path / "no" / "such" / "dir.html")


def test_to_html_is_a_deprecated_alias_that_writes_the_same_page(
    cran: dict[str, Any], tmp_path: Path
) -> None:
    """``to_html`` on the report classes stays for one release: it warns and writes exactly
    what ``ragmeter.html``'s writer writes (pages are written by ``ragmeter.html`` only)."""
    from ragmeter.html import write_stage_report
    from ragmeter.stages import evaluate_stages

    rag = ragmeter.evaluate_rag(SAMPLES)
    retrieval, run, qrels = cran["report"], cran["run"], cran["qrels"]
    other = ragmeter.evaluate_run(qrels, {q: docs[::-1] for q, docs in run.items()})
    result = compare(retrieval, other)
    staged = [
        {
            "id": "q1",
            "retrieved_ids": ["d1", "d2"],
            "relevance": {"d1": 1},
            "stages": [
                {"name": "bm25", "ids": ["d2", "d1"]},
                {"name": "context", "kind": "context", "ids": ["d1", "d2"], "inputs": ["bm25"]},
            ],
        }
    ]
    stage_report = evaluate_stages(staged)
    cases = [
        (rag, {"samples": SAMPLES}, write_rag_report),
        (retrieval, {"run": run, "qrels": qrels}, write_retrieval_report),
        (result, {"a": retrieval, "b": other}, write_comparison),
        (stage_report, {}, write_stage_report),
    ]
    for i, (obj, options, writer) in enumerate(cases):
        name = type(obj).__name__
        with pytest.warns(
            DeprecationWarning, match=rf"{name}.to_html is deprecated.*ragmeter\.html"
        ):
            old = obj.to_html(tmp_path / f"old{i}.html", **options)  # type: ignore[attr-defined]
        new = writer(obj, tmp_path / f"new{i}.html", **options)  # type: ignore[operator]
        assert _without_times(old.read_text(encoding="utf-8")) == _without_times(
            new.read_text(encoding="utf-8")
        ), name


def _without_times(page: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?(\.\d+)?(Z|[+-]\d\d:?\d\d)?", "T", page)


# --------------------------------------------------------------------------- plots


def test_histogram_counts_every_value_once() -> None:
    values = [0.0, 0.0, 0.05, 0.5, 0.99, 1.0, 1.0]
    svg = histogram(values, label="m", mean=0.5, median=0.5)
    counts = [
        int(c) for c in re.findall(r"\): (\d+)</title>|\]: (\d+)</title>", svg) for c in c if c
    ]
    assert sum(counts) == len(values)
    assert "[0.95, 1]: 3</title>" in svg  # 0.99 and both 1.0 land in the last, closed bin
    wide = histogram([-3.0, 250.0, 7.0], label="latency")
    assert ">-3<" in wide and ">250<" in wide
    assert "<rect" not in histogram([], label="empty")


# --------------------------------------------------------------------------- text files


def test_load_texts_reads_beir_jsonl_tsv_and_gzip(tmp_path: Path, data_dir: Path) -> None:
    queries = load_texts(data_dir / "cranfield_beir", "queries")
    assert len(queries) == 225 and queries["1"].startswith("what similarity laws")
    corpus = load_texts(data_dir / "cranfield_beir" / "corpus.jsonl", "corpus")
    assert corpus == ragmeter.load_cranfield()[0]  # BEIR's title + "\n" + text
    tsv = tmp_path / "topics.tsv"
    tsv.write_text("qid\ttext\n1\tfirst query\n2\tsecond\tquery\n", encoding="utf-8")
    assert load_texts(tsv, "queries") == {"1": "first query", "2": "second\tquery"}
    packed = tmp_path / "q.jsonl.gz"
    packed.write_bytes(gzip.compress(b'\xef\xbb\xbf{"id": 7, "query": "zipped"}\n'))
    assert load_texts(packed, "queries") == {"7": "zipped"}


def test_load_texts_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"_id": "1", "text": "ok"}\n{"text": "no id"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"q\.jsonl:2: .*'_id'"):
        load_texts(bad, "queries")
    tsv = tmp_path / "q.tsv"
    tsv.write_text("1\tok\nno tab here\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"q\.tsv:2: expected 'id<TAB>text'"):
        load_texts(tsv, "queries")
    with pytest.raises(FileNotFoundError, match="queries file not found"):
        load_texts(tmp_path, "queries")


def test_a_report_without_per_item_scores_says_so() -> None:
    from ragmeter.report import RetrievalEvalReport

    summary_only = RetrievalEvalReport(
        metrics={"ndcg@10": 0.5}, per_query={}, n_queries=3, k_values=(10,)
    )
    page = render_retrieval_report(summary_only)
    assert "This report holds no per-query scores" in page
    assert page_data(page)["ids"] == []
    full = render_rag_report(ragmeter.evaluate_rag(SAMPLES))
    assert "holds no per-sample scores" not in full


def test_the_guide_s_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "html-report.md"
    (code,) = re.findall(r"```python\n(.*?)```", guide.read_text(encoding="utf-8"), flags=re.S)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(code, str(guide), "exec"), namespace)
    report, compared, rag = (
        page_data((tmp_path / name).read_text(encoding="utf-8"))
        for name in ("cranfield.html", "compare.html", "rag.html")
    )
    assert len(report["ids"]) == 225 and report["texts"] is not None
    result = namespace["result"]
    assert result.mean_diff < 0 and result.significant
    assert compared["cmp"]["o"].count("l") == result.losses > result.wins
    assert rag["detail"][0][0]["un"] == ["It has 90 million people"]
