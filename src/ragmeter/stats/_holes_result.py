"""What :func:`~ragmeter.stats.fill_holes` found: the augmented qrels, which grades the judge
gave, the judge's agreement with the human grades, and each system's score and judged@k
before and after, with the text and JSON forms."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ragmeter.judge.runner import JudgeEstimate

__all__ = ["HoleFilling", "JudgeAgreement", "SystemFill"]


def _num(value: float | None) -> float | None:
    """JSON-ready: NaN and infinities become ``None``."""
    return value if value is not None and math.isfinite(value) else None


def _fmt(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


@dataclass(frozen=True)
class JudgeAgreement:
    """How the judge's grades compare with the human grades on a stratified sample of
    documents that **are** judged (see :func:`~ragmeter.stats.fill_holes`).

    ``pairs`` are ``(query_id, doc_id, human_grade, judge_grade)`` for every sampled
    document the judge graded (the judge grade on the qrels' scale, after ``grade_map``);
    ``asked`` counts the sample, ``failed`` the sampled documents the judge gave no grade
    (a bad reply, an error, the budget). ``confusion[i][j]`` counts documents humans graded
    ``labels[i]`` and the judge ``labels[j]``. ``kappa``, ``kappa_linear`` and
    ``kappa_quadratic`` are Cohen's kappa unweighted, linear and quadratic (NaN when
    undefined); ``exact`` is the share of identical grades. ``tau`` is Kendall's tau-b
    between the systems' scores under the human grades and under the judge's grades of the
    sample (``system_scores``: name -> (human, judge)); ``None`` with fewer than 2 systems.
    """

    asked: int
    failed: int
    pairs: list[tuple[str, str, float, float]]
    labels: list[float]
    confusion: list[list[int]]
    kappa: float
    kappa_linear: float
    kappa_quadratic: float
    exact: float
    tau: float | None = None
    system_scores: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Sampled documents graded by both the humans and the judge."""
        return len(self.pairs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN as ``None``)."""
        return {
            "n": self.n,
            "asked": self.asked,
            "failed": self.failed,
            "kappa": _num(self.kappa),
            "kappa_linear": _num(self.kappa_linear),
            "kappa_quadratic": _num(self.kappa_quadratic),
            "exact": _num(self.exact),
            "labels": list(self.labels),
            "confusion": [list(row) for row in self.confusion],
            "tau": _num(self.tau),
            "system_scores": {
                name: {"human": _num(h), "judge": _num(j)}
                for name, (h, j) in self.system_scores.items()
            },
            "pairs": [list(p) for p in self.pairs],
        }


@dataclass(frozen=True)
class SystemFill:
    """One system (run): its score and judged@k with the human qrels (``before``) and with
    the augmented qrels (``after``; ``None`` on a dry run), and how many of its top-depth
    holes were asked about (``holes``), graded (``filled``) and graded relevant."""

    name: str
    before: float
    after: float | None
    judged_before: float
    judged_after: float | None
    holes: int
    filled: int
    relevant: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "before": _num(self.before),
            "after": _num(self.after),
            "judged_before": _num(self.judged_before),
            "judged_after": _num(self.judged_after),
            "holes": self.holes,
            "filled": self.filled,
            "relevant": self.relevant,
        }


@dataclass
class HoleFilling:
    """The outcome of :func:`~ragmeter.stats.fill_holes`.

    ``qrels`` are the human qrels plus the judge's grades of the holes; ``judged_by_model``
    lists exactly those added grades ``{query_id: {doc_id: grade}}`` (on the qrels' scale),
    so every grade's source is known. ``holes`` are the unjudged documents of the runs' top
    ``depth``; ``failed`` those the judge gave no grade and why (``bad_replies`` counts the
    unparseable ones among them, never read as 0); ``skipped`` those with no text
    (``missing_text="skip"``). ``calls``, ``cache_hits``, ``input_tokens`` and
    ``output_tokens`` are what the judge cost; ``incomplete``/``stop_reason`` say a budget
    stopped it. On a dry run (``dry_run``) nothing was sent: ``estimate`` says what would
    be, and ``qrels`` are the human ones.
    """

    qrels: dict[str, dict[str, float]]
    judged_by_model: dict[str, dict[str, float]]
    holes: dict[str, list[str]]
    metric: str
    k: int
    depth: int
    systems: list[SystemFill]
    agreement: JudgeAgreement | None = None
    failed: dict[str, dict[str, str]] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    bad_replies: int = 0
    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    incomplete: bool = False
    stop_reason: str | None = None
    dry_run: bool = False
    estimate: JudgeEstimate | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def n_holes(self) -> int:
        """Unjudged (query, doc) pairs in the runs' top ``depth``."""
        return sum(len(docs) for docs in self.holes.values())

    @property
    def n_filled(self) -> int:
        """Holes the judge graded (now in ``qrels``)."""
        return sum(len(docs) for docs in self.judged_by_model.values())

    @property
    def n_failed(self) -> int:
        """Holes and sampled documents the judge was asked about but gave no grade."""
        return sum(len(docs) for docs in self.failed.values())

    @property
    def n_skipped(self) -> int:
        """Holes not asked about because a text was missing."""
        return sum(len(docs) for docs in self.skipped.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: counts, cost, the systems side by side, the agreement, and the
        judge's grades (the merged qrels are ``qrels``, written by
        :func:`ragmeter.write_trec_qrels`)."""
        est = self.estimate
        return {
            "metric": self.metric,
            "k": self.k,
            "depth": self.depth,
            "dry_run": self.dry_run,
            "holes": self.n_holes,
            "filled": self.n_filled,
            "failed": self.n_failed,
            "bad_replies": self.bad_replies,
            "skipped_no_text": self.n_skipped,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "incomplete": self.incomplete,
            "stop_reason": self.stop_reason,
            "estimate": None
            if est is None
            else {"calls": est.calls, "cached": est.cached, "input_tokens": est.input_tokens},
            "systems": [s.to_dict() for s in self.systems],
            "agreement": None if self.agreement is None else self.agreement.to_dict(),
            "judged_by_model": self.judged_by_model,
            "failed_pairs": self.failed,
            "skipped_pairs": self.skipped,
            "notes": list(self.notes),
        }

    def system_rows(self) -> list[list[str]]:
        """The side-by-side table as text cells: header row first."""
        jk = f"judged@{self.k}"
        rows = [
            [
                "system",
                f"{self.metric} before",
                f"{self.metric} after",
                f"{jk} before",
                f"{jk} after",
                "holes graded",
            ]
        ]
        for s in self.systems:
            rows.append(
                [
                    s.name,
                    _fmt(s.before),
                    _fmt(s.after),
                    _fmt(s.judged_before, 3),
                    _fmt(s.judged_after, 3),
                    f"{s.filled}/{s.holes} ({s.relevant} relevant)",
                ]
            )
        return rows

    def agreement_lines(self) -> list[str]:
        """The judge's agreement in a few lines (the confusion matrix included)."""
        a = self.agreement
        if a is None:
            return ["judge agreement: not measured (no judged documents were sampled)"]
        lines = [
            f"judge agreement on {a.n} judged documents (sample of {a.asked}, {a.failed} "
            f"without a grade): kappa {_fmt(a.kappa, 3)}, linear {_fmt(a.kappa_linear, 3)}, "
            f"quadratic {_fmt(a.kappa_quadratic, 3)}; same grade {_fmt(a.exact, 3)}",
        ]
        if a.tau is not None or a.system_scores:
            lines.append(
                f"system ranking agreement (Kendall's tau-b, {len(a.system_scores)} systems): "
                f"{_fmt(a.tau, 3)}"
            )
        width = max([len(f"{x:g}") for x in a.labels] + [5])
        lines.append("confusion (rows: human grade, columns: judge grade)")
        lines.append(" " * (width + 2) + " ".join(f"{x:>{width}g}" for x in a.labels))
        for label, row in zip(a.labels, a.confusion, strict=True):
            cells = " ".join(f"{c:>{width}d}" for c in row)
            lines.append(f"{label:>{width}g}  {cells}")
        return lines

    def summary_lines(self) -> list[str]:
        """The heading, the counts and the judge's cost (or, on a dry run, the estimate)."""
        if self.dry_run:
            est = self.estimate
            lines = [f"Dry run: {self.n_holes} holes in the top {self.depth}; nothing was sent"]
            if est is not None:
                lines.append(
                    f"judge calls to send: {est.calls} (already cached: {est.cached}); "
                    f"estimated input tokens: {est.input_tokens} (about 4 characters per token)"
                )
            return lines
        lines = [
            f"Holes filled by the judge: top {self.depth}, {self.metric}",
            f"holes: {self.n_holes}; graded: {self.n_filled}; no grade: {self.n_failed} "
            f"({self.bad_replies} bad replies); no text: {self.n_skipped}",
            f"judge calls: {self.calls} sent, {self.cache_hits} from the cache; tokens: "
            f"{self.input_tokens} in, {self.output_tokens} out",
        ]
        if self.incomplete:
            lines.append(f"incomplete: {self.stop_reason}")
        return lines

    def to_text(self) -> str:
        """A plain-text report: counts and cost, the systems side by side, the agreement."""
        lines = self.summary_lines()
        rows = self.system_rows()
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            cells = [
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ]
            lines.append("  ".join(cells).rstrip())
        if not self.dry_run:
            lines.extend(self.agreement_lines())
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()
