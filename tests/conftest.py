"""Shared fixtures: paths to the public test collections copied into tests/data/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# No telemetry from the frameworks under test (and no network here anyway).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The tests/data directory (trec_eval, cranfield_beir, squad, vaswani)."""
    return DATA


# -- skips are failures unless allowed ------------------------------------------------------
# A test that skips checks nothing, and a dependency that fails to import would silently
# drop a whole suite through importorskip. So a skip fails the run unless its reason is on
# this short list, each allowed for a reason that holds on some machines and not others.
SKIP_ALLOWED: dict[str, str] = {
    "needs os.setuid to test as an ordinary user": "no os.setuid on this platform",
    "Haystack 2.x has no deserialization allowlist": "the installed Haystack is 3.x",
    "Haystack >= 3 mock generator": "the installed Haystack is 2.x",
    "Chromium": "no Chromium on this machine (CI installs it and sets "
    "RAGMETER_REQUIRE_BROWSER, so there a missing browser fails)",
}


def _compiler_available() -> bool:
    """Whether ``sysconfig``'s C compiler is on ``PATH`` and ``Python.h`` exists."""
    import shutil
    import sysconfig

    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which(cc) is not None and header.exists()


COMPILER = _compiler_available()
if not COMPILER:  # pragma: no cover - every CI machine has one
    SKIP_ALLOWED["the compiled kernel is not built"] = "no C compiler or Python headers here"


@pytest.fixture(scope="session")
def compiler_available() -> bool:
    """Whether this machine has a C compiler and ``Python.h`` (so the kernel must build)."""
    return COMPILER


_UNEXPECTED_SKIPS: list[str] = []


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _check_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if not any(allowed in reason for allowed in SKIP_ALLOWED):
        _UNEXPECTED_SKIPS.append(f"{report.nodeid}: {reason}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _check_skip(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _check_skip(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _UNEXPECTED_SKIPS and not hasattr(terminalreporter.config, "workerinput"):
        terminalreporter.section("skips that are not allowed (tests/conftest.py SKIP_ALLOWED)")
        for line in _UNEXPECTED_SKIPS:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _UNEXPECTED_SKIPS and not hasattr(session.config, "workerinput") and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
