"""Report types: where results are assembled, summarised and rendered.

:class:`DistributionSummary` describes one metric's per-query (or per-sample) scores
without collapsing them to a mean. :class:`RetrievalEvalReport` and :class:`RagEvalReport`
carry means, per-item scores for drill-down, and the :class:`Conventions` they were
computed under, and render as text, markdown, JSON or a pandas frame.

One idea per module: ``_summary`` (a metric's distribution), ``_records`` (conventions,
judged counts and warnings), ``_fingerprint`` (what a report was scored on and under which
settings), ``_columns`` (per-query scores read from a flat array), ``_json`` (the JSON
written row by row), ``_base`` (what both reports share), ``_retrieval`` and ``_rag`` (the
two reports), ``_html`` (their deprecated ``to_html``).
"""

from __future__ import annotations

from ragmeter.aggregate import PERCENTILES as PERCENTILES  # re-exported (was defined here)
from ragmeter.report._columns import ColumnRows, RowsBuilder
from ragmeter.report._fingerprint import (
    METRIC_DEFINITIONS,
    ConfigFingerprint,
    DatasetFingerprint,
    SampleDigests,
)
from ragmeter.report._rag import RagEvalReport
from ragmeter.report._records import (
    UNJUDGED_JUDGED_ONLY,
    UNJUDGED_NON_RELEVANT,
    Conventions,
    JudgedShare,
    WarningLog,
)
from ragmeter.report._retrieval import RetrievalEvalReport
from ragmeter.report._summary import DistributionSummary

__all__ = [
    "METRIC_DEFINITIONS",
    "UNJUDGED_JUDGED_ONLY",
    "UNJUDGED_NON_RELEVANT",
    "ColumnRows",
    "ConfigFingerprint",
    "Conventions",
    "DatasetFingerprint",
    "DistributionSummary",
    "JudgedShare",
    "RagEvalReport",
    "RetrievalEvalReport",
    "RowsBuilder",
    "SampleDigests",
    "WarningLog",
]
