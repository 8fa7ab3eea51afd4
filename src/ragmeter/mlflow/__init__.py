"""ragmeter in MLflow: reports logged to MLflow runs, and ragmeter's metrics as GenAI scorers.

:func:`log_report` logs a :class:`~ragmeter.report.RetrievalEvalReport` or
:class:`~ragmeter.report.RagEvalReport` to an MLflow run the way ``mlflow.evaluate`` logs its
results: ``ndcg_at_10/mean`` and its spread as metrics, the per-query table as
``eval_results_table.json``, the conventions as params and the dataset and config
fingerprints as tags. :mod:`ragmeter.mlflow.scorers` makes ragmeter's deterministic sample
metrics MLflow GenAI scorers for ``mlflow.genai.evaluate(data=..., scorers=[...])``, each
scoring a row as :func:`ragmeter.evaluate_rag` scores the same sample.

Importing this package needs no MLflow; logging and making a scorer do
(``pip install 'ragmeter[mlflow]'``: ``mlflow-skinny`` with SQLAlchemy and Alembic for a
local ``sqlite:///`` tracking store, and pandas for ``mlflow.genai.evaluate``).

One idea per module: ``_names`` (ragmeter keys as MLflow names), ``_log`` (a report logged
to a run), ``_sample`` (an evaluation row as a sample), ``_scorer`` (the scorer class) and
``scorers`` (one scorer per metric).
"""

from __future__ import annotations

from ragmeter.mlflow import scorers
from ragmeter.mlflow._log import LogPlan, log_report, plan_report
from ragmeter.mlflow._names import metric_name
from ragmeter.mlflow._sample import row_sample

__all__ = ["LogPlan", "log_report", "metric_name", "plan_report", "row_sample", "scorers"]
