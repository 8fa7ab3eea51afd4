"""How far two raters agree: the confusion matrix of their grades, Cohen's kappa
(unweighted, linear, quadratic) and Kendall's tau-b between two score lists.

Conventions are scikit-learn's and SciPy's, so their functions are the test oracles:

* the categories are the sorted union of the labels both raters used (or ``labels``);
  ``matrix[i][j]`` counts items the first rater put in category ``i`` and the second in
  ``j`` (:func:`sklearn.metrics.confusion_matrix`);
* weighted kappa penalises a disagreement by the distance between the two categories'
  *positions* in that list, ``|i - j|`` (linear) or ``(i - j)**2`` (quadratic), not by the
  grade values (:func:`sklearn.metrics.cohen_kappa_score`); it is undefined (NaN) when the
  expected disagreement is 0, e.g. both raters used one and the same grade only;
* tau is tau-b, which corrects for ties on either side (:func:`scipy.stats.kendalltau`'s
  default); NaN when either list is constant or has fewer than 2 items.

Pure Python: the inputs are a few hundred grades and a handful of systems.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from ragmeter.errors import InvalidInputError

__all__ = ["Weights", "cohen_kappa", "confusion_matrix", "kendall_tau"]

Weights = Literal["linear", "quadratic"] | None


def _pair_check(a: Sequence[float], b: Sequence[float], what: str) -> None:
    if len(a) != len(b):
        raise InvalidInputError(
            f"{what} needs two lists of the same length, got {len(a)} and {len(b)}"
        )


def confusion_matrix(
    first: Sequence[float], second: Sequence[float], *, labels: Sequence[float] | None = None
) -> tuple[list[float], list[list[int]]]:
    """``(labels, matrix)``: ``matrix[i][j]`` counts items ``first`` graded ``labels[i]``
    and ``second`` graded ``labels[j]``. Items with a grade outside ``labels`` are not
    counted.

    >>> confusion_matrix([0, 1, 2, 2], [0, 2, 2, 1])
    ([0, 1, 2], [[1, 0, 0], [0, 0, 1], [0, 1, 1]])
    """
    _pair_check(first, second, "confusion_matrix")
    cats = sorted(set(first) | set(second)) if labels is None else list(labels)
    index = {label: i for i, label in enumerate(cats)}
    matrix = [[0] * len(cats) for _ in cats]
    for x, y in zip(first, second, strict=True):
        if x in index and y in index:
            matrix[index[x]][index[y]] += 1
    return cats, matrix


def cohen_kappa(
    first: Sequence[float],
    second: Sequence[float],
    *,
    weights: Weights = None,
    labels: Sequence[float] | None = None,
) -> float:
    """Cohen's kappa between two raters' grades of the same items: 1 is perfect agreement,
    0 what chance would give, below 0 worse than chance.

    ``weights=None`` counts every disagreement alike; ``"linear"`` and ``"quadratic"``
    weigh it by the distance between the categories (see the module docstring). NaN when
    undefined (no expected disagreement).

    >>> cohen_kappa([0, 1, 2, 3], [0, 1, 2, 3])
    1.0
    >>> round(cohen_kappa([0, 1, 2, 3, 3], [0, 2, 2, 3, 1], weights="quadratic"), 4)  # = sklearn's
    0.5902
    """
    if weights not in (None, "linear", "quadratic"):
        raise InvalidInputError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    cats, matrix = confusion_matrix(first, second, labels=labels)
    n = sum(map(sum, matrix))
    if n == 0:
        return math.nan
    rows = [sum(r) for r in matrix]
    cols = [sum(c) for c in zip(*matrix, strict=True)]
    observed = expected = 0.0
    for i in range(len(cats)):
        for j in range(len(cats)):
            if weights is None:
                w = 0.0 if i == j else 1.0
            else:
                w = float(abs(i - j)) if weights == "linear" else float((i - j) ** 2)
            observed += w * matrix[i][j]
            expected += w * rows[i] * cols[j] / n
    if expected == 0:
        return math.nan
    return 1.0 - observed / expected


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b between two paired score lists (e.g. systems' scores under two sets
    of labels): 1 when they order the items alike, -1 when reversed; ties count on
    neither side and shrink the denominator. NaN for fewer than 2 items or a constant list.

    >>> kendall_tau([0.1, 0.2, 0.3], [0.2, 0.3, 0.4]), kendall_tau([1, 2, 3], [3, 2, 1])
    (1.0, -1.0)
    """
    _pair_check(x, y, "kendall_tau")
    n = len(x)
    concordant = 0
    ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (x[i] > x[j]) - (x[i] < x[j])
            dy = (y[i] > y[j]) - (y[i] < y[j])
            concordant += dx * dy
            ties_x += dx == 0
            ties_y += dy == 0
    pairs = n * (n - 1) // 2
    denominator = math.sqrt((pairs - ties_x) * (pairs - ties_y))
    if denominator == 0:
        return math.nan
    return max(-1.0, min(1.0, concordant / denominator))
