"""What every comparison shares: the inputs it accepts, the tests it runs, tie tolerance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from ragmeter.errors import MissingDependencyError
from ragmeter.report import RagEvalReport, RetrievalEvalReport

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]


Comparable = RetrievalEvalReport | RagEvalReport | Mapping[str, float]
"""What :func:`compare` accepts on each side."""
TestName = Literal["randomization", "bootstrap", "t-test"]
OnMissing = Literal["error", "intersect"]

TESTS: tuple[str, ...] = ("randomization", "bootstrap", "t-test")
PRIMARY_RETRIEVAL_METRIC = "ndcg@10"
"""The metric a :class:`RetrievalEvalReport` is compared on when ``metric=None``."""

TIE_TOLERANCE = 1e-12
"""Two per-query scores closer than this count as a tie."""
_TEST_LABELS = {
    "randomization": "paired randomization test",
    "bootstrap": "paired bootstrap test",
    "t-test": "paired t-test",
}


def _require_numpy() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise MissingDependencyError("numpy", "stats") from None
