"""Helpers for a project's own test suite: fail a test when retrieval or answer quality regresses.

The baseline is a report, a ``{query_id: score}`` mapping, a report saved as JSON, or a
run saved in the run registry (``baseline="pinned"``, a run name, ``"NAME~1"``, a run id).

>>> from ragmeter.testing import assert_no_regression
>>> baseline = {"q1": 0.9, "q2": 0.8, "q3": 0.7}
>>> result = assert_no_regression(baseline, dict(baseline))  # passes, returns the decision
>>> result.passed
True
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ragmeter.errors import InvalidInputError
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.stats import Comparable, GateResult, OnMissing, TestName, gate, registry_baseline

if TYPE_CHECKING:
    from ragmeter.registry import Registry

__all__ = ["assert_no_regression"]


def _report_file(path: Path) -> Comparable:
    """A report saved with ``to_dict()``/``to_json()``, read back."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind == "retrieval":
        return RetrievalEvalReport.from_dict(data)
    if kind == "rag":
        return RagEvalReport.from_dict(data)
    raise InvalidInputError(
        f"{path}: expected a report saved with to_dict()/to_json() (a JSON object with "
        "'kind': 'retrieval' or 'rag')"
    )


def _baseline(
    baseline: Comparable | str | os.PathLike[str],
    current: Comparable,
    registry: Registry | str | os.PathLike[str] | None,
    metric: str | None,
) -> tuple[Comparable, list[str]]:
    """The baseline to gate against, and notes for the comparison's warnings."""
    if isinstance(baseline, (os.PathLike, str)):
        path = Path(baseline)
        if path.is_file():
            return _report_file(path), []
        if isinstance(baseline, os.PathLike):
            raise InvalidInputError(f"baseline report file not found: {path}")
        report, _, notes = registry_baseline(baseline, current, registry=registry, metric=metric)
        return report, notes
    return baseline, []


def assert_no_regression(
    baseline: Comparable | str | os.PathLike[str],
    current: Comparable,
    *,
    registry: Registry | str | os.PathLike[str] | None = None,
    metric: str | None = None,
    max_drop: float = 0.01,
    alpha: float = 0.05,
    test: TestName = "randomization",
    n: int = 10_000,
    seed: int | None = 0,
    on_missing: OnMissing = "error",
    higher_is_better: bool | None = None,
) -> GateResult:
    """Raise ``AssertionError`` if ``current`` regressed from ``baseline``; else return the verdict.

    Same rule as :func:`ragmeter.stats.gate` and ``ragmeter gate``: a regression is a drop
    larger than ``max_drop`` (metric units; a rise for a lower-is-better metric such as
    latency) that is also significant (``p_value < alpha``, paired ``test`` over the
    queries both score). The assertion message says which, with the full comparison.
    ``baseline``/``current`` are reports or ``{query_id: score}`` mappings, e.g. a report
    saved with ``to_dict()`` and loaded back with ``RetrievalEvalReport.from_dict``.

    ``baseline`` may also name a saved baseline: the path of a report JSON file, or a ref
    into the run registry (``registry``, a :class:`~ragmeter.registry.Registry` or its
    path; default ``$RAGMETER_REGISTRY``, else ``./.ragmeter/runs.sqlite``): ``"pinned"``
    (the pinned run; ``"pinned:NAME"`` with several), a run name (its newest run),
    ``"NAME~1"``, or a run id. A saved run is checked like for like with ``current``
    first: when their data or settings differ the call raises
    :class:`~ragmeter.registry.IncomparableRunsError` naming what differs (not an
    ``AssertionError``: comparing unlike runs is a broken test, not a regression).

    Bad arguments raise :class:`~ragmeter.errors.InvalidInputError`, not ``AssertionError``:
    a broken comparison is an error in the test, not a regression.

    >>> before = {f"q{i}": 0.8 for i in range(30)}
    >>> after = {f"q{i}": 0.5 for i in range(30)}
    >>> assert_no_regression(before, after, metric="ndcg@10")
    Traceback (most recent call last):
    ...
    AssertionError: REGRESSION: ndcg@10 dropped by 0.3000 (0.8000 -> 0.5000), ...
    """
    __tracebackhide__ = True  # pytest shows the assertion, not this frame
    base, notes = _baseline(baseline, current, registry, metric)
    result = gate(
        base,
        current,
        metric=metric,
        max_drop=max_drop,
        alpha=alpha,
        test=test,
        n=n,
        seed=seed,
        on_missing=on_missing,
        higher_is_better=higher_is_better,
    )
    if notes:
        comparison = replace(result.comparison, warnings=(*notes, *result.comparison.warnings))
        result = replace(result, comparison=comparison)
    if not result.passed:
        raise AssertionError(str(result))
    return result
