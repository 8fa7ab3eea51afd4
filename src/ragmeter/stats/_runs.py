"""Saved runs compared like for like: two registry runs paired (``diff_runs``), and a
baseline read from the registry for a gate (``registry_baseline``); the trend over runs is
in ``_trend``.

Two runs are *like for like* when the registry finds their dataset fingerprints (the
qrels or ground truth) and config fingerprints (metrics, cut-offs, relevance level,
missing-query rule, ...) equal (:meth:`ragmeter.registry.Registry.comparability`), except
for which *other* metrics each computed: comparing one metric both runs have, the metric
list and cut-offs (:data:`WHICH_METRICS`) do not change its numbers and are not held
against them. Any other pair is refused with
:class:`~ragmeter.registry.IncomparableRunsError` listing what differs, unless the caller
asks for the *common queries*: then the two are paired on the queries both scored, and the
result says so, and why, first among its warnings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.registry import Comparability, IncomparableRunsError, Registry, RunRecord
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.stats._base import PRIMARY_RETRIEVAL_METRIC, Comparable, TestName
from ragmeter.stats._compare import compare
from ragmeter.stats._result import CompareResult

if TYPE_CHECKING:
    from ragmeter.report import ConfigFingerprint, DatasetFingerprint

__all__ = [
    "RegistryLike",
    "RunPair",
    "diff_runs",
    "like_for_like",
    "load_pair",
    "open_registry",
    "registry_baseline",
    "run_label",
]

RegistryLike = Registry | str | os.PathLike[str] | None
"""A :class:`~ragmeter.registry.Registry`, the path of its database, or ``None`` for the
default one (``$RAGMETER_REGISTRY``, else ``./.ragmeter/runs.sqlite``)."""

Report = RetrievalEvalReport | RagEvalReport


def open_registry(registry: RegistryLike, *, read_only: bool = True) -> Registry:
    """``registry`` itself, or the registry at that path (default: ``$RAGMETER_REGISTRY``,
    else ``./.ragmeter/runs.sqlite``), opened read-only unless ``read_only=False``."""
    if isinstance(registry, Registry):
        return registry
    return Registry(registry, read_only=read_only)


def _record(registry: Registry, ref: str | RunRecord) -> RunRecord:
    if isinstance(ref, RunRecord):
        return ref
    if not isinstance(ref, str):
        raise InvalidInputError(
            f"a run is named by a ref string (a run id or prefix, a name, 'latest', "
            f"'pinned', 'NAME~1') or a RunRecord, got {type(ref).__name__}"
        )
    return registry.get(ref)


def run_label(record: RunRecord) -> str:
    """How a run is named in a comparison: its name and the first 8 characters of its id.

    Two runs of one name are told apart by the id, so the labels never clash.
    """
    return f"{record.name}@{record.id[:8]}"


def _refusal(ra: RunRecord, rb: RunRecord, verdict: Comparability) -> IncomparableRunsError:
    reasons = "; ".join(verdict.reasons) or "their fingerprints differ"
    return IncomparableRunsError(
        f"runs {run_label(ra)} and {run_label(rb)} are not like for like: {reasons}. "
        f"Their numbers cannot be compared as they are; to compare them on the "
        f"{len(verdict.common)} queries both scored, pass common_queries=True "
        "(ragmeter runs diff --common-queries)"
    )


#: Settings that say which metrics a run computed besides the one compared: they do not
#: change that metric's numbers, so a one-metric comparison ignores them (when both runs
#: have the metric).
WHICH_METRICS: tuple[str, ...] = ("metrics", "k_values", "measures")


def _reduced(config: ConfigFingerprint) -> ConfigFingerprint:
    from ragmeter.report import ConfigFingerprint

    kept = {k: v for k, v in config.settings.items() if k not in WHICH_METRICS}
    return ConfigFingerprint.of(kept)


def _beside_the_metric(a: ConfigFingerprint, b: ConfigFingerprint) -> set[str]:
    """The config differences between ``a`` and ``b`` that only say which other metrics
    were computed (in the fingerprints' own words)."""
    return set(a.differences(b)) - set(_reduced(a).differences(_reduced(b)))


def _default_metric_of(record: RunRecord) -> str | None:
    if record.kind == "retrieval":
        return PRIMARY_RETRIEVAL_METRIC
    return next(iter(record.metrics), None)


def _on_metric(
    verdict: Comparability, ra: RunRecord, rb: RunRecord, metric: str | None
) -> Comparability:
    """``verdict`` for a comparison of one metric: differences in which other metrics the
    runs computed are dropped when both have ``metric``."""
    key = metric or _default_metric_of(ra)
    if verdict.comparable or key is None or key not in ra.metrics or key not in rb.metrics:
        return verdict
    ignored = _beside_the_metric(ra.config, rb.config)
    reasons = [r for r in verdict.reasons if r not in ignored]
    return replace(verdict, comparable=not reasons, reasons=reasons)


def _direction(report: Report, key: str) -> bool:
    if isinstance(report, RagEvalReport):
        return report.higher_is_better.get(key, True)
    return True


def _common_scores(report: Report, key: str, ids: Iterable[str], label: str) -> dict[str, float]:
    scores = report.scores(key)
    if not scores:
        raise InvalidInputError(
            f"run {label} has no per-item scores for {key!r}; its metrics are: "
            f"{', '.join(report.metrics) or 'none'}"
        )
    return {i: scores[i] for i in ids if i in scores and scores[i] is not None}


@dataclass(frozen=True)
class RunPair:
    """Two saved runs ready to be paired: what :func:`diff_runs` gives :func:`compare`.

    ``a`` and ``b`` are the runs' reports, or, when the runs are not like for like and the
    caller asked for the common queries, their ``{query_id: score}`` on those queries
    (``metric`` then names the metric, ``higher_is_better`` its direction and ``note``
    says what was left out and why). ``label_a``/``label_b`` name the runs
    (:func:`run_label`).
    """

    record_a: RunRecord
    record_b: RunRecord
    a: Comparable
    b: Comparable
    metric: str | None
    higher_is_better: bool | None
    note: str | None

    @property
    def label_a(self) -> str:
        """``name@id8`` of the baseline run."""
        return run_label(self.record_a)

    @property
    def label_b(self) -> str:
        """``name@id8`` of the other run."""
        return run_label(self.record_b)

    def compare(
        self,
        *,
        test: TestName = "randomization",
        n: int = 10_000,
        seed: int | None = 0,
        confidence: float = 0.95,
        alpha: float = 0.05,
        higher_is_better: bool | None = None,
        top: int = 5,
    ) -> CompareResult:
        """:func:`compare` ``b`` against ``a`` (options as there); a common-queries pair's
        ``note`` comes first among the result's warnings."""
        result = compare(
            self.a,
            self.b,
            metric=self.metric,
            test=test,
            n=n,
            seed=seed,
            confidence=confidence,
            alpha=alpha,
            on_missing="error" if self.note is None else "intersect",
            higher_is_better=self.higher_is_better
            if higher_is_better is None
            else higher_is_better,
            top=top,
            label_a=self.label_a,
            label_b=self.label_b,
        )
        if self.note is None:
            return result
        return replace(result, warnings=(self.note, *result.warnings))


def load_pair(
    a: str | RunRecord,
    b: str | RunRecord,
    *,
    registry: RegistryLike = None,
    metric: str | None = None,
    common_queries: bool = False,
) -> RunPair:
    """Saved runs ``a`` and ``b`` read back for a paired comparison, like for like or
    refused (see :func:`diff_runs`, which compares what this returns)."""
    reg = open_registry(registry)
    ra, rb = _record(reg, a), _record(reg, b)
    verdict = _on_metric(reg.comparability(ra, rb), ra, rb, metric)
    if verdict.comparable:
        return RunPair(ra, rb, reg.load_report(ra), reg.load_report(rb), metric, None, None)
    if not common_queries:
        raise _refusal(ra, rb, verdict)
    if ra.kind != rb.kind:
        raise IncomparableRunsError(
            f"run {run_label(ra)} is a {ra.kind} run and {run_label(rb)} a {rb.kind} run: "
            "their scores measure different things, even on common ids"
        )
    report_a, report_b = reg.load_report(ra), reg.load_report(rb)
    key = metric or _default_key(report_a, run_label(ra))
    sa = _common_scores(report_a, key, verdict.common, run_label(ra))
    sb = _common_scores(report_b, key, verdict.common, run_label(rb))
    note = _common_note(len(sa.keys() & sb.keys()), verdict)
    return RunPair(ra, rb, sa, sb, key, _direction(report_a, key), note)


def diff_runs(
    a: str | RunRecord,
    b: str | RunRecord,
    *,
    registry: RegistryLike = None,
    metric: str | None = None,
    common_queries: bool = False,
    test: TestName = "randomization",
    n: int = 10_000,
    seed: int | None = 0,
    confidence: float = 0.95,
    alpha: float = 0.05,
    higher_is_better: bool | None = None,
    top: int = 5,
) -> CompareResult:
    """Compare saved run ``b`` against saved run ``a``, paired query by query.

    ``a`` and ``b`` are refs the registry resolves (a run id or unique prefix, a name for
    its newest run, ``"latest"``, ``"pinned"``, ``"NAME~1"``) or
    :class:`~ragmeter.registry.RunRecord` s; ``registry`` a
    :class:`~ragmeter.registry.Registry` or its path (default: the default registry). The
    runs' per-query (per-sample) scores are read back from the registry and given to
    :func:`compare` (the other options are its own): ``mean_diff`` is ``b - a``, with its
    confidence interval, p-value and most-moved queries; the labels are ``name@id8``.

    Runs that are not like for like raise :class:`~ragmeter.registry.IncomparableRunsError`
    listing every difference (``"qrels changed: 12 judgements added; relevance_level 1 vs
    2"``). With ``common_queries=True`` they are compared anyway, on the queries both
    scored, and the result's first warning says so and why.
    """
    pair = load_pair(a, b, registry=registry, metric=metric, common_queries=common_queries)
    return pair.compare(
        test=test,
        n=n,
        seed=seed,
        confidence=confidence,
        alpha=alpha,
        higher_is_better=higher_is_better,
        top=top,
    )


def _default_key(report: Report, label: str) -> str:
    if isinstance(report, RetrievalEvalReport):
        return PRIMARY_RETRIEVAL_METRIC
    if not report.metrics:
        raise InvalidInputError(f"run {label} has no metrics to compare")
    return next(iter(report.metrics))


def _common_note(paired: int, verdict: Comparability) -> str:
    """The warning a common-queries comparison carries first."""
    text = (
        f"compared on common queries only, as asked (common_queries): the runs are not like "
        f"for like ({'; '.join(verdict.reasons)}), so they are paired on the {paired} "
        "queries both scored"
    )
    if verdict.only_a or verdict.only_b:
        text += (
            f"; {len(verdict.only_a)} scored only by the first run (e.g. "
            f"{some_ids(verdict.only_a) or 'none'}) and {len(verdict.only_b)} only by the "
            f"second (e.g. {some_ids(verdict.only_b) or 'none'}) count on neither side"
        )
    return text + (
        ". Where judgements changed on a common query, its two scores were computed against "
        "different judgements"
        if any(r.startswith(("qrels", "samples", "dataset")) for r in verdict.reasons)
        else ""
    )


# --------------------------------------------------------------------------- gate baseline


def like_for_like(
    record: RunRecord,
    kind: str,
    dataset: DatasetFingerprint | None,
    config: ConfigFingerprint | None,
    *,
    metric: str | None = None,
) -> list[str]:
    """What differs between a saved run and a report's fingerprints (empty: like for like).

    ``kind`` is the report's (``"retrieval"`` or ``"rag"``); a missing fingerprint on
    either side is not a difference (it cannot be checked; see :func:`registry_baseline`).
    With ``metric`` (which both have), which other metrics each computed is no difference.
    """
    if record.kind != kind:
        return [f"kind: the saved run is a {record.kind} run, the current one a {kind} run"]
    reasons: list[str] = []
    if record.dataset is not None and dataset is not None:
        reasons.extend(record.dataset.differences(dataset))
    if config is not None:
        ignored = _beside_the_metric(record.config, config) if metric is not None else set()
        reasons.extend(r for r in record.config.differences(config) if r not in ignored)
    return reasons


def registry_baseline(
    ref: str,
    current: object,
    *,
    registry: RegistryLike = None,
    metric: str | None = None,
) -> tuple[Report, RunRecord, list[str]]:
    """The saved run ``ref`` to gate ``current`` against: ``(its report, its record,
    notes)``.

    ``current`` (a report, or a ``{query_id: score}`` mapping) is checked like for like
    against the saved run's fingerprints first: any difference raises
    :class:`~ragmeter.registry.IncomparableRunsError` naming every one. When that cannot
    be checked (a mapping, or a report without fingerprints), ``notes`` says so; a gate
    adds the notes to its comparison's warnings. ``metric`` is the metric gated (default:
    NDCG@10 for retrieval, else the saved run's first): when both have it, which other
    metrics each computed does not matter.
    """
    reg = open_registry(registry)
    record = reg.get(ref)
    notes: list[str] = []
    if isinstance(current, (RetrievalEvalReport, RagEvalReport)):
        kind = "retrieval" if isinstance(current, RetrievalEvalReport) else "rag"
        dataset = current.dataset_fingerprint
        key = metric or _default_metric_of(record)
        both = key is not None and key in record.metrics and key in current.metrics
        reasons = like_for_like(
            record, kind, dataset, current.config_fingerprint, metric=key if both else None
        )
        if reasons:
            raise IncomparableRunsError(
                f"the current report is not like for like with the baseline run "
                f"{run_label(record)} ({ref!r}): {'; '.join(reasons)}. Score the current "
                "system on the same data with the same settings, or pin a baseline scored "
                "the way the current report is (ragmeter runs pin REF)"
            )
        if dataset is None or record.dataset is None:
            notes.append(
                f"the ground truth could not be checked against the baseline run "
                f"{run_label(record)}: "
                + ("the current report" if dataset is None else "the saved run")
                + " has no dataset fingerprint (a report made by hand, or saved by an older "
                "ragmeter)"
            )
    else:
        notes.append(
            f"like for like with the baseline run {run_label(record)} could not be checked: "
            "the current scores are a plain mapping, which carries no fingerprints"
        )
    return reg.load_report(record), record, notes
