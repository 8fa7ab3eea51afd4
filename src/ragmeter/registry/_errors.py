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
    what differs and how to compare them on their common queries anyway.

    >>> error = IncomparableRunsError.between("a1", "b2", ["relevance_level 1 vs 2"], 48)
    >>> str(error)[:61]
    'runs a1 and b2 are not like for like: relevance_level 1 vs 2.'
    >>> error.reasons
    ['relevance_level 1 vs 2']
    """

    def __init__(self, message: str, reasons: list[str] | None = None) -> None:
        super().__init__(message)
        self.reasons: list[str] = list(reasons or [])
        """What differs, one item per difference."""

    @classmethod
    def between(cls, a: str, b: str, reasons: list[str], common: int) -> IncomparableRunsError:
        """The error for runs ``a`` and ``b`` (their ids or names), with ``reasons`` (from
        :meth:`~ragmeter.registry.Registry.comparability`) and how many ids both scored."""
        return cls(
            f"runs {a} and {b} are not like for like: {'; '.join(reasons)}. To compare them "
            f"anyway on the {common} ids both scored, pass common_queries=True (CLI: "
            "--common-queries); the result then says so",
            reasons,
        )
