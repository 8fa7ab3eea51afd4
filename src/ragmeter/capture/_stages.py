"""Stages: every step of a captured run that produced a ranking, and which one reached the model.

An adapter keeps one :class:`StageRecord` per step (a retriever call, a fusion, a reranker,
a step the user marked) as references while the run goes. When the sample is read,
:func:`stage_list` names them (unique within the sample), orders them as they finished and
adds the ``context`` stage: what reached the generator. The adapters that can see it say
what the context is (Haystack: the documents the prompt builder received; LlamaIndex: the
response's source nodes); otherwise :func:`infer_context` applies the one rule every
adapter shares, and when no stage can be identified the sample says so (never a pick that
depends on thread timing).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar

from ragmeter.capture._ids import content_doc_id, describe
from ragmeter.capture._rules import Retrieval
from ragmeter.schema import CONTEXT

__all__ = [
    "CallLike",
    "CallRecord",
    "StageRecord",
    "call_record",
    "frontier",
    "infer_context",
    "ranking",
    "select_calls",
    "stage_list",
    "stage_names",
    "timing_decides_order",
]


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


class StageRecord:
    """One step of a captured run that produced a ranking: the record every adapter keeps.

    Made when the step starts (``name``, ``query``, ``depth``, ``kind``; the start time and
    thread); :meth:`done` stores its documents as two tuples of references, ``ids`` (an
    entry is ``None`` for a document with no id: its id is :func:`content_doc_id` of its
    text, computed when first read) and ``texts``; :meth:`failed` records an exception.
    ``parent`` is the stage that encloses it (an ensemble's member retrievers: the
    ensemble), ``inputs`` the stages whose rankings it consumed (their names or records)
    where the framework says so (a Haystack joiner's senders, a LlamaIndex postprocessor's
    retriever). ``branch`` says which parallel
    branches the step runs in, where the framework shows it (LangChain ``RunnableParallel``:
    ``((fork, branch name), ...)`` from the outermost fork in): two steps in different
    branches of one fork ran side by side, whatever the clock says. ``extra`` holds what
    one framework adds (LlamaIndex: node ids and scores). Satisfies :class:`CallLike`.

    >>> stage = StageRecord("bm25", "lift", 0)
    >>> stage.done(["d1", None], ["wing", "Paris is the capital of France."])
    >>> stage.ids
    ['d1', 'sha256:557be7eca214f188']
    """

    __slots__ = (
        "_ids",
        "_unhashed",
        "branch",
        "depth",
        "end",
        "error",
        "extra",
        "inputs",
        "kind",
        "name",
        "parent",
        "query",
        "start",
        "texts",
        "thread",
    )

    def __init__(
        self,
        name: str | None,
        query: str | None,
        depth: int,
        *,
        kind: str = "retriever",
        parent: StageRecord | None = None,
        inputs: tuple[str | StageRecord, ...] | None = None,
        branch: tuple[tuple[int, str], ...] | None = None,
    ) -> None:
        self.name = name
        self.branch = branch
        self.query = query
        self.depth = depth
        self.kind = kind
        self.parent = parent
        self.inputs = inputs
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
        """The step returned these documents (one id and one text each, in rank order).

        ``unhashed`` says whether some id is ``None`` (``None``: look).
        """
        self._ids = tuple(ids)
        self.texts = tuple(texts)
        self._unhashed = (None in self._ids) if unhashed is None else unhashed
        self.extra = extra
        self.end = time.perf_counter()

    def failed(self, error: BaseException | str) -> None:
        """The step raised (its ranking stays ``None``)."""
        self.error = error if isinstance(error, str) else describe(error)
        self.end = time.perf_counter()

    @property
    def finished(self) -> bool:
        """Whether the step returned documents."""
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

    def nest(self) -> None:
        """A stage ran inside this one: a retriever made of one other reranks it (a
        compressor), of several fuses them (an ensemble)."""
        self.kind = _WRAPPERS.get(self.kind, self.kind)

    def same_ranking(self, ids: Sequence[str | None], texts: Sequence[str]) -> bool:
        """Whether the step returned exactly these documents, in this order (ids and texts)."""
        own = self._ids
        if own is None or len(own) != len(ids):
            return False
        return all(a == b for a, b in zip(own, ids, strict=True)) and all(
            a is b or a == b for a, b in zip(self.texts, texts, strict=True)
        )

    def to_dict(self, used: bool) -> dict[str, Any]:
        """:func:`call_record` of this step."""
        return call_record(self, used)


_WRAPPERS = {"retriever": "reranker", "reranker": "fusion"}
"""A stage's kind once a first, then a second stage ran inside it."""

CallRecord = StageRecord
"""The older name of :class:`StageRecord` (a retriever call is a stage)."""


def call_record(call: CallLike, used: bool) -> dict[str, Any]:
    """One retriever call as a plain dict (name, query, depth, ids, latency, used, error)."""
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


def ranking(calls: Sequence[StageRecord]) -> tuple[list[str], list[tuple[str, str]]]:
    """The chosen steps' documents as one ranking: each id once, at its best rank, and every
    ``(id, text)`` pair in rank order (chunks of one source collapse to one id).

    >>> a, b = StageRecord("a", None, 0), StageRecord("b", None, 0)
    >>> a.done(["d1", "d2"], ["x", "y"]); b.done(["d2", "d3"], ["y", "z"])
    >>> ranking([a, b])[0]
    ['d1', 'd2', 'd3']
    """
    pairs = [pair for call in calls for pair in zip(call.ids or (), call.texts, strict=True)]
    return list(dict.fromkeys(doc for doc, _ in pairs)), pairs


def _concurrent(a: CallLike, b: CallLike) -> bool:
    """Whether ``a`` and ``b`` may have run at the same time (so their order is timing's).

    Where the framework shows the parallel branches (``branch``), steps in different
    branches of one fork are concurrent and the others only if their times overlap;
    elsewhere two steps on different threads are concurrent too.
    """
    branch_a = getattr(a, "branch", None)
    branch_b = getattr(b, "branch", None)
    if branch_a is not None and branch_b is not None:
        for (fork_a, arm_a), (fork_b, arm_b) in zip(branch_a, branch_b, strict=False):
            if fork_a != fork_b:
                break
            if arm_a != arm_b:
                return True
    elif a.thread != b.thread:
        return True
    a_end = a.end if a.end is not None else math.inf
    b_end = b.end if b.end is not None else math.inf
    return a.start < b_end and b.start < a_end


def frontier(
    stages: Sequence[StageRecord], enclosing: StageRecord | None
) -> tuple[StageRecord, ...]:
    """What a marked step consumed when the framework does not say: the stages at its level
    (inside ``enclosing``) that finished before it started and that no other stage consumed
    (after two retrievers, both; after a fusion, the fusion). LangChain's ``stage()`` marks
    and steps read from traces use it.

    >>> a, b = StageRecord("bm25", "q", 0), StageRecord("dense", "q", 0)
    >>> a.done(["d1"], ["x"]); b.done(["d2"], ["y"])
    >>> [s.name for s in frontier([a, b], None)]
    ['bm25', 'dense']
    """
    consumed = {id(i) for s in stages for i in s.inputs or () if not isinstance(i, str)}
    return tuple(
        s for s in stages if s.parent is enclosing and s.end is not None and id(s) not in consumed
    )


def stage_names(stages: Sequence[StageRecord]) -> tuple[list[str], list[str]]:
    """A unique name per stage (in start order: a name seen again becomes ``"<name>#2"``...),
    and notes for names whose suffixes depend on thread timing (same-named stages that ran
    concurrently: the user should name them apart)."""
    names: list[str] = []
    seen: dict[str, list[StageRecord]] = {}
    taken: set[str] = set()
    for stage in stages:
        base = stage.name or stage.kind
        group = seen.setdefault(base, [])
        group.append(stage)
        name = base
        if base in taken:
            n = len(group)
            while f"{base}#{n}" in taken:
                n += 1
            name = f"{base}#{n}"
        taken.add(name)
        names.append(name)
    notes = [
        f"{len(group)} stages named {base!r} ran concurrently, so which is {base!r} and "
        f"which {base + '#2'!r} depends on thread timing; give them names of their own"
        for base, group in seen.items()
        if len(group) > 1
        and any(_concurrent(a, b) for i, a in enumerate(group) for b in group[i + 1 :])
    ]
    return names, notes


def infer_context(
    stages: Sequence[StageRecord], *, flow_known: bool = False, hint: str = ""
) -> tuple[StageRecord | None, str | None]:
    """The stage whose ranking reached the generator, when the adapter cannot see it, and a
    note when no stage can be identified.

    The candidates are the finished outermost stages (depth 0) that no other stage consumed
    (when the framework shows what each stage consumed, ``flow_known``). One candidate is
    the context. Of several: when the data flow is known, none is (two rankings reach the
    end of the pipeline side by side); when it is not (LangChain), the last to finish is,
    unless another candidate ran concurrently with it (then the pick would depend on
    thread timing, so none is). ``hint`` says how to fix it in the framework.
    """
    finished = [s for s in stages if s.finished and s.depth == 0]
    consumed = {id(i) if isinstance(i, StageRecord) else i for s in stages for i in s.inputs or ()}
    if consumed:
        finished = [s for s in finished if id(s) not in consumed and s.name not in consumed]
    if not finished:
        return None, None
    if len(finished) == 1:
        return finished[0], None
    last = max(finished, key=lambda s: s.seq)
    racing = [s for s in finished if s is not last and _concurrent(s, last)]
    if not flow_known and not racing:
        return last, None
    names = ", ".join(sorted({str(s.name) for s in finished}))
    why = (
        "they ran concurrently, so which is last depends on thread timing"
        if racing and not flow_known
        else "each reaches the end of the pipeline on its own"
    )
    return None, (
        f"{len(finished)} stages produced rankings ({names}) and none can be identified as "
        f"what reached the generator ({why}): the sample has no context ranking. "
        f"{hint or 'Pick a stage by name with stage=.'}"
    )


def stage_list(
    stages: Sequence[StageRecord], context: StageRecord | None
) -> tuple[list[dict[str, Any]], dict[int, str], list[str]]:
    """The sample's ``stages`` (dicts, in the order they finished, then the context), the
    unique name of each record (by ``id()``), and naming notes."""
    names, notes = stage_names(stages)
    by_id = {id(s): name for s, name in zip(stages, names, strict=True)}
    children: dict[int, list[str]] = {}
    for stage in stages:
        if stage.parent is not None:
            children.setdefault(id(stage.parent), []).append(by_id[id(stage)])
    order = _finish_order(stages, by_id)
    out = [_stage_dict(s, by_id[id(s)], children.get(id(s)), by_id) for s in order]
    if context is not None:
        same = by_id.get(id(context))
        entry = _stage_dict(context, CONTEXT, None, by_id)
        entry["kind"] = "context"
        entry["depth"] = 0
        if same is not None:
            entry["same_as"] = same
            entry["inputs"] = [same]
            entry.pop("query", None)
            entry.pop("latency_ms", None)
        out.append(entry)
    return out, by_id, notes


def _finish_order(stages: Sequence[StageRecord], names: dict[int, str]) -> list[StageRecord]:
    """The stages in the order they finished, except that stages which ran concurrently are
    ordered by name: which of two parallel retrievers ends first is timing's, and a table
    read across samples must not depend on it."""
    order = sorted(stages, key=lambda s: (s.end is None, s.seq))
    for _ in range(len(order)):
        swapped = False
        for i in range(len(order) - 1):
            a, b = order[i], order[i + 1]
            if names[id(b)] < names[id(a)] and timing_decides_order(a, b):
                order[i], order[i + 1] = b, a
                swapped = True
        if not swapped:
            break
    return order


def timing_decides_order(a: StageRecord, b: StageRecord) -> bool:
    """Whether which of ``a`` and ``b`` finished first is timing's, not the flow's: they may
    have run at the same time and neither ran inside nor consumed the other. Such stages are
    listed by name (:func:`stage_list`), so a table read across samples does not depend on
    a race."""
    return _concurrent(a, b) and not _related(a, b)


def _related(a: StageRecord, b: StageRecord) -> bool:
    """Whether one stage runs inside the other or consumed it (their order is the flow's)."""
    for inner, outer in ((a, b), (b, a)):
        parent = inner.parent
        while parent is not None:
            if parent is outer:
                return True
            parent = parent.parent
        for given in outer.inputs or ():
            if given is inner or given == inner.name:
                return True
    return False


def _stage_dict(
    stage: StageRecord, name: str, children: Iterable[str] | None, by_id: dict[int, str]
) -> dict[str, Any]:
    ids = stage.ids
    out: dict[str, Any] = {
        "name": name,
        "kind": stage.kind,
        "ids": None if ids is None else list(dict.fromkeys(ids)),
        "depth": stage.depth,
    }
    if stage.query is not None:
        out["query"] = stage.query
    inputs = [
        i if isinstance(i, str) else by_id.get(id(i), str(i.name)) for i in stage.inputs or ()
    ]
    inputs.extend(children or ())
    if inputs:
        out["inputs"] = list(dict.fromkeys(inputs))
    if stage.end is not None:
        out["latency_ms"] = (stage.end - stage.start) * 1000.0
    if stage.error is not None:
        out["error"] = stage.error
    return out


_C = TypeVar("_C", bound=CallLike)


def select_calls(
    calls: Sequence[_C],
    retrieval: Retrieval,
    retriever_name: str | None = None,
    *,
    name_hint: str = "",
) -> tuple[list[_C], list[tuple[str, str]]]:
    """The retriever calls whose ranking a sample scores under the deprecated ``retrieval=``
    and ``retriever_name=`` options, and ``(option, note)`` capture notes.

    The candidates are the finished calls named ``retriever_name`` (at any depth) when it is
    given, else the outermost ones (depth 0), in the order they finished. ``"last"`` takes the
    last, ``"first"`` the first, ``"merge"`` all of them. When the pick depends on thread
    timing (a candidate ran concurrently with the chosen one), a note says so; a
    ``retriever_name`` that matched no call is noted too. The stages (``stage=``) replace
    these options.
    """
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
            else "pick one with stage="
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
