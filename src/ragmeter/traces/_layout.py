"""A span's documents read by where their attributes are, for spans laid out like the last one.

Instrumentors write a retriever's documents the same way on every span: ``document.id``,
``document.score``, ``document.content`` of document 0, then of document 1... Reading them
key by key (:func:`ragmeter.traces._documents._documents`) is a dictionary lookup per
document field; once a span's keys are known to be laid out regularly, a span with exactly
the same keys (one list comparison) has its documents as slices of its attribute values.
The layout (:class:`Layout`) is made from the keys of a span read the careful way, and used
only where the careful reading finds the same: every list regular (documents 0..n-1 in
order, each with the same parts, with an id or a text), no other key under a document
prefix, and a document field that has no ``None`` in it (whose length the careful reading
takes as the list's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["Layout", "by_layout", "layout_of", "remember"]

_DOC_PREFIXES = (
    ("retrieval.documents.", "retrieval.documents"),
    ("reranker.output_documents.", "reranker.output_documents"),
    ("reranker.input_documents.", "reranker.input_documents"),
)
_DOC_STARTS = tuple(prefix for prefix, _ in _DOC_PREFIXES)
_READ = ("id", "content", "metadata")
_STR = frozenset({str})

Columns = tuple[list[Any], list[Any], list[Any] | None, bool, bool]
"""A list's ids, texts and metadata (``None``: not asked for), position by position, and
whether every id, and every text, is a ``str``."""


class Layout:
    """Where a span's documents are among its attributes: ``keys``, every key in order, and
    for each list its name, the index of its first attribute, how many attributes each
    document has (``stride``), how many documents, and the offset of its id, text and
    metadata in a document's attributes (-1: it has none)."""

    __slots__ = ("keys", "lists")

    def __init__(
        self, keys: list[str], lists: list[tuple[str, int, int, int, tuple[int, int, int]]]
    ) -> None:
        self.keys = keys
        self.lists = lists


_LAYOUTS: dict[tuple[int, str], Layout | None] = {}
"""The layout of the last span read for an attribute count and expected list (``None``: its
documents were irregular, or it had none)."""
_MISSES = [0]


def by_layout(
    attrs: Mapping[str, Any], expected: str, with_metadata: bool
) -> dict[str, Columns] | None:
    """The documents of ``attrs`` by list, if its keys are those of the last layout seen for
    its size and ``expected`` list and the careful reading would find the same; else
    ``None`` (the caller reads it the careful way and calls :func:`remember`)."""
    layout = _LAYOUTS.get((len(attrs), expected))
    if layout is None or list(attrs) != layout.keys:
        return None
    values = list(attrs.values())
    found: dict[str, Columns] = {}
    for name, start, stride, count, (at_id, at_text, at_meta) in layout.lists:
        end = start + stride * count
        ids = values[start + at_id : end : stride] if at_id >= 0 else [None] * count
        texts = values[start + at_text : end : stride] if at_text >= 0 else [None] * count
        metas = None
        if with_metadata:
            metas = values[start + at_meta : end : stride] if at_meta >= 0 else [None] * count
        text_ids = at_id >= 0 and _STR.issuperset(map(type, ids))
        text_texts = at_text >= 0 and _STR.issuperset(map(type, texts))
        if not (
            text_ids
            or text_texts
            or _no_none(ids)
            or _no_none(texts)
            or (metas is not None and _no_none(metas))
        ):
            return None  # the careful reading would stop at a None: it reads this one
        found[name] = (ids, texts, metas, text_ids, text_texts)
    return found


def remember(attrs: Mapping[str, Any], expected: str) -> None:
    """Make the layout of a span read the careful way, for the next ones of its size (the
    first time, and then at most every 64th span whose keys differ)."""
    key = (len(attrs), expected)
    if key in _LAYOUTS:
        _MISSES[0] += 1
        if _MISSES[0] % 64:
            return
    if len(_LAYOUTS) > 1024:
        _LAYOUTS.clear()
    _LAYOUTS[key] = layout_of(list(attrs))


def _no_none(values: list[Any]) -> bool:
    """Whether no value is ``None`` (by identity: a value's ``==`` is not asked)."""
    return not any(v is None for v in values)


def layout_of(keys: list[str]) -> Layout | None:
    """The layout of a span with these attribute keys, if its documents are regular (see the
    module's docstring); else ``None``.

    >>> layout = layout_of(["input.value", "retrieval.documents.0.document.id",
    ...     "retrieval.documents.0.document.content", "retrieval.documents.1.document.id",
    ...     "retrieval.documents.1.document.content"])
    >>> layout.lists
    [('retrieval.documents', 1, 2, 2, (0, 1, -1))]
    >>> layout_of(["retrieval.documents.1.document.id"]) is None  # no document 0
    True
    """
    found: dict[str, list[tuple[int, str, int]]] = {}
    for i, key in enumerate(keys):
        if not key.startswith(_DOC_STARTS):
            continue
        for prefix, name in _DOC_PREFIXES:
            if key.startswith(prefix):
                index, sep, part = key[len(prefix) :].partition(".document.")
                if not (sep and index.isascii() and index.isdigit()) or str(int(index)) != index:
                    return None  # a key the careful reading may read otherwise: it reads them
                found.setdefault(name, []).append((int(index), part, i))
                break
    lists = []
    for name, entries in found.items():
        parts = [part for position, part, _ in entries if position == 0]
        stride = len(parts)
        count = len(entries) // stride if stride else 0
        start = entries[0][2]
        regular = [
            (position, part, start + position * stride + j)
            for position in range(count)
            for j, part in enumerate(parts)
        ]
        if not count or entries != regular or ("id" not in parts and "content" not in parts):
            return None
        at_id, at_text, at_meta = (parts.index(p) if p in parts else -1 for p in _READ)
        lists.append((name, start, stride, count, (at_id, at_text, at_meta)))
    return Layout(keys, lists) if lists else None
