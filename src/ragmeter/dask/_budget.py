"""The judge budget of a Dask evaluation: one count of calls and tokens for every partition.

On a ``distributed`` cluster the count lives in the **scheduler**: a small scheduler plugin
(:class:`BudgetPlugin`, registered once per scheduler) adds one handler, and every judge
call a worker would send first asks it (:meth:`SchedulerBudget.spend_call`, one message,
answered atomically by the scheduler's event loop). The scheduler outlives workers, so a
worker that dies keeps its calls counted: a recomputed partition is charged again, and the
budget can end slightly underused, never overspent. Without a cluster (Dask's threaded or
synchronous scheduler) every partition runs in this process and :class:`LocalBudget`, a
locked counter, is the budget.

This module imports nothing from ragmeter, so the plugin is sent to the scheduler by
value: the scheduler needs ``distributed`` but not ragmeter.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

__all__ = ["HANDLER", "BudgetPlugin", "LocalBudget", "SchedulerBudget", "refusal"]

HANDLER = "ragmeter_judge_budget"
"""The scheduler handler the plugin adds."""


def refusal(calls: int, tokens: int, max_calls: int | None, max_tokens: int | None) -> str | None:
    """Why no further call may start (the runner's own wording), or ``None``.

    >>> refusal(3, 0, 3, None), refusal(1, 10, None, 10), refusal(0, 0, 1, 1)
    ('call budget of 3 reached', 'token budget of 10 reached (10 used)', None)
    """
    if max_calls is not None and calls >= max_calls:
        return f"call budget of {max_calls} reached"
    if max_tokens is not None and tokens >= max_tokens:
        return f"token budget of {max_tokens} reached ({tokens} used)"
    return None


class BudgetPlugin(SchedulerPlugin):  # type: ignore[misc]
    """Scheduler plugin: budgets by name, ``[calls, tokens, max_calls, max_tokens]``."""

    name = "ragmeter-judge-budget"
    idempotent = True

    def __init__(self) -> None:
        self.budgets: dict[str, list[Any]] = {}

    def start(self, scheduler: Any) -> None:
        scheduler.handlers[HANDLER] = self.handle

    def handle(
        self,
        action: str,
        budget: str,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        tokens: int = 0,
    ) -> Any:
        """``open`` a budget, ``spend`` a call (the refusal, or None), add ``tokens``, or
        ``close`` it (returns ``[calls, tokens]``)."""
        if action == "open":
            self.budgets[budget] = [0, 0, max_calls, max_tokens]
            return None
        state = self.budgets.get(budget)
        if state is None:
            return "the evaluation's judge budget is closed" if action == "spend" else None
        if action == "spend":
            refused = refusal(state[0], state[1], state[2], state[3])
            if refused is None:
                state[0] += 1
            return refused
        if action == "tokens":
            state[1] += int(tokens)
            return None
        if action == "close":
            del self.budgets[budget]
            return [state[0], state[1]]
        raise ValueError(f"unknown budget action {action!r}")


class SchedulerBudget:
    """A :class:`~ragmeter.judge.runner.JudgeBudget` kept by the scheduler (pickles by name).

    :meth:`bind` must be called in the task's thread (it finds the worker); the runner then
    calls :meth:`spend_call` and :meth:`spend_tokens` from other threads.
    """

    def __init__(self, name: str, max_calls: int | None, max_tokens: int | None) -> None:
        self.name = name
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self._worker: Any = None

    def __getstate__(self) -> tuple[str, int | None, int | None]:
        return self.name, self.max_calls, self.max_tokens

    def __setstate__(self, state: tuple[str, int | None, int | None]) -> None:
        self.name, self.max_calls, self.max_tokens = state
        self._worker = None

    def bind(self) -> SchedulerBudget:
        """This budget, bound to the worker running the current task."""
        from distributed import get_worker

        self._worker = get_worker()
        return self

    def _ask(self, action: str, **kwargs: Any) -> Any:
        from distributed.utils import sync

        worker = self._worker
        call = getattr(worker.scheduler, HANDLER)
        return sync(worker.loop, call, action=action, budget=self.name, **kwargs)

    def spend_call(self) -> str | None:
        """Ask the scheduler for one call; a budget that cannot be reached refuses."""
        try:
            refused = self._ask("spend")
        except Exception as exc:  # never call unbudgeted
            return f"the shared judge budget could not be reached ({exc!r})"
        return None if refused is None else str(refused)

    def spend_tokens(self, tokens: int) -> None:
        """Add one reply's tokens to the scheduler's count."""
        with contextlib.suppress(Exception):  # then the next spend_call refuses
            self._ask("tokens", tokens=tokens)

    @staticmethod
    def open(client: Any, name: str, max_calls: int | None, max_tokens: int | None) -> None:
        """Register the plugin (once per scheduler) and open the budget ``name``."""
        import cloudpickle

        module = sys.modules[__name__]
        cloudpickle.register_pickle_by_value(module)
        try:
            client.register_plugin(BudgetPlugin())
        finally:
            cloudpickle.unregister_pickle_by_value(module)
        client.sync(
            getattr(client.scheduler, HANDLER),
            action="open",
            budget=name,
            max_calls=max_calls,
            max_tokens=max_tokens,
        )

    @staticmethod
    def close(client: Any, name: str) -> tuple[int, int]:
        """Close the budget ``name``; returns the ``(calls, tokens)`` it granted and counted."""
        got = client.sync(getattr(client.scheduler, HANDLER), action="close", budget=name)
        return (int(got[0]), int(got[1])) if got else (0, 0)


class LocalBudget:
    """The budget of partitions that all run in this process (threads): a locked count."""

    def __init__(self, max_calls: int | None, max_tokens: int | None) -> None:
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.calls = 0
        self.tokens = 0
        self._lock = threading.Lock()

    def bind(self) -> LocalBudget:
        """This budget (nothing to bind in-process)."""
        return self

    def spend_call(self) -> str | None:
        """Grant and count one call, or say why not."""
        with self._lock:
            refused = refusal(self.calls, self.tokens, self.max_calls, self.max_tokens)
            if refused is None:
                self.calls += 1
            return refused

    def spend_tokens(self, tokens: int) -> None:
        """Count one reply's tokens."""
        with self._lock:
            self.tokens += tokens
