"""Progress bars on stderr: for large JSONL inputs and for judge calls, on a terminal only."""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ragmeter.cli._app import PROGRESS_MIN_BYTES, T, _stderr

if TYPE_CHECKING:
    from rich.progress import Progress


def with_progress(
    items: Iterable[T], *, total: int | None, enabled: bool
) -> Generator[T, None, None]:
    """Yield ``items`` while advancing a rich progress bar on stderr (when ``enabled``)."""
    if not enabled:
        yield from items
        return
    progress = _bar("reading samples")
    with progress:
        task = progress.add_task("samples", total=total)
        pending = 0
        for item in items:
            yield item
            pending += 1
            if pending == 256:  # advancing per item would cost more than a cheap metric
                progress.advance(task, pending)
                pending = 0
        progress.advance(task, pending)


def count_lines(path: Path) -> int:
    count = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            count += block.count(b"\n")
    return count


def wanted(path: Path, as_json: bool) -> bool:
    return not as_json and sys.stderr.isatty() and path.stat().st_size >= PROGRESS_MIN_BYTES


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


@contextmanager
def judge_progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar of judge calls on stderr; yields the runner's ``progress``
    callback, or ``None`` when not ``enabled``."""
    if not enabled:
        yield None
        return
    bar = _bar("judging")
    with bar:
        task = bar.add_task("judge calls", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _bar(label: str) -> Progress:
    """A transient rich progress bar on stderr: ``label``, the bar, done/total, elapsed."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_stderr(),
        transient=True,
    )
