"""Scoped ids: ``with capture(id=qid, relevance=...):`` names the runs started inside it."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ragmeter.capture._ids import ID_KEY, fields_from_metadata
from ragmeter.errors import InvalidInputError
from ragmeter.schema import RagSample, coerce_sample

if TYPE_CHECKING:
    from ragmeter.capture._front import StoreFront
    from ragmeter.capture._record import RunRecord
    from ragmeter.capture._store import SampleStore

__all__ = ["SCOPE", "Scope", "capture", "current_scope"]


SCOPE: ContextVar[Scope | None] = ContextVar("ragmeter_capture_scope", default=None)

_TRUTH = ("reference", "references", "reference_ids", "relevance")


class Scope:
    """The sample id and ground truth of the runs started inside one ``with`` block.

    Made by :func:`capture` (or an adapter's ``.capture(...)``); entering it sets it for the
    current thread or asyncio task (a :class:`~contextvars.ContextVar`, so concurrent
    threads and tasks each see their own), leaving it restores the previous one. Every
    top-level run an adapter records while it is active gets its ``id`` and ground truth,
    unless the run carries its own (``ragmeter_*`` run metadata wins). ``metadata`` joins
    the samples' ``metadata["run_metadata"]`` (its ``ragmeter_*`` keys fill fields, as in
    run metadata). With ``collect=True`` the records of those runs are kept in
    :attr:`records` (the dataset loop uses it).
    """

    __slots__ = (
        "_owner",
        "_records",
        "_state",
        "_token",
        "id",
        "metadata",
        "reference",
        "reference_ids",
        "references",
        "relevance",
    )

    def __init__(
        self,
        id: str | None = None,
        *,
        reference: str | None = None,
        references: list[str] | None = None,
        reference_ids: list[str] | None = None,
        relevance: Mapping[str, float] | None = None,
        metadata: Mapping[str, Any] | None = None,
        collect: bool = False,
    ) -> None:
        self.id = id
        self.reference = reference
        self.references = references
        self.reference_ids = reference_ids
        self.relevance = relevance
        self.metadata = metadata
        self._records: list[tuple[SampleStore, RagSample | RunRecord]] | None = (
            [] if collect else None
        )
        self._token: contextvars.Token[Scope | None] | None = None
        self._owner: StoreFront | None = None  # told when the scope opens and closes
        self._state: Any = None  # the owner's, while the scope is open

    @property
    def tagged(self) -> bool:
        """Whether the scope gives its runs a sample id."""
        return self.id is not None or bool(self.metadata and self.metadata.get(ID_KEY))

    def fields(self) -> dict[str, Any]:
        """The RagSample fields the scope sets: its ``metadata``'s ``ragmeter_*`` keys, then
        the explicit arguments (which win)."""
        out = fields_from_metadata(self.metadata)
        if self.id is not None:
            out["id"] = str(self.id)
        for name in _TRUTH:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def records(self, store: SampleStore | None = None) -> list[RagSample | RunRecord]:
        """What was recorded under the scope (``collect=True``), optionally by one store."""
        got = self._records or []
        return [rec for owner, rec in got if store is None or owner is store]

    def __enter__(self) -> Scope:
        self._token = SCOPE.set(self)
        if self._owner is not None:
            self._owner._scope_opened(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._owner is not None:
            self._owner._scope_closed(self)
        token, self._token = self._token, None
        if token is not None:
            SCOPE.reset(token)

    def __repr__(self) -> str:
        shown = {k: getattr(self, k) for k in ("id", *_TRUTH) if getattr(self, k) is not None}
        return f"Scope({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


def current_scope() -> Scope | None:
    """The :class:`Scope` active in this thread or task, or ``None``."""
    return SCOPE.get()


def capture(
    id: str | int | None = None,
    *,
    reference: str | None = None,
    references: list[str] | None = None,
    reference_ids: list[str] | None = None,
    relevance: Mapping[str, float] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Scope:
    """A :class:`Scope` giving the runs inside ``with capture(...):`` this id and ground truth.

    Works in every adapter (each adapter's ``handler.capture(...)`` is this, plus attaching
    itself where the framework needs it), and with threads and asyncio: each thread or task
    sees the scope it entered. ``id`` is the sample id (a str, or an int made a str);
    ``relevance`` the query's qrels row ``{doc_id: grade}``; ``reference_ids`` binary
    relevance; ``reference``/``references`` acceptable answers; ``metadata`` extra run
    metadata. Every value is checked here: a bad one raises
    :class:`~ragmeter.errors.InvalidInputError` naming it, before anything runs.

    >>> with capture(id="q1", relevance={"d1": 2}) as scope:
    ...     current_scope() is scope, scope.fields()
    (True, {'id': 'q1', 'relevance': {'d1': 2.0}})
    >>> current_scope() is None
    True
    >>> capture(id=1.5)
    Traceback (most recent call last):
    ...
    ragmeter.errors.InvalidInputError: capture(): id must be a str or an int, got 1.5
    """
    if id is not None and (isinstance(id, bool) or not isinstance(id, (str, int))):
        raise InvalidInputError(f"capture(): id must be a str or an int, got {id!r}")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidInputError(
            f"capture(): metadata must be a mapping, got {type(metadata).__name__}"
        )
    if reference is None and references is None and reference_ids is None and relevance is None:
        return Scope(None if id is None else str(id), metadata=metadata)  # nothing to check
    probe: dict[str, Any] = {"id": "-" if id is None else str(id)}
    for name, value in (
        ("reference", reference),
        ("references", references),
        ("reference_ids", reference_ids),
        ("relevance", relevance),
    ):
        if value is not None:
            probe[name] = value
    try:
        checked = coerce_sample(probe)
    except InvalidInputError as exc:
        raise InvalidInputError(f"capture(): {exc}") from None
    return Scope(
        None if id is None else str(id),
        reference=checked.reference,
        references=checked.references,
        reference_ids=checked.reference_ids,
        relevance=checked.relevance,
        metadata=metadata,
    )
