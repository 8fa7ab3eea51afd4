"""``--save NAME``, ``--tag KEY=VALUE`` and ``--registry PATH``: an evaluation kept as a run.

The options are checked before anything is scored (a bad tag fails at once, not after an
hour of judging); the report is saved once it is complete, and the run's id goes to
stderr so that stdout stays the report itself (a table or JSON).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import typer

from ragmeter.cli._app import CliError
from ragmeter.errors import RagmeterError, describe_error
from ragmeter.report import RagEvalReport, RetrievalEvalReport

__all__ = ["SaveRequest", "parse_tags", "save_request"]


def parse_tags(tags: Sequence[str] | None) -> dict[str, str]:
    """``["model=bm25", "split=test"]`` -> ``{"model": "bm25", "split": "test"}``;
    :class:`CliError` for a tag without ``=`` or an empty key, or a key given twice.

    >>> parse_tags(["model=bm25", "note=a=b"])
    {'model': 'bm25', 'note': 'a=b'}
    """
    out: dict[str, str] = {}
    for tag in tags or ():
        key, sep, value = tag.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliError(f"--tag takes KEY=VALUE, e.g. --tag model=bm25; got {tag!r}")
        if key in out:
            raise CliError(f"--tag {key} is given twice ({out[key]!r} and {value!r})")
        out[key] = value
    return out


@dataclass(frozen=True)
class SaveRequest:
    """What ``--save`` asked for: the run's name, its tags and the registry's path."""

    name: str
    tags: dict[str, str]
    registry: Path | None

    def save(self, report: RetrievalEvalReport | RagEvalReport) -> str:
        """Save ``report``, say its run id on stderr and return the id (a failure to save
        is :class:`CliError`, exit 2, naming the registry)."""
        from ragmeter.registry import Registry

        try:
            registry = Registry(self.registry)
            record = registry.save(report, name=self.name, tags=self.tags)
        except (RagmeterError, OSError) as exc:
            raise CliError(f"--save {self.name}: {describe_error(exc)}") from None
        typer.echo(
            f"saved run {record.id} as {self.name!r} in {registry.path}",
            err=True,
        )
        return record.id


def save_request(
    name: str | None, tags: Sequence[str] | None, registry: Path | None
) -> SaveRequest | None:
    """The checked ``--save``/``--tag``/``--registry`` options (``None``: nothing to save)."""
    if name is None:
        if tags:
            raise CliError("--tag labels a saved run: add --save NAME")
        if registry is not None:
            raise CliError("--registry names where --save keeps runs: add --save NAME")
        return None
    if not name.strip():
        raise CliError("--save takes the run's name, e.g. --save bm25; got an empty name")
    return SaveRequest(name.strip(), parse_tags(tags), registry)
