"""Two systems, query by query: the paired comparison and its result (``compare``)."""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.stats._base import (
    _TEST_LABELS,
    PRIMARY_RETRIEVAL_METRIC,
    TESTS,
    TIE_TOLERANCE,
    Comparable,
    OnMissing,
    TestName,
    _require_numpy,
)
from ragmeter.stats._resampling import (
    _bootstrap_means,
    _bootstrap_p,
    _randomization_p,
    _std,
    _t_test_p,
)

if TYPE_CHECKING:
    import os
    from pathlib import Path

    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]


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
