"""LangChain values -> RagSample field values (pure functions, no state).

Everything here is what is specific to LangChain's shapes: a chain's input and output,
``Document`` ids, ``LLMResult`` text and token usage. Id hashing and metadata keys come
from :mod:`ragmeter.capture`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import ChatPromptValue, PromptValue

from ragmeter.capture import content_doc_id
from ragmeter.errors import InvalidInputError

__all__ = [
    "DEFAULT_ID_KEY",
    "INPUT_KEYS",
    "OUTPUT_KEYS",
    "DocIdFn",
    "TextFn",
    "answer_of",
    "doc_ids_and_texts",
    "document_id",
    "llm_text_and_usage",
    "question_of",
    "text_of",
]

INPUT_KEYS: tuple[str, ...] = ("question", "input", "query")
"""Keys tried, in order, when a chain's input is a dict and no ``input_key`` was given."""

OUTPUT_KEYS: tuple[str, ...] = ("answer", "output", "result", "response", "text")
"""Keys tried, in order, when a chain's output is a dict and no ``output_key`` was given."""

DEFAULT_ID_KEY = "doc_id"
"""The ``Document.metadata`` key read for a doc id when ``Document.id`` is not set."""

DocIdFn = Callable[[Any], "str | None"]
TextFn = Callable[[Any], "str | None"]


def text_of(value: Any) -> str | None:
    """The text a LangChain value carries, or ``None`` when it carries none.

    A ``str`` is itself; a message (``AIMessage``, ``HumanMessage``, chunks) is its text
    content; a chat prompt or a list of messages is its last human message (the user's
    turn), else its last message; a string prompt is its string; a ``Document`` is its
    ``page_content``.

    >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    >>> text_of(AIMessage("Paris"))
    'Paris'
    >>> text_of([SystemMessage("be brief"), HumanMessage("capital of France?")])
    'capital of France?'
    >>> text_of(42) is None
    True
    """
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        return str(value.text)
    if isinstance(value, Document):
        return value.page_content
    if isinstance(value, ChatPromptValue):
        value = value.messages
    elif isinstance(value, PromptValue):
        return value.to_string()
    if isinstance(value, Sequence) and value and all(isinstance(m, BaseMessage) for m in value):
        humans = [m for m in value if m.type == "human"]
        return str((humans or list(value))[-1].text)
    return None


def _read(value: Any, key: str | TextFn | None, defaults: Sequence[str], what: str) -> str | None:
    if callable(key):
        return key(value)
    if isinstance(value, Mapping):
        if key is not None:
            if key not in value:
                keys = sorted(map(str, value))
                raise InvalidInputError(
                    f"{what}_key {key!r} is not in the run's {what} (keys: {keys})"
                )
            return text_of(value[key])
        for k in defaults:
            if k in value:
                return text_of(value[k])
        return text_of(next(iter(value.values()))) if len(value) == 1 else None
    return text_of(value)


def question_of(value: Any, key: str | TextFn | None) -> str | None:
    """The user's question in a root run's input.

    ``key=None`` (the default rule): a plain string or message is the question; a dict's
    ``"question"``, ``"input"`` or ``"query"`` value (first present), or its only value.
    A string ``key`` reads that dict key; a callable is called with the whole input.
    Raises :class:`~ragmeter.errors.InvalidInputError` when a string ``key`` is not in a
    dict input (the handler records that on the sample as a capture error).

    >>> question_of({"question": "why?", "k": 3}, None)
    'why?'
    >>> question_of({"q": "why?"}, "q")
    'why?'
    """
    return _read(value, key, INPUT_KEYS, "input")


def answer_of(value: Any, key: str | TextFn | None) -> str | None:
    """The answer in a root run's output (same rules as :func:`question_of`).

    The default rule reads a string, a message, or a dict's ``"answer"``, ``"output"``,
    ``"result"``, ``"response"`` or ``"text"`` value (first present), or its only value.

    >>> answer_of({"answer": "Paris", "context": []}, None)
    'Paris'
    """
    return _read(value, key, OUTPUT_KEYS, "output")


def document_id(doc: Any, id_key: str | None = DEFAULT_ID_KEY) -> str:
    """A retrieved document's id: ``Document.id``, else ``metadata[id_key]``, else a content hash.

    Never ``None``: a document without an id gets :func:`ragmeter.capture.content_doc_id`
    of its text, so it is scored (and joins to qrels keyed by that hash) instead of being
    dropped.

    >>> from langchain_core.documents import Document
    >>> document_id(Document("text", id="d1", metadata={"doc_id": "x"}))
    'd1'
    >>> document_id(Document("text", metadata={"doc_id": 7}))
    '7'
    >>> document_id(Document("Paris is the capital of France."))
    'sha256:557be7eca214f188'
    """
    doc_id = getattr(doc, "id", None)
    if doc_id is not None and doc_id != "":
        return str(doc_id)
    if id_key is not None:
        meta = getattr(doc, "metadata", None)
        if isinstance(meta, Mapping):
            value = meta.get(id_key)
            if value is not None and value != "":
                return str(value)
    return content_doc_id(_doc_text(doc))


def _doc_text(doc: Any) -> str:
    text = getattr(doc, "page_content", None)
    return text if isinstance(text, str) else str(doc)


def doc_ids_and_texts(
    documents: Sequence[Any],
    *,
    id_key: str | None = DEFAULT_ID_KEY,
    doc_id: DocIdFn | None = None,
    errors: list[str] | None = None,
) -> tuple[list[str], list[str]]:
    """Ids and texts of retrieved documents, in rank order, one pair per document.

    ``doc_id(doc)``, when given, decides the id; if it returns ``None`` or raises, the
    default rule (:func:`document_id`) decides instead, and a raise is noted in
    ``errors`` (one note per call, however many documents failed).
    """
    ids: list[str] = []
    texts: list[str] = []
    failed = 0
    first: BaseException | None = None
    for doc in documents:
        the_id: str | None = None
        if doc_id is not None:
            try:
                value = doc_id(doc)
                the_id = None if value is None else str(value)
            except Exception as exc:
                failed += 1
                first = first or exc
        ids.append(the_id if the_id is not None else document_id(doc, id_key))
        texts.append(_doc_text(doc))
    if failed and errors is not None:
        errors.append(
            f"doc_id raised {type(first).__name__}: {first} on {failed} of {len(ids)} "
            "document(s); their ids fell back to Document.id / metadata / content hash"
        )
    return ids, texts


def _usage_from_mapping(usage: Any) -> tuple[int | None, int | None]:
    if not isinstance(usage, Mapping):
        return None, None
    inp = usage.get("input_tokens", usage.get("prompt_tokens"))
    out = usage.get("output_tokens", usage.get("completion_tokens"))
    return (
        int(inp) if isinstance(inp, (int, float)) else None,
        int(out) if isinstance(out, (int, float)) else None,
    )


def llm_text_and_usage(response: Any) -> tuple[str | None, int | None, int | None]:
    """``(text, input_tokens, output_tokens)`` of an ``LLMResult``.

    The text is the first generation of the first prompt (what a chain passes on). Token
    counts come from each generation's ``message.usage_metadata`` when the model reports
    it, else from ``llm_output["token_usage"]`` / ``["usage"]`` (OpenAI-style
    ``prompt_tokens``/``completion_tokens`` too); ``None`` when nothing was reported.
    """
    generations = getattr(response, "generations", None) or []
    text: str | None = None
    if generations and generations[0]:
        first = generations[0][0]
        text = getattr(first, "text", None)
        if not isinstance(text, str):
            text = None
    inp: int | None = None
    out: int | None = None
    for gens in generations:
        for gen in gens:
            message = getattr(gen, "message", None)
            i, o = _usage_from_mapping(getattr(message, "usage_metadata", None))
            if i is not None:
                inp = (inp or 0) + i
            if o is not None:
                out = (out or 0) + o
    if inp is None and out is None:
        llm_output = getattr(response, "llm_output", None)
        if isinstance(llm_output, Mapping):
            inp, out = _usage_from_mapping(llm_output.get("token_usage", llm_output.get("usage")))
    return text, inp, out
