"""The math of the embedding metrics: cosine similarity, thresholds and best matches.

Conventions (every embedding metric uses these, and only these):

* **cosine of the raw vectors**: ``cos(a, b) = a.b / (|a| |b|)``, which equals the dot
  product of the L2-normalised vectors (Ragas normalises then takes the dot product,
  LlamaIndex divides the dot product by the norms, Haystack's bi-encoder calls
  ``sentence_transformers.util.cos_sim``: the same number up to rounding). The result is
  clipped to ``[-1, 1]`` (rounding can put it a hair outside); it may be negative.
* vectors are scaled by their largest component first (the cosine does not change), so
  tiny or huge components neither underflow nor overflow.
* **a zero vector** has no direction: its cosine with anything is defined as ``0.0`` here
  (Ragas and LlamaIndex divide by zero and get NaN; ``cos_sim`` gets 0 too); the metric
  counts it as a note on the report.
* **threshold**: ``score = 1.0 if cos >= threshold else 0.0``. Ragas' ``threshold`` and
  LlamaIndex's ``passing`` also use ``>=``; Ragas ignores a threshold of ``0`` (``if
  self.threshold:``), ragmeter does not. Haystack's SAS has no threshold.
* **text units**: a text's sentences are :func:`ragmeter.metrics.faithfulness.extract_claims`
  (the splitter of the lexical faithfulness metric); a text with no such sentence but some
  non-blank characters is one sentence, a blank text has none.

>>> cosine([1.0, 0.0], [1.0, 1.0])
0.7071067811865475
>>> cosine([0.0, 0.0], [1.0, 1.0]), passes(0.8, 0.8), passes(0.79, 0.8)
(0.0, True, False)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragmeter.errors import InvalidInputError
from ragmeter.metrics.faithfulness import extract_claims

__all__ = [
    "DEFAULT_MATCH_THRESHOLD",
    "best_matches",
    "check_threshold",
    "cosine",
    "cosines",
    "finite",
    "is_zero",
    "passes",
    "sentences",
]

DEFAULT_MATCH_THRESHOLD: float = 0.8
"""When a sentence or a context *matches* for the context metrics: cosine >= 0.8 (the
default ``similarity_threshold`` of LlamaIndex's ``SemanticSimilarityEvaluator``). The
scale of cosines depends on the model: calibrate it on a few labelled pairs of yours."""

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float64]
else:
    Matrix = Any  # numpy is imported when a metric runs, not with ``import ragmeter``


def check_threshold(threshold: object, *, name: str = "threshold") -> float | None:
    """``threshold`` as a float in ``[-1, 1]`` (or ``None``); :class:`InvalidInputError`
    otherwise.

    >>> check_threshold(0.5), check_threshold(None)
    (0.5, None)
    """
    if threshold is None:
        return None
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not -1.0 <= threshold <= 1.0
    ):
        raise InvalidInputError(f"{name} must be a cosine in [-1, 1] or None, got {threshold!r}")
    return float(threshold)


def is_zero(vector: Sequence[float] | Matrix) -> bool:
    """True when every component is 0 (the vector has no direction)."""
    return not any(vector)


def _scaled(vectors: Matrix) -> Matrix:
    """Each vector (each row of a matrix) divided by its largest absolute component: the
    same direction, and squares that neither underflow (1e-200) nor overflow (1e200)."""
    import numpy as np

    peak = np.abs(vectors).max(axis=-1, keepdims=True)
    scaled: Matrix = np.divide(vectors, peak, out=np.zeros_like(vectors), where=peak > 0)
    return scaled


def cosine(a: Sequence[float] | Matrix, b: Sequence[float] | Matrix) -> float:
    """Cosine similarity of two vectors of one length, clipped to ``[-1, 1]``; ``0.0``
    when either is a zero vector (see the module docstring)."""
    import numpy as np

    x = _scaled(np.asarray(a, dtype=np.float64))
    y = _scaled(np.asarray(b, dtype=np.float64))
    # sqrt(|x|^2 |y|^2) rather than |x| |y|: a vector's cosine with itself is then exactly
    # 1.0 (the square root of a rounded square is the number again)
    norms = math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y)))
    if norms == 0.0:
        return 0.0
    value = float(np.dot(x, y)) / norms
    return min(1.0, max(-1.0, value))


PAIRS_PER_PASS = 4096
"""Pairs :func:`cosines` takes in one numpy pass (bounds its memory to a few MB)."""


def cosines(vectors: Matrix, left: Sequence[int], right: Sequence[int]) -> list[float]:
    """The cosine of each pair of rows ``(vectors[left[k]], vectors[right[k]])``, as
    :func:`cosine` gives it for that pair (same scaling, zero vectors and clipping; equal to
    it up to the order of the float additions, ~1e-16), in vectorised passes: each row is
    scaled and its squared norm computed once, however many pairs it is in.

    >>> import numpy as np
    >>> cosines(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]), [0, 1, 0], [1, 1, 2])
    [0.7071067811865475, 1.0, 0.0]
    """
    import numpy as np

    if len(left) != len(right):
        raise InvalidInputError(f"cosines got {len(left)} left rows for {len(right)} right rows")
    if not left:
        return []
    scaled = _scaled(np.asarray(vectors, dtype=np.float64))
    squares = np.einsum("ij,ij->i", scaled, scaled)
    out: list[float] = []
    for start in range(0, len(left), PAIRS_PER_PASS):
        a = np.asarray(left[start : start + PAIRS_PER_PASS], dtype=np.intp)
        b = np.asarray(right[start : start + PAIRS_PER_PASS], dtype=np.intp)
        dots = np.einsum("ij,ij->i", scaled[a], scaled[b])
        norms = np.sqrt(squares[a] * squares[b])
        values = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
        out.extend(np.clip(values, -1.0, 1.0).tolist())
    return out


def passes(similarity: float, threshold: float) -> bool:
    """Whether ``similarity`` reaches ``threshold`` (``>=``, as Ragas and LlamaIndex)."""
    return similarity >= threshold


def best_matches(rows: Matrix, columns: Matrix) -> list[float]:
    """For each row vector, its highest cosine with any column vector (``0.0`` when there
    are no columns). A cosine with a zero vector is 0.0, as in :func:`cosine`.

    >>> import numpy as np
    >>> best_matches(np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([[1.0, 1.0], [0.0, 2.0]]))
    [0.7071067811865475, 0.0]
    """
    import numpy as np

    if rows.shape[0] == 0 or columns.shape[0] == 0:
        return [0.0] * rows.shape[0]
    rows, columns = _scaled(rows), _scaled(columns)
    norms = np.sqrt(
        np.outer(np.einsum("ij,ij->i", rows, rows), np.einsum("ij,ij->i", columns, columns))
    )
    products = rows @ columns.T
    sims = np.divide(products, norms, out=np.zeros_like(products), where=norms > 0)
    return [float(x) for x in np.clip(sims, -1.0, 1.0).max(axis=1)]


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` the context metrics compare (see the module docstring).

    >>> sentences("Paris is in France. Lyon is bigger; pi is 3.14.")
    ['Paris is in France', 'Lyon is bigger', 'pi is 3.14']
    >>> sentences("Yes."), sentences("   ")
    (['Yes.'], [])
    """
    stripped = text.strip()
    if not stripped:
        return []
    return extract_claims(stripped) or [stripped]


def finite(vector: Sequence[float]) -> bool:
    """True when every component is a finite number.

    >>> finite([1.0, -2.0]), finite([1.0, float("nan")]), finite([1e308, 1e308])
    (True, False, True)
    """
    # a finite sum means finite parts (a NaN or infinity propagates); a sum that overflowed
    # is checked part by part
    return math.isfinite(sum(vector)) or all(math.isfinite(x) for x in vector)
