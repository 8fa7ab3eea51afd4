"""The options and rules every adapter shares: which ranking a sample scores, what is
recorded, how failed runs count, and the warnings that name each framework's fix."""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragmeter._types import FAILED_QUERIES, FailedQueries
from ragmeter.errors import InvalidInputError, some_ids

__all__ = [
    "FAILED_QUERIES",
    "RECORD",
    "RETRIEVAL",
    "DocIdOption",
    "FailedQueries",
    "Hints",
    "IdWatch",
    "ProblemLog",
    "Record",
    "Retrieval",
    "check_failed",
    "check_record",
    "check_retrieval",
    "check_stage",
    "deprecated_option",
    "deprecated_selection",
    "doc_id_problem",
    "sample_id_problem",
]

# -- the rules for scoring captured samples (see the module docstring) -----------------------

Retrieval = Literal["last", "first", "merge"]
RETRIEVAL: dict[str, str] = {
    "last": "the ranking of the last outermost retriever call to finish",
    "first": "the ranking of the first outermost retriever call to finish",
    "merge": "every outermost retriever call's ranking, joined in the order they finished, "
    "each doc id at its best rank",
}
"""What ``retrieval=`` may be (LangChain and LlamaIndex handlers), and what each choice means."""


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


def check_stage(value: object, option: str = "stage") -> str:
    """``value`` if it names a stage (a non-empty str: ``"context"`` or a stage's name), else
    :class:`InvalidInputError`.

    >>> check_stage("bm25")
    'bm25'
    """
    if isinstance(value, str) and value:
        return value
    raise InvalidInputError(
        f"{option} must name a stage: 'context' (what reached the generator, the default) or "
        f"a stage's name such as a retriever's, got {value!r}"
    )


def deprecated_selection(owner: str, old: str, *, stacklevel: int = 3) -> None:
    """Warn (``DeprecationWarning``) that ``owner(old=...)`` is replaced by ``stage=``."""
    warnings.warn(
        f"{owner}({old}=...) is deprecated: every captured sample keeps each step that "
        "produced a ranking as a stage and scores 'context' (what reached the generator) by "
        f"default; pick another with stage='<name>' ({old}= will be removed in a future "
        "release)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def check_failed(value: object) -> FailedQueries:
    return "zero" if _choice(value, FAILED_QUERIES, "failed_queries") == "zero" else "skip"


@dataclass(frozen=True)
class Hints:
    """How a user of one framework fixes an id problem: the adapters fill it in, and the
    warnings of :meth:`SampleStore.evaluate_retrieval` quote it (and log with its logger).

    ``label`` is the framework's display name (progress bars, messages).
    ``sample_id`` says how to give each captured run its query id; ``doc_id`` how to make a
    retrieved document's id the one the qrels use (naming the current setting); ``stage``
    how to say which ranking reached the generator when ragmeter cannot tell.
    """

    framework: str = "ragmeter"
    sample_id: str = "Give each sample the query id the qrels use (RagSample.id)."
    doc_id: str = "Make retrieved_ids the doc ids the qrels use."
    label: str = ""
    stage: str = "Pick the stage to score by name with stage='<name>'."

    @property
    def name(self) -> str:
        """The framework's name as its users write it (``label``, e.g. ``LangChain``)."""
        return self.label or self.framework

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


# -- what to record, option names, logging capture problems ----------------------------------

Record = Literal["all", "tagged"]
RECORD: dict[str, str] = {
    "all": "every top-level run becomes a sample",
    "tagged": "only top-level runs that carry a sample id (capture(id=...), or the "
    "framework's own way of passing ragmeter_id) become samples; others, such as an "
    "evaluator's internal queries, are not recorded",
}
"""What ``record=`` may be (every adapter), and what each choice means."""


def check_record(value: object) -> Record:
    """``value`` if it is a :data:`RECORD` choice, else :class:`InvalidInputError`.

    >>> check_record("tagged")
    'tagged'
    """
    return "all" if _choice(value, RECORD, "record") == "all" else "tagged"


def deprecated_option(owner: str, old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn (``DeprecationWarning``) that ``owner(old=...)`` is now ``owner(new=...)``.

    Every adapter calls a document's id option ``doc_id``; the old names keep working.
    """
    warnings.warn(
        f"{owner}({old}=...) is deprecated; use {new}=..., the name every ragmeter adapter "
        f"uses for a document's id ({old}= will be removed in a future release)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class DocIdOption:
    """A framework's ``doc_id`` option: what it may name, and its deprecated older name.

    Every adapter has one: a document's id is one of the framework's own fields
    (``names``), a metadata key (``prefix`` + key) or, when ``functions`` is true, a function
    document -> id. ``rule`` is the end of the error message, after ``"<option> must be "``
    (the adapter's own wording, with an example). :meth:`check` validates a value;
    :meth:`resolve` also takes the value of the deprecated older name (``unset`` when it was
    not given) and warns about it.

    >>> ids = DocIdOption(("id", "content"), "meta.", "'id', 'content' or 'meta.<key>'")
    >>> ids.check("meta.file_id")
    'meta.file_id'
    >>> ids.check("meta.")
    Traceback (most recent call last):
    ...
    ragmeter.errors.InvalidInputError: doc_id must be 'id', 'content' or 'meta.<key>', got 'meta.'
    """

    __slots__ = ("functions", "names", "prefix", "rule")

    def __init__(
        self, names: tuple[str, ...], prefix: str, rule: str, *, functions: bool = True
    ) -> None:
        self.names = names
        self.prefix = prefix
        self.rule = rule
        self.functions = functions

    def check(self, value: Any, *, name: str = "doc_id") -> Any:
        """``value`` if it names a field, a metadata key or (``functions``) is callable."""
        if self.functions and callable(value):
            return value
        if isinstance(value, str) and (
            value in self.names or (value.startswith(self.prefix) and len(value) > len(self.prefix))
        ):
            return value
        raise InvalidInputError(f"{name} must be {self.rule}, got {value!r}")

    def resolve(
        self,
        doc_id: Any,
        older: Any,
        *,
        owner: str,
        older_name: str,
        default: Any,
        unset: Any,
        stacklevel: int = 5,
    ) -> Any:
        """The checked ``doc_id``: ``default`` when ``None``; the deprecated ``older_name=``
        value when that was given instead (a ``DeprecationWarning``); both is an error."""
        if older is unset:
            return self.check(default if doc_id is None else doc_id)
        deprecated_option(owner, older_name, "doc_id", stacklevel=stacklevel)
        if doc_id is not None:
            raise InvalidInputError(
                f"{owner}: pass doc_id= alone; {older_name}= is its deprecated older name"
            )
        return self.check(older, name=older_name)

    @staticmethod
    def describe(doc_id: Any) -> str:
        """``'meta.source_id'`` (quoted) for a name, the function's name for a function."""
        return getattr(doc_id, "__name__", repr(doc_id)) if callable(doc_id) else repr(doc_id)


class ProblemLog:
    """Logs capture problems: a warning the first time per kind, then at DEBUG level.

    ``count`` is how many problems were logged. Thread-safe.

    >>> log = ProblemLog(logging.getLogger("ragmeter_example"), "Example")
    >>> log("doc_id", "doc_id raised KeyError"); log("doc_id", "again"); log.count
    2
    """

    def __init__(self, logger: logging.Logger, framework: str) -> None:
        self.logger = logger
        self.framework = framework
        self.count = 0
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, kind: str, message: str, exc: BaseException | None = None) -> None:
        with self._lock:
            self.count += 1
            first = kind not in self._seen
            self._seen.add(kind)
        if first:
            self.logger.warning(
                "ragmeter could not capture part of a %s run (%s: %s); the run is unaffected "
                "and the problem is recorded in the sample's metadata['capture_errors']. "
                "Logged once per kind; later ones at DEBUG level.",
                self.framework,
                kind,
                message,
                exc_info=exc,
            )
        else:
            self.logger.debug("ragmeter capture problem (%s): %s", kind, message, exc_info=exc)
