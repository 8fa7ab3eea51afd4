"""Embedding metrics inside a Dask evaluation: embed where the partition is, merge, report.

Each partition runs :func:`ragmeter.embed.run_embeddings` on its own samples, on its
worker, with the embedding cache opened there: a path every worker can reach is one shared
cache (SQLite in WAL mode, safe for many processes), so a text another partition already
embedded is read, not embedded again, and a re-run makes no model call. The embedders
travel to the workers with their identity read once on the client (every worker keys the
cache as one machine does); the offline default embedder pickles as its model name and is
loaded once per worker process from the worker's own installation, whose weights must hash
as the client's. The counts of the report (``embed_calls``, ``embed_cache_hits``...) are
sums over the partitions; a text needed by two partitions counts in each.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmeter.dask._model_parts import (
    CacheSpec,
    ModelPartial,
    add_scores,
    cache_spec,
    local_ids,
    open_spec,
)
from ragmeter.embed import (
    EmbedCache,
    EmbedMetric,
    EmbedOptions,
    EmbedRun,
    Vector,
    load_default_embedder,
    run_embeddings,
)
from ragmeter.errors import RagmeterError
from ragmeter.evaluation.embedded import (
    NONE_SCORED,
    add_embed_run,
    check_embed_names,
    note_counts,
    sample_score,
    unscorable,
)
from ragmeter.report import RagEvalReport
from ragmeter.schema import RagSample

__all__ = [
    "EmbedPartial",
    "EmbedSpec",
    "add_embeds",
    "check_embeds",
    "embed_partition",
    "embed_spec",
]

_COUNTS = (
    ("embed_calls", "calls"),
    ("embed_texts", "texts"),
    ("embed_embedded", "embedded"),
    ("embed_cache_hits", "cache_hits"),
    ("embed_cache_writes_skipped", "cache_writes_skipped"),
)


class _Frozen:
    """An embedder with its identity read on the client (see the module docstring)."""

    def __init__(self, embedder: Any, identity: dict[str, Any]) -> None:
        self.embedder = embedder
        self._identity = identity

    @property
    def identity(self) -> dict[str, Any]:
        return self._identity

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        vectors: list[Vector] = await self.embedder.embed(texts)
        return vectors

    def check(self) -> None:
        """On the worker: refuse a default model whose weights are not the client's (its
        vectors would be cached under the client's identity)."""
        from ragmeter.embed.default import WordLlamaEmbedder

        if not isinstance(self.embedder, WordLlamaEmbedder):
            return
        here = dict(self.embedder.identity)
        if here != self._identity:
            raise RagmeterError(
                f"the offline embedding model on this Dask worker is {here}, on the client "
                f"{self._identity}: install the same ragmeter[semantic] (wordllama) on the "
                "client and every worker"
            )


@dataclass
class EmbedSpec:
    """What every partition needs to run the embedding metrics (pickled once)."""

    metrics: list[EmbedMetric]
    """Copies of the metrics whose embedders are :class:`_Frozen` (the default resolved)."""
    cache: CacheSpec
    """``None``, ``"default"`` (each worker's user cache dir) or ``(path, readonly)``."""
    options: EmbedOptions | None

    def open_cache(self) -> EmbedCache | None:
        opened: EmbedCache | None = open_spec(self.cache, EmbedCache)
        return opened


def embed_spec(
    metrics: Sequence[EmbedMetric], embed_cache: Any, embed_options: EmbedOptions | None
) -> EmbedSpec:
    """The spec of ``metrics`` (refused when a name repeats), read on the client: the
    default embedder is loaded here (a :class:`~ragmeter.errors.MissingDependencyError`
    naming ``ragmeter[semantic]`` before any task runs) and every identity frozen."""
    check_embed_names(metrics)
    default: Any = None
    frozen: list[EmbedMetric] = []
    for metric in metrics:
        embedder = metric.embedder
        if embedder is None:
            default = default or load_default_embedder()
            embedder = default
        twin = copy.copy(metric)
        twin.embedder = _Frozen(embedder, dict(embedder.identity))
        frozen.append(twin)
    return EmbedSpec(frozen, cache_spec(embed_cache, EmbedCache), embed_options)


@dataclass
class EmbedPartial(ModelPartial):
    """Embedding results of some partitions, in sample order; mergeable."""

    notes: dict[str, int] = field(default_factory=dict)
    """How many samples got each note (``"<metric>: <note>"``)."""
    models: list[dict[str, Any]] = field(default_factory=list)
    """The models' identities (the same for every partition that ran)."""

    def merge(self, later: ModelPartial) -> None:
        """Fold in the embedding results of the partitions right after these."""
        super().merge(later)
        assert isinstance(later, EmbedPartial)
        for note, count in later.notes.items():
            self.notes[note] = self.notes.get(note, 0) + count
        self.models = self.models or later.models
        self.cache_path = self.cache_path or later.cache_path


def embed_partition(samples: list[RagSample], spec: EmbedSpec, *, kept: bool) -> EmbedPartial:
    """Run the embedding metrics on one partition's samples (on its worker)."""
    part = EmbedPartial.start(spec.metrics, samples, kept=kept, counts=[n for n, _ in _COUNTS])
    keys = part.keys
    if not samples:
        return part
    for metric in spec.metrics:
        if isinstance(metric.embedder, _Frozen):
            metric.embedder.check()
    local, renamed = local_ids(samples)
    cache = spec.open_cache()
    try:
        run = run_embeddings(renamed, spec.metrics, cache=cache, options=spec.options)
    finally:
        if cache is not None:
            cache.close()
    _keep_run(part, run, None if cache is None else str(cache.path))
    rows = []
    for sample, sid in zip(samples, local, strict=True):
        row: dict[str, float | None] = {}
        infos: dict[str, dict[str, Any]] = {}
        for key in keys:
            row[key], info = sample_score(run, key, sid)
            if info and kept:
                infos[key] = info
        rows.append((sample.id, row, infos))
    part.add_rows(rows)
    return part


def _keep_run(part: EmbedPartial, run: EmbedRun, cache_path: str | None) -> None:
    """What the partition's run took (counts, models, notes, the cache's state)."""
    for name, attr in _COUNTS:
        part.counts[name] = int(getattr(run, attr))
    part.models = [dict(m) for m in run.models]
    part.notes = dict(note_counts(run))
    part.cache_path = cache_path
    if run.cache_writes_skipped:
        part.cache_write_problem = run.cache_write_problem


def check_embeds(embedded: EmbedPartial, metrics: Sequence[EmbedMetric], n: int) -> None:
    """Refuse an embedding metric no sample can be scored on (as on one machine)."""
    for metric in metrics:
        if not embedded.applies[metric.name]:
            raise unscorable(metric, n)


def add_embeds(report: RagEvalReport, embedded: EmbedPartial, n: int) -> None:
    """Add the embedding metrics to ``report`` as :func:`ragmeter.evaluate_rag` does on one
    machine (same keys, order, means, details, warnings; ``extra`` counts summed over the
    partitions)."""
    add_scores(report, embedded, n, NONE_SCORED)
    counts = embedded.counts
    run = EmbedRun(models=embedded.models, cache_write_problem=embedded.cache_write_problem)
    for name, attr in _COUNTS:
        setattr(run, attr, counts.get(name, 0))
    add_embed_run(report, run, Counter(embedded.notes), embedded.cache_path)
    report.__dict__.pop("summaries", None)
