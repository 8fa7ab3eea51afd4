"""``as_retriever_fn``: a LangChain retriever as the callable ``evaluate_retrieval`` runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragmeter.errors import InvalidInputError, check_k
from ragmeter_langchain._convert import DEFAULT_ID_KEY, DocIdFn, doc_ids_and_texts

__all__ = ["as_retriever_fn"]


def as_retriever_fn(
    retriever: Any,
    *,
    id_key: str | None = DEFAULT_ID_KEY,
    doc_id: DocIdFn | None = None,
    limit_kwarg: str | None = None,
    config: Any = None,
) -> Callable[..., list[str]]:
    """Wrap a ``BaseRetriever`` (any runnable returning documents) for ``evaluate_retrieval``.

    The returned ``fn(query, *, limit=None) -> list[str]`` invokes the retriever and
    returns the documents' ids in rank order, by the same rules as
    :class:`~ragmeter_langchain.RagmeterCallbackHandler` (``doc_id(doc)``, else
    ``Document.id``, else ``metadata[id_key]``, else a content hash). ``limit`` keeps the
    top ``limit`` ids; with ``limit_kwarg`` (e.g. ``"k"`` for a vector-store retriever) it is
    also passed to ``retriever.invoke`` so the retriever fetches that many. ``config`` is
    passed to every ``invoke`` (e.g. ``{"callbacks": [handler]}``).

    Raises :class:`~ragmeter.errors.InvalidInputError` when ``retriever`` has no
    ``invoke`` method.

    >>> from langchain_core.documents import Document
    >>> from langchain_core.runnables import RunnableLambda
    >>> docs = RunnableLambda(lambda q: [Document("a", id="d1"), Document("b", id="d2")])
    >>> as_retriever_fn(docs)("query", limit=1)
    ['d1']
    """
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
        ids, _ = doc_ids_and_texts(list(documents), id_key=id_key, doc_id=doc_id)
        return ids if limit is None else ids[:limit]

    return retrieve
