"""The HTML reports in a real headless Chromium: they load without errors, draw their plots,
sort, filter, page and open drill-downs, show hostile text as text, and fetch nothing.

Run on the bundled Cranfield collection (BM25 and a weaker run) and on a RAG sample file;
each test leaves a screenshot (see conftest.py for where).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

import ragmeter
from ragmeter import cli
from ragmeter.html import write_rag_report, write_retrieval_report
from ragmeter.io.trec import write_trec_run
from ragmeter.stats import compare

pytestmark = pytest.mark.browser

CRAN = Path(__file__).parent.parent / "data" / "cranfield_beir"

PLOTS_JS = """sel => [...document.querySelectorAll(sel)].map(svg => {
    const box = svg.getBoundingClientRect();
    const marks = [...svg.querySelectorAll('rect.bar, circle, rect.w, rect.t, rect.l')]
        .filter(m => { const b = m.getBBox(); return b.width > 0 && b.height > 0; });
    return [box.width, box.height, marks.length];
})"""


def rounded(value: float) -> float:
    """A score as the page keeps it (6 significant digits)."""
    return float(f"{value:.6g}")


def table_ids(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        "#table tbody tr", "rows => rows.map(r => r.cells[0].textContent)"
    )


def assert_plots_drawn(page: Any, selector: str, at_least: int) -> list[list[float]]:
    plots = page.evaluate(PLOTS_JS, selector)
    assert len(plots) >= at_least, plots
    for width, height, marks in plots:
        assert width > 100 and height > 20 and marks > 0, plots
    return plots


def filter_rows(page: Any, text: str) -> str:
    page.fill("#filter", text)
    page.wait_for_function("t => document.getElementById('count').dataset.filter === t", arg=text)
    return str(page.text_content("#count"))


def test_retrieval_report_on_cranfield(
    tmp_path: Path, cranfield: dict[str, Any], open_page: Any, screenshot: Any
) -> None:
    corpus, queries, qrels, run = (cranfield[k] for k in ("corpus", "queries", "qrels", "run"))
    report = ragmeter.evaluate_run(qrels, run)
    path = write_retrieval_report(
        report,
        tmp_path / "cranfield.html",
        run=run,
        qrels=qrels,
        queries=queries,
        corpus=corpus,
        dataset="Cranfield",
        system="BM25",
    )
    loaded = open_page(path)
    page = loaded.page
    assert loaded.errors == []
    assert loaded.requests == [path.resolve().as_uri()]  # one file, nothing fetched
    # the histograms of the @10 column set: 6 metrics at 10, plus uncut map and mrr
    assert_plots_drawn(page, "#metrics > .grid svg.plot", 8)
    assert page.text_content("#count") == "225 rows"
    ids = list(report.per_query)
    assert table_ids(page) == ids[:25]

    # sort by ndcg@10: descending first, then ascending; ties keep the report's order
    score = {q: rounded(report.per_query[q]["ndcg@10"]) for q in ids}
    position = {q: i for i, q in enumerate(ids)}
    page.click("#table th[data-key='ndcg@10'] button")
    best_first = sorted(ids, key=lambda q: (-score[q], position[q]))
    assert table_ids(page) == best_first[:25]
    assert page.get_attribute("#table th[data-key='ndcg@10']", "aria-sort") == "descending"
    page.click("#table th[data-key='ndcg@10'] button")
    assert table_ids(page) == sorted(ids, key=lambda q: (score[q], position[q]))[:25]

    # filter: a numeric condition, then words of the query texts
    low = sum(score[q] < 0.1 for q in ids)
    assert filter_rows(page, "ndcg@10 < 0.1") == f"{low} of 225 rows match"
    wording = sum("boundary layer" in f"{q}\n{queries[q]}".lower() for q in ids)
    assert filter_rows(page, "Boundary Layer") == f"{wording} of 225 rows match"
    filter_rows(page, "")

    # paging
    page.click("#next")
    assert page.text_content("#page-info").startswith("rows 26–50 of 225")
    page.click("#prev")

    # drill-down into the best query: its text, its ranking with grades, missed relevant docs
    page.click("#table th[data-key='ndcg@10'] button")  # descending again
    q = best_first[0]
    page.click("#table tbody tr:first-child")
    assert page.text_content("#drill h2") == f"Query {q}"
    assert page.text_content("#drill .qtext") == queries[q]
    lists = page.locator("#drill ol.ranked")
    ranked = lists.nth(0).locator("li .doc").all_text_contents()
    assert ranked == list(run[q][:10])
    marked = (
        lists.nth(0)
        .locator("li")
        .evaluate_all("items => items.map(li => li.classList.contains('relevant'))")
    )
    assert marked == [qrels[q].get(d, 0) > 0 for d in run[q][:10]]
    missed = {d for d, g in qrels[q].items() if g > 0 and d not in run[q][:10]}
    if missed:
        assert set(lists.nth(1).locator("li .doc").all_text_contents()) == missed
    screenshot(loaded, "cranfield-retrieval-report")

    # a link to one query opens its drill-down
    other = ids[3]
    page.goto(f"{path.resolve().as_uri()}#item={other}")
    page.reload()
    page.wait_for_selector("html[data-ready='1']")
    assert page.text_content("#drill h2") == f"Query {other}"
    assert loaded.errors == []


def test_rag_report_from_a_sample_file(
    tmp_path: Path, rag_case: dict[str, Any], open_page: Any, screenshot: Any, capsys: Any
) -> None:
    out = tmp_path / "rag.html"
    assert cli.run(["report", str(rag_case["path"]), "--html", str(out)]) == 0
    assert "61 samples" in capsys.readouterr().out
    loaded = open_page(out)
    page = loaded.page
    assert loaded.errors == []
    assert loaded.requests == [out.resolve().as_uri()]
    assert_plots_drawn(page, "#metrics > .grid svg.plot", 5)
    assert page.text_content("#count") == "61 rows"

    # faithfulness' unsupported claims are highlighted in the answer
    report = ragmeter.evaluate_rag(rag_case["samples"])
    first = rag_case["samples"][0]["id"]
    claims = report.details[first]["faithfulness"]["unsupported_claims"]
    assert claims == [rag_case["unsupported"]]
    filter_rows(page, first)
    page.click("#table tbody tr:first-child")
    assert page.text_content("#drill h2") == f"Sample {first}"
    assert page.locator("#drill .answer mark.unsupported").all_text_contents() == claims
    assert page.locator("#drill ol.ctx-list li").count() == 3
    relevant = page.locator("#drill ol.ranked li.relevant .doc").all_text_contents()
    sample = rag_case["samples"][0]
    assert relevant == [d for d in sample["retrieved_ids"] if sample["relevance"].get(d, 0) > 0]
    screenshot(loaded, "rag-report")

    # sorting by faithfulness puts the samples with unsupported claims first (ascending)
    filter_rows(page, "")
    page.click("#table th[data-key='faithfulness'] button")
    page.click("#table th[data-key='faithfulness'] button")
    lowest = min(v for v in report.scores("faithfulness").values())
    cell = page.locator("#table tbody tr:first-child td").nth(
        2 + list(report.metrics).index("faithfulness")
    )
    assert float(cell.text_content()) == pytest.approx(lowest, abs=5e-5)

    # script and markup in a question or an answer are shown as text, never run or parsed
    filter_rows(page, "xss")
    page.click("#table tbody tr:first-child")
    assert page.text_content("#drill .qtext") == rag_case["xss"]
    assert page.text_content("#drill .answer").startswith("</script><b>bold?</b>")
    assert page.locator("#drill .answer b, img, iframe").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert loaded.dialogs == [] and loaded.errors == []


def test_comparison_of_two_runs(
    tmp_path: Path, cranfield: dict[str, Any], open_page: Any, screenshot: Any
) -> None:
    qrels, run, weaker = (cranfield[k] for k in ("qrels", "run", "weaker"))
    write_trec_run(weaker, tmp_path / "weaker.run")
    out = tmp_path / "compare.html"
    args = ["compare", str(CRAN / "bm25.run"), str(tmp_path / "weaker.run"), "--qrels", str(CRAN)]
    assert cli.run([*args, "--html", str(out)]) == 0
    loaded = open_page(out)
    page = loaded.page
    assert loaded.errors == []
    assert loaded.requests == [out.resolve().as_uri()]

    result = compare(ragmeter.evaluate_run(qrels, run), ragmeter.evaluate_run(qrels, weaker))
    scatter = assert_plots_drawn(page, "svg.scatter", 1)
    assert scatter[0][2] == result.n == 225  # one drawn point per paired query
    counts = page.locator("svg.wtl text").all_text_contents()
    assert counts == [str(result.wins), str(result.ties), str(result.losses)]
    assert page.locator("svg.scatter circle.w").count() == result.wins
    assert page.locator("svg.scatter circle.l").count() == result.losses

    # the table opens on the queries that moved most
    moved = max([*result.improved, *result.regressed], key=lambda c: abs(c.diff))
    assert table_ids(page)[0] == moved.query_id

    # "regressed most" opens both rankings side by side
    worst = result.regressed[0].query_id
    page.click(f"button.item-link[data-item='{worst}']")
    assert page.text_content("#drill h2") == f"Query {worst}"
    sides = page.locator("#drill .side")
    assert sides.count() == 2
    assert sides.nth(0).locator("ol.ranked").first.locator(".doc").all_text_contents() == list(
        run[worst][:10]
    )
    assert sides.nth(1).locator("ol.ranked").first.locator(".doc").all_text_contents() == list(
        weaker[worst][:10]
    )
    screenshot(loaded, "cranfield-comparison")

    # clicking a point of the scatter opens that query
    point = page.locator("svg.scatter circle.w").first
    index = int(point.get_attribute("data-i"))
    point.click(force=True)
    expected = list(ragmeter.evaluate_run(qrels, run, k_values=(10,), metrics=["ndcg"]).per_query)
    assert page.text_content("#drill h2") == f"Query {expected[index]}"
    assert loaded.errors == []


def test_hostile_query_texts_and_labels_stay_text(
    tmp_path: Path, open_page: Any, screenshot: Any
) -> None:
    evil = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    qrels = {"q<1>": {"d&1": 1, "</script>": 2}, "q2": {"d2": 1}}
    run = {"q<1>": ["</script>", "d&1", "x"], "q2": ["d2"]}
    report = ragmeter.evaluate_run(qrels, run, k_values=(10,))
    path = write_retrieval_report(
        report,
        tmp_path / "evil.html",
        run=run,
        qrels=qrels,
        queries={"q<1>": evil, "q2": "plain"},
        corpus={"</script>": evil},
        system=evil,
        dataset="</title><script>window.__pwned = 3</script>",
        title=evil,
    )
    loaded = open_page(path)
    page = loaded.page
    assert page.title() == evil
    assert page.text_content("header h1") == evil
    filter_rows(page, "q<1>")
    page.click("#table tbody tr:first-child")
    assert page.text_content("#drill .qtext") == evil
    assert page.locator("#drill .doc").first.text_content() == "</script>"
    assert page.locator("#drill .snip").first.text_content() == evil
    assert page.locator("img").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert loaded.dialogs == [] and loaded.errors == []
    screenshot(loaded, "hostile-texts")


@pytest.mark.slow
def test_ten_thousand_queries_load_and_sort(tmp_path: Path, open_page: Any) -> None:
    rng = random.Random(7)
    words = [
        "wing",
        "flow",
        "heat",
        "boundary",
        "layer",
        "shock",
        "pressure",
        "panel",
        "flutter",
        "nozzle",
    ]
    queries = {f"q{i}": " ".join(rng.choices(words, k=12)) for i in range(10_000)}
    docs = [f"d{j}" for j in range(50_000)]
    run = {q: rng.sample(docs, 100) for q in queries}
    qrels = {
        q: {d: rng.randint(1, 3) for d in [*rng.sample(run[q][:30], 3), "dx"]} for q in queries
    }
    corpus = {d: " ".join(rng.choices(words, k=40)) for d in docs}
    report = ragmeter.evaluate_run(qrels, run)
    path = write_retrieval_report(
        report, tmp_path / "10k.html", run=run, qrels=qrels, queries=queries, corpus=corpus
    )
    assert path.stat().st_size < 10_000_000
    loaded = open_page(path)
    page = loaded.page
    assert loaded.errors == []
    assert page.text_content("#count") == "10000 rows"
    ids = list(report.per_query)
    score = {q: rounded(report.per_query[q]["ndcg@10"]) for q in ids}
    position = {q: i for i, q in enumerate(ids)}
    page.click("#table th[data-key='ndcg@10'] button")
    assert table_ids(page) == sorted(ids, key=lambda q: (-score[q], position[q]))[:25]


def test_a_report_without_per_item_scores_opens_cleanly(tmp_path: Path, open_page: Any) -> None:
    from ragmeter.report import RagEvalReport

    summary_only = RagEvalReport(metrics={"token_f1": 0.5}, coverage={"token_f1": 3}, n_samples=3)
    loaded = open_page(write_rag_report(summary_only, tmp_path / "empty.html"))
    assert loaded.errors == []
    assert loaded.page.text_content("#count") == "0 rows"
    assert loaded.page.text_content("#page-info") == "no rows"
