"""Bounded, cached, budgeted execution of judge metrics over samples.

* **Bounded**: at most ``concurrency`` calls in flight, an optional requests-per-minute
  limit, a per-call ``timeout``; transient errors (rate limits, timeouts, 5xx: see
  :func:`~ragmeter.judge.protocol.is_transient`) are retried with exponential backoff,
  other errors are not.
* **Honest**: a call that fails for good, or a reply that is not a valid verdict, gives the
  sample ``None`` for that metric with the reason recorded; never NaN, never dropped.
* **Cached**: replies are stored in a :class:`~ragmeter.judge.cache.JudgeCache`; a re-run is
  served from it (``cache_hits``) and sends nothing (``calls``). The cache is looked up
  once for every job up front and again right before each call, so a verdict another
  process committed in the meantime is used rather than paid for twice. A verdict the
  cache could not store (read-only cache, failed write) is still used, and counted in
  ``cache_writes_skipped``.
* **One call per prompt**: jobs with the same cache key (the same metric, prompt, judge
  identity and repeat index, e.g. two identical samples) share one call within a run; the
  others reuse its verdict or its failure (counted in ``deduplicated``, not in ``calls``).
* **Budgeted**: ``max_calls`` / ``max_tokens`` stop the run cleanly: no new call starts
  past the budget, the rest get ``None`` with reason ``"budget exhausted"`` and the result
  is marked ``incomplete``. :func:`estimate_judges` is the dry run. A
  :class:`JudgeBudget` (``budget=``) is a budget shared with other runs, e.g. every
  partition of a Dask evaluation (:mod:`ragmeter.dask`): each call must be granted by it
  too.
* **Cancellable**: cancelling the run cancels every call in flight and waits for them, so
  no background task outlives it.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from ragmeter.errors import InvalidInputError
from ragmeter.judge.cache import JudgeCache, cache_key
from ragmeter.judge.metrics import JudgeMetric, VerdictError
from ragmeter.judge.protocol import JudgeReply, Message, is_transient
from ragmeter.schema import RagSample

__all__ = [
    "JudgeBudget",
    "JudgeEstimate",
    "JudgeOptions",
    "JudgeRun",
    "arun_judges",
    "estimate_judges",
    "gather_or_cancel",
    "run_judges",
    "run_sync",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class JudgeOptions:
    """Execution limits for judge calls (all optional but ``concurrency``)."""

    concurrency: int = 8
    requests_per_minute: float | None = None
    timeout: float | None = 60.0
    retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 20.0
    max_calls: int | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise InvalidInputError(f"concurrency must be >= 1, got {self.concurrency!r}")
        if self.retries < 0:
            raise InvalidInputError(f"retries must be >= 0, got {self.retries!r}")
        if self.requests_per_minute is not None and self.requests_per_minute <= 0:
            raise InvalidInputError(
                f"requests_per_minute must be > 0, got {self.requests_per_minute!r}"
            )
        if self.timeout is not None and not self.timeout > 0:
            raise InvalidInputError(
                f"timeout must be > 0 seconds or None (no timeout), got {self.timeout!r}"
            )
        for name in ("max_calls", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 0):
                raise InvalidInputError(
                    f"{name} must be an int >= 0 or None (no budget), got {value!r}"
                )


@runtime_checkable
class JudgeBudget(Protocol):
    """A call and token budget shared by several runs (other threads, processes, machines).

    The runner asks :meth:`spend_call` before every call it would send (retries included),
    in a worker thread, after the cache had no verdict; ``None`` grants the call and counts
    it, a string refuses it and says why (the job gets ``None`` with reason ``"budget
    exhausted"``, the run is marked incomplete with that reason). After each reply it
    reports the reply's tokens to :meth:`spend_tokens`. A call granted here but refused by
    the run's own ``max_calls``/``max_tokens`` stays counted: a shared budget may end
    slightly underused, never overspent.
    """

    def spend_call(self) -> str | None:
        """Grant (and count) one call, or say why not."""
        ...

    def spend_tokens(self, tokens: int) -> None:
        """Count the input and output tokens of one reply."""
        ...


@dataclass
class JudgeEstimate:
    """What a run would cost before anything is spent (``tokens`` ~ characters / 4)."""

    calls: int
    cached: int
    input_tokens: int
    samples: int
    metrics: list[str]


@dataclass
class JudgeRun:
    """Per-sample judge scores and what it took to get them.

    ``calls`` counts calls sent (retries included), ``cache_hits`` verdicts served from the
    cache, ``deduplicated`` verdicts shared with an identical job of the same run.
    ``cache_writes_skipped`` counts new verdicts the cache did not store, and
    ``cache_write_problem`` says why (e.g. ``"the cache is read-only"``).
    """

    scores: dict[str, dict[str, float | None]] = field(default_factory=dict)
    reasons: dict[str, dict[str, str]] = field(default_factory=dict)
    spread: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    incomplete: bool = False
    stop_reason: str | None = None
    deduplicated: int = 0
    cache_writes_skipped: int = 0
    cache_write_problem: str | None = None


@dataclass
class _Job:
    sample_id: str
    metric: JudgeMetric
    repeat: int
    messages: list[Message]
    key: str
    reply: JudgeReply | None = None
    error: str | None = None


def _plan(
    samples: Sequence[RagSample], metrics: Sequence[JudgeMetric]
) -> tuple[list[_Job], dict[str, dict[str, str]]]:
    jobs: list[_Job] = []
    skipped: dict[str, dict[str, str]] = {}
    # The identity is read once per metric and run: it may take some work to compute
    # (FunctionJudge fingerprints its function), and it must not change half-way.
    identities = [dict(metric.judge.identity) for metric in metrics]
    for sample in samples:
        for metric, identity in zip(metrics, identities, strict=True):
            if not metric.applies_to(sample):
                need = ", ".join(sorted(metric.needs))
                skipped.setdefault(sample.id, {})[metric.name] = f"sample lacks one of: {need}"
                continue
            messages = metric.messages(sample)
            for r in range(metric.repeats):
                key = cache_key(metric.name, metric.version, messages, identity, r)
                jobs.append(_Job(sample.id, metric, r, messages, key))
    return jobs, skipped


def _estimate_tokens(messages: Sequence[Message]) -> int:
    return sum(math.ceil(len(m.content) / 4) + 4 for m in messages)


def estimate_judges(
    samples: Sequence[RagSample], metrics: Sequence[JudgeMetric], *, cache: JudgeCache | None = None
) -> JudgeEstimate:
    """Dry run: how many calls (and roughly how many input tokens) a run would send.

    ``cached`` counts the verdicts the cache holds; ``calls`` the distinct prompts it does
    not (identical jobs share one call, as in a run), before retries.
    """
    jobs, _ = _plan(samples, metrics)
    cached = 0
    to_send: dict[str, _Job] = {}
    for job in jobs:
        if cache is not None and cache.get(job.key) is not None:
            cached += 1
        else:
            to_send.setdefault(job.key, job)
    return JudgeEstimate(
        calls=len(to_send),
        cached=cached,
        input_tokens=sum(_estimate_tokens(j.messages) for j in to_send.values()),
        samples=len(samples),
        metrics=[m.name for m in metrics],
    )


class _Limiter:
    def __init__(self, rpm: float | None) -> None:
        self._interval = 60.0 / rpm if rpm else 0.0
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self._interval:
            return
        async with self._lock:
            now = time.monotonic()
            delay = self._next - now
            self._next = max(now, self._next) + self._interval
        if delay > 0:
            await asyncio.sleep(delay)


async def arun_judges(
    samples: Sequence[RagSample],
    metrics: Sequence[JudgeMetric],
    *,
    cache: JudgeCache | None = None,
    options: JudgeOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    budget: JudgeBudget | None = None,
) -> JudgeRun:
    """Score ``samples`` with judge ``metrics`` (async). See the module docstring;
    ``budget`` is a :class:`JudgeBudget` shared with other runs."""
    opts = options or JudgeOptions()
    jobs, skipped = _plan(samples, metrics)
    run = JudgeRun()
    for sid, reasons in skipped.items():
        for name, why in reasons.items():
            run.scores.setdefault(sid, {})[name] = None
            run.reasons.setdefault(sid, {})[name] = why
    pending, twins = _look_up(jobs, cache, run)
    calls = _Calls(run, opts, cache, budget, twins, progress, len(jobs))
    await gather_or_cancel([asyncio.ensure_future(calls.one(job)) for job in pending])
    _collect(jobs, run)
    return run


async def gather_or_cancel(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Wait for every task; if one fails or the wait is cancelled, cancel them all and wait
    for them, so no background task outlives the run, then raise."""
    try:
        if tasks:
            await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _look_up(
    jobs: Sequence[_Job], cache: JudgeCache | None, run: JudgeRun
) -> tuple[list[_Job], dict[str, list[_Job]]]:
    """Serve the jobs the cache holds; the rest: one job to send per cache key, and the
    identical jobs (key -> jobs) that will reuse its verdict."""
    pending: list[_Job] = []
    twins: dict[str, list[_Job]] = {}  # key -> jobs that reuse the first job's verdict
    for job in jobs:
        hit = cache.get(job.key) if cache is not None else None
        if hit is not None:
            job.reply = hit
            run.cache_hits += 1
        elif job.key in twins:
            twins[job.key].append(job)
        else:
            twins[job.key] = []
            pending.append(job)
    return pending, twins


class _Calls:
    """Sends the judge calls of one run: bounded, rate-limited, retried, budgeted."""

    def __init__(
        self,
        run: JudgeRun,
        opts: JudgeOptions,
        cache: JudgeCache | None,
        budget: JudgeBudget | None,
        twins: dict[str, list[_Job]],
        progress: Callable[[int, int], None] | None,
        total: int,
    ) -> None:
        self.run = run
        self.opts = opts
        self.cache = cache
        self.budget = budget
        self.twins = twins
        self.progress = progress
        self.sem = asyncio.Semaphore(opts.concurrency)
        self.limiter = _Limiter(opts.requests_per_minute)
        self.done = run.cache_hits  # twins count as done when the job they wait for is
        self.total = total
        if progress:
            progress(self.done, total)

    def over_budget(self) -> bool:
        """Whether the run's own call or token budget is spent (``stop_reason`` says so)."""
        run, opts = self.run, self.opts
        if opts.max_calls is not None and run.calls >= opts.max_calls:
            run.stop_reason = f"call budget of {opts.max_calls} reached"
            return True
        used = run.input_tokens + run.output_tokens
        if opts.max_tokens is not None and used >= opts.max_tokens:
            run.stop_reason = f"token budget of {opts.max_tokens} reached ({used} used)"
            return True
        return False

    async def one(self, job: _Job) -> None:
        """Get ``job``'s verdict (or its failure), share it with its twins, count progress."""
        async with self.sem:
            for attempt in range(self.opts.retries + 1):
                if await self.attempt(job, attempt):
                    break
        for twin in self.twins[job.key]:
            twin.reply, twin.error = job.reply, job.error
            if twin.reply is not None:
                self.run.deduplicated += 1
        self.done += 1 + len(self.twins[job.key])
        if self.progress:
            self.progress(self.done, self.total)

    async def attempt(self, job: _Job, attempt: int) -> bool:
        """One try at ``job``'s verdict; ``False`` when a transient error asks for another."""
        run, opts, cache = self.run, self.opts, self.cache
        # Wait for the rate limiter *before* checking the budget: no await may come
        # between the check and the count, or waiting tasks would overshoot it.
        await self.limiter.wait()
        if attempt == 0 and cache is not None:
            # Another process may have committed this verdict since the lookup
            # above (two runs over the same data): use it rather than pay twice.
            hit = cache.get(job.key)
            if hit is not None:
                job.reply = hit
                run.cache_hits += 1
                return True
        if self.budget is not None:
            refused = await asyncio.to_thread(self.budget.spend_call)
            if refused is not None:
                run.stop_reason = refused
                run.incomplete = True
                job.error = "budget exhausted"
                return True
        if self.over_budget():
            run.incomplete = True
            job.error = "budget exhausted"
            return True
        run.calls += 1
        try:
            coro = job.metric.judge.complete(job.messages)
            reply = await (asyncio.wait_for(coro, opts.timeout) if opts.timeout else coro)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if is_transient(exc) and attempt < opts.retries:
                await asyncio.sleep(min(opts.max_backoff, opts.backoff * 2**attempt))
                return False
            kind = (
                "timed out"
                if isinstance(exc, (asyncio.TimeoutError, TimeoutError))
                else f"raised {exc!r}"
            )
            job.error = f"judge {kind} after {attempt + 1} attempt(s)"
            return True
        await self.keep(job, reply)
        return True

    async def keep(self, job: _Job, reply: JudgeReply) -> None:
        """Record a reply: the job's verdict, its tokens (on the shared budget too), and
        the cache (counting a verdict it did not store)."""
        run, cache = self.run, self.cache
        job.reply = reply
        run.input_tokens += reply.input_tokens or 0
        run.output_tokens += reply.output_tokens or 0
        if self.budget is not None:
            used = (reply.input_tokens or 0) + (reply.output_tokens or 0)
            await asyncio.to_thread(self.budget.spend_tokens, used)
        if cache is not None and not cache.put(job.key, reply):
            run.cache_writes_skipped += 1
            run.cache_write_problem = cache.write_problem


def _collect(jobs: Sequence[_Job], run: JudgeRun) -> None:
    grouped: dict[tuple[str, str], list[_Job]] = {}
    for job in jobs:
        grouped.setdefault((job.sample_id, job.metric.name), []).append(job)
    for (sid, name), group in grouped.items():
        values: list[float] = []
        errors: list[str] = []
        for job in group:
            if job.reply is None:
                errors.append(job.error or "not run")
                continue
            try:
                values.append(job.metric.parse(job.reply.text))
            except VerdictError as exc:
                errors.append(f"unparseable verdict: {exc}")
        row = run.scores.setdefault(sid, {})
        if values:
            mean = math.fsum(values) / len(values)
            row[name] = mean
            if len(group) > 1:
                var = math.fsum((v - mean) ** 2 for v in values) / len(values)
                run.spread.setdefault(sid, {})[name] = {
                    "n": float(len(values)),
                    "std": math.sqrt(var),
                    "min": min(values),
                    "max": max(values),
                }
        else:
            row[name] = None
        if errors:
            run.reasons.setdefault(sid, {})[name] = "; ".join(sorted(set(errors)))


def run_judges(
    samples: Sequence[RagSample],
    metrics: Sequence[JudgeMetric],
    **kwargs: Any,
) -> JudgeRun:
    """Synchronous :func:`arun_judges`; works inside a running event loop (uses a thread)."""
    return run_sync(lambda: arun_judges(samples, metrics, **kwargs), "ragmeter-judges")


def run_sync(make: Callable[[], Coroutine[Any, Any, _T]], name: str) -> _T:
    """Run the coroutine ``make()`` returns to completion from synchronous code; inside a
    running event loop (a notebook, a server), in a thread named ``name`` of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["out"] = asyncio.run(make())
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name=name)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: _T = box["out"]
    return result
