"""Fixtures shared by the metric tests."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType

import pytest


@contextmanager
def _finishes_within(seconds: int) -> Iterator[None]:
    """Fail rather than hang: on the inputs used with it, a quadratic kernel runs for hours."""

    def hang(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"still running after {seconds} s: quadratic in the input?")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def finishes_within() -> Callable[[int], AbstractContextManager[None]]:
    """``with finishes_within(30): ...`` raises TimeoutError instead of hanging (POSIX)."""
    return _finishes_within
