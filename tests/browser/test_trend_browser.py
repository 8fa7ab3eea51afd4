"""The trend page of ``ragmeter runs trend --html`` in a real headless Chromium: every run a
point, the CI band drawn, the regression marked, each point a link to that run's own
report page (which exists and loads), nothing fetched, no errors.

Eight Cranfield runs saved from the command line: BM25 and copies with the top 10 of some
queries shuffled (one with half of them: a significant drop), the last two scored at
relevance level 2 (not like for like: a new series). The regressions marked are the ones
:func:`ragmeter.stats.trend` finds (tested against SciPy in tests/stats/test_runs.py).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from ragmeter import cli
from ragmeter.io.trec import write_trec_run
from ragmeter.registry import Registry
from ragmeter.stats import trend

pytestmark = pytest.mark.browser

CRAN = Path(__file__).parent.parent / "data" / "cranfield_beir"

BOXES_JS = """sel => [...document.querySelectorAll(sel)].map(e => {
    const b = e.getBBox(); return [b.width, b.height];
})"""


def _variant(run: dict[str, list[str]], share: float) -> dict[str, list[str]]:
    """``run`` with the top 10 of a ``share`` of its queries shuffled (a worse system)."""
    out = {}
    for qid, docs in run.items():
        rng = random.Random(f"{qid}:{share}")
        top = list(docs[:10])
        if rng.random() < share:
            rng.shuffle(top)
        out[qid] = top + list(docs[10:])
    return out


#: The saved runs: the share of queries whose top 10 is shuffled, and the options. The
#: 0.5 run drops significantly; the last two are scored at relevance level 2.
PLAN: list[tuple[float, list[str]]] = [
    (0.0, []),
    (0.1, []),
    (0.05, []),
    (0.5, []),
    (0.0, []),
    (0.05, []),
    (0.0, ["--relevance-level", "2"]),
    (0.05, ["--relevance-level", "2"]),
]


def _saved(tmp_path: Path, cranfield: dict[str, Any]) -> tuple[Path, list[str]]:
    """The runs of :data:`PLAN` saved by ``ragmeter retrieval --save``, oldest first."""
    registry = tmp_path / "runs.sqlite"
    qrels = CRAN / "qrels" / "test.tsv"
    for i, (share, extra) in enumerate(PLAN):
        run = tmp_path / f"run{i}.run"
        write_trec_run(_variant(cranfield["run"], share), run)
        args = ["retrieval", "--qrels", str(qrels), "--run", str(run), "--json", *extra]
        assert cli.run([*args, "--save", "bm25", "--registry", str(registry)]) == 0
    ids = [r.id for r in reversed(Registry(registry).runs())]
    return registry, ids


def test_trend_page_in_chromium(
    tmp_path: Path,
    cranfield: dict[str, Any],
    browser: Any,
    screenshot: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    registry, ids = _saved(tmp_path, cranfield)
    page_path = tmp_path / "trend.html"
    code = cli.run(
        ["runs", "trend", "ndcg@10", "--html", str(page_path), "--registry", str(registry)]
    )
    assert code == 0, capsys.readouterr().err
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(page_path.resolve().as_uri())
        page.wait_for_load_state("load")
        assert errors == [] and requests == [page_path.resolve().as_uri()]
        # one point per run, in time order, the weaker run marked as the regression
        runs = page.eval_on_selector_all("svg.trend circle.pt", "cs => cs.map(c => c.dataset.run)")
        assert runs == ids
        marked = page.eval_on_selector_all(
            "svg.trend circle.pt.regression", "cs => cs.map(c => c.dataset.run)"
        )
        flagged = [p.run_id for p in trend(registry, "ndcg@10") if p.regression]
        assert ids[3] in flagged and marked == flagged
        assert page.locator("svg.trend text.mark").count() == len(flagged)
        assert page.locator("table.runs tr.regression").count() == len(flagged)
        # drawn: points, CI bars, the band of each like-for-like series, and its break
        for selector, count in (
            ("svg.trend circle.pt", len(PLAN)),
            ("svg.trend line.ci", len(PLAN)),
            ("svg.trend polygon.band", 2),
            ("svg.trend line.break", 1),
        ):
            boxes = page.evaluate(BOXES_JS, selector)
            assert len(boxes) == count, (selector, boxes)
        for width, height in page.evaluate(BOXES_JS, "svg.trend polygon.band"):
            assert width > 50 and height > 1
        # every point links to its run's report page, which exists
        hrefs = page.eval_on_selector_all("svg.trend a", "as => as.map(a => a.href.baseVal)")
        assert len(hrefs) == len(PLAN)
        for run_id, href in zip(ids, hrefs, strict=True):
            assert (tmp_path / href).is_file() and run_id in href
        screenshot(_Loaded(page), "trend")
        # following a point opens that run's report page, and it renders
        page.click(f'svg.trend circle.pt[data-run="{ids[3]}"]')
        page.wait_for_selector("html[data-ready='1']", timeout=30_000)
        assert page.url.endswith(f"trend_runs/{ids[3]}.html")
        assert ids[3][:12] in page.title() and page.text_content("#count") == "225 rows"
        assert errors == []
    finally:
        context.close()


class _Loaded:
    """What the ``screenshot`` fixture takes: an object with the page."""

    def __init__(self, page: Any) -> None:
        self.page = page
