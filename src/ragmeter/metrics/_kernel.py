"""The fused per-query kernel behind :func:`ragmeter.evaluate_run` for the built-ins.

Per query: one ``{doc_id: rank}`` dictionary built in C by ``dict(zip(ranked, RANKS))`` over
a shared list of rank ints (its size also reveals a repeated doc id, so no second pass is
needed); one walk over the query's judgements (a handful of docs, not the whole ranking);
then every requested built-in metric at every cut-off from the sorted 1-based hit ranks,
with prefix sums built in C by ``itertools.accumulate``. The same walk gives ``judged@k``
(code ``judged``: the share of the top ``min(k, n)`` that has a judgement, any grade), so
the drivers report it on every run at the cost of one lookup per judgement. Values come
out as a flat list in the order of :func:`result_keys`, so the driver builds keys once per
run, not per query.

Sums are accumulated in the order trec_eval uses (rank ascending: ``gain / log2(rank + 1)``
for DCG, ``rel_so_far / rank`` for AP), with plain float additions, so per-query values
match trec_eval's to the last bit. Arguments are trusted: the public drivers validate them.

Two backends share this contract. :func:`py_score_query` (pure Python) is the reference and
always available. The optional compiled extension ``ragmeter.metrics._ckernel`` (built from
``_ckernel.c`` when a C compiler is present at install time) does the same IEEE operations in
the same order, so its values are the same floats; it handles lists/tuples of ``str`` doc ids
with ``dict`` judgements of ``int``/``float``/``bool`` grades, and hands any other input
(other id types, numpy scalars, a bad grade ...) to :func:`py_score_query`, so results and
errors are the Python kernel's. :data:`score_query` is the compiled one when it is importable,
unless the environment variable ``RAGMETER_PURE_PYTHON`` is set to anything but ``""``/``"0"``
when this module is imported; :data:`BACKEND` says which (``"c"`` or ``"python"``). The same
extension scores a whole run in one C loop (:data:`c_run_loop`, used by
:mod:`ragmeter.evaluation.scoring`) with the same per-query arithmetic.
"""

from __future__ import annotations

import math
import os
from array import array
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ragmeter._types import MAX_GRADE

if TYPE_CHECKING:
    from ragmeter.metrics._ckernel import RunLoop as RunLoop

__all__ = [
    "BACKEND",
    "MAX_GRADE",
    "BadGradeError",
    "NonStrIdsError",
    "RepeatedDocsError",
    "ScoreQuery",
    "c_rows_dict",
    "c_run_loop",
    "c_score_query",
    "column_sums",
    "doubles",
    "duplicates_in",
    "kernel_codes",
    "positions",
    "py_score_query",
    "result_keys",
    "score_query",
    "str_positions",
    "zip_dict",
]

ScoreQuery = Callable[
    [Sequence[str], Mapping[str, float], Sequence[int], Sequence[int], "float | None"],
    "list[float] | None",
]
"""The signature of :func:`py_score_query` and of the compiled kernel."""

NDCG, RECALL, PRECISION, HIT_RATE, MRR, MAP, JUDGED = range(7)
CODES: dict[str, int] = {
    "ndcg": NDCG,
    "recall": RECALL,
    "precision": PRECISION,
    "hit_rate": HIT_RATE,
    "mrr": MRR,
    "map": MAP,
    "judged": JUDGED,
}
"""Kernel codes by name. ``judged`` is ir_measures' ``Judged@k``
(:func:`ragmeter.metrics.ranking.judged_at_k`): the share of the top ``min(k, n)`` docs that
have a judgement (any grade), ``0.0`` for an empty ranking; the drivers add it to every run."""
_UNCUT = (MRR, MAP)
"""Metrics that also report an uncut value (trec_eval ``recip_rank`` and ``map``)."""

_RANKS: list[int] = list(range(1, 1025))
"""``_RANKS[i] == i + 1``: shared 1-based rank ints, so building a rank map allocates none."""
_LOG2: list[float] = [0.0] + [math.log2(r + 1) for r in range(1, 1025)]
"""``_LOG2[r] == log2(r + 1)``: the DCG discount of 1-based rank ``r``."""


_STR = frozenset({str})


class RepeatedDocsError(Exception):
    """Raised by :func:`score_query` for a scored ranking that repeats a doc id."""


class BadGradeError(Exception):
    """Raised by :func:`score_query` for a grade that is NaN, infinite or beyond
    :data:`MAX_GRADE`; ``args`` are ``(doc_id, grade)``."""


class NonStrIdsError(Exception):
    """Raised by :func:`py_score_query` when a doc id (in the ranking or the judgements) is
    not a ``str``: the driver converts int ids with ``str()`` and scores again, so ``1`` and
    ``"1"`` are the same doc, never silently two (and refuses other kinds of id)."""


def _grow(n: int) -> None:
    """Make ``_RANKS`` and ``_LOG2`` cover ranks up to ``n``."""
    start = len(_RANKS) + 1
    stop = max(n, 2 * len(_RANKS)) + 1
    _RANKS.extend(range(start, stop))
    _LOG2.extend(math.log2(r + 1) for r in range(start, stop))


def _check_str_ids(ranked: Sequence[object], judgements: Mapping[Any, object]) -> None:
    """Raise :class:`NonStrIdsError` unless every id is a ``str`` (or a ``str`` subclass)."""
    types = set(map(type, ranked)).union(map(type, judgements))
    if not all(issubclass(t, str) for t in types):
        raise NonStrIdsError


def duplicates_in(ranked: Sequence[str]) -> list[str]:
    """The doc ids that occur more than once in ``ranked``, sorted.

    >>> duplicates_in(["a", "b", "a", "c", "b", "a"])
    ['a', 'b']
    """
    seen: set[str] = set()
    dups: set[str] = set()
    for d in ranked:
        if d in seen:
            dups.add(d)
        seen.add(d)
    return sorted(dups)


def kernel_codes(names: Sequence[str]) -> list[int]:
    """Kernel codes of built-in metric names (``"ndcg"`` ...), in the given order."""
    return [CODES[n] for n in names]


def result_keys(labels: Sequence[str], codes: Sequence[int], ks: Sequence[int]) -> list[str]:
    """The keys of :func:`score_query`'s values: ``label@k`` per k, then uncut ``label``.

    >>> result_keys(["recall", "map"], kernel_codes(["recall", "map"]), [1, 10])
    ['recall@1', 'recall@10', 'map@1', 'map@10', 'map']
    """
    keys: list[str] = []
    for label, code in zip(labels, codes, strict=True):
        keys.extend(f"{label}@{k}" for k in ks)
        if code in _UNCUT:
            keys.append(label)
    return keys


def py_score_query(
    ranked: Sequence[str],
    judgements: Mapping[str, float],
    ks: Sequence[int],
    codes: Sequence[int],
    relevance_level: float | None,
) -> list[float] | None:
    """Every requested built-in metric for one query, in :func:`result_keys` order.

    ``ks`` must be sorted ascending and distinct. Returns ``None`` when the query has no
    relevant judgement (it is not scored). Raises :class:`RepeatedDocsError` when it is
    scored and ``ranked`` repeats a doc id, :class:`BadGradeError` for a grade that is not
    finite or beyond :data:`MAX_GRADE`, and :class:`NonStrIdsError` when an id is not a
    ``str``.

    >>> py_score_query(["x", "d1", "d2"], {"d1": 1, "d2": 0}, [1, 2], kernel_codes(["mrr"]), None)
    [0.0, 0.5, 0.5]
    """
    if not _STR.issuperset(map(type, ranked)) or not _STR.issuperset(map(type, judgements)):
        _check_str_ids(ranked, judgements)
    n = len(ranked)
    if n > len(_RANKS):
        _grow(n)
    pos = dict(zip(ranked, _RANKS, strict=False))
    get = pos.get
    # hits: (rank, grade) of retrieved docs with a positive grade, i.e. the DCG gains;
    # ideal: every positive grade; ranks: sorted ranks of the retrieved *relevant* docs.
    hits: list[tuple[int, float]] = []
    ideal: list[float] = []
    if relevance_level is None:
        for doc, grade in judgements.items():
            if not -MAX_GRADE <= grade <= MAX_GRADE:  # NaN fails both comparisons
                raise BadGradeError(doc, grade)
            if grade > 0:
                ideal.append(grade)
                r = get(doc)
                if r is not None:
                    hits.append((r, grade))
        n_rel = len(ideal)
        if not n_rel:
            return None
        hits.sort()
        ranks = [r for r, _ in hits]
    else:
        ranks = []
        n_rel = 0
        for doc, grade in judgements.items():
            if not -MAX_GRADE <= grade <= MAX_GRADE:
                raise BadGradeError(doc, grade)
            if grade >= relevance_level:
                n_rel += 1
                r = get(doc)
                if r is not None:
                    ranks.append(r)
            if grade > 0:
                ideal.append(grade)
                r = get(doc)
                if r is not None:
                    hits.append((r, grade))
        if not n_rel:
            return None
        ranks.sort()
        hits.sort()
    if len(pos) != n:
        raise RepeatedDocsError
    counts = [bisect_right(ranks, k) for k in ks] if ranks else [0] * len(ks)

    out: list[float] = []
    for code in codes:
        if code == JUDGED:  # judged docs in the top min(k, n), over min(k, n)
            if n:
                judged = sorted(filter(None, map(get, judgements)))  # ranks are >= 1
                out += [bisect_right(judged, k) / (k if k < n else n) for k in ks]
            else:
                out += [0.0] * len(ks)
        elif code == PRECISION:
            out += [c / k for c, k in zip(counts, ks, strict=True)]
        elif code == RECALL:
            out += [c / n_rel for c in counts]
        elif code == HIT_RATE:
            out += [1.0 if c else 0.0 for c in counts]
        elif code == MRR:
            rr = 1.0 / ranks[0] if ranks else 0.0
            out += [rr if c else 0.0 for c in counts]
            out.append(rr)
        elif code == MAP:
            ap = [0.0]  # ap[c]: sum of (relevant so far / rank) over the first c hits
            acc = 0.0
            for j, r in enumerate(ranks, 1):
                acc += j / r
                ap.append(acc)
            out += [ap[c] / n_rel for c in counts]
            out.append(acc / n_rel)
        elif hits:  # NDCG
            out += _ndcg(hits, ideal, ks, counts if relevance_level is None else None)
        else:  # NDCG with nothing of positive grade retrieved
            out += [0.0] * len(ks)
    return out


def _ndcg(
    hits: list[tuple[int, float]],
    ideal: list[float],
    ks: Sequence[int],
    counts: list[int] | None,
) -> list[float]:
    """NDCG at each k: DCG of the retrieved positive grades over the ideal DCG, both cut.

    ``hits`` is sorted by rank and not empty (so ``ideal`` is not empty either); ``counts``
    holds the number of hits within each k, or ``None`` to count them here.
    """
    kmax = ks[-1]
    top = max(hits[-1][0], min(len(ideal), kmax))
    if top >= len(_LOG2):
        _grow(top)
    log2 = _LOG2
    ideal.sort(reverse=True)
    idcg = [0.0]
    acc = 0.0
    i = 0
    for g in ideal:
        i += 1
        if i > kmax:
            break
        acc += g / log2[i]
        idcg.append(acc)
    dcg = [0.0]
    acc = 0.0
    for r, g in hits:
        acc += g / log2[r]
        dcg.append(acc)
    if counts is None:
        gain_ranks = [r for r, _ in hits]
        counts = [bisect_right(gain_ranks, k) for k in ks]
    last = i if i <= kmax else kmax
    return [dcg[c] / idcg[k if k < last else last] for c, k in zip(counts, ks, strict=True)]


def _load_c_kernel() -> ScoreQuery | None:
    """The compiled kernel, configured to hand unrecognised inputs to :func:`py_score_query`;
    ``None`` when the extension was not built (no C compiler at install time)."""
    try:
        from ragmeter.metrics import _ckernel
    except ImportError:
        return None
    _ckernel.configure(py_score_query, RepeatedDocsError)
    return _ckernel.score_query


c_score_query: ScoreQuery | None = _load_c_kernel()
"""The compiled kernel, or ``None`` when it is not built (it is loaded even when
``RAGMETER_PURE_PYTHON`` is set, so tests can compare the two)."""

_FORCE_PYTHON = os.environ.get("RAGMETER_PURE_PYTHON", "").strip() not in ("", "0")

score_query: ScoreQuery = (
    c_score_query if c_score_query is not None and not _FORCE_PYTHON else py_score_query
)
"""The kernel the drivers use: compiled when importable, unless ``RAGMETER_PURE_PYTHON`` is set.

>>> score_query(["x", "d1", "d2"], {"d1": 1, "d2": 0}, [1, 2], kernel_codes(["mrr"]), None)
[0.0, 0.5, 0.5]
"""

BACKEND: Literal["c", "python"] = "python" if score_query is py_score_query else "c"
"""Which kernel :data:`score_query` is: ``"c"`` (compiled) or ``"python"``."""


def _load(name: str) -> Any:
    try:
        from ragmeter.metrics import _ckernel
    except ImportError:
        return None
    return getattr(_ckernel, name, None)  # None: a kernel built before it existed


c_column_sums: Callable[[array[float], int], list[float] | None] | None = (
    None if _FORCE_PYTHON else _load("column_sums")
)
"""The compiled :func:`column_sums` (``None`` when not built or ``RAGMETER_PURE_PYTHON`` is set;
it returns ``None`` itself for a value :func:`math.fsum` must look at: not finite, ``-0.0``)."""


def column_sums(values: array[float], width: int) -> list[float]:
    """``math.fsum`` of each column of ``values`` read as rows of ``width`` (exact sums rounded
    once: the same floats whatever order the rows are in), at C speed when the compiled
    kernel is built.

    >>> column_sums(array("d", [0.1, 1.0, 0.2, 0.0, 0.3, 1.0]), 2)
    [0.6, 2.0]
    """
    if c_column_sums is not None:
        sums = c_column_sums(values, width)
        if sums is not None:
            return sums
    return [math.fsum(values[j::width]) for j in range(width)]


c_run_loop: type[RunLoop] | None = None if _FORCE_PYTHON else _load("RunLoop")
"""The compiled loop over a whole run's rankings (``_ckernel.RunLoop``, see ``_ckernel_run.c``),
or ``None`` when not built or ``RAGMETER_PURE_PYTHON`` is set."""

c_pack_doubles: Callable[[list[float]], bytes] | None = (
    None if _FORCE_PYTHON else _load("pack_doubles")
)
"""The compiled packing of :func:`doubles` (``None`` when not built or ``RAGMETER_PURE_PYTHON``
is set)."""


def doubles(values: list[float]) -> array[float]:
    """``values`` as an ``array('d')`` (packed in C when the compiled kernel is built:
    ``array('d', values)`` parses every item with a format string).

    >>> doubles([0.5, 1.0])
    array('d', [0.5, 1.0])
    """
    if c_pack_doubles is None:
        return array("d", values)
    out = array("d")
    out.frombytes(c_pack_doubles(values))
    return out


K = TypeVar("K")
V = TypeVar("V")

c_rows_dict: Callable[..., Any] | None = None if _FORCE_PYTHON else _load("rows_dict")
"""The compiled ``rows_dict`` (:meth:`ragmeter.report.ColumnRows.to_dict` in C), or ``None``."""

c_zip_dict: Callable[..., Any] | None = None if _FORCE_PYTHON else _load("zip_dict")
"""The compiled :func:`zip_dict` (``None`` when not built or ``RAGMETER_PURE_PYTHON`` is set)."""


def zip_dict(keys: list[K], values: list[V]) -> dict[K, V]:
    """``dict(zip(keys, values))`` for two lists of one length, made at its final size in C
    when the compiled kernel is built (a report's million per-query rows, a run's index).

    >>> zip_dict(["q1", "q2"], [{"p@1": 1.0}, {"p@1": 0.0}])
    {'q1': {'p@1': 1.0}, 'q2': {'p@1': 0.0}}
    """
    if c_zip_dict is None:
        return dict(zip(keys, values, strict=True))
    return c_zip_dict(keys, values)  # type: ignore[no-any-return]


def positions(keys: Mapping[K, Any]) -> dict[K, int]:
    """Each key of ``keys`` at its position (in C for a ``dict``: its keys' hashes are read
    from the dict, so each key object is visited once).

    >>> positions({"q1": {}, "q2": {}})
    {'q1': 0, 'q2': 1}
    """
    if c_zip_dict is None or type(keys) is not dict:
        return dict(zip(keys, range(len(keys)), strict=True))
    return c_zip_dict(keys, len(keys))  # type: ignore[no-any-return]


def str_positions(keys: Mapping[Any, Any]) -> dict[str, int] | None:
    """:func:`positions` of a ``dict`` whose keys are all exact ``str``, checked in the same
    visit to each key; ``None`` for any other mapping (its keys must be made ``str`` first).

    >>> str_positions({"q1": {}, "q2": {}}), str_positions({"q1": {}, 2: {}})
    ({'q1': 0, 'q2': 1}, None)
    """
    if type(keys) is not dict:
        return None
    if c_zip_dict is not None:
        return c_zip_dict(keys, len(keys), True)  # type: ignore[no-any-return]
    if not all(key.__class__ is str for key in keys):
        return None
    return positions(keys)
