"""``pipeline_retriever``: a Haystack pipeline as the callable ``evaluate_retrieval`` takes."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragmeter.errors import InvalidInputError, check_k
from ragmeter_haystack._documents import _UNSET, DocId, describe_doc_id, doc_id_option, recorded_ids
from ragmeter_haystack._pipeline import check_component, find_component, nest_input

__all__ = ["pipeline_retriever"]

logger = logging.getLogger("ragmeter_haystack")
logger.addHandler(logging.NullHandler())


def pipeline_retriever(
    pipeline: Any,
    retriever_component: str | None = None,
    query_input: str | Sequence[str] = "query",
    *,
    top_k_input: str | None = "top_k",
    doc_id: DocId | None = None,
    documents_output: str = "documents",
    data: Mapping[str, Mapping[str, Any]] | None = None,
    doc_id_field: Any = _UNSET,
) -> Callable[..., list[str]]:
    """Wrap ``pipeline`` as ``retrieve(query, *, limit=None) -> [doc_id, ...]``.

    Hand the result to :func:`ragmeter.evaluation.retrieval.evaluate_retrieval`, which
    calls it once per judged query with ``limit=`` the deepest cut-off. Each call runs the
    pipeline with the query at ``query_input`` (``"<component>.<input>"``, or an input name
    given to every component that has it open, as Haystack's flat inputs do; a list of
    these when several inputs take the question, e.g. a prompt builder's), passes
    ``limit`` to the retriever's ``top_k_input`` when it has one, and returns the ids
    (``doc_id``: ``"id"``, ``"content"``, ``"meta.<key>"`` or a function; ``doc_id_field=``
    is its deprecated name) of the
    ``retriever_component``'s documents, best first, cut at ``limit``, by the id rule of
    :class:`~ragmeter_haystack.RagmeterRecorder`: a document without that field keeps its
    rank under its ``Document.id`` (logged once per retriever function; ``evaluate_retrieval``
    keeps each id at its best rank). ``data`` adds fixed inputs (e.g. filters), nested by
    component. The whole pipeline runs on each call, so point this at a retrieval pipeline
    (or accept that a RAG pipeline's generator runs too).

    :raises ValueError: When a component is not in the pipeline, lacks the output, or the
        default retriever is ambiguous.

    Example::

        retrieve = pipeline_retriever(rag, retriever_component="retriever")
        report = evaluate_retrieval(retrieve, qrels, queries, k_values=(10,))
    """
    if retriever_component is None:
        retriever_component = find_component(
            pipeline, role="retriever_component", socket=documents_output, prefer="Retriever"
        )
        if retriever_component is None:
            raise InvalidInputError(
                f"no component of the pipeline has a {documents_output!r} output: name it with "
                "retriever_component='<component name>'"
            )
    else:
        check_component(
            pipeline, retriever_component, role="retriever_component", socket=documents_output
        )
    field = doc_id_option(doc_id, doc_id_field, owner="pipeline_retriever")
    targets = [query_input] if isinstance(query_input, str) else [str(t) for t in query_input]
    if not targets:
        raise InvalidInputError("query_input is empty: name where the query goes, e.g. 'query'")
    for target in targets:  # validate once, up front
        nest_input(pipeline, target, None, role="query_input")
    node = pipeline.graph.nodes[retriever_component]
    has_top_k = top_k_input is not None and top_k_input in (node.get("input_sockets") or {})
    fixed = {str(c): dict(v) for c, v in (data or {}).items()}
    name = retriever_component
    warned = threading.Event()

    def retrieve(query: str, *, limit: int | None = None) -> list[str]:
        run_data: dict[str, dict[str, Any]] = {c: dict(v) for c, v in fixed.items()}
        for target in targets:
            for comp, inputs in nest_input(pipeline, target, query, role="query_input").items():
                run_data.setdefault(comp, {}).update(inputs)
        if limit is not None:
            check_k(limit, name="limit")
            if has_top_k:
                run_data.setdefault(name, {})[str(top_k_input)] = limit
        result = pipeline.run(run_data, include_outputs_from={name})
        docs = (result.get(name) or {}).get(documents_output) or []
        ids, missing = recorded_ids(docs, field)
        if missing and not warned.is_set():
            warned.set()
            logger.warning(
                "%d of %d documents retrieved for %.80r have no value for doc_id=%s; "
                "they keep their rank under their Document.id (logged once)",
                missing,
                len(ids),
                query,
                describe_doc_id(field),
            )
        return ids if limit is None else ids[:limit]

    return retrieve
