"""Bounded, cached, batched execution of the embedding metrics over samples.

* **Each distinct text once**: the texts every metric needs for every sample are collected
  first; each distinct ``(model, text)`` is embedded at most once per run (and never when
  the cache holds it).
* **Batched and bounded**: the texts to embed go to the model in batches of at most
  ``batch_size`` (never an empty one), shortest first (:func:`text_length`), at most
  ``concurrency`` batches in flight (fewer if the embedder has a ``max_concurrency``), each
  with a ``timeout``; transient errors (rate limits, timeouts, 5xx: see
  :func:`~ragmeter.judge.is_transient`) are retried with exponential backoff.
* **Cached**: vectors are stored in an :class:`~ragmeter.embed.cache.EmbedCache` keyed by
  the model's identity and the text; a re-run makes no model call. Right before a batch is
  sent the cache is asked again, so vectors another process stored meanwhile are used.
* **Honest**: a batch that fails for good leaves the samples that need its texts ``None``
  for that metric, with the reason recorded; never NaN. A model that answers with the
  wrong number of vectors, vectors of different lengths, or non-finite values is an
  :class:`~ragmeter.errors.EmbedderOutputError` naming the model and a sample that needs
  the text: its numbers cannot be trusted for any sample.
* :func:`estimate_embeddings` is the dry run: how many texts would be embedded, and how
  many the cache already holds, without calling any model.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmeter.embed.cache import EmbedCache, embed_key
from ragmeter.embed.metrics import EmbedMetric, load_default_embedder
from ragmeter.embed.protocol import Embedder, Vector, max_concurrency
from ragmeter.embed.similarity import Matrix, finite
from ragmeter.errors import EmbedderOutputError, InvalidInputError
from ragmeter.judge import is_transient
from ragmeter.judge.runner import gather_or_cancel, run_sync
from ragmeter.schema import RagSample

__all__ = [
    "EmbedEstimate",
    "EmbedOptions",
    "EmbedRun",
    "arun_embeddings",
    "estimate_embeddings",
    "run_embeddings",
    "text_length",
]


@dataclass(frozen=True)
class EmbedOptions:
    """How texts reach the model: ``batch_size`` texts per call, ``concurrency`` calls in
    flight, ``timeout`` seconds per call (``None``: no limit), ``retries`` of a transient
    error with exponential ``backoff`` (capped at ``max_backoff`` seconds)."""

    batch_size: int = 64
    concurrency: int = 4
    timeout: float | None = 120.0
    retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 20.0

    def __post_init__(self) -> None:
        for name in ("batch_size", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{name} must be an int >= 1, got {value!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise InvalidInputError(f"retries must be an int >= 0, got {self.retries!r}")
        if self.timeout is not None and not self.timeout > 0:
            raise InvalidInputError(
                f"timeout must be > 0 seconds or None (no timeout), got {self.timeout!r}"
            )


@dataclass
class EmbedEstimate:
    """What a run would embed: ``texts`` text occurrences the metrics need, ``distinct``
    distinct ``(model, text)`` pairs among them, ``cached`` of those the cache holds,
    ``to_embed`` the rest, and ``calls`` the batches that takes at ``batch_size``."""

    texts: int
    distinct: int
    cached: int
    to_embed: int
    calls: int
    samples: int
    metrics: list[str]
    models: list[dict[str, Any]]


@dataclass
class EmbedRun:
    """Per-sample scores of the embedding metrics and what it took to get them.

    ``calls`` counts model calls sent (batches, retries included), ``embedded`` the texts
    the model embedded, ``cache_hits`` distinct texts served by the cache, ``texts`` the
    text occurrences the metrics needed (a text needed twice is embedded once).
    ``notes`` are facts about a score that was given (an empty answer, a zero vector),
    ``reasons`` why a score is ``None``.
    """

    scores: dict[str, dict[str, float | None]] = field(default_factory=dict)
    reasons: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    details: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    models: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    embedded: int = 0
    cache_hits: int = 0
    texts: int = 0
    cache_writes_skipped: int = 0
    cache_write_problem: str | None = None


class _Model:
    """One embedder of a run: its identity and the distinct texts it must embed."""

    def __init__(self, embedder: Embedder, identity: dict[str, Any]) -> None:
        self.embedder = embedder
        self.identity = identity
        self.name = str(identity.get("model", type(embedder).__name__))
        self.owner: dict[str, str] = {}  # text -> the first sample id that needs it
        self._keys: dict[str, str] = {}  # text -> cache key, made when a cache asks
        self.vectors: dict[str, Vector | Matrix] = {}  # a list, or a row of a batch's matrix
        self.failed: dict[str, str] = {}  # text -> why it has no vector
        self.dim: int | None = None

    def need(self, text: str, sample_id: str) -> None:
        self.owner.setdefault(text, sample_id)

    def key(self, text: str) -> str:
        """The cache key of ``text`` (computed once, only when there is a cache)."""
        key = self._keys.get(text)
        if key is None:
            key = self._keys[text] = embed_key(self.identity, text)
        return key

    def accept_many(self, texts: Sequence[str], vectors: Sequence[Any]) -> list[Vector | Matrix]:
        """Check and keep one batch's vectors in one numpy pass (rows of one float64
        matrix); a batch that fails the check goes through :meth:`accept`, which names the
        text at fault."""
        import numpy as np

        try:
            matrix = np.asarray(vectors, dtype=np.float64)
        except (TypeError, ValueError):  # ragged, or not numbers: accept() says which
            matrix = None
        if (
            matrix is None
            or matrix.ndim != 2
            or matrix.shape != (len(texts), self.dim or matrix.shape[1])
            or matrix.shape[1] == 0
            or not np.isfinite(matrix).all()
        ):
            return [self.accept(t, v) for t, v in zip(texts, vectors, strict=True)]
        self.dim = matrix.shape[1]
        rows = list(matrix)
        self.vectors.update(zip(texts, rows, strict=True))
        return rows

    def accept(self, text: str, vector: Sequence[float]) -> Vector:
        """Check one vector (finite, the model's length) and keep it."""
        values = [float(x) for x in vector]
        where = f"for the text {text[:60]!r} of sample {self.owner[text]!r}"
        if not values or not finite(values):
            raise EmbedderOutputError(
                f"embedding model {self.name!r} returned "
                f"{'an empty vector' if not values else 'a NaN or infinite value'} {where}"
            )
        if self.dim is None:
            self.dim = len(values)
        elif len(values) != self.dim:
            raise EmbedderOutputError(
                f"embedding model {self.name!r} returned a vector of length {len(values)} "
                f"{where}, after vectors of length {self.dim}: one model must give one length "
                "(a cache shared by two configurations of one model? give them different "
                "identities)"
            )
        self.vectors[text] = values
        return values


_Plan = list[tuple[RagSample, EmbedMetric, _Model]]


def _models(metrics: Sequence[EmbedMetric]) -> list[_Model]:
    """One :class:`_Model` per metric (metrics with the same identity share one); the
    default embedder is loaded once, only when a metric has none."""
    default: Embedder | None = None
    by_identity: dict[str, _Model] = {}
    out: list[_Model] = []
    for metric in metrics:
        embedder = metric.embedder
        if embedder is None:
            default = default or load_default_embedder()
            embedder = default
        identity = dict(embedder.identity)
        key = json.dumps(identity, sort_keys=True, default=str, ensure_ascii=False)
        model = by_identity.setdefault(key, _Model(embedder, identity))
        out.append(model)
    return out


def _plan(
    samples: Sequence[RagSample], metrics: Sequence[EmbedMetric], models: Sequence[_Model]
) -> tuple[_Plan, int, dict[str, dict[str, str]]]:
    """The (sample, metric, model) jobs, the text occurrences they need, and the samples
    each metric skips (with why)."""
    jobs: _Plan = []
    skipped: dict[str, dict[str, str]] = {}
    occurrences = 0
    for sample in samples:
        for metric, model in zip(metrics, models, strict=True):
            if not metric.applies_to(sample):
                skipped.setdefault(sample.id, {})[metric.name] = (
                    f"sample lacks {metric.requirement}"
                )
                continue
            for text in metric.texts(sample):
                model.need(text, sample.id)
                occurrences += 1
            jobs.append((sample, metric, model))
    return jobs, occurrences, skipped


def _distinct(models: Sequence[_Model]) -> list[_Model]:
    return list({id(m): m for m in models}.values())


def estimate_embeddings(
    samples: Sequence[RagSample],
    metrics: Sequence[EmbedMetric],
    *,
    cache: EmbedCache | None = None,
    options: EmbedOptions | None = None,
) -> EmbedEstimate:
    """Dry run: how many texts a run would embed and how many the cache holds. No model is
    called (the default embedder is loaded, to know its identity)."""
    opts = options or EmbedOptions()
    models = _models(metrics)
    _, occurrences, _ = _plan(samples, metrics, models)
    distinct = cached = calls = 0
    for model in _distinct(models):
        keys = [model.key(t) for t in model.owner] if cache is not None else []
        held = cache.get_many(keys) if cache is not None else {}
        missing = len(model.owner) - len(held)
        distinct += len(model.owner)
        cached += len(held)
        calls += math.ceil(missing / opts.batch_size)
    return EmbedEstimate(
        texts=occurrences,
        distinct=distinct,
        cached=cached,
        to_embed=distinct - cached,
        calls=calls,
        samples=len(samples),
        metrics=[m.name for m in metrics],
        models=[m.identity for m in _distinct(models)],
    )


class _Batches:
    """Sends one run's batches: bounded, timed, retried, checked, cached."""

    def __init__(
        self,
        run: EmbedRun,
        opts: EmbedOptions,
        cache: EmbedCache | None,
        progress: Callable[[int, int], None] | None,
        total: int,
    ) -> None:
        self.run = run
        self.opts = opts
        self.cache = cache
        self.sems: dict[int, asyncio.Semaphore] = {}  # id(model) -> its bound
        self.progress = progress
        self.total = total
        self.done = 0

    async def one(self, model: _Model, chunk: list[str]) -> None:
        """Embed ``chunk`` (what the cache still lacks of it), keep and cache the vectors."""
        async with self._sem(model):
            texts = self._not_cached_meanwhile(model, chunk)
            if texts:
                vectors = await self._call(model, texts)
                if vectors is not None:
                    self._keep(model, texts, vectors)
        self.done += len(chunk)
        if self.progress:
            self.progress(min(self.done, self.total), self.total)

    def _sem(self, model: _Model) -> asyncio.Semaphore:
        """The model's bound: ``concurrency`` calls in flight, or fewer when the embedder
        says it takes fewer (its ``max_concurrency``, e.g. 1 for a local model run in a
        thread); waiting for it is not part of a call's ``timeout``."""
        sem = self.sems.get(id(model))
        if sem is None:
            limit = max_concurrency(model.embedder)
            sem = asyncio.Semaphore(min(self.opts.concurrency, limit or self.opts.concurrency))
            self.sems[id(model)] = sem
        return sem

    def _not_cached_meanwhile(self, model: _Model, texts: list[str]) -> list[str]:
        if self.cache is None:
            return texts
        held = self.cache.get_many([model.key(t) for t in texts])
        rest = [t for t in texts if model.key(t) not in held]
        if len(rest) < len(texts):
            hits = [t for t in texts if model.key(t) in held]
            model.accept_many(hits, [held[model.key(t)] for t in hits])
            self.run.cache_hits += len(hits)
        return rest

    async def _call(self, model: _Model, texts: list[str]) -> list[Vector] | None:
        opts = self.opts
        for attempt in range(opts.retries + 1):
            self.run.calls += 1
            try:
                coro = model.embedder.embed(texts)
                out = await (asyncio.wait_for(coro, opts.timeout) if opts.timeout else coro)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_transient(exc) and attempt < opts.retries:
                    await asyncio.sleep(min(opts.max_backoff, opts.backoff * 2**attempt))
                    continue
                kind = (
                    "timed out"
                    if isinstance(exc, (asyncio.TimeoutError, TimeoutError))
                    else f"raised {exc!r}"
                )
                why = f"embedding model {model.name!r} {kind} after {attempt + 1} attempt(s)"
                model.failed.update(dict.fromkeys(texts, why))
                return None
            rows: list[Any] | None
            try:
                rows = list(out)  # a list, or e.g. a numpy matrix: one row a text
            except TypeError:
                rows = None
            if rows is None or len(rows) != len(texts):
                got = len(rows) if rows is not None else "no list of"
                raise EmbedderOutputError(
                    f"embedding model {model.name!r} returned {got} vectors for a batch of "
                    f"{len(texts)} texts (the first needed by sample {model.owner[texts[0]]!r}); "
                    "an embedder must return one vector per text, in order"
                )
            return rows
        return None  # pragma: no cover - the loop always returns

    def _keep(self, model: _Model, texts: list[str], vectors: list[Vector]) -> None:
        rows = model.accept_many(texts, vectors)
        self.run.embedded += len(texts)
        if self.cache is None:
            return
        kept = {model.key(t): row for t, row in zip(texts, rows, strict=True)}
        if not self.cache.put_many(kept, model=model.name):
            self.run.cache_writes_skipped += len(kept)
            self.run.cache_write_problem = self.cache.write_problem


async def arun_embeddings(
    samples: Sequence[RagSample],
    metrics: Sequence[EmbedMetric],
    *,
    cache: EmbedCache | None = None,
    options: EmbedOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> EmbedRun:
    """Score ``samples`` with the embedding ``metrics`` (async). See the module docstring;
    ``progress(done, total)`` counts distinct texts."""
    opts = options or EmbedOptions()
    models = _models(metrics)
    jobs, occurrences, skipped = _plan(samples, metrics, models)
    run = EmbedRun(texts=occurrences, models=[m.identity for m in _distinct(models)])
    for sid, reasons in skipped.items():
        for name, why in reasons.items():
            run.scores.setdefault(sid, {})[name] = None
            run.reasons.setdefault(sid, {})[name] = why
    total = sum(len(m.owner) for m in _distinct(models))
    batches = _Batches(run, opts, cache, progress, total)
    tasks: list[asyncio.Future[None]] = []
    for model in _distinct(models):
        pending = _from_cache(model, cache, run)
        batches.done += len(model.owner) - len(pending)
        pending.sort(key=text_length)  # a batch of like lengths pads least
        for start in range(0, len(pending), opts.batch_size):
            chunk = pending[start : start + opts.batch_size]
            tasks.append(asyncio.ensure_future(batches.one(model, chunk)))
    if progress:
        progress(batches.done, total)
    await gather_or_cancel(tasks)
    _score(jobs, run)
    return run


_PIECES = re.compile(r"\w+|[^\w\s]")


def text_length(text: str) -> tuple[int, int]:
    """How long ``text`` is for a model, roughly: its words and punctuation marks (the
    pieces a BERT-style tokenizer splits first; each is one token or more), then its
    characters. The runner sends texts in this order, so a model that pads a batch to its
    longest text pads least: sorted by characters alone (what Sentence Transformers'
    ``encode`` does inside a call), the model read 31% more tokens than the benchmark's
    texts hold (``docs/semantic_speed.md``), sorted by pieces 1% more.

    >>> text_length("Paris, France."), sorted(["a b c", "abcdefgh", "a, b"], key=text_length)
    ((4, 14), ['abcdefgh', 'a, b', 'a b c'])
    """
    return len(_PIECES.findall(text)), len(text)


def _from_cache(model: _Model, cache: EmbedCache | None, run: EmbedRun) -> list[str]:
    """Serve the model's texts the cache holds; the texts still to embed, in order."""
    if cache is None:
        return list(model.owner)
    held = cache.get_many([model.key(t) for t in model.owner])
    hits = [t for t in model.owner if model.key(t) in held]
    for start in range(0, len(hits), 4096):  # one matrix per 4096 vectors
        chunk = hits[start : start + 4096]
        model.accept_many(chunk, [held[model.key(t)] for t in chunk])
    run.cache_hits += len(hits)
    return [t for t in model.owner if model.key(t) not in held]


def _score(jobs: _Plan, run: EmbedRun) -> None:
    """Each job's score: ``None`` with the reasons when a text it needs has no vector, else
    the metric's :meth:`~ragmeter.embed.metrics.EmbedMetric.compute_many` over all the
    samples it scores with one model (one vectorised pass)."""
    groups: dict[tuple[int, int], tuple[EmbedMetric, _Model, list[RagSample]]] = {}
    for sample, metric, model in jobs:
        row = run.scores.setdefault(sample.id, {})
        row[metric.name] = None
        if model.failed:
            failed = sorted({model.failed[t] for t in metric.texts(sample) if t in model.failed})
            if failed:
                run.reasons.setdefault(sample.id, {})[metric.name] = "; ".join(failed)
                continue
        groups.setdefault((id(metric), id(model)), (metric, model, []))[2].append(sample)
    for metric, model, samples in groups.values():
        scored = metric.compute_many(samples, model.vectors)
        for sample, (value, notes, detail) in zip(samples, scored, strict=True):
            _keep_score(run, sample.id, metric.name, value, notes, detail)


def _keep_score(
    run: EmbedRun,
    sample_id: str,
    name: str,
    value: float,
    notes: list[str],
    detail: dict[str, Any] | None,
) -> None:
    run.scores[sample_id][name] = value
    if notes:
        run.notes.setdefault(sample_id, {})[name] = notes
    if detail:
        run.details.setdefault(sample_id, {})[name] = detail


def run_embeddings(
    samples: Sequence[RagSample], metrics: Sequence[EmbedMetric], **kwargs: Any
) -> EmbedRun:
    """Synchronous :func:`arun_embeddings`; works inside a running event loop too."""
    return run_sync(lambda: arun_embeddings(samples, metrics, **kwargs), "ragmeter-embeddings")
