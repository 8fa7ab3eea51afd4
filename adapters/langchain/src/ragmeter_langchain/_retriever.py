"""``as_retriever_fn``: a LangChain retriever as the callable ``evaluate_retrieval`` runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragmeter.errors import InvalidInputError, check_k
from ragmeter_langchain._convert import UNSET_KEY, DocId, doc_id_rule, doc_ids_and_texts

__all__ = ["as_retriever_fn"]


def as_retriever_fn(
    retriever: Any,
    *,
    doc_id: DocId = None,
    limit_kwarg: str | None = None,
    config: Any = None,
    id_key: Any = UNSET_KEY,
) -> Callable[..., list[str]]:
    """Wrap a ``BaseRetriever`` (any runnable returning documents) for ``evaluate_retrieval``.

    The returned ``fn(query, *, limit=None) -> list[str]`` invokes the retriever and
    returns the documents' ids in rank order, by the same ``doc_id`` rule as
    :class:`~ragmeter_langchain.RagmeterCallbackHandler` (``None``: ``Document.id``, else
    ``metadata["doc_id"]``, else a content hash; ``"id"``, ``"content"``,
    ``"metadata.<key>"`` or a function; ``id_key=`` is deprecated). ``limit`` keeps the
    top ``limit`` ids; with ``limit_kwarg`` (e.g. ``"k"`` for a vector-store retriever) it is
    also passed to ``retriever.invoke`` so the retriever fetches that many. ``config`` is
    passed to every ``invoke`` (e.g. ``{"callbacks": [handler]}``).

    Raises :class:`~ragmeter.errors.InvalidInputError` when ``retriever`` has no
    ``invoke`` method or ``doc_id`` is not a rule.

    >>> from langchain_core.documents import Document
    >>> from langchain_core.runnables import RunnableLambda
    >>> docs = RunnableLambda(lambda q: [Document("a", id="d1"), Document("b", id="d2")])
    >>> as_retriever_fn(docs)("query", limit=1)
    ['d1']
    """
    rule = doc_id_rule(doc_id, id_key, owner="as_retriever_fn")
    if not callable(getattr(retriever, "invoke", None)):
        raise InvalidInputError(
            f"retriever must be a LangChain retriever or runnable with .invoke(), got "
            f"{type(retriever).__name__}; for a plain function pass it to evaluate_retrieval "
            "directly"
        )

    def retrieve(query: str, *, limit: int | None = None) -> list[str]:
        kwargs: dict[str, Any] = {}
        if limit is not None:
            check_k(limit, name="limit")
            if limit_kwarg is not None:
                kwargs[limit_kwarg] = limit
        documents = retriever.invoke(query, config, **kwargs)
        ids, _ = doc_ids_and_texts(list(documents), rule=rule)
        return ids if limit is None else ids[:limit]

    return retrieve
