"""Character-level evidence: spans of source documents (seed 004).

Offsets are half-open ``[start, end)`` character positions in a source document.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragmeter.errors import InvalidInputError

__all__ = ["Chunk", "GoldSpan", "Span"]


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open character range ``[start, end)`` of document ``doc_id``.

    >>> Span("doc1", 100, 270).length
    170
    >>> Span("doc1", 5, 2)
    Traceback (most recent call last):
    ...
    ragmeter.errors.InvalidInputError: Span('doc1', 5, 2): start must be <= end
    """

    doc_id: str
    start: int
    end: int

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(
                    f"Span({self.doc_id!r}, {self.start!r}, {self.end!r}): {name} must be an "
                    f"int >= 0, got {value!r}"
                )
        if self.start > self.end:
            raise InvalidInputError(
                f"Span({self.doc_id!r}, {self.start}, {self.end}): start must be <= end"
            )

    @property
    def length(self) -> int:
        """Number of characters covered."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class GoldSpan:
    """A span of gold evidence with an IR grade (2 fully relevant, 1 partial, 0 not)."""

    span: Span
    grade: int = 2


@dataclass(frozen=True, slots=True)
class Chunk:
    """A retrievable piece of a document: its id, where it sits, and its text."""

    id: str
    span: Span
    text: str = ""
