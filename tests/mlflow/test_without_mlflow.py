"""Without MLflow installed, ``import ragmeter.mlflow`` works and using it names the extra."""

from __future__ import annotations

import subprocess
import sys

BLOCKED = "import sys; sys.modules['mlflow'] = None\n"
EXPECTED = "True this feature needs the optional package 'mlflow': pip install 'ragmeter[mlflow]'"


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKED + code], capture_output=True, text=True, check=False
    )


def _raises(call: str) -> str:
    return (
        "from ragmeter.errors import MissingDependencyError\n"
        f"try:\n    {call}\n"
        "except MissingDependencyError as exc:\n"
        "    print(isinstance(exc, ImportError), exc)\n"
    )


def test_a_scorer_without_mlflow_names_the_pip_command() -> None:
    done = _run("from ragmeter.mlflow import scorers\n" + _raises("scorers.exact_match()"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == EXPECTED


def test_log_report_without_mlflow_names_the_pip_command() -> None:
    done = _run(
        "from ragmeter.mlflow import log_report\n"
        "from ragmeter.report import RetrievalEvalReport\n"
        "report = RetrievalEvalReport(metrics={'map': 0.5}, per_query={}, n_queries=2,"
        " k_values=())\n" + _raises("log_report(report)")
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == EXPECTED


def test_importing_ragmeter_mlflow_loads_no_mlflow() -> None:
    done = _run(
        "del sys.modules['mlflow']\n"
        "import ragmeter.mlflow, ragmeter.mlflow.scorers\n"
        "print(sorted(m for m in sys.modules if m == 'mlflow' or m.startswith('mlflow.')))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
