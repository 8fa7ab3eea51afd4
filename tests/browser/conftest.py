"""Fixtures for the browser tests: a real headless Chromium driven by Playwright.

The browser is Debian's ``chromium`` (``apt-get install chromium``; ``.ci/run`` installs it),
or whatever ``$RAGMETER_CHROMIUM`` names; Playwright only drives it and downloads nothing.
Without a Chromium the tests are skipped with a message saying how to get one, unless
``$RAGMETER_REQUIRE_BROWSER`` is set (as in CI), where a missing browser is a failure: a test
that skips in CI checks nothing.

Screenshots go to ``$RAGMETER_ARTIFACTS`` (CI sets it and lists it at the end of its output),
else to pytest's temporary directory; each test prints the path it wrote.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import ragmeter
from ragmeter.io.jsonl import write_jsonl

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def find_chromium() -> str | None:
    """The Chromium to drive: ``$RAGMETER_CHROMIUM``, Debian's ``/usr/bin/chromium``, or one
    on ``PATH``."""
    named = os.environ.get("RAGMETER_CHROMIUM")
    if named:
        return named
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _unavailable(message: str) -> None:
    if os.environ.get("RAGMETER_REQUIRE_BROWSER"):
        pytest.fail(f"{message} ($RAGMETER_REQUIRE_BROWSER is set, so this is a failure)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module and process.

    Module scope, not session: while Playwright's sync API is started it keeps an asyncio
    event loop running in this thread, so a later test elsewhere calling ``asyncio.run()``
    would fail; leaving the module stops it.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("browser tests need Playwright: pip install -e '.[test]'")
    executable = find_chromium()
    if executable is None:
        _unavailable(
            "no Chromium found: apt-get install chromium (Debian), or set $RAGMETER_CHROMIUM "
            "to a Chromium or Chrome binary"
        )
    manager = sync_playwright().start()
    try:
        launched = manager.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
    except Exception as exc:  # the binary exists but does not start
        manager.stop()
        _unavailable(f"Chromium at {executable} did not start: {exc}")
    yield launched
    launched.close()
    manager.stop()


@dataclass
class Loaded:
    """A page opened from a file, with everything it said and asked for."""

    page: Any
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    """``open_page(path)`` loads a report file, waits until its script has rendered, and
    returns a :class:`Loaded` collecting console errors, page errors, requests and dialogs."""
    contexts: list[Any] = []

    def load(path: Path, *, width: int = 1280, height: int = 900) -> Loaded:
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        page = context.new_page()
        loaded = Loaded(page)
        page.on(
            "console",
            lambda m: (
                loaded.errors.append(f"console.{m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        page.on("pageerror", lambda e: loaded.errors.append(f"page error: {e}"))
        page.on("request", lambda r: loaded.requests.append(r.url))

        def on_dialog(dialog: Any) -> None:
            loaded.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.goto(path.resolve().as_uri())
        page.wait_for_selector("html[data-ready='1']", timeout=30_000)
        return loaded

    yield load
    for context in contexts:
        context.close()


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: ``$RAGMETER_ARTIFACTS`` or a temporary directory."""
    named = os.environ.get("RAGMETER_ARTIFACTS")
    root = Path(named) if named else tmp_path_factory.mktemp("artifacts")
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture
def screenshot(artifacts: Path) -> Any:
    """``screenshot(loaded, name)`` saves a full-page PNG, prints where, checks it is one."""

    def take(loaded: Loaded, name: str) -> Path:
        path = artifacts / f"{name}.png"
        loaded.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 10_000  # a blank page would be far smaller
        return path

    return take


@pytest.fixture(scope="session")
def cranfield() -> dict[str, Any]:
    """The bundled Cranfield collection, its BM25 run and a weaker run (top 10 shuffled)."""
    corpus, queries, qrels = ragmeter.load_cranfield()
    run = ragmeter.load_cranfield_bm25_run()
    weaker = {}
    for qid, docs in run.items():
        top = list(docs[:10])
        random.Random(qid).shuffle(top)
        weaker[qid] = top + list(docs[10:])
    return {"corpus": corpus, "queries": queries, "qrels": qrels, "run": run, "weaker": weaker}


UNSUPPORTED = "It was first measured on the Moon in 1969"
XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@pytest.fixture(scope="session")
def rag_case(tmp_path_factory: pytest.TempPathFactory, cranfield: dict[str, Any]) -> dict[str, Any]:
    """A RAG sample file built from Cranfield: the question, BM25's top 3 texts as contexts,
    an extractive answer (every third one with an unsupported claim added), a reference, the
    retrieved ids with graded relevance; plus one sample whose texts are HTML and script."""
    corpus, queries, qrels, run = (cranfield[k] for k in ("corpus", "queries", "qrels", "run"))
    samples: list[dict[str, Any]] = []
    for i, (qid, docs) in enumerate(list(run.items())[:60]):
        title, _, text = corpus[docs[0]].partition("\n")
        first = (text or title).split(" . ")[0]
        relevance = dict(qrels.get(qid, {}))
        best = max(relevance, key=lambda d: relevance[d]) if relevance else docs[0]
        samples.append(
            {
                "id": f"q{qid}",
                "user_input": queries[qid],
                "response": first + "." + (f" {UNSUPPORTED}." if i % 3 == 0 else ""),
                "reference": corpus[best].partition("\n")[0].rstrip(" ."),
                "retrieved_contexts": [corpus[d][:500] for d in docs[:3]],
                "retrieved_ids": list(docs[:5]),
                "relevance": relevance,
                "latency_ms": 100.0 + 7 * i,
            }
        )
    samples.append(
        {
            "id": "xss",
            "user_input": XSS,
            "response": "</script><b>bold?</b> " + XSS,
            "reference": "<i>ref</i>",
            "retrieved_contexts": ["<iframe src='https://example.com'></iframe>"],
        }
    )
    path = tmp_path_factory.mktemp("rag") / "samples.jsonl"
    write_jsonl(samples, path)
    return {"path": path, "samples": samples, "unsupported": UNSUPPORTED, "xss": XSS}
