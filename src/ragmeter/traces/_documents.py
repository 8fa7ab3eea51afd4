"""A span's documents: OpenInference's flat ``...documents.<n>.document.*`` attributes, or
the JSON documents an instrumentor wrote into ``output.value``, as ids and texts."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragmeter.traces._json import _dotted, _json_object, _looks_json
from ragmeter.traces._layout import by_layout, remember

DocIdRule = str | Callable[[Mapping[str, Any]], Any] | None
"""Where a document's id is: ``None``/``"id"``, ``"content"``, ``"metadata.<key>"``, or a
function of the document."""


_REPR_ID = re.compile(r"^Document\(id=([^,)]+)")
_REPR_CONTENT = re.compile(r"content: '(.*?)'(?:, (?:meta|score|embedding)|\)$)", re.S)


class Docs:
    """A span's documents as columns, position by position: ``ids``, ``texts`` and
    ``metas`` (the raw ``document.id``/``content``/``metadata`` values, ``None`` where a
    document has none; ``metas`` is all ``None`` when the doc-id rule does not read it).
    ``text_ids``/``text_texts``: every id/text is known to be a ``str`` (not a subclass)."""

    __slots__ = ("ids", "metas", "text_ids", "text_texts", "texts")

    def __init__(
        self,
        ids: list[Any],
        texts: list[Any],
        metas: list[Any] | None = None,
        text_ids: bool = False,
        text_texts: bool = False,
    ) -> None:
        self.ids = ids
        self.texts = texts
        self.metas = metas if metas is not None else [None] * len(ids)
        self.text_ids = text_ids
        self.text_texts = text_texts

    @classmethod
    def of(cls, items: Sequence[Mapping[str, Any]]) -> Docs:
        """Columns from document dicts (``id``, ``content``, ``metadata``)."""
        return cls(
            [d.get("id") for d in items],
            [d.get("content") for d in items],
            [d.get("metadata") for d in items],
        )

    def __len__(self) -> int:
        return len(self.ids)

    def dicts(self) -> list[dict[str, Any]]:
        """The documents as dicts, as a ``doc_id`` function is given them."""
        return [
            {"id": i, "content": t, "metadata": m}
            for i, t, m in zip(self.ids, self.texts, self.metas, strict=True)
        ]


def _output_documents(attrs: Mapping[str, Any], key: str | None = None) -> Docs | None:
    """Documents in a span's JSON ``output.value``: a list of LangChain documents (``id``,
    ``page_content``, ``metadata``), or under ``"documents"``; Haystack writes each as its
    repr (``Document(id=d1, content: '...', ...)``)."""
    value = attrs.get("output.value")
    if not isinstance(value, str) or not _looks_json(value):
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if isinstance(data, Mapping):
        data = data.get(key or "documents")
    elif key is not None:
        return None
    if not isinstance(data, list):
        return None
    return _as_documents(data)


def _as_documents(items: Sequence[Any]) -> Docs | None:
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Mapping) and ("page_content" in item or "content" in item):
            text = item.get("page_content", item.get("content"))
            out.append({"id": item.get("id"), "content": text, "metadata": item.get("metadata")})
        elif isinstance(item, str) and item.startswith("Document("):
            ident = _REPR_ID.match(item)
            text = _REPR_CONTENT.search(item)
            out.append(
                {
                    "id": ident.group(1) if ident else None,
                    "content": text.group(1) if text else item,
                }
            )
        else:
            return None
    return Docs.of(out)


def _documents(
    attrs: Mapping[str, Any],
    fields: tuple[str, ...] = ("id", "content", "metadata"),
    dropped: int = 0,
    expected: str = "retrieval.documents",
) -> tuple[dict[str, Docs], int]:
    """``{"retrieval.documents": Docs(ids, texts, metas), ...}`` from flat keys
    (``retrieval.documents.3.document.id``), in position order, and how many positions are
    missing before the last one (a span whose first attributes were dropped by the SDK's
    attribute limit keeps only its last documents).

    Positions 0, 1, ... are read directly (the usual, complete case); a span that lost
    attributes (``dropped``), has documents past the first empty position, or none at the
    first position of its ``expected`` list while holding document keys, is read key by key
    instead. A span whose keys are laid out as the last one of its size was is read by
    where its documents are (:mod:`ragmeter.traces._layout`), with the same result."""
    if dropped:
        return _scan_documents(attrs, fields)
    columns = by_layout(attrs, expected, "metadata" in fields)
    if columns is not None:
        return {name: Docs(*found) for name, found in columns.items()}, 0
    read = _read_positions(attrs, fields, expected)
    remember(attrs, expected)
    return read


def _read_positions(
    attrs: Mapping[str, Any], fields: tuple[str, ...], expected: str
) -> tuple[dict[str, Docs], int]:
    """:func:`_documents` of a span that lost no attributes, position by position."""
    found: dict[str, Docs] = {}
    get = attrs.get
    with_metadata = "metadata" in fields
    for name in _DOC_LISTS:
        ids, texts, metas = _keys(name)
        if _absent(get, ids, texts) and (not with_metadata or get(metas[0]) is None):
            continue  # no such list: nothing at its first three positions
        guessed = _as_last_time(get, name, ids, texts, metas if with_metadata else None)
        if guessed is not None:
            found[name] = guessed
            continue
        id_col, text_col = _column(get, ids), _column(get, texts)
        meta_col = _column(get, metas) if with_metadata else []
        n = max(len(id_col), len(text_col), len(meta_col))
        if n + 3 > len(ids):
            _grow_keys(n + 3)
            return _read_positions(attrs, fields, expected)
        for later in (n, n + 1, n + 2):  # a gap: documents after an empty position
            if get(ids[later]) is not None or get(texts[later]) is not None:
                return _scan_documents(attrs, fields)
            if with_metadata and later == n and get(metas[later]) is not None:
                return _scan_documents(attrs, fields)
        if n:
            _LAST_COUNT[name] = n
            found[name] = Docs(
                _filled(get, ids, id_col, n),
                _filled(get, texts, text_col, n),
                _filled(get, metas, meta_col, n) if with_metadata else None,
            )
    if expected not in found and any(key.startswith(_DOC_STARTS) for key in attrs):
        return _scan_documents(attrs, fields)  # no first position: a gap at the start?
    return found, 0


_LAST_COUNT: dict[str, int] = {}
"""How many documents the last span read the slow way held in each list: a retriever
returns the same number every time, so the next span is read straight to that count."""

_STR = frozenset({str})


def _as_last_time(
    get: Callable[[str], Any],
    name: str,
    ids: list[str],
    texts: list[str],
    metas: list[str] | None,
) -> Docs | None:
    """The documents of list ``name`` if it holds as many as the last one read
    (:data:`_LAST_COUNT`), read in one go: what the position-by-position reading below
    finds, given that one of the id and text columns is full up to that count and nothing
    (no id, text, or metadata) follows; else ``None``."""
    n = _LAST_COUNT.get(name, 0)
    if not n or n + 3 > len(ids):
        return None
    id_col = list(map(get, ids[: n + 3]))
    if id_col[n] is not None or id_col[n + 1] is not None or id_col[n + 2] is not None:
        return None
    text_col = list(map(get, texts[: n + 3]))
    if text_col[n] is not None or text_col[n + 1] is not None or text_col[n + 2] is not None:
        return None
    del id_col[n:], text_col[n:]
    if not (_full(id_col) or _full(text_col)):
        return None
    meta_col = None
    if metas is not None:
        meta_col = list(map(get, metas[: n + 1]))
        if meta_col.pop() is not None:
            return None
    return Docs(id_col, text_col, meta_col)


def all_missing(ids: list[Any], text: bool = False) -> bool:
    """Whether no id is given (each is ``None`` or ``""``); the usual case (every id is
    text; ``text``: known to be) is answered without a per-item test."""
    if ids and (text or _STR.issuperset(map(type, ids))) and "" not in ids:
        return False
    return all(i is None or i == "" for i in ids)


def _full(values: list[Any]) -> bool:
    """Whether no value is ``None`` (by identity: a value's ``==`` is not asked)."""
    return _STR.issuperset(map(type, values)) or not any(v is None for v in values)


def _absent(get: Callable[[str], Any], ids: list[str], texts: list[str]) -> bool:
    """No id and no text at the first three positions of a list (nothing to read, and no
    gap to look for)."""
    return (
        get(ids[0]) is None
        and get(texts[0]) is None
        and get(ids[1]) is None
        and get(texts[1]) is None
        and get(ids[2]) is None
        and get(texts[2]) is None
    )


def _column(get: Callable[[str], Any], keys: list[str]) -> list[Any]:
    """The values of ``keys`` up to the first one absent (``None``)."""
    out: list[Any] = []
    for value in map(get, keys):
        if value is None:
            break
        out.append(value)
    return out


def _filled(get: Callable[[str], Any], keys: list[str], column: list[Any], n: int) -> list[Any]:
    """``column`` read on to position ``n`` (a field some documents lack: ``None`` there)."""
    if len(column) < n:
        column.extend(map(get, keys[len(column) : n]))
    return column


def _scan_documents(
    attrs: Mapping[str, Any], fields: tuple[str, ...]
) -> tuple[dict[str, Docs], int]:
    """:func:`_documents` by reading every key (positions with gaps)."""
    by_position: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attrs.items():
        if not key.startswith(_DOC_STARTS):
            continue
        for prefix, name in _DOC_PREFIXES:
            if key.startswith(prefix):
                index, _, part = key[len(prefix) :].partition(".document.")
                if part in fields and index.isdigit():
                    docs = by_position.setdefault(name, {})
                    docs.setdefault(int(index), {})[part] = value
                break
    out: dict[str, Docs] = {}
    missing = 0
    for name, docs in by_position.items():
        positions = sorted(docs)
        missing += positions[-1] + 1 - len(positions)
        out[name] = Docs.of([docs[i] for i in positions])
    return out, missing


_DOC_LISTS = ("retrieval.documents", "reranker.output_documents", "reranker.input_documents")
_KEY_CACHE: dict[str, tuple[list[str], list[str], list[str]]] = {}
_KEY_COUNT = [64]
"""How many positions' flat keys (``retrieval.documents.7.document.id``) are made, once."""


def _keys(name: str) -> tuple[list[str], list[str], list[str]]:
    """The flat id, content and metadata keys of a document list, position by position."""
    keys = _KEY_CACHE.get(name)
    if keys is None or len(keys[0]) < _KEY_COUNT[0]:
        keys = _KEY_CACHE[name] = tuple(  # type: ignore[assignment]
            [f"{name}.{i}.document.{part}" for i in range(_KEY_COUNT[0])]
            for part in ("id", "content", "metadata")
        )
    return keys  # type: ignore[return-value]


def _grow_keys(needed: int) -> None:
    while _KEY_COUNT[0] < needed:
        _KEY_COUNT[0] *= 2


_DOC_PREFIXES = (
    ("retrieval.documents.", "retrieval.documents"),
    ("reranker.output_documents.", "reranker.output_documents"),
    ("reranker.input_documents.", "reranker.input_documents"),
)
_DOC_STARTS = tuple(prefix for prefix, _ in _DOC_PREFIXES)


def _ids_and_texts(documents: Docs, rule: DocIdRule) -> tuple[list[str | None], list[str], int]:
    """Each document's id (``None``: none, to be hashed from its text) and text, and how
    many ids are missing (those hashes are noted, unless the rule is ``"content"``). The
    lists may be ``documents``' own: read them, do not change them."""
    texts = documents.texts
    if not (documents.text_texts or _STR.issuperset(map(type, texts))):
        texts = [text if text.__class__ is str else _text(text) for text in texts]
    # else the usual case, all text: as they are, no per-item test
    if rule is None or rule == "id":
        ids = documents.ids
        if (documents.text_ids or _STR.issuperset(map(type, ids))) and "" not in ids:
            return ids, texts, 0  # every document has an id
        ids = [
            ident if ident.__class__ is str and ident else _plain_id(ident)
            for ident in documents.ids
        ]
    else:
        ids = [_doc_id(doc, rule) for doc in documents.dicts()]
    hashed = 0 if rule == "content" else ids.count(None)
    return ids, texts, hashed


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _plain_id(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _doc_id(doc: Mapping[str, Any], rule: DocIdRule) -> str | None:
    if rule is None or rule == "id":
        value = doc.get("id")
    elif rule == "content":
        return None
    elif callable(rule):
        value = rule(doc)
    else:
        meta = _json_object(doc.get("metadata")) or {}
        value = _dotted(meta, rule[len("metadata.") :])
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)
