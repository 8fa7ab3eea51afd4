"""What every framework adapter shares: id rules, metadata keys and the sample store.

Adapters only translate framework events into :class:`~ragmeter.schema.RagSample` fields;
storing, joining to qrels, writing JSONL and scoring happen here, identically for
LangChain, Haystack and LlamaIndex. A user who switches framework keeps ``.samples``,
``.to_run()``, ``.clear()``, ``.to_jsonl()`` and ``.evaluate()``.

Metadata keys a user can pass with a run (``config["metadata"]`` in LangChain, a
``sample_id=``/metadata argument in Haystack, ``instrument_tags`` in LlamaIndex):

=========================  ==================================================
``ragmeter_id``            the sample id (joins captured samples to qrels)
``ragmeter_reference``     the ground-truth answer (``reference``)
``ragmeter_references``    further acceptable answers (``references``)
``ragmeter_reference_ids`` relevant doc ids (``reference_ids``)
``ragmeter_relevance``     graded relevance ``{doc_id: grade}``
=========================  ==================================================

Rules every adapter follows when captured samples are scored (no silent wrong number):

* **Repeated sample ids.** Every captured sample is scored. The second and later samples
  with one id are keyed ``"<id>#2"``, ``"<id>#3"``... in :meth:`SampleStore.to_run`,
  :meth:`~SampleStore.to_qrels` and ``evaluate_rag``'s ``per_sample`` alike, and
  :meth:`SampleStore.evaluate_retrieval` judges each against the qrels of ``<id>``; the
  report warns with the counts.
* **Failed runs.** A sample whose run raised before a ranking was captured (``error`` set,
  ``retrieved_ids`` ``None``) is reported apart (``report.extra["capture"]["failed"]`` and
  a warning) and scores 0 (``failed_queries="zero"``) or is left out
  (``failed_queries="skip"``). A judged query never captured follows ``missing_queries``
  (``only_captured=True`` is ``missing_queries="skip"``).
* **Forgotten ids.** When no captured sample id is a qrels query id the scoring is refused;
  when most are not, or when no (or few) retrieved doc ids appear in the qrels, the report
  warns and the adapter's logger logs it, naming the option that fixes it in that
  framework (:class:`Hints`).
* **Several retriever calls.** :func:`select_calls` picks the ranking a sample scores
  (``"last"``, ``"first"`` or ``"merge"``, or the calls of one named retriever) and notes
  when the pick depends on thread timing (calls that ran concurrently).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from pydantic import ValidationError

from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.schema import RagSample, sample_keys, samples_to_qrels, samples_to_run

if TYPE_CHECKING:
    from ragmeter.evaluation.retrieval import MissingQueries
    from ragmeter.report import RagEvalReport, RetrievalEvalReport

__all__ = [
    "FAILED_QUERIES",
    "ID_KEY",
    "METADATA_FIELDS",
    "RETRIEVAL",
    "CallLike",
    "FailedQueries",
    "Hints",
    "IdWatch",
    "Retrieval",
    "SampleStore",
    "call_record",
    "check_retrieval",
    "content_doc_id",
    "describe",
    "doc_id_problem",
    "fields_from_metadata",
    "jsonable",
    "run_metadata",
    "sample_id_problem",
    "sample_keys",
    "select_calls",
    "validated_sample",
]

logger = logging.getLogger("ragmeter")
logger.addHandler(logging.NullHandler())

ID_KEY = "ragmeter_id"
METADATA_FIELDS: dict[str, str] = {
    "ragmeter_id": "id",
    "ragmeter_reference": "reference",
    "ragmeter_references": "references",
    "ragmeter_reference_ids": "reference_ids",
    "ragmeter_relevance": "relevance",
}
"""Run-metadata key -> RagSample field it fills."""


def content_doc_id(text: str) -> str:
    """A stable id for a document that has none: ``"sha256:"`` + 16 hex chars of its text.

    The same text always gets the same id (across processes and machines), so a run
    captured twice joins to the same qrels.

    >>> content_doc_id("Paris is the capital of France.")
    'sha256:557be7eca214f188'
    """
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def fields_from_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The RagSample fields a run's metadata sets (see the module table).

    >>> fields_from_metadata({"ragmeter_id": "q12", "ragmeter_reference_ids": ["d1"], "x": 1})
    {'id': 'q12', 'reference_ids': ['d1']}
    """
    out: dict[str, Any] = {}
    if not metadata:
        return out
    for key, field in METADATA_FIELDS.items():
        if key in metadata and metadata[key] is not None:
            value = metadata[key]
            out[field] = str(value) if field == "id" else value
    return out


# Assembling a captured sample without ever failing the user's run: what is captured is
# JSON-safe, the user's own run metadata sits under ``metadata["run_metadata"]``, and a field
# that does not validate is left out and noted in ``metadata["capture_errors"]`` instead of
# costing the whole sample. Every adapter builds its samples with these.


def describe(exc: BaseException) -> str:
    """``"ValueError: message"``: how a captured exception is recorded."""
    return f"{type(exc).__name__}: {exc}"


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` made JSON-safe (``to_jsonl`` must not fail on captured metadata).

    Strings, ints, bools and ``None`` stay; a NaN or infinite float and any other object
    become their ``str``; mappings and lists are converted item by item (8 levels deep).

    >>> jsonable({"when": float("nan"), "ids": (1, "a"), 2: {3}})
    {'when': 'nan', 'ids': [1, 'a'], '2': '{3}'}
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth < 8:
        if isinstance(value, Mapping):
            return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [jsonable(v, depth + 1) for v in value]
    return str(value)


def run_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The user's run metadata minus the ``ragmeter_*`` keys that fill sample fields, JSON-safe.

    >>> run_metadata({"ragmeter_id": "q1", "team": "search"})
    {'team': 'search'}
    """
    if not metadata:
        return {}
    return {str(k): jsonable(v) for k, v in metadata.items() if k not in METADATA_FIELDS}


def validated_sample(fields: dict[str, Any], errors: list[str]) -> RagSample:
    """A ``RagSample`` from ``fields``; a field that does not validate is left out.

    What was left out, and why, is appended to ``errors``; a non-empty ``errors`` becomes
    ``metadata["capture_errors"]``. Only ``id`` and ``metadata`` are always kept.

    >>> errors: list[str] = []
    >>> s = validated_sample({"id": "q1", "latency_ms": -1.0, "response": "ok"}, errors)
    >>> s.id, s.response, s.latency_ms, s.metadata["capture_errors"] == errors
    ('q1', 'ok', None, True)
    >>> errors
    ['invalid latency_ms left out: Input should be greater than or equal to 0 (got -1.0)']
    """
    try:
        return RagSample.model_validate(_with_errors(fields, errors))
    except ValidationError as exc:
        problems = exc.errors()
    bad = sorted({str(p["loc"][0]) for p in problems if p.get("loc")} - {"id", "metadata"})
    msg, got = (problems[0]["msg"], problems[0].get("input")) if problems else ("?", None)
    errors.append(f"invalid {', '.join(bad) or 'sample'} left out: {msg} (got {got!r:.80})")
    kept = {k: v for k, v in fields.items() if k not in bad}
    try:
        return RagSample.model_validate(_with_errors(kept, errors))
    except ValidationError:
        core = {k: fields[k] for k in ("id",) if isinstance(fields.get(k), str)}
        return RagSample.model_validate(_with_errors(core, errors))


def _with_errors(fields: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    if not errors:
        return fields
    meta = dict(fields.get("metadata") or {})
    meta["capture_errors"] = list(errors)
    return {**fields, "metadata": meta}


# -- the rules for scoring captured samples (see the module docstring) -----------------------

Retrieval = Literal["last", "first", "merge"]
RETRIEVAL: dict[str, str] = {
    "last": "the ranking of the last outermost retriever call to finish",
    "first": "the ranking of the first outermost retriever call to finish",
    "merge": "every outermost retriever call's ranking, joined in the order they finished, "
    "each doc id at its best rank",
}
"""What ``retrieval=`` may be (LangChain and LlamaIndex handlers), and what each choice means."""

FailedQueries = Literal["zero", "skip"]
FAILED_QUERIES: dict[str, str] = {
    "zero": "a sample whose run failed before a ranking was captured scores 0 and counts in "
    "the mean",
    "skip": "a sample whose run failed before a ranking was captured is left out of the mean",
}
"""What ``failed_queries=`` may be (``evaluate_retrieval`` of every adapter)."""


def _choice(value: object, choices: Mapping[str, str], name: str) -> str:
    if isinstance(value, str) and value in choices:
        return value
    meanings = "; ".join(f"{k!r}: {v}" for k, v in choices.items())
    raise InvalidInputError(
        f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r} ({meanings})"
    )


def check_retrieval(value: object) -> Retrieval:
    """``value`` if it is a :data:`RETRIEVAL` choice, else :class:`InvalidInputError`.

    >>> check_retrieval("merge")
    'merge'
    """
    choice = _choice(value, RETRIEVAL, "retrieval")
    return "last" if choice == "last" else "first" if choice == "first" else "merge"


def _check_failed(value: object) -> FailedQueries:
    return "zero" if _choice(value, FAILED_QUERIES, "failed_queries") == "zero" else "skip"


@dataclass(frozen=True)
class Hints:
    """How a user of one framework fixes an id problem: the adapters fill it in, and the
    warnings of :meth:`SampleStore.evaluate_retrieval` quote it (and log with its logger).

    ``sample_id`` says how to give each captured run its query id; ``doc_id`` how to make a
    retrieved document's id the one the qrels use (naming the current setting).
    """

    framework: str = "ragmeter"
    sample_id: str = "Give each sample the query id the qrels use (RagSample.id)."
    doc_id: str = "Make retrieved_ids the doc ids the qrels use."

    @property
    def logger(self) -> logging.Logger:
        """``ragmeter_<framework>`` (``ragmeter`` for the core)."""
        name = self.framework
        return logging.getLogger("ragmeter" if name == "ragmeter" else f"ragmeter_{name}")


def sample_id_problem(
    sample_ids: Sequence[str], qrels: Mapping[str, Any], hint: str
) -> tuple[bool, str] | None:
    """``(fatal, message)`` when no captured sample id, or fewer than half, is a qrels query id.

    ``fatal`` is true when none is (nothing captured can be scored). ``None``: no problem.

    >>> sample_id_problem(["4f1c-9a", "q2"], {"q1": {}, "q2": {}}, "Pass ragmeter_id.")
    >>> sample_id_problem(["4f1c-9a"], {"q1": {}}, "Pass ragmeter_id.")[0]
    True
    """
    distinct = list(dict.fromkeys(sample_ids))
    if not distinct:
        return None
    unknown = [i for i in distinct if i not in qrels]
    if len(unknown) == len(distinct):
        return True, (
            f"none of the {len(distinct)} captured sample ids (e.g. {some_ids(distinct)}) is a "
            f"query id of the qrels (e.g. {some_ids(qrels)}), so nothing captured can be "
            f"scored. {hint}"
        )
    judged = len(distinct) - len(unknown)
    if judged * 2 < len(distinct):
        return False, (
            f"only {judged} of {len(distinct)} captured sample ids are query ids of the qrels; "
            f"the other {len(unknown)} (e.g. {some_ids(unknown)}) are not scored. If they "
            f"should be: {hint}"
        )
    return None


def doc_id_problem(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, Any]],
    hint: str,
    *,
    truth: str = "the qrels",
) -> str | None:
    """A warning when no retrieved doc id, or few, appears anywhere in ``qrels``; else ``None``.

    Only judged queries with a non-empty ranking count. A query *matches* when one of its
    retrieved ids is judged for any query (a wrong id field matches nothing anywhere, a poor
    retriever still hits documents judged for some query). No query matching means the run
    and ``truth`` name documents differently; fewer than half matching says they probably do.

    >>> print(doc_id_problem({"q1": ["3f2a"]}, {"q1": {"d1": 1}}, "Pick the id field."))
    none of the 1 doc ids retrieved for the 1 judged queries (e.g. '3f2a') appears anywhere
    in the qrels (whose doc ids are e.g. 'd1'): the two name documents differently, so every
    score is 0. Pick the id field.
    """
    universe = {str(d) for row in qrels.values() for d in row}
    known = sorted(universe)  # for the message, in a stable order
    ranked = [ids for q, ids in run.items() if ids and qrels.get(q)]
    if not ranked or not universe:
        return None
    matched = sum(1 for ids in ranked if any(str(d) in universe for d in ids))
    unmatched = [str(d) for ids in ranked for d in ids if str(d) not in universe]
    if matched == 0:
        return (
            f"none of the {len(set(unmatched))} doc ids retrieved for the {len(ranked)} judged "
            f"queries (e.g. {some_ids(unmatched)}) appears anywhere in {truth} (whose doc ids "
            f"are e.g. {some_ids(known)}): the two name documents differently, so every "
            f"score is 0. {hint}"
        )
    if matched * 2 < len(ranked):
        return (
            f"only {matched} of {len(ranked)} judged queries retrieved any doc id that appears "
            f"in {truth} (retrieved e.g. {some_ids(unmatched)}; {truth}: e.g. "
            f"{some_ids(known)}); unless the retriever is that poor, the doc ids probably "
            f"differ. {hint}"
        )
    return None


class IdWatch:
    """Watches queries scored one at a time (a per-query metric) for doc ids that never match.

    :meth:`observe` takes each query's retrieved and judged ids; once ``min_queries``
    queries have been seen and not one retrieved id was judged for any of them, it returns
    a warning (and logs it once on ``logger``), on every call until an id matches. Thread-
    safe; a copy (``copy.deepcopy``, pickling) starts afresh.

    >>> watch = IdWatch("Pass id_map=.", min_queries=2)
    >>> watch.observe(["n-1"], ["d1"]) is None
    True
    >>> print(watch.observe(["n-2"], ["d2"]))
    none of the doc ids retrieved for 2 queries (e.g. 'n-1', 'n-2') is among the expected
    ids of any of them (e.g. 'd1', 'd2'): the two name documents differently, so every score
    is 0. Pass id_map=.
    """

    _LIMIT = 100_000  # ids kept per side; past it the watch stops collecting

    def __init__(
        self,
        hint: str,
        *,
        truth: str = "the expected ids",
        min_queries: int = 5,
        logger: logging.Logger | None = None,
    ) -> None:
        self.hint = hint
        self.truth = truth
        self.min_queries = min_queries
        self.logger = logger if logger is not None else logging.getLogger("ragmeter")
        self._lock = threading.Lock()
        self._retrieved: dict[str, None] = {}
        self._judged: dict[str, None] = {}
        self.queries = 0
        self.matched = False
        self.warned = False

    def __deepcopy__(self, memo: dict[int, Any]) -> IdWatch:
        return IdWatch(
            self.hint, truth=self.truth, min_queries=self.min_queries, logger=self.logger
        )

    def __getstate__(self) -> dict[str, Any]:
        return {
            "hint": self.hint,
            "truth": self.truth,
            "min_queries": self.min_queries,
            "logger": self.logger.name,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        fresh = IdWatch(
            state["hint"],
            truth=state["truth"],
            min_queries=state["min_queries"],
            logger=logging.getLogger(state["logger"]),
        )
        self.__dict__.update(fresh.__dict__)

    def observe(self, retrieved: Iterable[object], judged: Iterable[object]) -> str | None:
        """Record one query: the warning while no retrieved id was ever judged, else ``None``."""
        got = [str(d) for d in retrieved]
        truth = [str(d) for d in judged]
        if not got or not truth:
            return None
        with self._lock:
            if self.matched:
                return None
            self.queries += 1
            if len(self._retrieved) < self._LIMIT:
                self._retrieved.update(dict.fromkeys(got))
                self._judged.update(dict.fromkeys(truth))
            if any(d in self._judged for d in self._retrieved):
                self.matched = True
                self._retrieved.clear()
                self._judged.clear()
                return None
            if self.queries < self.min_queries:
                return None
            message = (
                f"none of the doc ids retrieved for {self.queries} queries (e.g. "
                f"{some_ids(self._retrieved)}) is among {self.truth} of any of them (e.g. "
                f"{some_ids(self._judged)}): the two name documents differently, so every "
                f"score is 0. {self.hint}"
            )
            first, self.warned = not self.warned, True
        if first:
            self.logger.warning("%s", message)
        return message


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


class SampleStore:
    """A thread-safe, append-only list of captured samples (the adapters' shared surface).

    ``max_samples`` bounds memory: when set, the oldest samples are dropped past it (and
    ``dropped`` counts them). ``hints`` is how the adapter's users fix id problems; the
    warnings of :meth:`evaluate_retrieval` quote it.

    >>> store = SampleStore()
    >>> store.add(RagSample(id="q1", retrieved_ids=["d1", "d2"], reference_ids=["d2"]))
    >>> store.add(RagSample(id="q1", retrieved_ids=["d2"]))
    >>> store.to_run()
    {'q1': ['d1', 'd2'], 'q1#2': ['d2']}
    >>> store.evaluate_retrieval({"q1": {"d2": 1}}, k_values=(2,), metrics=["recall"]).metrics
    {'recall@2': 1.0}
    """

    def __init__(self, *, max_samples: int | None = None, hints: Hints | None = None) -> None:
        self._lock = threading.RLock()
        self._samples: list[RagSample] = []
        self.max_samples = max_samples
        self.dropped = 0
        self.hints = hints if hints is not None else Hints()

    def add(self, sample: RagSample) -> None:
        """Append one finished sample."""
        with self._lock:
            self._samples.append(sample)
            if self.max_samples is not None and len(self._samples) > self.max_samples:
                excess = len(self._samples) - self.max_samples
                del self._samples[:excess]
                self.dropped += excess

    @property
    def samples(self) -> list[RagSample]:
        """The captured samples in completion order (a copy)."""
        with self._lock:
            return list(self._samples)

    def clear(self) -> None:
        """Forget every captured sample."""
        with self._lock:
            self._samples.clear()
            self.dropped = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._samples)

    def to_run(self) -> dict[str, list[str]]:
        """``{sample_id: [doc_id, ...]}``, ready for :func:`ragmeter.evaluate_run`.

        A sample whose id an earlier sample already has is keyed ``"<id>#2"``, ``"<id>#3"``...
        (as in ``evaluate_rag``'s ``per_sample``); samples without a ranking are left out.
        """
        return samples_to_run(self.samples)

    def to_qrels(self) -> dict[str, dict[str, float]]:
        """``{sample_id: {doc_id: grade}}`` from the relevance the samples carry (same keys)."""
        return samples_to_qrels(self.samples)

    def to_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write the samples as JSONL (see :mod:`ragmeter.io.jsonl`); returns the count."""
        from ragmeter.io.jsonl import write_jsonl

        return write_jsonl(self.samples, path)

    def evaluate(self, **kwargs: Any) -> RagEvalReport:
        """Score the captured samples with :func:`ragmeter.evaluate_rag` (kwargs pass through)."""
        from ragmeter.evaluation.rag import evaluate_rag

        return evaluate_rag(self.samples, **kwargs)

    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> RetrievalEvalReport:
        """Score every captured ranking with :func:`ragmeter.evaluate_run` (kwargs pass through).

        ``qrels`` defaults to the relevance carried by the samples themselves. The rules:

        * a judged query that was never captured scores 0 and counts in the mean
          (``missing_queries="zero"``, trec_eval ``-c``, the default), or is left out
          (``"skip"``; ``only_captured=True`` says the same);
        * a captured sample whose run failed before a ranking was captured (``error`` set,
          ``retrieved_ids`` ``None``) scores 0 and counts (``failed_queries="zero"``) or is
          left out (``"skip"``); either way it is listed in ``report.extra["capture"]
          ["failed"]`` and a warning counts it. A captured sample that did not fail but has
          no ranking scores 0 (a warning says so);
        * a repeated sample id is scored under ``"<id>#2"``... against the qrels of ``<id>``;
        * no captured sample id among the qrels ids raises
          :class:`~ragmeter.errors.InvalidInputError`; fewer than half, or retrieved doc ids
          that (nearly) never appear in the qrels, give a warning that names the fix.

        Every such warning is in ``report.warnings`` and logged (``hints.logger``);
        ``report.extra["capture"]`` holds the counts (JSON-ready).
        """
        from ragmeter.evaluation.retrieval import evaluate_run
        from ragmeter.report import WarningLog

        if only_captured and missing_queries not in (None, "skip"):
            raise InvalidInputError(
                f"only_captured=True means missing_queries='skip' (judged queries never captured "
                f"are left out of the mean), but missing_queries={missing_queries!r} was given "
                "too: pass one of the two"
            )
        missing: Any = missing_queries
        if missing is None:
            missing = "skip" if only_captured else "zero"
        failed_rule = _check_failed(failed_queries)
        samples = self.samples
        keys = sample_keys([s.id for s in samples])
        notes: list[tuple[str, str]] = []
        judged = self._judgements(qrels, samples, keys, notes)

        run: dict[str, list[str]] = {}
        failed: list[str] = []
        unranked: list[str] = []
        troubled: list[str] = []
        for key, sample in zip(keys, samples, strict=True):
            if sample.retrieved_ids is not None:
                run[key] = list(sample.retrieved_ids)
            elif key in judged:
                (failed if sample.error is not None else unranked).append(key)
            if key in judged and sample.metadata.get("capture_errors"):
                troubled.append(key)
        for key in unranked:
            run[key] = []
        for key in failed:
            if failed_rule == "zero":
                run[key] = []
            else:
                del judged[key]
        if failed and failed_rule == "skip" and not any(q in run for q in judged):
            raise InvalidInputError(
                f"every captured sample the qrels judge failed before a ranking was captured "
                f"({some_ids(failed)}; see sample.error), and failed_queries='skip' leaves "
                "them out: nothing is left to score"
            )
        self._note_problems(
            samples, keys, judged, run, failed, failed_rule, unranked, troubled, notes
        )

        log = kwargs.pop("warnings", None)
        if log is None:
            log = WarningLog()
        for source, message in notes:
            log.add("capture", source, message)
            self.hints.logger.warning("ragmeter: %s", message)
        report = evaluate_run(judged, run, missing_queries=missing, warnings=log, **kwargs)
        if any(source == "doc_ids" for source, _ in notes):
            # ours names the fix; the generic one from evaluate_run says less
            report.warnings = [w for w in report.warnings if "[run] (doc_ids)" not in w]
        counts = {s.id: 0 for s in samples}
        for s in samples:
            counts[s.id] += 1
        report.extra["capture"] = {
            "framework": self.hints.framework,
            "samples": len(samples),
            "failed": failed,
            "failed_queries": failed_rule,
            "unranked": unranked,
            "repeated": {sid: n for sid, n in counts.items() if n > 1},
            "unjudged": sum(1 for key in run if key not in judged),
            "capture_errors": len(troubled),
        }
        return report

    def _judgements(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None,
        samples: Sequence[RagSample],
        keys: Sequence[str],
        notes: list[tuple[str, str]],
    ) -> dict[str, Mapping[str, float]]:
        """The qrels by sample key: a repeat is judged by its id's row; checks the sample ids."""
        judged: dict[str, Mapping[str, float]] = {}
        if qrels is None:
            for key, sample in zip(keys, samples, strict=True):
                own = sample.relevance_map()
                if own is not None:
                    judged[key] = own
            if not judged and samples:
                raise InvalidInputError(
                    "no captured sample carries ground truth (ragmeter_relevance or "
                    "ragmeter_reference_ids), so there is nothing to judge the run against: "
                    "pass qrels={query_id: {doc_id: grade}}"
                )
            return judged
        given = {str(q): row for q, row in qrels.items()}
        if len(given) != len(qrels):
            raise InvalidInputError(
                "two qrels query ids are the same string (e.g. 1 and '1'); keep one of them"
            )
        problem = sample_id_problem([s.id for s in samples], given, self.hints.sample_id)
        if problem is not None:
            fatal, message = problem
            if fatal:
                raise InvalidInputError(message)
            notes.append(("sample_ids", message))
        for key, sample in zip(keys, samples, strict=True):
            if sample.id in given:
                judged[key] = given[sample.id]
        captured = {s.id for s in samples}
        for qid, row in given.items():
            if qid in captured:
                continue
            if qid in judged:
                raise InvalidInputError(
                    f"the qrels query {qid!r} has the key a repeated sample is scored under "
                    f"({qid.rpartition('#')[0]!r} was captured several times); rename that "
                    "query or capture each query once"
                )
            judged[qid] = row
        return judged

    def _note_problems(
        self,
        samples: Sequence[RagSample],
        keys: Sequence[str],
        judged: Mapping[str, Mapping[str, float]],
        run: Mapping[str, Sequence[str]],
        failed: Sequence[str],
        failed_rule: FailedQueries,
        unranked: Sequence[str],
        troubled: Sequence[str],
        notes: list[tuple[str, str]],
    ) -> None:
        repeats = [key for key, sample in zip(keys, samples, strict=True) if key != sample.id]
        if repeats:
            n = len(repeats)
            notes.append(
                (
                    "repeated_ids",
                    f"{n} sample{'s' if n != 1 else ''} repeat{'' if n != 1 else 's'} an "
                    f"earlier sample id; each is scored under its own key ({some_ids(repeats)}) "
                    "against the qrels of its id, so every captured run counts in the mean. "
                    "Capture each query once (or clear() between runs) to weight queries "
                    "equally.",
                )
            )
        if failed:
            rule = (
                "they score 0 and count in the mean (failed_queries='zero'); pass "
                "failed_queries='skip' to score only the runs that worked"
                if failed_rule == "zero"
                else "they are left out of the mean (failed_queries='skip')"
            )
            notes.append(
                (
                    "failed_queries",
                    f"{len(failed)} of {len(samples)} captured samples failed before a ranking "
                    f"was captured ({some_ids(failed, 5)}; see sample.error): {rule}",
                )
            )
        if unranked:
            notes.append(
                (
                    "unranked",
                    f"{len(unranked)} captured samples have no ranking although their run did "
                    f"not fail ({some_ids(unranked)}): no retriever ran, or none was picked "
                    "(see their metadata['retriever_calls'] and ['capture_errors']); they "
                    "score 0",
                )
            )
        if troubled:
            sample_of = dict(zip(keys, samples, strict=True))
            first = sample_of[troubled[0]].metadata["capture_errors"]
            notes.append(
                (
                    "capture_errors",
                    f"{len(troubled)} judged samples carry capture problems in "
                    f"metadata['capture_errors'] (e.g. {troubled[0]!r}: {str(first[0])!r:.300})",
                )
            )
        problem = doc_id_problem({k: v for k, v in run.items() if v}, judged, self.hints.doc_id)
        if problem is not None:
            notes.append(("doc_ids", problem))

    def extend(self, samples: Iterable[RagSample]) -> None:
        """Append several samples."""
        for s in samples:
            self.add(s)
