"""Is the winner real? Paired comparison of two systems, query by query.

Two systems scored on the same queries give two numbers per query. :func:`compare` pairs
them by query id and asks whether the mean difference is larger than the query-to-query
noise, the way IR evaluation does it (Smucker, Allan & Carterette, CIKM 2007):

* ``mean_diff`` is always **b minus a** (``a`` the baseline, ``b`` the candidate), in the
  metric's own units, whatever the metric's direction;
* ``ci_low``/``ci_high`` is a paired bootstrap percentile interval of that mean;
* ``p_value`` is two-sided, from a paired randomization (sign-flip) test by default, a
  paired bootstrap test, or a paired t-test;
* ``wins``/``ties``/``losses`` count queries where ``b`` is better / equal / worse, taking
  the metric's direction into account (lower latency is a win).

:func:`compare_many` compares several systems against one baseline with Holm–Bonferroni
adjusted p-values; :func:`gate` turns a comparison into a pass/fail regression decision.
NumPy is imported only when a comparison runs, so ``import ragmeter`` stays light.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ragmeter.errors import InvalidInputError, MissingDependencyError, some_ids
from ragmeter.report import RagEvalReport, RetrievalEvalReport

if TYPE_CHECKING:
    import os
    from pathlib import Path

    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

__all__ = [
    "PRIMARY_RETRIEVAL_METRIC",
    "TESTS",
    "CompareResult",
    "ComparisonRow",
    "ComparisonTable",
    "GateResult",
    "QueryChange",
    "compare",
    "compare_many",
    "gate",
    "holm_bonferroni",
]

Comparable = RetrievalEvalReport | RagEvalReport | Mapping[str, float]
"""What :func:`compare` accepts on each side."""
TestName = Literal["randomization", "bootstrap", "t-test"]
OnMissing = Literal["error", "intersect"]

TESTS: tuple[str, ...] = ("randomization", "bootstrap", "t-test")
PRIMARY_RETRIEVAL_METRIC = "ndcg@10"
"""The metric a :class:`RetrievalEvalReport` is compared on when ``metric=None``."""

TIE_TOLERANCE = 1e-12
"""Two per-query scores closer than this count as a tie."""
_CHUNK_ELEMENTS = 2_000_000  # resamples are drawn in blocks of about this many numbers
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


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class QueryChange:
    """One query's scores under both systems; ``diff`` is ``b - a``."""

    query_id: str
    a: float
    b: float

    @property
    def diff(self) -> float:
        """``b - a`` for this query."""
        return self.b - self.a

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return {"query_id": self.query_id, "a": self.a, "b": self.b, "diff": self.diff}


def _json_float(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _f(value: float, digits: int = 4) -> str:
    return f"{value:+.{digits}f}"


@dataclass(frozen=True)
class CompareResult:
    """The outcome of :func:`compare`: is ``b`` really different from ``a``?

    ``mean_diff`` is the mean of ``b - a`` over the ``n`` paired queries (positive: ``b``
    scored higher, whatever the metric's direction). ``ci_low``/``ci_high`` bound it with
    ``confidence`` (paired bootstrap, percentile method). ``p_value`` (two-sided) is the
    chance of a mean difference at least this large if the two systems were
    interchangeable; ``exact`` says it came from all ``2**n`` sign flips rather than a
    random sample of them. ``effect_size`` is Cohen's d_z, ``mean_diff`` over the standard
    deviation of the differences (``±inf`` when every query moved by the same amount).
    ``wins``/``ties``/``losses`` count queries where ``b`` is better/equal/worse under
    ``higher_is_better``; ``improved``/``regressed`` list the queries that moved most.
    ``warnings`` say when the two sides do not score the same queries the same way: a judged
    query one run has no ranking for, which its report scored 0 (``missing_queries="zero"``,
    = trec_eval -c) and which is therefore paired as a 0, or queries left out of the pairing
    (``on_missing="intersect"``); each gives the counts per side and the convention applied.
    """

    metric: str | None
    test: str
    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    ci_low: float
    ci_high: float
    p_value: float
    effect_size: float
    wins: int
    ties: int
    losses: int
    higher_is_better: bool = True
    confidence: float = 0.95
    alpha: float = 0.05
    n_resamples: int = 10_000
    seed: int | None = 0
    exact: bool = False
    improved: tuple[QueryChange, ...] = ()
    regressed: tuple[QueryChange, ...] = ()
    only_in_a: int = 0
    only_in_b: int = 0
    label_a: str = "a"
    label_b: str = "b"
    warnings: tuple[str, ...] = ()

    @property
    def significant(self) -> bool:
        """``p_value < alpha``."""
        return self.p_value < self.alpha

    @property
    def b_is_better(self) -> bool:
        """Whether ``b``'s mean is better than ``a``'s under the metric's direction."""
        return self.mean_diff > 0 if self.higher_is_better else self.mean_diff < 0

    def verdict(self) -> str:
        """One plain sentence: which system is better, and whether that is significant."""
        a, b = self.label_a, self.label_b
        p = _p_text(self.p_value)
        if self.mean_diff == 0 or not self.significant:
            return (
                f"no significant difference between {b} and {a} "
                f"(p = {p} >= alpha {self.alpha:g}); the gap may be noise"
            )
        word = "better" if self.b_is_better else "worse"
        return f"{b} is significantly {word} than {a} (p = {p} < alpha {self.alpha:g})"

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready; a non-finite effect size becomes ``None``)."""
        return {
            "metric": self.metric,
            "test": self.test,
            "n": self.n,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "mean_diff": self.mean_diff,
            "diff_direction": f"{self.label_b} - {self.label_a}",
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "p_value": self.p_value,
            "alpha": self.alpha,
            "significant": self.significant,
            "exact": self.exact,
            "effect_size": _json_float(self.effect_size),
            "wins": self.wins,
            "ties": self.ties,
            "losses": self.losses,
            "higher_is_better": self.higher_is_better,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "improved": [c.to_dict() for c in self.improved],
            "regressed": [c.to_dict() for c in self.regressed],
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "label_a": self.label_a,
            "label_b": self.label_b,
            "verdict": self.verdict(),
            "warnings": list(self.warnings),
        }

    def __str__(self) -> str:
        a, b = self.label_a, self.label_b
        metric = self.metric or "score"
        direction = "higher" if self.higher_is_better else "lower"
        width = max(len(a), len(b), 12)
        pct = f"{self.confidence * 100:g}%"
        resamples = (
            f"all {2**self.n} sign flips (exact)"
            if self.exact
            else ("t distribution" if self.test == "t-test" else f"{self.n_resamples} resamples")
        )
        if self.test != "t-test" and not self.exact and self.p_value <= 1 / (self.n_resamples + 1):
            resamples += "; the smallest p this many resamples can show"
        lines = [
            f"{metric}: {b} vs {a} over {self.n} paired queries ({direction} is better)",
            f"  {a:<{width}}  {self.mean_a:.4f}",
            f"  {b:<{width}}  {self.mean_b:.4f}",
            f"  {'difference':<{width}}  {_f(self.mean_diff)}  ({b} - {a}; {pct} CI "
            f"[{_f(self.ci_low)}, {_f(self.ci_high)}], paired bootstrap)",
            f"  {'p-value':<{width}}  {_p_text(self.p_value)}  "
            f"({_TEST_LABELS.get(self.test, self.test)}, two-sided, {resamples})",
            f"  {'effect size':<{width}}  d_z = {self.effect_size:+.2f}",
            f"  {'per query':<{width}}  {b} better {self.wins} · tied {self.ties} · "
            f"{b} worse {self.losses}",
            f"  {'verdict':<{width}}  {self.verdict()}",
        ]
        lines.extend(f"  warning: {w}" for w in self.warnings)
        for title, changes in (
            ("improved most", self.improved),
            ("regressed most", self.regressed),
        ):
            if changes:
                lines.append(f"  {title} ({b} - {a}):")
                w = max(len(c.query_id) for c in changes)
                lines.extend(
                    f"    {c.query_id:<{w}}  {c.a:.4f} -> {c.b:.4f}  ({_f(c.diff)})"
                    for c in changes
                )
        return "\n".join(lines)

    def to_html(self, path: str | os.PathLike[str], *, a: Any, b: Any, **options: Any) -> Path:
        """Deprecated: :func:`ragmeter.html.write_comparison` (same options).

        Writes this comparison as one self-contained, offline HTML page; returns its path.

        ``a`` and ``b`` are what was compared (two reports or two ``{query_id: score}``
        mappings): the page shows the per-query scatter of ``b`` against ``a``, the win,
        tie and loss counts, the interval and p-value, and the queries that moved most,
        each opening both drill-downs side by side. ``options``: ``run_a``, ``run_b``,
        ``qrels``, ``queries``, ``corpus`` (retrieval), ``samples_a``, ``samples_b`` (RAG),
        ``title``, ``dataset``, ``note``, ``depth``, ``max_bytes``; see
        :func:`ragmeter.html.write_comparison`.
        """
        warnings.warn(
            "CompareResult.to_html is deprecated: pages are written by ragmeter.html; call "
            "ragmeter.html.write_comparison(result, path, a=..., b=..., ...) (same options; "
            "to_html will be "
            "removed in a future release)",
            DeprecationWarning,
            stacklevel=2,
        )
        from ragmeter.html import write_comparison

        return write_comparison(self, path, a=a, b=b, **options)


def _p_text(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


# --------------------------------------------------------------------------- inputs


def _default_metric(x: object, which: str) -> str | None:
    if isinstance(x, RetrievalEvalReport):
        return PRIMARY_RETRIEVAL_METRIC
    if isinstance(x, RagEvalReport):
        if not x.metrics:
            raise InvalidInputError(f"report {which} has no metrics to compare")
        return next(iter(x.metrics))
    return None


def _check_score(value: object, qid: str, which: str) -> float:
    if not isinstance(value, numbers.Real):
        raise InvalidInputError(
            f"the score for query {qid!r} in {which} is {value!r}, not a number; "
            "pass {query_id: score} with float scores"
        )
    out = float(value)
    if not math.isfinite(out):
        raise InvalidInputError(
            f"the score for query {qid!r} in {which} is {out!r}; a paired test needs a finite "
            "number for every query (fix the metric, or leave the query out of both)"
        )
    return out


def _extract(x: object, key: str | None, which: str) -> tuple[dict[str, float], bool | None]:
    """``({id: score}, higher_is_better or None if unknown)`` for one side."""
    if isinstance(x, (RetrievalEvalReport, RagEvalReport)) and key is None:
        raise InvalidInputError(f"name the metric to compare {which} on, e.g. metric='ndcg@10'")
    if isinstance(x, RetrievalEvalReport):
        key = str(key)
        if not x.per_query:
            raise InvalidInputError(
                f"report {which} has no per-query scores (per_query is empty); a paired test "
                "needs them: keep the report from evaluate_run or its full to_dict() JSON"
            )
        scores = x.scores(key)
        if not scores:
            raise InvalidInputError(
                f"report {which} has no per-query scores for {key!r}; its metrics are: "
                f"{', '.join(x.metrics) or 'none'}"
            )
        return {q: _check_score(v, q, which) for q, v in scores.items()}, True
    if isinstance(x, RagEvalReport):
        key = str(key)
        scores = x.scores(key)
        if not scores:
            raise InvalidInputError(
                f"report {which} has no per-sample scores for {key!r}; its metrics are: "
                f"{', '.join(x.metrics) or 'none'}"
            )
        return {q: _check_score(v, q, which) for q, v in scores.items()}, x.higher_is_better.get(
            key
        )
    if isinstance(x, Mapping):
        return {str(q): _check_score(v, str(q), which) for q, v in x.items()}, None
    raise InvalidInputError(
        f"{which} must be a RetrievalEvalReport, a RagEvalReport or a {{query_id: score}} "
        f"mapping, got {type(x).__name__}"
    )


def _pair(
    sa: dict[str, float], sb: dict[str, float], on_missing: str, la: str, lb: str
) -> tuple[list[str], set[str], set[str]]:
    only_a = sa.keys() - sb.keys()
    only_b = sb.keys() - sa.keys()
    shared = sa.keys() & sb.keys()
    if (only_a or only_b) and on_missing == "error":
        parts = []
        if only_a:
            parts.append(f"{len(only_a)} only in {la} (e.g. {some_ids(sorted(only_a))})")
        if only_b:
            parts.append(f"{len(only_b)} only in {lb} (e.g. {some_ids(sorted(only_b))})")
        raise InvalidInputError(
            f"{la} and {lb} do not score the same queries: {'; '.join(parts)}. Score both "
            f"against the same qrels, or pass on_missing='intersect' to compare only the "
            f"{len(shared)} queries both score."
        )
    if len(shared) < 2:
        raise InvalidInputError(
            f"a paired comparison needs at least 2 queries scored by both {la} and {lb}, "
            f"got {len(shared)}"
        )
    return sorted(shared), set(only_a), set(only_b)


def _unranked(x: object) -> tuple[set[str], bool]:
    """``(judged queries the run had no ranking for, whether that is known)`` of one side:
    known for a :class:`RetrievalEvalReport` (its ``missing_queries``), not for the rest."""
    if isinstance(x, RetrievalEvalReport):
        return set(x.missing_queries), True
    return set(), False


def _pairing_warnings(
    a: object,
    b: object,
    ids: list[str],
    d: FloatArray,
    only: tuple[set[str], set[str]],
    labels: tuple[str, str],
) -> list[str]:
    """What :func:`compare` says when the sides do not score the same queries the same way.

    A paired query that one side's report lists in ``missing_queries`` (its run has no
    ranking for it) was scored 0 by that report (``missing_queries="zero"``) and is paired
    as a 0; a query scored by one side only was left out (``on_missing="intersect"``).
    """
    la, lb = labels
    unranked = (_unranked(a), _unranked(b))
    n = len(ids)
    notes: list[str] = []
    for side in (0, 1):
        mine, (theirs, known) = unranked[side][0], unranked[1 - side]
        lx, ly = labels[side], labels[1 - side]
        zeroed = [i for i, q in enumerate(ids) if q in mine and q not in theirs]
        if not zeroed:
            continue
        others = "ranks" if known else "scores"
        rest = [i for i, q in enumerate(ids) if q not in unranked[0][0] | unranked[1][0]]
        common = (
            f"; over the {len(rest)} paired queries both rank, the mean difference is "
            f"{float(d[rest].mean()):+.4f}"
            if rest and known
            else ""
        )
        notes.append(
            f"{lx}'s run has no ranking for {len(zeroed)} of the {n} paired queries that "
            f"{ly} {others} (e.g. {some_ids(ids[i] for i in zeroed)}): {lx}'s report scored "
            "them 0 (missing_queries='zero', = trec_eval -c) and they are paired as 0, so "
            f"they count against {lx} in the means, the wins and losses and the test; they "
            f"make up {float(d[zeroed].sum()) / n:+.4f} of the {float(d.mean()):+.4f} mean "
            f"difference ({lb} - {la}){common}. To compare only the queries both rank, "
            "score both with missing_queries='skip' (ragmeter compare: --missing-queries "
            "skip) and pass on_missing='intersect'"
        )
    both = sum(1 for q in ids if q in unranked[0][0] and q in unranked[1][0])
    if both:
        notes.append(
            f"{both} of the {n} paired queries have no ranking in either run: both reports "
            "scored them 0 (missing_queries='zero', = trec_eval -c), so they are paired as "
            "ties"
        )
    only_a, only_b = only
    if only_a or only_b:
        parts = []
        for side, (lx, ly, ids_x) in enumerate(((la, lb, only_a), (lb, la, only_b))):
            if not ids_x:
                continue
            part = f"{len(ids_x)} only in {lx} (e.g. {some_ids(sorted(ids_x))}"
            unranked_y, known = unranked[1 - side]
            skipped = len(ids_x & unranked_y)
            if known and skipped:
                part += (
                    f"; {ly}'s run has no ranking for {skipped} of them, which its report "
                    "left out: missing_queries='skip'"
                )
            parts.append(part + ")")
        notes.append(
            f"left out {len(only_a)} queries only in {la} and {len(only_b)} only in {lb} "
            f"(on_missing='intersect'): {'; '.join(parts)}. The comparison is paired on the "
            f"{n} queries both score; the left-out ones count on neither side"
        )
    return notes


def _check_options(test: str, n: object, confidence: float, alpha: float, on_missing: str) -> None:
    if test not in TESTS:
        raise InvalidInputError(f"test must be one of {', '.join(map(repr, TESTS))}, got {test!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"n (the number of resamples) must be an int >= 1, got {n!r}")
    if not 0 < confidence < 1:
        raise InvalidInputError(f"confidence must be between 0 and 1, got {confidence!r}")
    if not 0 < alpha < 1:
        raise InvalidInputError(f"alpha must be between 0 and 1, got {alpha!r}")
    if on_missing not in ("error", "intersect"):
        raise InvalidInputError(f"on_missing must be 'error' or 'intersect', got {on_missing!r}")


# --------------------------------------------------------------------------- resampling


def _tolerance(d: FloatArray) -> float:
    # Null statistics are sums in another order than the observed one; values equal in
    # exact arithmetic may differ by a few ulps. 1e-9 of the mean |d| absorbs that and is
    # far below any real gap between distinct values of the statistic.
    import numpy as np

    return 1e-9 * float(np.mean(np.abs(d)))


def _bootstrap_means(d: FloatArray, n_resamples: int, seed: int | None) -> FloatArray:
    """Means of ``n_resamples`` resamples of ``d`` (with replacement), in blocks.

    The indices are ``default_rng(seed).integers(0, len(d), (n_resamples, len(d)))``
    drawn block by block, the same stream ``scipy.stats.bootstrap(..., rng=seed)`` uses.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    m = d.size
    rows = max(1, _CHUNK_ELEMENTS // m)
    out = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, rows):
        stop = min(start + rows, n_resamples)
        idx = rng.integers(0, m, size=(stop - start, m))
        out[start:stop] = np.take(d, idx).mean(axis=1)
    return out


def _randomization_p(d: FloatArray, n_resamples: int, seed: int | None) -> tuple[float, bool]:
    """Two-sided sign-flip p-value of the mean of ``d``; exact when ``2**m <= n_resamples``.

    Under the null the sign of each paired difference is a fair coin, so the mean of
    ``d`` with random signs is the null distribution. Monte Carlo p-values are
    ``(count + 1) / (n_resamples + 1)``, counting the observed assignment, so never 0.
    """
    import numpy as np

    m = d.size
    total = float(d.sum())
    observed = abs(total) / m
    threshold = observed - _tolerance(d)
    rows = max(1, _CHUNK_ELEMENTS // m)
    count = 0
    if m < 63 and 2**m <= n_resamples:
        shifts = np.arange(m, dtype=np.uint64)
        n_all = 2**m
        for start in range(0, n_all, rows):
            codes = np.arange(start, min(start + rows, n_all), dtype=np.uint64)
            bits = ((codes[:, None] >> shifts) & np.uint64(1)).astype(np.float64)
            null = (total - 2.0 * (bits @ d)) / m
            count += int(np.count_nonzero(np.abs(null) >= threshold))
        return count / n_all, True
    rng = np.random.default_rng(seed)
    n_bytes = (m + 7) // 8
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        raw = rng.integers(0, 256, size=(size, n_bytes), dtype=np.uint8)
        # float64 bits: a float64 @ float64 product uses BLAS, uint8 @ float64 does not.
        bits = np.unpackbits(raw, axis=1, count=m).astype(np.float64)
        null = (total - 2.0 * (bits @ d)) / m
        count += int(np.count_nonzero(np.abs(null) >= threshold))
    return (count + 1) / (n_resamples + 1), False


def _bootstrap_p(d: FloatArray, boot: FloatArray) -> float:
    """Two-sided paired bootstrap test of mean 0 (Efron & Tibshirani's shifted bootstrap).

    Resampling ``d - mean(d)`` (the null made true) gives means ``boot - mean(d)``; the
    p-value is ``(count(|boot - mean(d)| >= |mean(d)|) + 1) / (len(boot) + 1)``.
    """
    import numpy as np

    mean = float(d.mean())
    count = int(np.count_nonzero(np.abs(boot - mean) >= abs(mean) - _tolerance(d)))
    return (count + 1) / (boot.size + 1)


def _std(d: FloatArray) -> float:
    """Sample standard deviation, 0.0 when it is only rounding noise (constant differences)."""
    sd = float(d.std(ddof=1))
    return 0.0 if sd <= _tolerance(d) else sd


def _t_test_p(d: FloatArray) -> float:
    """Two-sided paired t-test p-value (Student t, ``n - 1`` degrees of freedom).

    When every difference is the same (up to rounding), ``t`` is undefined: ``1.0`` if
    they are all 0, else ``0.0`` (a constant non-zero shift), where SciPy returns NaN.
    """
    m = d.size
    mean = float(d.mean())
    sd = _std(d)
    if sd == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = mean / (sd / math.sqrt(m))
    return _student_t_two_sided(t, m - 1)


def _student_t_two_sided(t: float, df: float) -> float:
    """Two-sided tail probability ``P(|T| >= |t|)`` of Student's t with ``df`` degrees of freedom.

    Computed as the regularized incomplete beta ``I_{df/(df+t^2)}(df/2, 1/2)``.

    >>> round(_student_t_two_sided(2.0, 10), 6)
    0.073388
    >>> _student_t_two_sided(0.0, 5)
    1.0
    """
    if df <= 0:
        raise InvalidInputError(f"df must be > 0, got {df!r}")
    t2 = t * t
    if t2 == 0.0:
        return 1.0
    if math.isinf(t2):
        return 0.0
    x = df / (df + t2)
    y = t2 / (df + t2)  # 1 - x without cancellation
    return min(1.0, _betainc_reg(df / 2.0, 0.5, x, y))


def _betainc_reg(a: float, b: float, x: float, y: float) -> float:
    """Regularized incomplete beta ``I_x(a, b)`` with ``y = 1 - x`` (continued fraction)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_cf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_cf(b, a, y) / b


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta, evaluated by the modified Lentz method."""
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for i in range(1, 100_000):
        two_i = 2 * i
        for num in (
            i * (b - i) * x / ((a + two_i - 1.0) * (a + two_i)),
            -(a + i) * (a + b + i) * x / ((a + two_i) * (a + two_i + 1.0)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            step = d * c
            h *= step
        if abs(step - 1.0) < 1e-15:
            break
    return h


# --------------------------------------------------------------------------- compare


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
    exact = False
    if test == "randomization":
        p_value, exact = _randomization_p(d, n, seed)
    elif test == "bootstrap":
        p_value = _bootstrap_p(d, boot)
    else:
        p_value = _t_test_p(d)

    sd = _std(d)
    effect = (
        mean_diff / sd
        if sd > 0
        else (0.0 if mean_diff == 0 else math.copysign(math.inf, mean_diff))
    )
    gain = d if higher_is_better else -d
    wins = int(np.count_nonzero(gain > TIE_TOLERANCE))
    losses = int(np.count_nonzero(gain < -TIE_TOLERANCE))
    order = sorted(range(len(ids)), key=lambda i: (-float(gain[i]), ids[i]))
    improved = [i for i in order[:top] if gain[i] > TIE_TOLERANCE]
    worst = sorted(range(len(ids)), key=lambda i: (float(gain[i]), ids[i]))
    regressed = [i for i in worst[:top] if gain[i] < -TIE_TOLERANCE]
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
        effect_size=effect,
        wins=wins,
        ties=len(ids) - wins - losses,
        losses=losses,
        higher_is_better=higher_is_better,
        confidence=confidence,
        alpha=alpha,
        n_resamples=n,
        seed=seed,
        exact=exact,
        improved=tuple(QueryChange(ids[i], float(xa[i]), float(xb[i])) for i in improved),
        regressed=tuple(QueryChange(ids[i], float(xa[i]), float(xb[i])) for i in regressed),
        only_in_a=len(only_a),
        only_in_b=len(only_b),
        label_a=label_a,
        label_b=label_b,
        warnings=tuple(notes),
    )


# --------------------------------------------------------------------------- many systems


def holm_bonferroni(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order.

    Sort the ``m`` p-values ascending; the ``i``-th smallest (1-based) is multiplied by
    ``m - i + 1``, capped at 1, and made non-decreasing along the sorted order. Rejecting
    every hypothesis whose adjusted p-value is below ``alpha`` controls the family-wise
    error rate at ``alpha`` (Holm 1979), and is never less powerful than Bonferroni.

    >>> holm_bonferroni([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    ps = [float(p) for p in p_values]
    for i, p in enumerate(ps):
        if not 0.0 <= p <= 1.0:
            raise InvalidInputError(f"p_values[{i}] must be in [0, 1], got {p!r}")
    m = len(ps)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: ps[j])):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class ComparisonRow:
    """One system against the baseline: its :class:`CompareResult` and Holm-adjusted p."""

    name: str
    result: CompareResult
    p_adjusted: float

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return {"name": self.name, "p_adjusted": self.p_adjusted, **self.result.to_dict()}


@dataclass(frozen=True)
class ComparisonTable:
    """The outcome of :func:`compare_many`: every system against one baseline.

    ``p_adjusted`` on each row is Holm–Bonferroni over the ``len(rows)`` comparisons; a
    row is significant when ``p_adjusted < alpha``.
    """

    baseline: str
    metric: str | None
    test: str
    alpha: float
    rows: tuple[ComparisonRow, ...]

    def significant(self) -> list[str]:
        """Names of the systems that differ significantly from the baseline (adjusted)."""
        return [r.name for r in self.rows if r.p_adjusted < self.alpha]

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return {
            "baseline": self.baseline,
            "metric": self.metric,
            "test": self.test,
            "alpha": self.alpha,
            "correction": "holm-bonferroni",
            "rows": [r.to_dict() for r in self.rows],
        }

    def _cells(self) -> list[list[str]]:
        first = self.rows[0].result
        pct = f"{first.confidence * 100:g}% CI"
        cells = [["system", "mean", "diff", pct, "p", "p (Holm)", "W/T/L", ""]]
        cells.append([f"{self.baseline} (baseline)", f"{first.mean_a:.4f}", "", "", "", "", "", ""])
        for row in self.rows:
            r = row.result
            cells.append(
                [
                    row.name,
                    f"{r.mean_b:.4f}",
                    _f(r.mean_diff),
                    f"[{_f(r.ci_low)}, {_f(r.ci_high)}]",
                    _p_text(r.p_value),
                    _p_text(row.p_adjusted),
                    f"{r.wins}/{r.ties}/{r.losses}",
                    ("better" if r.b_is_better else "worse") + " *"
                    if row.p_adjusted < self.alpha
                    else "",
                ]
            )
        return cells

    def _title(self) -> str:
        first = self.rows[0].result
        return (
            f"{self.metric or 'score'} against {self.baseline!r} over {first.n} paired queries "
            f"({_TEST_LABELS[self.test]}; Holm–Bonferroni over {len(self.rows)} comparisons; "
            f"* = significant at alpha {self.alpha:g})"
        )

    def to_markdown(self) -> str:
        """The table as markdown."""
        cells = self._cells()
        lines = ["| " + " | ".join(cells[0]) + " |", "|---" + "|---:" * 6 + "|---|"]
        lines.extend("| " + " | ".join(c) + " |" for c in cells[1:])
        return "\n".join(lines)

    def __str__(self) -> str:
        cells = self._cells()
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        out = [self._title()]
        for j, row in enumerate(cells):
            out.append(
                "  ".join(
                    c.ljust(w) if i in (0, 7) else c.rjust(w)
                    for i, (c, w) in enumerate(zip(row, widths, strict=True))
                ).rstrip()
            )
            if j == 0:
                out.append("  ".join("-" * w for w in widths[:-1]))
        out.extend(f"warning: {row.name}: {w}" for row in self.rows for w in row.result.warnings)
        return "\n".join(out)


def compare_many(
    systems: Mapping[str, Comparable],
    *,
    baseline: str | None = None,
    metric: str | None = None,
    test: TestName = "randomization",
    n: int = 10_000,
    seed: int | None = 0,
    confidence: float = 0.95,
    alpha: float = 0.05,
    on_missing: OnMissing = "error",
    higher_is_better: bool | None = None,
    top: int = 5,
) -> ComparisonTable:
    """Compare every system in ``systems`` against ``baseline`` (default: the first one).

    Each pair is a :func:`compare` with the same options and seed; the p-values are then
    adjusted with :func:`holm_bonferroni` so that "any of these differs" keeps its
    ``alpha`` however many systems are compared.

    >>> base = {"q1": 0.2, "q2": 0.5, "q3": 0.4, "q4": 0.1}
    >>> same = dict(base)
    >>> table = compare_many({"bm25": base, "copy": same}, test="t-test")
    >>> table.rows[0].p_adjusted, table.significant()
    (1.0, [])
    """
    if len(systems) < 2:
        raise InvalidInputError(
            f"compare_many needs at least 2 systems (a baseline and one to compare), got "
            f"{len(systems)}"
        )
    names = list(systems)
    if baseline is None:
        baseline = names[0]
    elif baseline not in systems:
        raise InvalidInputError(
            f"baseline {baseline!r} is not one of the systems: {', '.join(map(repr, names))}"
        )
    results = [
        compare(
            systems[baseline],
            systems[name],
            metric=metric,
            test=test,
            n=n,
            seed=seed,
            confidence=confidence,
            alpha=alpha,
            on_missing=on_missing,
            higher_is_better=higher_is_better,
            top=top,
            label_a=baseline,
            label_b=name,
        )
        for name in names
        if name != baseline
    ]
    adjusted = holm_bonferroni([r.p_value for r in results])
    rows = tuple(ComparisonRow(r.label_b, r, p) for r, p in zip(results, adjusted, strict=True))
    return ComparisonTable(
        baseline=baseline, metric=results[0].metric, test=test, alpha=alpha, rows=rows
    )


# --------------------------------------------------------------------------- gate


@dataclass(frozen=True)
class GateResult:
    """A regression decision: ``passed`` unless the drop is both too large and significant.

    ``drop`` is how much worse ``current`` is than ``baseline`` in the metric's units
    (positive = worse; for a lower-is-better metric a rise counts as a drop); ``reason``
    says why, in one sentence (and points to the comparison's ``warnings`` when the two do
    not score the same queries the same way); ``comparison`` is the full
    :class:`CompareResult` with the baseline as ``a`` and the current run as ``b``.
    """

    passed: bool
    reason: str
    drop: float
    max_drop: float
    alpha: float
    comparison: CompareResult

    @property
    def exit_code(self) -> int:
        """``0`` when the gate passes, ``1`` when it fails (for a CI job)."""
        return 0 if self.passed else 1

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return {
            "passed": self.passed,
            "reason": self.reason,
            "drop": self.drop,
            "max_drop": self.max_drop,
            "alpha": self.alpha,
            "warnings": list(self.comparison.warnings),
            "comparison": self.comparison.to_dict(),
        }

    def __str__(self) -> str:
        return f"{self.reason}\n\n{self.comparison}"


def gate(
    baseline: Comparable,
    current: Comparable,
    *,
    metric: str | None = None,
    max_drop: float = 0.01,
    alpha: float = 0.05,
    test: TestName = "randomization",
    n: int = 10_000,
    seed: int | None = 0,
    on_missing: OnMissing = "error",
    higher_is_better: bool | None = None,
) -> GateResult:
    """Decide whether ``current`` regressed from ``baseline`` on ``metric``.

    The gate fails only when the mean got worse by more than ``max_drop`` (in the metric's
    units: ``0.01`` is one NDCG point) **and** the paired test finds the change significant
    (``p_value < alpha``). A large drop on few queries that could be noise passes, with a
    reason saying so. The direction follows ``higher_is_better`` (from the report when
    ``None``): for latency or cost a rise is the drop.

    >>> base = {"q1": 0.9, "q2": 0.8, "q3": 0.7, "q4": 0.9, "q5": 0.8}
    >>> now = {"q1": 0.9, "q2": 0.8, "q3": 0.7, "q4": 0.9, "q5": 0.79}
    >>> gate(base, now, max_drop=0.01).passed
    True
    """
    if isinstance(max_drop, bool) or not isinstance(max_drop, numbers.Real):
        raise InvalidInputError(f"max_drop must be a number >= 0, got {max_drop!r}")
    if not (math.isfinite(float(max_drop)) and max_drop >= 0):
        raise InvalidInputError(
            f"max_drop must be a finite number >= 0 (in the metric's units), got {max_drop!r}"
        )
    result = compare(
        baseline,
        current,
        metric=metric,
        test=test,
        n=n,
        seed=seed,
        alpha=alpha,
        on_missing=on_missing,
        higher_is_better=higher_is_better,
        label_a="baseline",
        label_b="current",
    )
    drop = -result.mean_diff if result.higher_is_better else result.mean_diff
    name = result.metric or "the score"
    moved = f"{result.mean_a:.4f} -> {result.mean_b:.4f}"
    test_text = f"{_TEST_LABELS[test]} over {result.n} paired queries"
    p_text = f"p = {_p_text(result.p_value)}"
    worse = "rose" if not result.higher_is_better else "dropped"
    if drop > max_drop and result.p_value < alpha:
        passed = False
        reason = (
            f"REGRESSION: {name} {worse} by {drop:.4f} ({moved}), more than the allowed "
            f"{max_drop:g}, and the change is significant ({p_text} < alpha {alpha:g}; "
            f"{test_text})."
        )
    elif drop > max_drop:
        passed = True
        reason = (
            f"ok: {name} {worse} by {drop:.4f} ({moved}), more than the allowed "
            f"{max_drop:g}, but the change is not significant ({p_text} >= alpha {alpha:g}; "
            f"{test_text}): it may be noise, and more queries would tell."
        )
    elif drop > 0:
        passed = True
        reason = (
            f"ok: {name} {worse} by {drop:.4f} ({moved}), within the allowed {max_drop:g} "
            f"({p_text}; {test_text})."
        )
    else:
        passed = True
        reason = f"ok: {name} did not get worse ({moved}; {p_text}; {test_text})."
    if result.warnings:
        reason += (
            " Caution: the two do not score the same queries the same way; see the "
            f"warning{'s' if len(result.warnings) > 1 else ''} below."
        )
    return GateResult(
        passed=passed,
        reason=reason,
        drop=drop,
        max_drop=float(max_drop),
        alpha=alpha,
        comparison=result,
    )
