"""The registry's errors: a database it cannot use, a run it cannot find, two runs it will
not compare."""

from __future__ import annotations

from ragmeter.errors import InvalidInputError, RagmeterError

__all__ = ["IncomparableRunsError", "RegistryError", "RunNotFoundError"]


class RegistryError(RagmeterError):
    """A registry database that cannot be used (corrupt, not ragmeter's, from a newer
    ragmeter, read-only when written to) or a scores file that does not match its hash;
    the message names the file."""


class RunNotFoundError(RegistryError, LookupError):
    """No run matches a reference; the message names the reference and what exists."""

    def __str__(self) -> str:  # not KeyError's quoted repr
        return str(self.args[0]) if self.args else ""


class IncomparableRunsError(InvalidInputError):
    """Two runs scored on other ground truth or under other settings; the message lists
    what differs and how to compare them on their common queries anyway."""
