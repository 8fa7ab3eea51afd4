"""The ragmeter exception tree.

Every error ragmeter raises on purpose derives from :class:`RagmeterError`, so one
``except RagmeterError`` catches them all. Subclasses also inherit the built-in
exception a caller would expect (``ValueError``, ``KeyError``, ``ImportError``)::

    RagmeterError
    ├── InvalidInputError (ValueError)        bad argument or record, names it
    │   ├── DataFormatError                   a file line that cannot be parsed (path, line)
    │   ├── DuplicateDocumentError            a ranking that repeats a doc id (query, ids)
    │   ├── NoScorableQueriesError            nothing to average over
    │   ├── NoSamplesError                    no samples at all
    │   ├── CacheFileError                    a cache file that cannot be used (path)
    │   │   ├── JudgeCacheError               ... of judge verdicts
    │   │   └── EmbedCacheError               ... of embeddings
    │   ├── EmbedderOutputError               an embedding model's vectors are unusable
    │   └── InvalidTypeError (TypeError)      an argument of the wrong kind
    ├── UnknownMetricError (KeyError, ValueError)
    ├── MissingDependencyError (ImportError)  an optional extra is not installed
    └── JudgeError                            what a judge (the user's model) answered
        ├── TransientJudgeError               worth retrying (rate limit, timeout, 5xx)
        └── VerdictError (ValueError)         a reply that is not a valid verdict
"""

from __future__ import annotations

from collections.abc import Iterable


class RagmeterError(Exception):
    """Root of every error ragmeter raises on purpose."""


class InvalidInputError(RagmeterError, ValueError):
    """An argument or record is not acceptable; the message names it and the fix."""


class DataFormatError(InvalidInputError):
    """A line of an input file cannot be parsed.

    ``path`` and ``line`` (1-based) say where; the message says what was wrong.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(f"{where}{message}")
        self.path = path
        self.line = line


class DuplicateDocumentError(InvalidInputError):
    """A ranking repeats a doc id for a query that is scored."""

    def __init__(self, query_id: str, duplicates: Iterable[str]) -> None:
        dups = sorted(set(duplicates))
        shown = ", ".join(repr(d) for d in dups[:10]) + (" ..." if len(dups) > 10 else "")
        super().__init__(
            f"the run for query {query_id!r} returns the same doc id more than once: {shown}. "
            "A ranking is a list of distinct documents; scoring one with repeats would report "
            "a retriever's bug as a score. De-duplicate it, keeping each doc at its best rank "
            "(evaluate_retrieval does this for you)."
        )
        self.query_id = query_id
        self.duplicates = dups


class NoScorableQueriesError(InvalidInputError):
    """No query has a relevant judgement, so there is nothing to average."""


class NoSamplesError(InvalidInputError):
    """An evaluation was given no samples at all (an empty list or file)."""


class InvalidTypeError(InvalidInputError, TypeError):
    """An argument of the wrong kind (e.g. not a chat model where one is needed)."""


class UnknownMetricError(RagmeterError, KeyError, ValueError):
    """A metric name that is not registered; the message lists what exists."""

    def __init__(
        self, name: object, available: Iterable[str], also: str = "", *, bare: bool = True
    ) -> None:
        names = ", ".join(sorted(available))
        hint = ""
        if bare and isinstance(name, str) and "@" in name:  # registry names have no @k
            hint = (
                f" Registry names are bare: pass {name.split('@', 1)[0]!r} and choose the "
                "cut-off with k / k_values ('metric@k' exists only as a result key)."
            )
        super().__init__(f"no metric named {name!r}. Available: {names}.{hint}{also}")
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])


class MissingDependencyError(RagmeterError, ImportError):
    """An optional dependency is missing; the message gives the pip command."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"this feature needs the optional package {package!r}: pip install 'ragmeter[{extra}]'"
        )


def some_ids(ids: Iterable[object], n: int = 3) -> str:
    """The first ``n`` distinct ids, quoted, for a message: ``'a', 'b', 'c', ...``.

    >>> some_ids(["q1", "q1", "q2"]), some_ids(["a", "b", "c", "d"])
    ("'q1', 'q2'", "'a', 'b', 'c', ...")
    """
    shown: list[str] = []
    for key in dict.fromkeys(ids):
        if len(shown) == n:
            shown.append("...")
            break
        shown.append(repr(key))
    return ", ".join(shown)


def describe_error(exc: BaseException) -> str:
    """How ``exc`` reads to a user: an ``OSError`` as ``"file: what"``, others as is.

    >>> describe_error(FileNotFoundError(2, "No such file or directory", "nope.json"))
    'nope.json: No such file or directory'
    """
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc)


def check_k(k: object, *, name: str = "k") -> int:
    """Return ``k`` if it is an int >= 1, else raise :class:`InvalidInputError`.

    >>> check_k(5)
    5
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(
            f"{name} must be an int >= 1, got {k!r} (a k of 0 or below is not a smaller "
            "top-k, it is a slice that means something else)."
        )
    return k


class JudgeError(RagmeterError):
    """What a judge (the user's model) answered could not be used."""


class TransientJudgeError(JudgeError):
    """Raise from a judge for an error worth retrying (rate limit, timeout, 5xx)."""


class VerdictError(JudgeError, ValueError):
    """A judge's reply that is not a valid verdict."""


class CacheFileError(InvalidInputError):
    """A ragmeter cache file that cannot be used: not an SQLite database, corrupted, another
    application's database, or a path where no cache can be created.

    ``path`` names the file; ``problem`` says what is wrong with it, as a predicate of "the
    file" (``"is corrupted (...)"``); ``hint`` what to do, which never advises deleting a
    file that is not this kind of cache. The message joins them and adds running without
    the cache (``off`` says how).
    """

    what = "cache"
    off = "run without a cache"

    def __init__(self, path: object, problem: str, *, hint: str | None = None) -> None:
        advice = hint or "use another cache path"
        super().__init__(
            f"{self.what} {path}: the file {problem}. To go on, {advice}, or {self.off}"
        )
        self.path = path
        self.problem = problem
        self.hint = advice


class JudgeCacheError(CacheFileError):
    """A judge cache file that cannot be used (see :class:`CacheFileError`)."""

    what = "judge cache"
    off = "run without a cache (judge_cache=None; --no-judge-cache on the command line)"


class EmbedCacheError(CacheFileError):
    """An embedding cache file that cannot be used (see :class:`CacheFileError`)."""

    what = "embedding cache"
    off = "run without a cache (embed_cache=None; --no-embed-cache on the command line)"


class EmbedderOutputError(InvalidInputError):
    """An embedding model answered with something that is not one finite vector per text,
    all of one length: the message names the model and a sample that needs the text."""
