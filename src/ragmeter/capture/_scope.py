"""Scoped ids: ``with capture(id=qid, relevance=...):`` names the runs started inside it.

Scopes nest, and each belongs to one observer or to all: ``handler.capture(...)`` is the
handler's own (other handlers do not see it), ``ragmeter.capture.capture(...)`` applies to
every observer. An observer takes the nearest enclosing scope that is its own or everyone's
(:func:`scope_for`), so two handlers' nested scopes never cross their ids or ground truth.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ragmeter.capture._ids import ID_KEY, fields_from_metadata
from ragmeter.errors import InvalidInputError
from ragmeter.schema import RagSample, coerce_sample

if TYPE_CHECKING:
    from ragmeter.capture._front import StoreFront
    from ragmeter.capture._record import RunRecord
    from ragmeter.capture._store import SampleStore

__all__ = ["SCOPE", "Scope", "Truth", "capture", "current_scope", "propagate", "scope_for"]

_Frame = tuple["Scope", "_Frame | None"]
"""An open scope and the frame that was open when it was entered (a linked stack)."""

SCOPE: ContextVar[_Frame | None] = ContextVar("ragmeter_capture_scope", default=None)

_TRUTH = ("reference", "references", "reference_ids", "relevance")

P = ParamSpec("P")
R = TypeVar("R")


class Truth:
    """The sample id and ground truth a scope gives its runs, without the open scope's
    state: what a finished run keeps of its scope (6 references, where a :class:`Scope`
    holds 16). ``batch`` is always ``None`` here."""

    __slots__ = ("id", "metadata", "reference", "reference_ids", "references", "relevance")

    batch: dict[str, list[str]] | None = None

    def __init__(
        self,
        id: str | None = None,
        *,
        reference: str | None = None,
        references: list[str] | None = None,
        reference_ids: list[str] | None = None,
        relevance: Mapping[str, float] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.reference = reference
        self.references = references
        self.reference_ids = reference_ids
        self.relevance = relevance
        self.metadata = metadata

    @property
    def tagged(self) -> bool:
        """Whether the scope gives its runs a sample id."""
        return (
            self.id is not None
            or self.batch is not None
            or bool(self.metadata and self.metadata.get(ID_KEY))
        )

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

    def settled(self) -> Truth | str | None:
        """What a finished run keeps: the id alone when that is all there is (a str costs
        nothing more: the caller's id), else the id and ground truth."""
        if (
            self.metadata is None
            and self.reference is None
            and self.references is None
            and self.reference_ids is None
            and self.relevance is None
        ):
            return self.id
        if type(self) is Truth:
            return self
        return Truth(
            self.id,
            reference=self.reference,
            references=self.references,
            reference_ids=self.reference_ids,
            relevance=self.relevance,
            metadata=self.metadata,
        )


class Scope(Truth):
    """The sample id and ground truth of the runs started inside one ``with`` block.

    Made by :func:`capture` (or an adapter's ``.capture(...)``, which makes the adapter its
    ``owner``); entering it sets it for the current thread or asyncio task (a
    :class:`~contextvars.ContextVar`, so concurrent threads and tasks each see their own),
    leaving it restores the previous one. Every top-level run an observer records while the
    scope is active gets its ``id`` and ground truth. Which wins when a run carries its own
    (``ragmeter_*`` run metadata): a scope of that observer's own wins over the run's
    metadata, which wins over a scope that belongs to every observer. ``metadata`` joins the
    samples' ``metadata["run_metadata"]`` (its ``ragmeter_*`` keys fill fields, as in run
    metadata). With ``collect=True`` the records of those runs are kept in :attr:`records`
    (the dataset loop uses it). A *batch* scope (``capture(batch={qid: question})``) gives
    each run the id of the query whose text its question is (see :meth:`member_for`).

    A scope object is entered by one thread or task at a time; to carry the scope into
    worker threads, use :func:`propagate`.
    """

    __slots__ = (
        "_claimed",
        "_lock",
        "_members",
        "_owner",
        "_records",
        "_state",
        "_token",
        "answers",
        "batch",
        "qrels",
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
        batch: Mapping[str, str] | None = None,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        answers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            id,
            reference=reference,
            references=references,
            reference_ids=reference_ids,
            relevance=relevance,
            metadata=metadata,
        )
        self.batch: dict[str, list[str]] | None = None  # question -> query ids, in order
        self.qrels = qrels
        self.answers = answers
        # a batch scope's bookkeeping (a plain scope allocates none: one is made per query)
        self._claimed: set[str] | None = None
        self._members: dict[str, Scope] | None = None
        self._lock: threading.Lock | None = None
        if batch is not None:
            self.batch = {}
            for qid, text in batch.items():
                self.batch.setdefault(text, []).append(qid)
            self._claimed, self._members, self._lock = set(), {}, threading.Lock()
        self._records: list[tuple[SampleStore, RagSample | RunRecord]] | None = (
            [] if collect else None
        )
        self._token: contextvars.Token[_Frame | None] | None = None
        self._owner: StoreFront | None = None  # told when the scope opens and closes
        self._state: Any = None  # the owner's, while the scope is open

    @property
    def owner(self) -> StoreFront | None:
        """The observer the scope belongs to (``None``: every observer)."""
        return self._owner

    def member_for(self, question: str | None) -> Scope | None:
        """A batch scope's scope for the run that asked ``question``: the next query of the
        batch with that text not yet claimed (each query id is given once, in the batch's
        order), with its qrels row and answer. ``None`` when no unclaimed query has that
        text (the run keeps the batch scope: no id)."""
        lock, claimed, members = self._lock, self._claimed, self._members
        if self.batch is None or question is None or lock is None:
            return None
        if claimed is None or members is None:
            return None
        with lock:
            for qid in self.batch.get(question, ()):
                if qid not in claimed:
                    claimed.add(qid)
                    break
            else:
                return None
            member = members.get(qid)
            if member is None:
                row = None if self.qrels is None else self.qrels.get(qid)
                answer = None if self.answers is None else self.answers.get(qid)
                member = Scope(
                    qid,
                    relevance=None if row is None else dict(row),
                    reference=answer,
                    metadata=self.metadata,
                )
                member._owner = self._owner
                member._records = self._records
                members[qid] = member
        return member

    def records(self, store: SampleStore | None = None) -> list[RagSample | RunRecord]:
        """What was recorded under the scope (``collect=True``), optionally by one store."""
        got = self._records or []
        return [rec for owner, rec in got if store is None or owner is store]

    def __enter__(self) -> Scope:
        self._token = SCOPE.set((self, SCOPE.get()))
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
        if self.batch is not None:
            shown["batch"] = sum(len(ids) for ids in self.batch.values())
        return f"Scope({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


def current_scope() -> Scope | None:
    """The innermost :class:`Scope` active in this thread or task, or ``None``."""
    frame = SCOPE.get()
    return None if frame is None else frame[0]


def scope_for(owner: object) -> Scope | None:
    """The scope that applies to ``owner``'s runs here: the innermost open scope that is
    ``owner``'s own or belongs to every observer; ``None`` when there is none."""
    frame = SCOPE.get()
    while frame is not None:
        scope = frame[0]
        if scope._owner is None or scope._owner is owner:
            return scope
        frame = frame[1]
    return None


def propagate(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn``, run in a copy of the caller's context (its open scopes included) wherever it
    is called: the one-line way to carry a scope into worker threads.

    A :class:`~concurrent.futures.ThreadPoolExecutor` and ``loop.run_in_executor`` run work
    in the worker thread's own context, so a ``capture()`` scope (and the framework's own
    context: LangChain's callbacks, LlamaIndex's span) stops at the thread boundary.
    ``pool.submit(propagate(engine.query), question)`` inside the scope keeps it. Each
    call runs in its own copy, so one wrapped function may run in many threads at once.

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with capture(id="q1"), ThreadPoolExecutor() as pool:
    ...     lost = pool.submit(current_scope).result()
    ...     kept = pool.submit(propagate(current_scope)).result()
    >>> lost is None, kept.id
    (True, 'q1')
    """
    context = contextvars.copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return context.copy().run(fn, *args, **kwargs)

    return run


def capture(
    id: str | int | None = None,
    *,
    reference: str | None = None,
    references: list[str] | None = None,
    reference_ids: list[str] | None = None,
    relevance: Mapping[str, float] | None = None,
    metadata: Mapping[str, Any] | None = None,
    batch: Mapping[str, str] | None = None,
    qrels: Mapping[str, Mapping[str, float]] | None = None,
    answers: Mapping[str, str] | None = None,
) -> Scope:
    """A :class:`Scope` giving the runs inside ``with capture(...):`` this id and ground truth.

    Works in every adapter (each adapter's ``handler.capture(...)`` is this, owned by the
    adapter and attaching it where the framework needs it), and with threads and asyncio:
    each thread or task sees the scope it entered. ``id`` is the sample id (a str, or an
    int made a str); ``relevance`` the query's qrels row ``{doc_id: grade}``;
    ``reference_ids`` binary relevance; ``reference``/``references`` acceptable answers;
    ``metadata`` extra run metadata.

    For several queries run at once (LangChain ``batch``, ``asyncio.gather``), ``batch=
    {query_id: question}`` gives each run the id of the query whose text its question is
    (``qrels=`` and ``answers=`` by query id give each its ground truth); a question asked
    twice takes the next id with that text. Every value is checked here: a bad one raises
    :class:`~ragmeter.errors.InvalidInputError` naming it, before anything runs.

    The scope keeps your ``relevance`` mapping itself (checked, not copied), so a dataset's
    qrels rows are not copied once per run.

    >>> row = {"d1": 2}
    >>> with capture(id="q1", relevance=row) as scope:
    ...     current_scope() is scope, scope.fields(), scope.relevance is row
    (True, {'id': 'q1', 'relevance': {'d1': 2}}, True)
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
    if batch is not None or qrels is not None or answers is not None:
        return _batch_scope(
            id, batch, qrels, answers, metadata, reference, references, reference_ids, relevance
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
        reference_ids=_kept(reference_ids, checked.reference_ids),
        relevance=_kept(relevance, checked.relevance),
        metadata=metadata,
    )


def _kept(given: Any, checked: Any) -> Any:
    """The caller's own object when it is what validation made of it (a run record then
    holds a reference to the dataset's qrels row, not a copy per run), else the copy."""
    if type(given) is type(checked) and given == checked:
        if type(given) is dict and not all(type(k) is str for k in given):
            return checked
        return given
    return checked


def _batch_scope(
    id: object,
    batch: Mapping[str, str] | None,
    qrels: Mapping[str, Mapping[str, float]] | None,
    answers: Mapping[str, str] | None,
    metadata: Mapping[str, Any] | None,
    *single: object,
) -> Scope:
    if batch is None:
        raise InvalidInputError(
            "capture(): qrels= and answers= go with batch={query_id: question} (the ground "
            "truth of each query of the batch); for one query pass relevance= or reference="
        )
    if id is not None or any(value is not None for value in single):
        raise InvalidInputError(
            "capture(): batch= gives each run its own id and ground truth (qrels=, answers= "
            "by query id); do not pass id=, reference=, references=, reference_ids= or "
            "relevance= with it"
        )
    if not isinstance(batch, Mapping) or not batch:
        raise InvalidInputError(
            "capture(): batch must be a non-empty mapping {query_id: question}, got "
            f"{batch!r:.80}"
        )
    given: dict[str, str] = {}
    for qid, text in batch.items():
        if not isinstance(text, str):
            raise InvalidInputError(
                f"capture(): batch[{qid!r}] must be the question (a str), got {type(text).__name__}"
            )
        given[str(qid)] = text
    checked_qrels: dict[str, dict[str, float]] | None = None
    if qrels is not None:
        checked_qrels = {}
        for qid, row in qrels.items():
            if str(qid) not in given:
                continue  # other queries' judgements: not this batch's
            try:
                checked = coerce_sample({"id": str(qid), "relevance": row})
            except InvalidInputError as exc:
                raise InvalidInputError(f"capture(): qrels: {exc}") from None
            checked_qrels[str(qid)] = dict(checked.relevance or {})
    checked_answers: dict[str, str] | None = None
    if answers is not None:
        checked_answers = {}
        for qid, answer in answers.items():
            if not isinstance(answer, str):
                raise InvalidInputError(
                    f"capture(): answers[{qid!r}] must be a str, got {type(answer).__name__}"
                )
            checked_answers[str(qid)] = answer
    return Scope(metadata=metadata, batch=given, qrels=checked_qrels, answers=checked_answers)
