"""A real local MLflow tracking store per test module: ``sqlite:///`` in a temp dir, no server.

MLflow's usage telemetry is switched off before MLflow is imported (no network here), and
evaluation runs with two workers, writing traces as it goes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["DO_NOT_TRACK"] = "true"
# sqlite serves one writer at a time: with MLflow's default 10 evaluation workers and
# asynchronous trace export, its 5-connection pool runs out and traces are dropped.
os.environ["MLFLOW_GENAI_EVAL_MAX_WORKERS"] = "2"
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"

import mlflow  # after the telemetry switch


@pytest.fixture(scope="module")
def tracking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh sqlite tracking store (its folder), also the working directory (an experiment
    made without an artifact location keeps its artifacts in ``./mlruns``); both are put back
    after."""
    folder = tmp_path_factory.mktemp("mlflow")
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{folder / 'mlflow.db'}")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(folder)
            yield folder
    finally:
        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.set_tracking_uri(before)


@pytest.fixture
def experiment(tracking: Path, request: pytest.FixtureRequest) -> str:
    """A new experiment (its id) named after the test, made current for the test."""
    name = request.node.name
    found = mlflow.get_experiment_by_name(name)
    exp_id = (
        found.experiment_id
        if found
        else mlflow.create_experiment(
            name, artifact_location=(tracking / "artifacts" / name).as_uri()
        )
    )
    mlflow.set_experiment(experiment_id=exp_id)
    return str(exp_id)
