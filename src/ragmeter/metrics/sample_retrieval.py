"""Deprecated path of :mod:`ragmeter.evaluation.sample_retrieval` (removed in a future release).

Retrieval metrics on samples score each sample's ranking with ``evaluate_run``: they are a
driver, not a metric family, so they moved to ``ragmeter.evaluation``.
"""

from __future__ import annotations

import warnings

from ragmeter.evaluation.sample_retrieval import *  # noqa: F403
from ragmeter.evaluation.sample_retrieval import __all__ as __all__

warnings.warn(
    "ragmeter.metrics.sample_retrieval moved to ragmeter.evaluation.sample_retrieval; "
    "import it from there (the old path will be removed in a future release)",
    DeprecationWarning,
    stacklevel=2,
)
