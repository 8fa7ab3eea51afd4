"""A local registry of evaluation runs: every saved report with its fingerprints, metric
means and intervals, and per-query scores, in one SQLite file (default
``./.ragmeter/runs.sqlite``, or ``$RAGMETER_REGISTRY``).

>>> import tempfile, pathlib
>>> from ragmeter import evaluate_run
>>> report = evaluate_run({"q1": {"d1": 1}}, {"q1": ["d1"]}, k_values=[1], metrics=["recall"])
>>> with tempfile.TemporaryDirectory() as tmp:
...     with Registry(pathlib.Path(tmp) / "runs.sqlite") as registry:
...         saved = report.save(name="bm25", tags=["nightly"], registry=registry)
...         again = registry.load_report("bm25")
...         (registry.get("latest").name, saved.tags, again.per_query == report.per_query)
('bm25', {'nightly': ''}, True)

One idea per module: ``_schema`` (the file: opening, checking, migrating), ``_artifact``
(the scores file), ``_records`` (what a run is), ``_rows`` (a run to a row and back),
``_refs`` (finding a run by reference), ``_store`` (the :class:`Registry`), ``_errors``.
"""

from __future__ import annotations

from ragmeter.registry._errors import IncomparableRunsError, RegistryError, RunNotFoundError
from ragmeter.registry._records import Comparability, MetricRow, RunRecord, t_interval
from ragmeter.registry._schema import SCHEMA_VERSION
from ragmeter.registry._store import DEFAULT_PATH, ENV, Registry

__all__ = [
    "DEFAULT_PATH",
    "ENV",
    "SCHEMA_VERSION",
    "Comparability",
    "IncomparableRunsError",
    "MetricRow",
    "Registry",
    "RegistryError",
    "RunNotFoundError",
    "RunRecord",
    "t_interval",
]
