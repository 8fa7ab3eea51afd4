"""Which document a LlamaIndex node is, and a retriever callable for ``evaluate_retrieval``.

An *id field* says what identifies a retrieved node when it is scored:

=====================  =========================================================
``"node_id"``          the node's own id (a chunk id once documents are split)
``"ref_doc_id"``       the id of the source ``Document`` the chunk came from
``"metadata.<key>"``   ``node.metadata["<key>"]`` (a dotted path reads nested dicts)
a function             ``fn(node) -> str | None``
=====================  =========================================================

Qrels name source documents, so a pipeline that chunks its documents is scored with
``id_field="ref_doc_id"`` (or a metadata key); several chunks of one document then count
once, at the best rank (:func:`ragmeter.evaluation.retrieval.dedupe_best_rank`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.base import BaseIndex
from llama_index.core.schema import BaseNode, NodeRelationship, NodeWithScore, RelatedNodeInfo

from ragmeter.errors import InvalidInputError, check_k

__all__ = [
    "IdField",
    "check_id_field",
    "describe_id_field",
    "node_doc_id",
    "query_engine_retriever",
]

logger = logging.getLogger("ragmeter_llamaindex")
logger.addHandler(logging.NullHandler())

IdField = str | Callable[[BaseNode], str | None]
"""``"node_id"``, ``"ref_doc_id"``, ``"metadata.<key>"`` or ``fn(node) -> id``."""

_MISSING = object()


def check_id_field(id_field: object, *, name: str = "id_field") -> IdField:
    """Return ``id_field`` if it is a valid id field (see the module table), else raise.

    >>> check_id_field("metadata.doc_id")
    'metadata.doc_id'
    >>> check_id_field("doc_id")
    Traceback (most recent call last):
    ...
    ragmeter.errors.InvalidInputError: id_field must be 'node_id', 'ref_doc_id', ... got 'doc_id'
    """
    if callable(id_field):
        return id_field
    if isinstance(id_field, str) and (
        id_field in ("node_id", "ref_doc_id")
        or (id_field.startswith("metadata.") and len(id_field) > len("metadata."))
    ):
        return id_field
    raise InvalidInputError(
        f"{name} must be 'node_id', 'ref_doc_id', 'metadata.<key>' (e.g. 'metadata.doc_id') "
        f"or a function node -> id, got {id_field!r}"
    )


def _metadata_value(metadata: Mapping[str, Any], path: str) -> Any:
    if path in metadata:
        return metadata[path]
    value: Any = metadata
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def node_doc_id(node: BaseNode | NodeWithScore, id_field: IdField = "node_id") -> str | None:
    """The id ``id_field`` gives ``node`` (a node or a ``NodeWithScore``), as a string.

    ``None`` when the node has no such value (no source document, no metadata key, or the
    function returned ``None``); callers decide what that means.

    >>> from llama_index.core.schema import TextNode, NodeRelationship, RelatedNodeInfo
    >>> chunk = TextNode(id_="chunk-3", text="...", metadata={"src": {"page": 7}},
    ...     relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-1")})
    >>> node_doc_id(chunk), node_doc_id(chunk, "ref_doc_id")
    ('chunk-3', 'doc-1')
    >>> node_doc_id(chunk, "metadata.src.page")
    '7'
    >>> node_doc_id(TextNode(id_="n", text="..."), "ref_doc_id") is None
    True
    """
    if isinstance(node, NodeWithScore):
        node = node.node
    value: Any
    if callable(id_field):
        value = id_field(node)
    elif id_field == "node_id":
        value = node.node_id
    elif id_field == "ref_doc_id":
        source = node.relationships.get(NodeRelationship.SOURCE)
        value = source.node_id if isinstance(source, RelatedNodeInfo) else None
    else:
        value = _metadata_value(node.metadata or {}, id_field[len("metadata.") :])
        if value is _MISSING:
            value = None
    if value is None or value == "":
        return None
    return str(value)


def describe_id_field(id_field: IdField) -> str:
    """``'ref_doc_id'`` (quoted) for a string, the function's name for a function."""
    return getattr(id_field, "__name__", repr(id_field)) if callable(id_field) else repr(id_field)


def query_engine_retriever(
    index_or_retriever: Any, *, id_field: IdField = "node_id"
) -> Callable[..., list[str]]:
    """A ``retriever(query, *, limit=None) -> [doc_id, ...]`` for ``ragmeter.evaluate_retrieval``.

    ``index_or_retriever`` is a LlamaIndex index (``VectorStoreIndex`` ...), a
    ``BaseRetriever``, or a query engine with a ``.retriever``. ``limit`` (which
    ``evaluate_retrieval`` passes as ``max(k_values)`` unless told otherwise) becomes the
    retriever's ``similarity_top_k``: an index builds ``as_retriever(similarity_top_k=limit)``
    (one per limit, cached); a retriever with a ``similarity_top_k`` attribute gets it set for
    the call and restored afterwards (calls are serialised by a lock); any other retriever
    returns what it returns. Either way at most ``limit`` ids come back, as from every
    adapter's retriever function. Node ids come from ``id_field`` (see the module table),
    in rank order, repeats included: ``evaluate_retrieval`` keeps each doc at its best rank.

    Raises :class:`~ragmeter.errors.InvalidInputError` for an unsupported object or id field,
    and, when called, for a node that has no value for ``id_field`` (it could never match
    qrels; choose another id field).
    """
    field = check_id_field(id_field)
    if isinstance(index_or_retriever, BaseIndex):
        index: BaseIndex[Any] = index_or_retriever
        cache: dict[int | None, BaseRetriever] = {}

        def get_retriever(limit: int | None) -> BaseRetriever:
            if limit not in cache:
                kwargs = {} if limit is None else {"similarity_top_k": limit}
                cache[limit] = index.as_retriever(**kwargs)
            return cache[limit]

        def run(query: str, limit: int | None) -> list[NodeWithScore]:
            return get_retriever(limit).retrieve(query)

    else:
        retriever = index_or_retriever
        if not isinstance(retriever, BaseRetriever):
            retriever = getattr(index_or_retriever, "retriever", None)
        if not isinstance(retriever, BaseRetriever):
            raise InvalidInputError(
                "index_or_retriever must be a LlamaIndex index, a BaseRetriever or a query "
                f"engine with a .retriever, got {type(index_or_retriever).__name__}"
            )
        base: BaseRetriever = retriever
        lock = threading.Lock()
        settable = hasattr(base, "similarity_top_k")

        def run(query: str, limit: int | None) -> list[NodeWithScore]:
            if limit is None or not settable:
                return base.retrieve(query)
            with lock:
                before = base.similarity_top_k  # type: ignore[attr-defined]
                base.similarity_top_k = limit  # type: ignore[attr-defined]
                try:
                    return base.retrieve(query)
                finally:
                    base.similarity_top_k = before  # type: ignore[attr-defined]

    def retrieve(query: str, *, limit: int | None = None) -> list[str]:
        if limit is not None:
            check_k(limit, name="limit")
        ids: list[str] = []
        for rank, scored in enumerate(run(query, limit)):
            doc_id = node_doc_id(scored, field)
            if doc_id is None:
                raise InvalidInputError(
                    f"query {query!r:.80}: the node at rank {rank + 1} "
                    f"(node_id {scored.node.node_id!r}) has no value for id_field="
                    f"{describe_id_field(field)}; use 'node_id', 'ref_doc_id' or a metadata key "
                    "every node has"
                )
            ids.append(doc_id)
        return ids if limit is None else ids[:limit]

    return retrieve
