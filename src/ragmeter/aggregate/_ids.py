"""Sample ids across a stream: repeated ids (``q1#2``) counted in bounded memory."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any


def _digests(ids: Sequence[str]) -> tuple[Any, Any]:
    """Two int64 arrays: Python's (SipHash) hashes of each id and of ``"\x1f" + id``,
    together a 128-bit digest (two independent keyed hashes of different inputs)."""
    import numpy as np

    high = np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids))
    low = np.fromiter((hash("\x1f" + i) for i in ids), dtype=np.int64, count=len(ids))
    return high, low


class StreamKeys:
    """:class:`ragmeter.schema.SampleKeys`' rule for a stream, in ~16 bytes per id.

    The key of each id is the id, or ``"<id>#2"``, ``"<id>#3"``... (the first free suffix)
    when an earlier sample took it, exactly as ``SampleKeys``, but the keys taken are kept
    as 128-bit digests (two SipHash string hashes) in sorted NumPy arrays, merged
    log-structured so that adding ``n`` ids costs ``O(n log n)``, not as strings. Two
    different ids share a digest with probability about ``n**2 / 2**129`` (1e-27 for a
    million ids). Ids are resolved a block at a time with :meth:`resolve`; the digests are
    those of this process (``PYTHONHASHSEED``), so a ``StreamKeys`` is not merged across
    processes.

    >>> keys = StreamKeys()
    >>> keys.resolve(["q1", "q2", "q1"]), keys.resolve(["q1", "q1#2"]), keys.repeats
    (['q1', 'q2', 'q1#2'], ['q1#3', 'q1#2#2'], 3)
    """

    def __init__(self) -> None:
        self._levels: list[tuple[Any, Any]] = []  # (high sorted, low aligned), sizes decreasing
        self.repeats = 0
        """How many ids so far were renamed because an earlier sample took them."""

    def __len__(self) -> int:
        return sum(int(high.size) for high, _ in self._levels)

    def _seen(self, high: Any, low: Any) -> Any:
        import numpy as np

        found = np.zeros(high.size, dtype=bool)
        if not self._levels:
            return found
        order = np.argsort(high)  # sorted queries search a large level cache-friendly
        ranks = np.empty_like(order)
        ranks[order] = np.arange(order.size)
        for level_high, level_low in self._levels:
            pos = np.searchsorted(level_high, high[order])[ranks]
            inside = pos < level_high.size
            hit = np.zeros(high.size, dtype=bool)
            hit[inside] = level_high[pos[inside]] == high[inside]
            for i in np.flatnonzero(hit).tolist():  # confirm with the other 64 bits
                j = int(pos[i])
                while j < level_high.size and level_high[j] == high[i]:
                    if level_low[j] == low[i]:
                        found[i] = True
                        break
                    j += 1
        return found

    def _taken(self, key: str, block: set[str]) -> bool:
        if key in block:
            return True
        high, low = _digests([key])
        return bool(self._seen(high, low)[0])

    def resolve(self, ids: Sequence[str]) -> list[str]:
        """The keys of a block of ids, in order (and mark them taken)."""
        if not ids:
            return []
        high, low = _digests(ids)
        seen_mask = self._seen(high, low)
        if not seen_mask.any() and len(set(ids)) == len(ids):  # the usual case: all new
            self._insert(high, low)
            return list(ids)
        seen = seen_mask.tolist()
        block: set[str] = set()
        keys: list[str] = []
        renamed: list[int] = []
        for i, (sid, was) in enumerate(zip(ids, seen, strict=True)):
            key = sid
            if was or sid in block:
                self.repeats += 1
                suffix = 2
                while self._taken(f"{sid}#{suffix}", block):
                    suffix += 1
                key = f"{sid}#{suffix}"
                renamed.append(i)
            block.add(key)
            keys.append(key)
        if renamed:
            new_high, new_low = _digests([keys[i] for i in renamed])
            high[renamed], low[renamed] = new_high, new_low
        self._insert(high, low)
        return keys

    def _insert(self, high: Any, low: Any) -> None:
        import numpy as np

        order = np.argsort(high, kind="stable")
        level = (high[order], low[order])
        while self._levels and self._levels[-1][0].size <= level[0].size:
            top_high, top_low = self._levels.pop()
            both_high = np.concatenate((top_high, level[0]))
            both_low = np.concatenate((top_low, level[1]))
            order = np.argsort(both_high, kind="stable")
            level = (both_high[order], both_low[order])
        self._levels.append(level)


_SUFFIXES = re.compile(r"(?:#[0-9]+)+\Z")


def id_root(sample_id: str) -> str:
    """``sample_id`` without its trailing ``#<digits>`` suffixes.

    Every key the repeated-id rule (:class:`StreamKeys`, :class:`ragmeter.schema.SampleKeys`)
    makes from an id has that id's root, so two samples can only affect each other's keys
    when their roots are equal.

    >>> id_root("q1"), id_root("q1#2"), id_root("q1#2#3"), id_root("doc#a")
    ('q1', 'q1', 'q1', 'doc#a')
    """
    return _SUFFIXES.sub("", sample_id) if "#" in sample_id else sample_id


def _root_digests(ids: Sequence[str]) -> Any:
    """The 64-bit BLAKE2b digests of the ids' roots: the same in every process."""
    import numpy as np

    digests = (
        hashlib.blake2b(id_root(i).encode("utf-8", "surrogatepass"), digest_size=8).digest()
        for i in ids
    )
    return np.fromiter(digests, dtype="S8", count=len(ids)).view(np.uint64)


class IdRoots:
    """Which sample ids may repeat, found across processes: a mergeable
    :class:`StreamKeys` stand-in for a partitioned stream.

    :meth:`resolve` records the 64-bit digest of each id's :func:`id_root` (BLAKE2b, the
    same in every process, unlike :class:`StreamKeys`' string hashes) and returns the ids
    unchanged; :meth:`merge` folds in another part's digests; :meth:`repeated` gives the
    digests seen more than once. Only samples whose root digest is repeated can be
    renamed by the repeated-id rule, so applying :class:`~ragmeter.schema.SampleKeys` to
    just those ids, in stream order, counts the repeats of the whole stream exactly (a
    digest collision only adds a sample to that pass, never changes the count). About
    8 bytes per distinct root.

    >>> a, b = IdRoots(), IdRoots()
    >>> a.resolve(["q1", "q2"]), b.resolve(["q3", "q1#2"])
    (['q1', 'q2'], ['q3', 'q1#2'])
    >>> a.merge(b)
    >>> a.matches(["q1", "q2", "q3", "q1#7"])
    [True, False, False, True]
    """

    repeats = 0
    """Always 0: the repeats are counted afterwards (see the class docstring)."""

    def __init__(self) -> None:
        import numpy as np

        self._unique: Any = np.zeros(0, dtype=np.uint64)  # sorted distinct digests
        self._repeated: Any = np.zeros(0, dtype=np.uint64)  # sorted, seen more than once
        self._pending: list[Any] = []

    def resolve(self, ids: Sequence[str]) -> list[str]:
        """Record a block of ids; returns them unchanged (as :meth:`StreamKeys.resolve`
        would when no id repeats)."""
        if ids:
            self._pending.append(_root_digests(ids))
        return list(ids)

    def _compact(self) -> None:
        import numpy as np

        if not self._pending:
            return
        values, counts = np.unique(
            np.concatenate([self._unique, *self._pending]), return_counts=True
        )
        self._pending = []
        self._unique = values
        if (counts > 1).any():
            self._repeated = np.union1d(self._repeated, values[counts > 1])

    def merge(self, other: IdRoots) -> None:
        """Fold in ``other``'s digests (``other`` is unchanged)."""
        import numpy as np

        other._compact()
        self._pending.append(other._unique)
        self._repeated = np.union1d(self._repeated, other._repeated)
        self._compact()

    def repeated(self) -> Any:
        """The sorted digests (``uint64``) of the roots seen more than once."""
        self._compact()
        return self._repeated

    def repeated_only(self) -> IdRoots:
        """A copy that holds only :meth:`repeated` (what a finished stream needs: about
        nothing when no id repeats). Merging into it would miss repeats across the parts."""
        roots = IdRoots()
        roots._repeated = self.repeated()
        return roots

    def matches(self, ids: Sequence[str]) -> list[bool]:
        """For each id, whether its root digest is :meth:`repeated`."""
        import numpy as np

        repeated = self.repeated()
        if not ids or not repeated.size:
            return [False] * len(ids)
        found: list[bool] = np.isin(_root_digests(ids), repeated).tolist()
        return found

    def __getstate__(self) -> tuple[Any, Any]:
        self._compact()
        return self._unique, self._repeated

    def __setstate__(self, state: tuple[Any, Any]) -> None:
        self._unique, self._repeated = state
        self._pending = []

    def __repr__(self) -> str:
        self._compact()
        return f"IdRoots(distinct={self._unique.size}, repeated={self._repeated.size})"
