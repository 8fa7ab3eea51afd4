"""Which document a LlamaIndex node is, and a retriever callable for ``evaluate_retrieval``.

The ``doc_id`` option (the name every ragmeter adapter uses; ``id_field`` is its deprecated
older name) says what identifies a retrieved node when it is scored:

=====================  =========================================================
``"node_id"``          the node's own id (a chunk id once documents are split)
``"ref_doc_id"``       the id of the source ``Document`` the chunk came from; a node with
                       no source (built directly, not split from a ``Document``) is its
                       own document: its ``node_id``
``"metadata.<key>"``   ``node.metadata["<key>"]`` (a dotted path reads nested dicts)
``"content"``          a hash of the node's text (:func:`ragmeter.capture.content_doc_id`)
a function             ``fn(node) -> str | None``
=====================  =========================================================

Qrels name source documents, so a pipeline that chunks its documents is scored with
``doc_id="ref_doc_id"`` (or a metadata key); several chunks of one document then count
once, at the best rank (:func:`ragmeter.evaluation.retrieval.dedupe_best_rank`). A node
with no ``SOURCE`` relationship (a ``TextNode`` you built, a ``Document`` indexed as it is)
was split from nothing, so ``"ref_doc_id"`` gives its own ``node_id``, quietly, as
LlamaIndex's ``IngestionPipeline`` does (``node.ref_doc_id or node.id_``): one rule serves
an index of whole documents and one of chunks. Ids that then never match the qrels are
still warned about where they are scored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.base import BaseIndex
from llama_index.core.schema import BaseNode, NodeRelationship, NodeWithScore, RelatedNodeInfo

from ragmeter.capture import DocIdOption, content_doc_id
from ragmeter.errors import InvalidInputError, check_k

__all__ = [
    "UNSET",
    "DocId",
    "IdField",
    "check_doc_id",
    "check_id_field",
    "describe_id_field",
    "doc_id_option",
    "node_doc_id",
    "query_engine_retriever",
]

logger = logging.getLogger("ragmeter_llamaindex")
logger.addHandler(logging.NullHandler())

DocId = str | Callable[[BaseNode], str | None]
"""``"node_id"``, ``"ref_doc_id"``, ``"metadata.<key>"``, ``"content"`` or ``fn(node) -> id``."""

IdField = DocId
"""The deprecated name of :data:`DocId`."""

UNSET: Any = object()
"""The default of the deprecated ``id_field=`` arguments (not given)."""

_MISSING = object()


DOC_ID = DocIdOption(
    ("node_id", "ref_doc_id", "content"),
    "metadata.",
    "'node_id', 'ref_doc_id', 'metadata.<key>' (e.g. 'metadata.doc_id'), 'content' or a "
    "function node -> id",
)
"""The ``doc_id`` option of every LlamaIndex entry point."""


def check_doc_id(doc_id: object, *, name: str = "doc_id") -> DocId:
    """Return ``doc_id`` if it is a valid id rule (see the module table), else raise.

    >>> check_doc_id("metadata.doc_id")
    'metadata.doc_id'
    >>> check_doc_id("doc_id")
    Traceback (most recent call last):
    ...
    ragmeter.errors.InvalidInputError: doc_id must be 'node_id', 'ref_doc_id', ... got 'doc_id'
    """
    checked: DocId = DOC_ID.check(doc_id, name=name)
    return checked


def check_id_field(id_field: object, *, name: str = "id_field") -> DocId:
    """:func:`check_doc_id` under the option's older name."""
    return check_doc_id(id_field, name=name)


def doc_id_option(doc_id: Any, id_field: Any, *, owner: str, default: DocId = "node_id") -> DocId:
    """The checked ``doc_id`` rule, taking the deprecated ``id_field=`` into account."""
    checked: DocId = DOC_ID.resolve(
        doc_id, id_field, owner=owner, older_name="id_field", default=default, unset=UNSET
    )
    return checked


def _metadata_value(metadata: Mapping[str, Any], path: str) -> Any:
    if path in metadata:
        return metadata[path]
    value: Any = metadata
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def node_doc_id(
    node: BaseNode | NodeWithScore, doc_id: DocId = "node_id", *, id_field: Any = UNSET
) -> str | None:
    """The id the ``doc_id`` rule gives ``node`` (a node or a ``NodeWithScore``), as a string.

    ``None`` when the node has no such value (no metadata key, the function returned
    ``None``, a ``SOURCE`` relationship that is not one node); callers decide what that
    means. ``"ref_doc_id"`` of a node with no ``SOURCE`` relationship is the node's own id:
    it is its own document (see the module docstring).

    >>> from llama_index.core.schema import TextNode, NodeRelationship, RelatedNodeInfo
    >>> chunk = TextNode(id_="chunk-3", text="...", metadata={"src": {"page": 7}},
    ...     relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-1")})
    >>> node_doc_id(chunk), node_doc_id(chunk, "ref_doc_id")
    ('chunk-3', 'doc-1')
    >>> node_doc_id(chunk, "metadata.src.page")
    '7'
    >>> node_doc_id(TextNode(id_="n", text="..."), "ref_doc_id")  # no source: its own id
    'n'
    """
    if id_field is not UNSET:
        doc_id = doc_id_option(None, id_field, owner="node_doc_id")
    if isinstance(node, NodeWithScore):
        node = node.node
    value: Any
    if callable(doc_id):
        value = doc_id(node)
    elif doc_id == "node_id":
        value = node.node_id
    elif doc_id == "ref_doc_id":
        if NodeRelationship.SOURCE not in node.relationships:
            value = node.node_id  # split from nothing: the node is its own document
        else:
            source = node.relationships[NodeRelationship.SOURCE]
            value = source.node_id if isinstance(source, RelatedNodeInfo) else None
    elif doc_id == "content":
        text = getattr(node, "text", None)
        value = content_doc_id(text if isinstance(text, str) else node.get_content())
    else:
        value = _metadata_value(node.metadata or {}, doc_id[len("metadata.") :])
        if value is _MISSING:
            value = None
    if value is None or value == "":
        return None
    return str(value)


describe_id_field = DocIdOption.describe
"""``'ref_doc_id'`` (quoted) for a string, the function's name for a function."""


def query_engine_retriever(
    index_or_retriever: Any, *, doc_id: DocId | None = None, id_field: Any = UNSET
) -> Callable[..., list[str]]:
    """A ``retriever(query, *, limit=None) -> [doc_id, ...]`` for ``ragmeter.evaluate_retrieval``.

    ``index_or_retriever`` is a LlamaIndex index (``VectorStoreIndex`` ...), a
    ``BaseRetriever``, or a query engine with a ``.retriever``. ``limit`` (which
    ``evaluate_retrieval`` passes as ``max(k_values)`` unless told otherwise) becomes the
    retriever's ``similarity_top_k``: an index builds ``as_retriever(similarity_top_k=limit)``
    (one per limit, cached); a retriever with a ``similarity_top_k`` attribute gets it set for
    the call and restored afterwards (calls are serialised by a lock); any other retriever
    returns what it returns. Either way at most ``limit`` ids come back, as from every
    adapter's retriever function. Ids come from ``doc_id`` (see the module table;
    ``id_field=`` is deprecated), in the retriever's list order (never re-sorted by score;
    ties keep their order), repeats included: ``evaluate_retrieval`` keeps each doc at its
    best rank.

    Raises :class:`~ragmeter.errors.InvalidInputError` for an unsupported object or id rule,
    and, when called, for a node that has no value for ``doc_id`` (it could never match
    qrels; choose another rule).
    """
    field = doc_id_option(doc_id, id_field, owner="query_engine_retriever")
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
                    f"(node_id {scored.node.node_id!r}) has no value for doc_id="
                    f"{describe_id_field(field)}; use 'node_id', 'ref_doc_id' or a metadata key "
                    "every node has"
                )
            ids.append(doc_id)
        return ids if limit is None else ids[:limit]

    return retrieve
