"""A run as it goes into the database and comes back out: the row of a report, the
:class:`RunRecord` of a row, and the git state, metric rows and judge facts a save records."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ragmeter.errors import InvalidInputError
from ragmeter.registry._records import MetricRow, RunRecord, t_interval
from ragmeter.report import (
    ConfigFingerprint,
    DatasetFingerprint,
    RagEvalReport,
    RetrievalEvalReport,
)

__all__ = ["COLUMNS", "git_state", "metric_rows", "pack", "record_of", "tags_of", "unpack"]

COLUMNS = (
    "seq, id, name, created, kind, git_commit, git_dirty, dataset, config, ragmeter_version, "
    "metric_definitions, judge_model, judge_prompt_hash, tokens, cost, metrics, scores_path, "
    "scores_sha256, pinned_at, note"
)
"""The columns :func:`record_of` reads (the blobs are read apart, when needed)."""


def pack(value: Any) -> bytes:
    """A JSON value as a gzipped blob (per-item digests, scored ids)."""
    return gzip.compress(json.dumps(value, separators=(",", ":")).encode("utf-8"), mtime=0)


def unpack(blob: bytes | None) -> Any:
    """The JSON value of a :func:`pack` blob (``None`` for none)."""
    return None if blob is None else json.loads(gzip.decompress(blob).decode("utf-8"))


def tags_of(tags: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
    """Tags as ``{key: value}``: a mapping as it is; a sequence of ``"key=value"`` or bare
    ``"label"`` (value ``""``).

    >>> tags_of(["nightly", "model=bge"])
    {'nightly': '', 'model': 'bge'}
    """
    if tags is None:
        return {}
    if isinstance(tags, Mapping):
        return {str(k): str(v) for k, v in tags.items()}
    if isinstance(tags, str):
        tags = [tags]
    out: dict[str, str] = {}
    for tag in tags:
        if not isinstance(tag, str) or not tag:
            raise InvalidInputError(f"a tag must be a non-empty string, got {tag!r}")
        key, _, value = tag.partition("=")
        out[key] = value
    return out


def git_state(cwd: str | os.PathLike[str] | None = None) -> tuple[str | None, bool | None]:
    """``(HEAD's commit, whether tracked files have changes)`` of the git repository
    holding ``cwd`` (default: the working directory); ``(None, None)`` outside one or
    without git. Untracked files do not count (the registry itself may be one)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None, None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None, None
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return head.stdout.strip() or None, dirty


def metric_rows(report: RetrievalEvalReport | RagEvalReport) -> dict[str, MetricRow]:
    """Each metric's mean, 95% Student-t interval and ``n`` (see :class:`MetricRow`)."""
    rows: dict[str, MetricRow] = {}
    for key, mean in report.metrics.items():
        summary = report.summary(key)
        low, high = t_interval(mean, summary.std, summary.count)
        rows[key] = MetricRow(mean, low, high, summary.count)
    return rows


def judge_facts(
    report: RetrievalEvalReport | RagEvalReport,
) -> tuple[str | None, str | None, int | None, float | None]:
    """``(judge model, judge prompt hash, tokens, cost)``: the models of the judges in
    ``extra["judges"]`` (comma-separated), a sha256 over their prompt hashes, the judge's
    input plus output tokens, and the pipeline's total ``cost_usd`` (mean x coverage);
    ``None`` for what the report does not have."""
    extra = report.extra
    judges = extra.get("judges")
    model = prompt = None
    if isinstance(judges, Mapping) and judges:
        models = sorted({str(j.get("model")) for j in judges.values() if isinstance(j, Mapping)})
        model = ", ".join(models) or None
        prompts = {str(k): j.get("prompt_sha256") for k, j in judges.items()}
        prompt = hashlib.sha256(json.dumps(prompts, sort_keys=True).encode()).hexdigest()
    tokens = None
    if "judge_input_tokens" in extra or "judge_output_tokens" in extra:
        tokens = int(extra.get("judge_input_tokens", 0)) + int(extra.get("judge_output_tokens", 0))
    cost = None
    if "cost_usd" in report.metrics and isinstance(report, RagEvalReport):
        cost = report.metrics["cost_usd"] * report.coverage.get("cost_usd", 0)
    return model, prompt, tokens, cost


def record_of(row: sqlite3.Row | tuple[Any, ...], base: Path, tags: dict[str, str]) -> RunRecord:
    """The :class:`RunRecord` of a row of :data:`COLUMNS` (``base``: the database's folder,
    which scores paths are relative to)."""
    (_, rid, name, created, kind, commit, dirty, dataset, config, version, definitions,
     model, prompt, tokens, cost, metrics, scores_path, sha, pinned_at, note) = row  # fmt: skip
    return RunRecord(
        id=rid,
        name=name,
        tags=tags,
        created=datetime.fromisoformat(created),
        kind=kind,
        git_commit=commit,
        git_dirty=None if dirty is None else bool(dirty),
        dataset=None if dataset is None else DatasetFingerprint.from_dict(json.loads(dataset)),
        config=ConfigFingerprint.from_dict(json.loads(config)),
        ragmeter_version=version,
        metric_definitions=definitions,
        judge_model=model,
        judge_prompt_hash=prompt,
        tokens=tokens,
        cost=cost,
        metrics={k: MetricRow(**v) for k, v in json.loads(metrics).items()},
        scores_path=base / scores_path,
        scores_sha256=sha,
        pinned=pinned_at is not None,
        note=note,
    )
