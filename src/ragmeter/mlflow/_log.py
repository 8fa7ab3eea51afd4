"""A ragmeter report logged to an MLflow run, named as ``mlflow.evaluate`` names its results.

What :func:`log_report` writes (``P`` is ``prefix``, ``NAME`` a result key in MLflow's
spelling, ``ndcg@10`` -> ``ndcg_at_10``; see :mod:`ragmeter.mlflow._names`):

* **metrics** ``P NAME/mean`` (the report's number, exactly), ``/ci_low`` and ``/ci_high``
  (the 95% Student-t interval of the mean, as the run registry stores it:
  :func:`ragmeter.registry.t_interval`; none for ``n < 2``), ``/std`` (population),
  ``/median``, ``/min``, ``/max`` and ``/n`` (the queries or samples scored), as
  ``mlflow.evaluate`` logs ``toxicity/v1/mean`` (ragmeter versions its metric definitions
  as a whole: the ``ragmeter.metric_definitions`` param, not ``/v1`` in each name); the share
  of judged documents as ``P judged_at_10/mean``. A streamed report without per-item scores
  logs its summaries (approximate medians, see :class:`~ragmeter.report.DistributionSummary`);
  a report made by hand with no scores at all only ``/mean`` and ``/n``.
* **params** ``P ragmeter.SETTING``: every setting of the report's config fingerprint (what
  changes the numbers: metrics, cut-offs, relevance level, averaging, ties, ...), JSON
  text (cut to MLflow's 6000 characters, saying so); MLflow params never change, so a
  second report into one run needs its own ``prefix``.
* **tags** ``P ragmeter.version``, ``P ragmeter.kind`` (``retrieval``/``rag``),
  ``P ragmeter.dataset_fingerprint`` and ``P ragmeter.config_fingerprint`` (the sha256 digests;
  no dataset tag for a report made by hand), ``P ragmeter.warnings`` (how many).
* **artifacts** ``P eval_results_table.json`` (``mlflow.log_table``'s layout and UI entry,
  at full precision: one row per query or sample, its id in ``query_id``/``sample_id`` and a
  ``NAME/score`` column per metric, as ``mlflow.evaluate``'s table; ``null`` where a sample
  was not scored; replaced, not appended to, when logged again), ``P
  ragmeter_report.json`` (the report's JSON without the per-item rows: summaries,
  conventions, fingerprints; :meth:`~ragmeter.report.RetrievalEvalReport.from_dict` reads
  it) and, when there are any, ``P ragmeter_warnings.json`` (warnings, missing queries).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragmeter._version import __version__
from ragmeter.errors import InvalidInputError, MissingDependencyError
from ragmeter.mlflow._names import check_prefix, metric_names
from ragmeter.registry import t_interval
from ragmeter.report import RagEvalReport, RetrievalEvalReport

__all__ = ["LogPlan", "log_report", "plan_report"]

Report = RetrievalEvalReport | RagEvalReport
_BATCH = 100  # MLflow's limit of params or tags in one log_batch (metrics: 1000)
_STATS = ("std", "median", "min", "max")
_PARAM_CHARS = 6000  # MLflow's limit of a param value
_CUT = " ... (cut: the whole value is in ragmeter_report.json)"
_LOGGED_ARTIFACTS = "mlflow.loggedArtifacts"  # the run tag that lists its tables for the UI


@dataclass
class LogPlan:
    """Everything :func:`log_report` writes for one report, before it touches MLflow."""

    metrics: dict[str, float] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    table: dict[str, list[Any]] | None = None
    """``eval_results_table.json``: ``{"columns": [...], "data": [[...], ...]}``; ``None``
    when not logged."""
    table_file: str = "eval_results_table.json"
    documents: dict[str, Any] = field(default_factory=dict)
    """JSON artifacts: ``{artifact path: content}``."""


def _kind(report: object) -> str:
    if isinstance(report, RetrievalEvalReport):
        return "retrieval"
    if isinstance(report, RagEvalReport):
        return "rag"
    raise InvalidInputError(
        f"log_report takes a RetrievalEvalReport or a RagEvalReport, got {type(report).__name__}"
    )


def _n(report: Report, key: str) -> int:
    """How many items a mean is over when the report has no per-item scores (by hand)."""
    if isinstance(report, RagEvalReport):
        return report.coverage.get(key, 0)
    return report.n_queries


def _metrics(report: Report, names: Mapping[str, str], prefix: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, mean in report.metrics.items():
        name = f"{prefix}{names[key]}"
        out[f"{name}/mean"] = float(mean)
        summary = report.summary(key)
        if not summary.count:
            out[f"{name}/n"] = float(_n(report, key))
            continue
        out[f"{name}/n"] = float(summary.count)
        for stat in _STATS:
            out[f"{name}/{stat}"] = float(getattr(summary, stat))
        low, high = t_interval(mean, summary.std, summary.count)
        if low is not None and high is not None:
            out[f"{name}/ci_low"], out[f"{name}/ci_high"] = low, high
    if isinstance(report, RetrievalEvalReport) and report.judged is not None:
        judged = report.judged.means
        for key, name in metric_names(judged).items():
            out[f"{prefix}{name}/mean"] = float(judged[key])
    return out


def _param_text(value: Any) -> str:
    """A setting as a param value: JSON text (a string as is), cut to MLflow's 6000 chars."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if len(text) > _PARAM_CHARS:
        text = text[: _PARAM_CHARS - len(_CUT)] + _CUT
    return text


def _settings(report: Report) -> Mapping[str, Any]:
    return report.config_fingerprint.settings


def _tags(report: Report, kind: str, prefix: str) -> dict[str, str]:
    tags = {
        f"{prefix}ragmeter.version": __version__,
        f"{prefix}ragmeter.kind": kind,
        f"{prefix}ragmeter.config_fingerprint": report.config_fingerprint.digest,
        f"{prefix}ragmeter.warnings": str(len(report.warnings)),
    }
    dataset = report.dataset_fingerprint
    if dataset is not None:
        tags[f"{prefix}ragmeter.dataset_fingerprint"] = dataset.digest
    return tags


def _table(report: Report, names: Mapping[str, str]) -> dict[str, list[Any]] | None:
    """The per-item table in ``mlflow.log_table``'s JSON layout (pandas' ``"split"``)."""
    rows: Mapping[str, Mapping[str, float | None]]
    if isinstance(report, RetrievalEvalReport):
        rows, id_column = report.per_query, "query_id"
    else:
        rows, id_column = report.per_sample, "sample_id"
    if not rows:
        return None
    keys = list(names)
    return {
        "columns": [id_column, *(f"{names[k]}/score" for k in keys)],
        "data": [[item, *(row.get(k) for k in keys)] for item, row in rows.items()],
    }


def plan_report(
    report: Report, *, prefix: str | None = None, log_per_query: bool = True
) -> LogPlan:
    """What :func:`log_report` would log for ``report`` (see the module docstring).

    >>> report = RetrievalEvalReport(metrics={"ndcg@10": 0.5}, per_query={"q1": {"ndcg@10": 0.5}},
    ...                              n_queries=1, k_values=(10,))
    >>> plan = plan_report(report, prefix="dev/")
    >>> plan.metrics["dev/ndcg_at_10/mean"], plan.table_file
    (0.5, 'dev/eval_results_table.json')
    >>> plan.table
    {'columns': ['query_id', 'ndcg_at_10/score'], 'data': [['q1', 0.5]]}
    """
    kind = _kind(report)
    prefix = check_prefix(prefix)
    names = metric_names(report.metrics)
    plan = LogPlan(
        metrics=_metrics(report, names, prefix),
        params={f"{prefix}ragmeter.{k}": _param_text(v) for k, v in _settings(report).items()},
        tags=_tags(report, kind, prefix),
        table=_table(report, names) if log_per_query else None,
        table_file=f"{prefix}eval_results_table.json",
    )
    whole = report.to_dict()
    whole["per_query" if kind == "retrieval" else "per_sample"] = {}
    whole.pop("judged_per_query", None)
    plan.documents[f"{prefix}ragmeter_report.json"] = whole
    missing = getattr(report, "missing_queries", [])
    if report.warnings or missing:
        warned = {"warnings": list(report.warnings), "missing_queries": list(missing)}
        plan.documents[f"{prefix}ragmeter_warnings.json"] = warned
    bad = [k for k, v in plan.metrics.items() if not math.isfinite(v)]
    if bad:
        raise InvalidInputError(f"report metrics must be finite numbers; not: {', '.join(bad)}")
    return plan


def _mlflow() -> Any:
    try:
        import mlflow
    except ImportError:
        raise MissingDependencyError("mlflow", "mlflow") from None
    return mlflow


@contextlib.contextmanager
def _target_run(
    mlflow: Any, run_id: str | None, experiment: str | None, run_name: str | None
) -> Iterator[str]:
    """The id of the run to log into: ``run_id``, the active run, or one started here."""
    active = mlflow.active_run()
    if (run_id is not None or active is not None) and (experiment or run_name):
        which = (
            f"run {run_id!r}" if run_id is not None else f"the active run {active.info.run_id!r}"
        )
        raise InvalidInputError(
            f"experiment= and run_name= name a run log_report starts; it logs into {which}"
        )
    from mlflow.exceptions import MlflowException

    if run_id is not None:
        try:
            mlflow.tracking.MlflowClient().get_run(run_id)
        except MlflowException as exc:
            raise InvalidInputError(
                f"no MLflow run {run_id!r} in the tracking store {mlflow.get_tracking_uri()!r} "
                f"({exc.message})"
            ) from None
        yield run_id
        return
    if active is not None:
        yield str(active.info.run_id)
        return
    experiment_id = None
    if experiment is not None:
        found = mlflow.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else mlflow.create_experiment(experiment)
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name) as run:
        yield str(run.info.run_id)


def _log_table(client: Any, run_id: str, table: dict[str, list[Any]], path: str) -> None:
    """``table`` as ``mlflow.log_table`` writes it, shown as a table in MLflow's UI, but at
    full precision (``log_table`` goes through pandas' ``to_json``, which keeps 10 digits)."""
    client.log_text(run_id, json.dumps(table, allow_nan=False, separators=(",", ":")), path)
    logged = json.loads(client.get_run(run_id).data.tags.get(_LOGGED_ARTIFACTS, "[]"))
    entry = {"path": path, "type": "table"}
    if entry not in logged:
        client.set_tag(run_id, _LOGGED_ARTIFACTS, json.dumps([*logged, entry]))


def _write(mlflow: Any, run_id: str, plan: LogPlan) -> None:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.exceptions import MlflowException

    client = mlflow.tracking.MlflowClient()
    now = int(time.time() * 1000)
    metrics = [Metric(k, v, now, 0) for k, v in plan.metrics.items()]
    for i in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[i : i + 1000])
    params = [Param(k, v) for k, v in plan.params.items()]
    for i in range(0, len(params), _BATCH):
        try:
            client.log_batch(run_id, params=params[i : i + _BATCH])
        except MlflowException as exc:
            raise InvalidInputError(
                f"run {run_id!r} already has other values for ragmeter's params (a report "
                f"logged before?): pass prefix= to log another report into it ({exc.message})"
            ) from None
    tags = [RunTag(k, v) for k, v in plan.tags.items()]
    for i in range(0, len(tags), _BATCH):
        client.log_batch(run_id, tags=tags[i : i + _BATCH])
    if plan.table is not None:
        _log_table(client, run_id, plan.table, plan.table_file)
    for path, content in plan.documents.items():
        client.log_dict(run_id, content, path)


def log_report(
    report: Report,
    *,
    run_id: str | None = None,
    experiment: str | None = None,
    run_name: str | None = None,
    prefix: str | None = None,
    log_per_query: bool = True,
) -> str:
    """Log ``report`` to MLflow and return the run id (what is logged: the module docstring).

    The run is ``run_id`` if given, else the active run (``mlflow.start_run()``), else a new
    run this call starts and ends, in the experiment named ``experiment`` (created when
    missing; default: MLflow's current experiment) and called ``run_name``. ``prefix``
    starts every metric name, param, tag and artifact path (``"test/"``: another report in
    the same run), as ``mlflow.evaluate``'s ``metric_prefix``; ``log_per_query=False`` leaves
    out the per-query (per-sample) table. The tracking store is MLflow's
    (``mlflow.set_tracking_uri``, ``MLFLOW_TRACKING_URI``).

    Raises :class:`~ragmeter.errors.MissingDependencyError` without MLflow (``pip install
    'ragmeter[mlflow]'``), :class:`~ragmeter.errors.InvalidInputError` for an unknown
    ``run_id``, a ``prefix`` MLflow cannot name, or params the run already holds otherwise.
    """
    mlflow = _mlflow()
    plan = plan_report(report, prefix=prefix, log_per_query=log_per_query)
    with _target_run(mlflow, run_id, experiment, run_name) as target:
        _write(mlflow, target, plan)
    return target
