"""The options every adapter shares: which retriever calls a sample keeps, what is recorded,
the doc-id watch of per-query metrics, and how capture problems are logged.

The rules for scoring captured samples (the stage option, failed runs, the id checks and each
framework's :class:`Hints`) live in :mod:`ragmeter.evaluation.capture_rules`; they are
importable from here too."""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Iterable
from typing import Any, Literal

from ragmeter._types import FAILED_QUERIES, FailedQueries
from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.evaluation.capture_rules import (
    Hints,
    check_choice,
    check_failed,
    check_stage,
    doc_id_problem,
    sample_id_problem,
)

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

# -- which retriever calls a sample keeps -----------------------------------------------------

Retrieval = Literal["last", "first", "merge"]
RETRIEVAL: dict[str, str] = {
    "last": "the ranking of the last outermost retriever call to finish",
    "first": "the ranking of the first outermost retriever call to finish",
    "merge": "every outermost retriever call's ranking, joined in the order they finished, "
    "each doc id at its best rank",
}
"""What ``retrieval=`` may be (LangChain and LlamaIndex handlers), and what each choice means."""


def check_retrieval(value: object) -> Retrieval:
    """``value`` if it is a :data:`RETRIEVAL` choice, else :class:`InvalidInputError`.

    >>> check_retrieval("merge")
    'merge'
    """
    choice = check_choice(value, RETRIEVAL, "retrieval")
    return "last" if choice == "last" else "first" if choice == "first" else "merge"


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
    return "all" if check_choice(value, RECORD, "record") == "all" else "tagged"


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
