"""A span's documents: OpenInference's flat ``...documents.<n>.document.*`` attributes, or
the JSON documents an instrumentor wrote into ``output.value``, as ids and texts."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragmeter.traces._json import _dotted, _json_object, _looks_json

DocIdRule = str | Callable[[Mapping[str, Any]], Any] | None
"""Where a document's id is: ``None``/``"id"``, ``"content"``, ``"metadata.<key>"``, or a
function of the document."""


_REPR_ID = re.compile(r"^Document\(id=([^,)]+)")
_REPR_CONTENT = re.compile(r"content: '(.*?)'(?:, (?:meta|score|embedding)|\)$)", re.S)


def _output_documents(
    attrs: Mapping[str, Any], key: str | None = None
) -> list[dict[str, Any]] | None:
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


def _as_documents(items: Sequence[Any]) -> list[dict[str, Any]] | None:
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
    return out


def _documents(
    attrs: Mapping[str, Any],
    fields: tuple[str, ...] = ("id", "content", "metadata"),
    dropped: int = 0,
    expected: str = "retrieval.documents",
) -> tuple[dict[str, list[dict[str, Any]]], int]:
    """``{"retrieval.documents": [{"id": ..., "content": ...}, ...], ...}`` from flat keys
    (``retrieval.documents.3.document.id``), in position order, and how many positions are
    missing before the last one (a span whose first attributes were dropped by the SDK's
    attribute limit keeps only its last documents).

    Positions 0, 1, ... are looked up directly (the usual, complete case); a span that lost
    attributes (``dropped``), has documents past the first empty position, or none at the
    first position of its ``expected`` list while holding document keys, is read key by key
    instead."""
    if dropped:
        return _scan_documents(attrs, fields)
    found: dict[str, list[dict[str, Any]]] = {}
    get = attrs.get
    with_metadata = "metadata" in fields
    for name in _DOC_LISTS:
        ids, texts = _keys(name, "id"), _keys(name, "content")
        metas = _keys(name, "metadata")
        docs: list[dict[str, Any]] = []
        i = 0
        while True:
            if i + 3 > len(ids):
                _grow_keys(i + 3)
                ids, texts, metas = (
                    _keys(name, "id"),
                    _keys(name, "content"),
                    _keys(name, "metadata"),
                )
            ident, text = get(ids[i]), get(texts[i])
            meta = get(metas[i]) if with_metadata else None
            if ident is None and text is None and meta is None:
                break
            docs.append({"id": ident, "content": text, "metadata": meta})
            i += 1
        for later in (i + 1, i + 2):  # a gap: documents after an empty position
            if get(ids[later]) is not None or get(texts[later]) is not None:
                return _scan_documents(attrs, fields)
        if docs:
            found[name] = docs
    if expected not in found and any(key.startswith(_DOC_STARTS) for key in attrs):
        return _scan_documents(attrs, fields)  # no first position: a gap at the start?
    return found, 0


def _scan_documents(
    attrs: Mapping[str, Any], fields: tuple[str, ...]
) -> tuple[dict[str, list[dict[str, Any]]], int]:
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
    out: dict[str, list[dict[str, Any]]] = {}
    missing = 0
    for name, docs in by_position.items():
        positions = sorted(docs)
        missing += positions[-1] + 1 - len(positions)
        out[name] = [docs[i] for i in positions]
    return out, missing


_DOC_LISTS = ("retrieval.documents", "reranker.output_documents", "reranker.input_documents")
_KEY_CACHE: dict[tuple[str, str], list[str]] = {}
_KEY_COUNT = [64]
"""How many positions' flat keys (``retrieval.documents.7.document.id``) are made, once."""


def _keys(name: str, part: str) -> list[str]:
    keys = _KEY_CACHE.get((name, part))
    if keys is None or len(keys) < _KEY_COUNT[0]:
        keys = _KEY_CACHE[name, part] = [
            f"{name}.{i}.document.{part}" for i in range(_KEY_COUNT[0])
        ]
    return keys


def _grow_keys(needed: int) -> None:
    while _KEY_COUNT[0] < needed:
        _KEY_COUNT[0] *= 2


_DOC_PREFIXES = (
    ("retrieval.documents.", "retrieval.documents"),
    ("reranker.output_documents.", "reranker.output_documents"),
    ("reranker.input_documents.", "reranker.input_documents"),
)
_DOC_STARTS = tuple(prefix for prefix, _ in _DOC_PREFIXES)


def _ids_and_texts(
    documents: Sequence[Mapping[str, Any]], rule: DocIdRule
) -> tuple[list[str | None], list[str], int]:
    texts = [
        text if (text := doc.get("content")).__class__ is str else _text(text) for doc in documents
    ]
    if rule is None or rule == "id":
        ids = [
            ident if (ident := doc.get("id")).__class__ is str and ident else _plain_id(ident)
            for doc in documents
        ]
    else:
        ids = [_doc_id(doc, rule) for doc in documents]
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
