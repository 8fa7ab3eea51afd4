"""Deferred capture: a hook keeps references, the records are made later, in batches.

A framework hook runs in the middle of the user's pipeline, between the framework's own
work, and whatever code it runs is cold there: measured on 10-document pipelines, the same
capture code that takes 10-17 µs when replayed in a loop adds 60-100 µs to a real query,
almost all of it cache misses, not instructions. So an adapter whose hooks do real work
(reading a component's outputs, deciding stages) can instead append what it was given to
an event log (references only, a few hundred nanoseconds), hand the log of a finished run
to a :class:`Backlog`, and interpret it later: the backlog runs its pending work once
``size`` runs are waiting, all in one go (warm code), and before anything reads a store
(:meth:`~ragmeter.capture.SampleStore.settle`), so readers never see the difference.

While a log is interpreted, :func:`replaying` makes :func:`now` and :func:`thread_now`
give the time and thread the event happened at, so the records (start and end times,
threads, stage order) are exactly what live capture would have made.

>>> backlog = Backlog(size=2)
>>> done = []
>>> backlog.add(lambda: done.append(1))
>>> done
[]
>>> backlog.add(lambda: done.append(2))
>>> done
[1, 2]
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar

__all__ = ["BACKLOG_SIZE", "Backlog", "now", "replaying", "thread_now"]

logger = logging.getLogger("ragmeter.capture")

BACKLOG_SIZE = 64
"""Runs a :class:`Backlog` keeps before it interprets them (measured: 64 brings a Haystack
tracer from +60-100 µs to about +30 µs per query; each run's references wait at most
this many runs, or until a store is read)."""

_REPLAY: ContextVar[tuple[float, int] | None] = ContextVar("ragmeter_replay", default=None)


def now() -> float:
    """``time.perf_counter()``, or the time of the event being replayed."""
    at = _REPLAY.get()
    return time.perf_counter() if at is None else at[0]


def thread_now() -> int:
    """``threading.get_ident()``, or the thread of the event being replayed."""
    at = _REPLAY.get()
    return threading.get_ident() if at is None else at[1]


def replaying(at: float, thread: int) -> None:
    """Make :func:`now` and :func:`thread_now` give ``at`` and ``thread`` in this context
    (call it inside the :class:`~contextvars.Context` a replay runs in)."""
    _REPLAY.set((at, thread))


class Backlog:
    """Work deferred by capture hooks, run ``size`` items at a time and on :meth:`settle`.

    :meth:`add` is safe from any thread; work runs in the order it was added, one batch
    at a time (a reader calling :meth:`settle` while a batch runs waits for it). Work must
    not raise; if it does, the problem is logged and the rest still runs (a capture never
    fails the user's pipeline).
    """

    def __init__(self, size: int = BACKLOG_SIZE) -> None:
        self.size = size
        self._pending: list[Callable[[], object]] = []
        self._guard = threading.Lock()  # the pending list
        self._running = threading.RLock()  # one batch at a time (a work may read a store)

    def add(self, work: Callable[[], object]) -> None:
        """Keep ``work``; run everything pending once ``size`` items wait."""
        with self._guard:
            pending = self._pending
            pending.append(work)
            full = len(pending) >= self.size
        if full:
            self.settle()

    def settle(self) -> None:
        """Run everything pending now (readers call it before they read)."""
        if not self._pending:
            return
        with self._running:
            while True:
                with self._guard:
                    batch, self._pending = self._pending, []
                if not batch:
                    return
                for work in batch:
                    try:
                        work()
                    except Exception:  # never into the pipeline or the reader
                        logger.exception("ragmeter: a deferred capture failed")

    def __len__(self) -> int:
        return len(self._pending)
