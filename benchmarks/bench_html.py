"""Benchmark: size of the HTML report and how fast it opens in a real Chromium.

The goal (issue 15): a 10k-query report is under 10 MB and opens in a browser in under 2 s.
For 1,000 and 10,000 queries this writes three pages -- a retrieval report (run of 100 docs
per query, graded qrels, query texts, a 50,000-doc corpus for snippets), a RAG report
(question, answer with claims, reference, 3 contexts per sample) and a comparison of two
runs -- and for each prints:

* ``MB``: the file's size (10^6 bytes);
* ``write s``: Python time to build and write it (``to_html``);
* ``DCL ms``: DOMContentLoaded, from the navigation's start (the HTML parsed, the inline
  SVG plots laid out, the script run);
* ``ready ms``: when the page's script finished its first render (the table's first page
  drawn; a ``performance.mark`` it sets);
* ``FCP ms``: first contentful paint;
* ``load ms``: the load event;
* ``open s``: wall-clock from ``page.goto`` to the rendered page, as Playwright sees it;
* ``sort ms``: one click on a metric column, re-sorting every row (10k) and redrawing.

Each page is opened ``--repeat`` times, each time in a fresh browser context of one
Chromium (Debian's, driven by Playwright; nothing is downloaded), from a ``file://`` URL;
the median is printed (best in brackets). The machine is a shared 2-core box, so treat
the figures as an order of magnitude.

    python benchmarks/bench_html.py                  # 1k and 10k, 5 opens each
    python benchmarks/bench_html.py --sizes 10000 --repeat 3
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

import ragmeter
from ragmeter.html import write_comparison, write_rag_report, write_retrieval_report
from ragmeter.stats import compare

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
_WORDS_TEXT = (
    "wing flow heat boundary layer shock pressure panel flutter nozzle supersonic transonic "
    "laminar turbulent velocity cylinder plate stress buckling vibration model theory "
    "experiment measured results drag lift airfoil jet mach number"
)
WORDS = tuple(_WORDS_TEXT.split())
TIMING_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const ready = performance.getEntriesByName('ragmeter-ready')[0];
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  return {dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
          ready: ready ? ready.startTime : null, fcp: fcp ? fcp.startTime : null};
}"""
SORT_JS = """key => {
  const t0 = performance.now();
  document.querySelector(`#table th[data-key="${key}"] button`).click();
  return performance.now() - t0;
}"""


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


def make_inputs(n: int, seed: int = 0) -> dict[str, Any]:
    """Synthetic retrieval inputs shaped like a BEIR collection."""
    rng = random.Random(seed)
    docs = [f"doc{j}" for j in range(50_000)]
    queries = {f"q{i}": _text(rng, rng.randint(6, 16)) for i in range(n)}
    run = {q: rng.sample(docs, 100) for q in queries}
    weaker = {}
    for q, ranked in run.items():
        top = ranked[:10]
        rng.shuffle(top)
        weaker[q] = top + ranked[10:]
    qrels = {
        q: {d: rng.randint(1, 3) for d in rng.sample(ranked[:40], 3)} | {rng.choice(docs): 2}
        for q, ranked in run.items()
    }
    corpus = {d: _text(rng, 60) for d in docs}
    return {"queries": queries, "run": run, "weaker": weaker, "qrels": qrels, "corpus": corpus}


def make_samples(n: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        contexts = [_text(rng, 60) for _ in range(3)]
        answer = " ".join(contexts[0].split()[:12]) + ". " + _text(rng, 8) + "."
        out.append(
            {
                "id": f"s{i}",
                "user_input": _text(rng, 10) + "?",
                "response": answer,
                "reference": " ".join(contexts[0].split()[:6]),
                "retrieved_contexts": contexts,
                "retrieved_ids": [f"d{j}" for j in rng.sample(range(5000), 5)],
                "reference_ids": [f"d{rng.randrange(5000)}"],
                "latency_ms": rng.uniform(50, 900),
            }
        )
    return out


def write_pages(n: int, root: Path) -> list[tuple[str, Path, float, str]]:
    """The three pages for ``n`` items: (name, path, seconds to write, a column to sort)."""
    x = make_inputs(n)
    pages = []

    def timed(name: str, sort_key: str, write: Callable[[], Path]) -> None:
        t0 = time.perf_counter()
        path = write()
        pages.append((name, path, time.perf_counter() - t0, sort_key))

    a = ragmeter.evaluate_run(x["qrels"], x["run"])
    b = ragmeter.evaluate_run(x["qrels"], x["weaker"])
    timed(
        "retrieval",
        "ndcg@10",
        lambda: write_retrieval_report(
            a,
            root / f"retrieval-{n}.html",
            run=x["run"],
            qrels=x["qrels"],
            queries=x["queries"],
            corpus=x["corpus"],
        ),
    )
    samples = make_samples(n)
    rag = ragmeter.evaluate_rag(samples)
    timed("rag", "token_f1", lambda: write_rag_report(rag, root / f"rag-{n}.html", samples=samples))
    result = compare(a, b, label_a="bm25", label_b="shuffled")
    timed(
        "compare",
        "diff",
        lambda: write_comparison(
            result,
            root / f"compare-{n}.html",
            a=a,
            b=b,
            run_a=x["run"],
            run_b=x["weaker"],
            qrels=x["qrels"],
            queries=x["queries"],
            corpus=x["corpus"],
        ),
    )
    return pages


def open_page(browser: Any, path: Path, sort_key: str) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    t0 = time.perf_counter()
    page.goto(path.resolve().as_uri(), wait_until="load")
    page.wait_for_selector("html[data-ready='1']")
    wall = time.perf_counter() - t0
    timing = page.evaluate(TIMING_JS)
    timing["open"] = wall
    timing["sort"] = page.evaluate(SORT_JS, sort_key)
    context.close()
    if errors:
        raise RuntimeError(f"{path.name}: the page reported errors: {errors}")
    return timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    header = (
        f"{'page':<10} {'items':>6} {'MB':>6} {'write s':>8} {'DCL ms':>12} {'ready ms':>12} "
        f"{'FCP ms':>12} {'load ms':>12} {'open s':>12} {'sort ms':>12}"
    )
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=FLAGS)
        print(f"Chromium {browser.version}, {args.repeat} opens per page, median [best]")
        print(header)
        for n in args.sizes:
            for name, path, write_s, sort_key in write_pages(n, Path(tmp)):
                runs = [open_page(browser, path, sort_key) for _ in range(args.repeat)]

                def cell(key: str, runs: list[dict[str, float]] = runs, digits: int = 0) -> str:
                    values = [r[key] for r in runs if r[key] is not None]
                    if not values:
                        return "-"
                    med, best = statistics.median(values), min(values)
                    return f"{med:.{digits}f} [{best:.{digits}f}]"

                size = path.stat().st_size / 1e6
                print(
                    f"{name:<10} {n:>6} {size:>6.2f} {write_s:>8.2f} {cell('dcl'):>12} "
                    f"{cell('ready'):>12} {cell('fcp'):>12} {cell('load'):>12} "
                    f"{cell('open', digits=2):>12} {cell('sort', digits=1):>12}"
                )
        browser.close()


if __name__ == "__main__":
    main()
