"""Retriever calls: the one record every adapter keeps per call, and which call a sample scores."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from ragmeter.capture._ids import content_doc_id, describe
from ragmeter.capture._rules import Retrieval

__all__ = ["CallLike", "CallRecord", "call_record", "ranking", "select_calls"]


class CallLike(Protocol):
    """One retriever call as an adapter records it, for :func:`select_calls`."""

    @property
    def name(self) -> str | None: ...  # the retriever's name (matched by ``retriever_name``)

    @property
    def depth(self) -> int: ...  # how many retriever calls enclose it (0: outermost)

    @property
    def ids(self) -> list[str] | None: ...  # its ranking; ``None``: it did not finish

    @property
    def seq(self) -> int: ...  # completion order within the sample

    @property
    def start(self) -> float: ...  # ``time.perf_counter()`` when it started

    @property
    def end(self) -> float | None: ...  # ``time.perf_counter()`` when it ended

    @property
    def thread(self) -> int: ...  # ``threading.get_ident()`` of the thread it started on

    @property
    def query(self) -> str | None: ...  # the query it was given

    @property
    def error(self) -> str | None: ...  # ``"ValueError: ..."`` when it raised


_THREADS: dict[int, int] = {}


def _thread_ident(ident: int) -> int:
    """``ident``, kept so every record of one thread shares one int object (8 bytes, not 36)."""
    if len(_THREADS) > 4096:  # threads come and go: forget the old ones
        _THREADS.clear()
    return _THREADS.setdefault(ident, ident)


class CallRecord:
    """One retriever call inside a captured run: the record every adapter keeps.

    Made when the call starts (``name``, ``query``, ``depth``; the start time and thread);
    :meth:`done` stores its documents as two tuples of references, ``ids`` (an entry is
    ``None`` for a document with no id: its id is :func:`content_doc_id` of its text,
    computed when first read) and ``texts``; :meth:`failed` records an exception.
    ``extra`` holds what one framework adds (LlamaIndex: node ids and scores). Satisfies
    :class:`CallLike`.

    >>> call = CallRecord("bm25", "lift", 0)
    >>> call.done(["d1", None], ["wing", "Paris is the capital of France."])
    >>> call.ids
    ['d1', 'sha256:557be7eca214f188']
    """

    __slots__ = (
        "_ids",
        "_unhashed",
        "depth",
        "end",
        "error",
        "extra",
        "name",
        "query",
        "start",
        "texts",
        "thread",
    )

    def __init__(self, name: str | None, query: str | None, depth: int) -> None:
        self.name = name
        self.query = query
        self.depth = depth
        self.start = time.perf_counter()
        ident = threading.get_ident()
        self.thread = _THREADS.get(ident) or _thread_ident(ident)  # one int object per thread
        self.end: float | None = None
        self._ids: tuple[str | None, ...] | None = None
        self._unhashed = False
        self.texts: tuple[str, ...] = ()
        self.error: str | None = None
        self.extra: Any = None

    def done(
        self,
        ids: Sequence[str | None],
        texts: Sequence[str],
        *,
        unhashed: bool | None = None,
        extra: Any = None,
    ) -> None:
        """The call returned these documents (one id and one text each, in rank order).

        ``unhashed`` says whether some id is ``None`` (``None``: look).
        """
        self._ids = tuple(ids)
        self.texts = tuple(texts)
        self._unhashed = (None in self._ids) if unhashed is None else unhashed
        self.extra = extra
        self.end = time.perf_counter()

    def failed(self, error: BaseException | str) -> None:
        """The call raised (its ranking stays ``None``)."""
        self.error = error if isinstance(error, str) else describe(error)
        self.end = time.perf_counter()

    @property
    def finished(self) -> bool:
        """Whether the call returned documents."""
        return self._ids is not None

    @property
    def seq(self) -> int:
        """Completion order: the end time in nanoseconds (``-1`` while it runs)."""
        return -1 if self.end is None else int(self.end * 1e9)

    @property
    def ids(self) -> list[str] | None:
        """The documents' ids in rank order (content hashes filled in); ``None``: unfinished."""
        raw = self._ids
        if raw is None:
            return None
        if self._unhashed:
            raw = tuple(
                content_doc_id(text) if doc is None else doc
                for doc, text in zip(raw, self.texts, strict=True)
            )
            self._ids, self._unhashed = raw, False
        return list(raw)  # type: ignore[arg-type]  # no None left

    def to_dict(self, used: bool) -> dict[str, Any]:
        """:func:`call_record` of this call."""
        return call_record(self, used)


def call_record(call: CallLike, used: bool) -> dict[str, Any]:
    """One retriever call as ``metadata["retriever_calls"]`` lists it (the same in every adapter).

    ``used`` marks the call(s) whose ranking the sample scores; ``error`` is present only when
    the call raised; ``latency_ms`` is ``None`` for a call that never ended.
    """
    out: dict[str, Any] = {
        "name": call.name,
        "query": call.query,
        "depth": call.depth,
        "ids": call.ids,
        "latency_ms": None if call.end is None else (call.end - call.start) * 1000.0,
        "used": used,
    }
    if call.error is not None:
        out["error"] = call.error
    return out


def ranking(calls: Sequence[CallRecord]) -> tuple[list[str], list[tuple[str, str]]]:
    """The chosen calls' documents as one ranking: each id once, at its best rank, and every
    ``(id, text)`` pair in rank order (chunks of one source collapse to one id).

    >>> a, b = CallRecord("a", None, 0), CallRecord("b", None, 0)
    >>> a.done(["d1", "d2"], ["x", "y"]); b.done(["d2", "d3"], ["y", "z"])
    >>> ranking([a, b])[0]
    ['d1', 'd2', 'd3']
    """
    pairs = [pair for call in calls for pair in zip(call.ids or (), call.texts, strict=True)]
    return list(dict.fromkeys(doc for doc, _ in pairs)), pairs


_C = TypeVar("_C", bound=CallLike)


def _concurrent(a: CallLike, b: CallLike) -> bool:
    """Whether ``a`` and ``b`` may have run at the same time (so their order is timing's)."""
    if a.thread != b.thread:
        return True
    a_end = a.end if a.end is not None else math.inf
    b_end = b.end if b.end is not None else math.inf
    return a.start < b_end and b.start < a_end


def select_calls(
    calls: Sequence[_C],
    retrieval: Retrieval,
    retriever_name: str | None = None,
    *,
    name_hint: str = "",
) -> tuple[list[_C], list[tuple[str, str]]]:
    """The retriever calls whose ranking a sample scores, and ``(option, note)`` capture notes.

    The candidates are the finished calls named ``retriever_name`` (at any depth) when it is
    given, else the outermost ones (depth 0), in the order they finished. ``"last"`` takes the
    last, ``"first"`` the first, ``"merge"`` all of them. When the pick depends on thread
    timing (a candidate ran concurrently with the chosen one: on another thread, or at the
    same time under asyncio), a note says so and asks for ``retriever_name`` (``name_hint``
    says how to name a retriever in that framework); a ``retriever_name`` that matched no
    call is noted too.
    """
    if len(calls) == 1 and retriever_name is None:  # the common case, kept cheap
        only = calls[0]
        return ([only] if only.ids is not None and only.depth == 0 else []), []
    notes: list[tuple[str, str]] = []
    done = sorted((c for c in calls if c.ids is not None), key=lambda c: c.seq)
    if retriever_name is not None:
        pool = [c for c in done if c.name == retriever_name]
        if not pool and calls:
            seen = sorted({str(c.name) for c in calls})
            notes.append(
                (
                    "retriever_name",
                    f"{retriever_name!r} matched no finished retriever call (names seen: "
                    f"{seen}){'; ' + name_hint if name_hint else ''}",
                )
            )
    else:
        pool = [c for c in done if c.depth == 0]
    if not pool:
        return [], notes
    if retrieval == "merge":
        chosen = pool
        racing = [c for i, c in enumerate(pool) if any(_concurrent(c, o) for o in pool[i + 1 :])]
        what = "the order in which retrieval='merge' joins their rankings"
    else:
        pick = pool[-1] if retrieval == "last" else pool[0]
        chosen = [pick]
        racing = [c for c in pool if c is not pick and _concurrent(c, pick)]
        what = f"which ranking retrieval={retrieval!r} scores"
    if racing:
        names = sorted({str(c.name) for c in pool})
        chooser = (
            "name a retriever that is called only once"
            if retriever_name is not None
            else "pick one with retriever_name="
        )
        notes.append(
            (
                "retrieval",
                f"{len(pool)} retriever calls ({', '.join(names)}) ran concurrently, so {what} "
                f"depends on thread timing; {chooser}"
                f"{' (' + name_hint + ')' if name_hint else ''}",
            )
        )
    return chosen, notes
