"""Two systems, query by query: the paired comparison (``compare``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ragmeter.errors import InvalidInputError
from ragmeter.stats._base import (
    TIE_TOLERANCE,
    Comparable,
    OnMissing,
    TestName,
    _require_numpy,
)
from ragmeter.stats._pairing import (
    _check_options,
    _default_metric,
    _extract,
    _pair,
    _pairing_warnings,
)
from ragmeter.stats._resampling import (
    _bootstrap_means,
    _bootstrap_p,
    _randomization_p,
    _std,
    _t_test_p,
)
from ragmeter.stats._result import CompareResult, QueryChange

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

__all__ = ["CompareResult", "QueryChange", "compare"]


def compare(
    a: Comparable,
    b: Comparable,
    *,
    metric: str | None = None,
    test: TestName = "randomization",
    n: int = 10_000,
    seed: int | None = 0,
    confidence: float = 0.95,
    alpha: float = 0.05,
    on_missing: OnMissing = "error",
    higher_is_better: bool | None = None,
    top: int = 5,
    label_a: str = "a",
    label_b: str = "b",
) -> CompareResult:
    """Compare ``b`` against baseline ``a``, query by query; ``mean_diff`` is ``b - a``.

    ``a`` and ``b`` are two :class:`~ragmeter.report.RetrievalEvalReport` s (compared on
    ``metric``, default ``"ndcg@10"``), two :class:`~ragmeter.report.RagEvalReport` s
    (default: the first metric of ``a``), or two ``{query_id: score}`` mappings. Scores are
    paired by id; ids scored by only one side raise :class:`~ragmeter.errors.InvalidInputError`
    naming a few of them, unless ``on_missing="intersect"`` (then they are left out and
    counted in ``only_in_a``/``only_in_b``).

    ``test``: ``"randomization"`` (default; sign flips of the paired differences, exact over
    all ``2**n_queries`` flips when that is at most ``n``), ``"bootstrap"`` (shifted paired
    bootstrap) or ``"t-test"`` (paired Student t). ``n`` resamples for the bootstrap
    interval and the resampling tests; ``seed`` makes them reproducible (``None``: fresh
    randomness). ``higher_is_better`` decides what a win is (default: from the report,
    ``True`` for retrieval metrics and plain mappings). ``top`` is how many most-moved
    queries to keep each way.

    >>> a = {"q1": 0.2, "q2": 0.5, "q3": 0.4, "q4": 0.1}
    >>> b = {"q1": 0.6, "q2": 0.5, "q3": 0.9, "q4": 0.3}
    >>> r = compare(a, b)
    >>> round(r.mean_diff, 4), r.wins, r.ties, r.losses, r.p_value  # all 16 flips: exact
    (0.275, 3, 1, 0, 0.25)
    >>> r.significant
    False
    """
    _check_options(test, n, confidence, alpha, on_missing)
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise InvalidInputError(f"top must be an int >= 0, got {top!r}")
    _require_numpy()
    import numpy as np

    key = metric
    if key is None:
        key = _default_metric(a, label_a) or _default_metric(b, label_b)
    sa, hib_a = _extract(a, key, label_a)
    sb, hib_b = _extract(b, key, label_b)
    if higher_is_better is None:
        higher_is_better = hib_a if hib_a is not None else hib_b if hib_b is not None else True
    ids, only_a, only_b = _pair(sa, sb, on_missing, label_a, label_b)

    xa = np.fromiter((sa[i] for i in ids), dtype=np.float64, count=len(ids))
    xb = np.fromiter((sb[i] for i in ids), dtype=np.float64, count=len(ids))
    d = xb - xa
    mean_diff = float(d.mean())
    boot = _bootstrap_means(d, n, seed)
    tail = (1.0 - confidence) / 2.0
    ci_low, ci_high = (float(v) for v in np.quantile(boot, [tail, 1.0 - tail]))
    p_value, exact = _p_value(test, d, n, seed, boot)
    gain = d if higher_is_better else -d
    wins = int(np.count_nonzero(gain > TIE_TOLERANCE))
    losses = int(np.count_nonzero(gain < -TIE_TOLERANCE))
    improved, regressed = _most_moved(ids, xa, xb, gain, top)
    notes = _pairing_warnings(a, b, ids, d, (only_a, only_b), (label_a, label_b))
    return CompareResult(
        metric=key,
        test=test,
        n=len(ids),
        mean_a=float(xa.mean()),
        mean_b=float(xb.mean()),
        mean_diff=mean_diff,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=float(p_value),
        effect_size=_effect_size(mean_diff, _std(d)),
        wins=wins,
        ties=len(ids) - wins - losses,
        losses=losses,
        higher_is_better=higher_is_better,
        confidence=confidence,
        alpha=alpha,
        n_resamples=n,
        seed=seed,
        exact=exact,
        improved=improved,
        regressed=regressed,
        only_in_a=len(only_a),
        only_in_b=len(only_b),
        label_a=label_a,
        label_b=label_b,
        warnings=tuple(notes),
    )


def _p_value(
    test: str, d: FloatArray, n: int, seed: int | None, boot: FloatArray
) -> tuple[float, bool]:
    """``(two-sided p-value, whether it is exact)`` of the paired differences ``d`` under
    ``test``; ``boot`` holds the bootstrap means already drawn for the interval."""
    if test == "randomization":
        return _randomization_p(d, n, seed)
    if test == "bootstrap":
        return _bootstrap_p(d, boot), False
    return _t_test_p(d), False


def _effect_size(mean_diff: float, sd: float) -> float:
    """Cohen's d_z: ``mean_diff / sd``, ``±inf`` when every item moved by the same amount."""
    if sd > 0:
        return mean_diff / sd
    return 0.0 if mean_diff == 0 else math.copysign(math.inf, mean_diff)


def _most_moved(
    ids: list[str], xa: FloatArray, xb: FloatArray, gain: FloatArray, top: int
) -> tuple[tuple[QueryChange, ...], tuple[QueryChange, ...]]:
    """The ``top`` items that improved most and the ``top`` that regressed most (``gain``
    is the difference in the metric's direction; ties broken by id)."""
    order = sorted(range(len(ids)), key=lambda i: (-float(gain[i]), ids[i]))
    improved = [i for i in order[:top] if gain[i] > TIE_TOLERANCE]
    worst = sorted(range(len(ids)), key=lambda i: (float(gain[i]), ids[i]))
    regressed = [i for i in worst[:top] if gain[i] < -TIE_TOLERANCE]
    return (
        tuple(QueryChange(ids[i], float(xa[i]), float(xb[i])) for i in improved),
        tuple(QueryChange(ids[i], float(xa[i]), float(xb[i])) for i in regressed),
    )
