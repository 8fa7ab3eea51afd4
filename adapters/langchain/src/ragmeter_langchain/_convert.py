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

from ragmeter.capture import content_doc_id, deprecated_option
from ragmeter.errors import InvalidInputError

__all__ = [
    "DEFAULT_ID_KEY",
    "INPUT_KEYS",
    "OUTPUT_KEYS",
    "UNSET_KEY",
    "DocId",
    "DocIdFn",
    "DocIdRule",
    "TextFn",
    "answer_of",
    "doc_id_rule",
    "doc_ids_and_texts",
    "document_id",
    "fallback_note",
    "llm_text_and_usage",
    "question_of",
    "text_of",
]

INPUT_KEYS: tuple[str, ...] = ("question", "input", "query")
"""Keys tried, in order, when a chain's input is a dict and no ``input_key`` was given."""

OUTPUT_KEYS: tuple[str, ...] = ("answer", "output", "result", "response", "text")
"""Keys tried, in order, when a chain's output is a dict and no ``output_key`` was given."""

UNSET_KEY: Any = object()
"""The default of the deprecated ``id_key=`` arguments (not given)."""

DEFAULT_ID_KEY = "doc_id"
"""The ``Document.metadata`` key the default rule reads when ``Document.id`` is not set."""

DocIdFn = Callable[[Any], "str | None"]
TextFn = Callable[[Any], "str | None"]
DocId = str | DocIdFn | None
"""The ``doc_id=`` option: ``None`` (the default rule), ``"id"``, ``"content"``,
``"metadata.<key>"`` or a function ``Document -> id``."""


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


class DocIdRule:
    """How a retrieved ``Document`` is named: the ``doc_id=`` option, checked once.

    ===================  ================================================================
    ``None`` (default)   ``Document.id``, else ``metadata["doc_id"]``, else a content hash
    ``"id"``             ``Document.id``, else a content hash
    ``"content"``        a content hash (:func:`ragmeter.capture.content_doc_id`)
    ``"metadata.<key>"`` ``metadata[<key>]``, else (noted) ``Document.id``, else a hash
    a function           ``fn(doc)``; ``None`` or a raise (noted) falls back to the default
    ===================  ================================================================

    A document is never dropped for want of an id. :meth:`ids_and_texts` is the capture hot
    path: it returns ``None`` where the id is the content hash (hashed when read).

    >>> rule = DocIdRule("metadata.src")
    >>> rule.ids_and_texts([Document("a", metadata={"src": "s1"}), Document("b", id="d2")])
    (['s1', 'd2'], ['a', 'b'], 1, None)
    """

    __slots__ = ("fn", "key", "mode", "spec")

    def __init__(self, doc_id: DocId = None, *, id_key: str | None = DEFAULT_ID_KEY) -> None:
        self.spec = doc_id
        self.fn: DocIdFn | None = None
        self.key: str | None = id_key
        if doc_id is None:
            self.mode = "default" if id_key is not None else "id"
        elif callable(doc_id):
            self.mode, self.fn = "function", doc_id
        elif doc_id in ("id", "content"):
            self.mode, self.key = doc_id, None
        elif isinstance(doc_id, str) and doc_id.startswith("metadata.") and len(doc_id) > 9:
            self.mode, self.key = "metadata", doc_id[9:]
        else:
            raise InvalidInputError(
                "doc_id must be None (Document.id, else metadata['doc_id'], else a content "
                "hash), 'id', 'content', 'metadata.<key>' (e.g. 'metadata.source') or a "
                f"function Document -> id, got {doc_id!r}"
            )

    def describe(self) -> str:
        """The rule in words, for hints and messages."""
        if self.mode == "function":
            return f"your doc_id= function {getattr(self.fn, '__name__', '')!s} decides each id"
        if self.mode == "metadata":
            return f"ids are metadata[{self.key!r}], else Document.id, else a content hash"
        if self.mode == "content":
            return "ids are content hashes ('sha256:...')"
        key = "" if self.key is None else f"metadata[{self.key!r}], else "
        return f"ids are Document.id, else {key}a content hash ('sha256:...')"

    def one(self, doc: Any) -> str:
        """The id of one document (content hash included)."""
        ids, texts, _, _ = self.ids_and_texts([doc])
        doc_id = ids[0]
        return content_doc_id(texts[0]) if doc_id is None else doc_id

    def ids_and_texts(
        self, documents: Sequence[Any]
    ) -> tuple[list[str | None], list[str], int, BaseException | None]:
        """``(ids, texts, missing, error)`` of retrieved documents, in rank order.

        An id is ``None`` where it is the content hash of the text; ``missing`` counts
        documents without the ``metadata.<key>`` (or a ``doc_id`` function that raised),
        ``error`` is the first exception the function raised.
        """
        mode, key = self.mode, self.key
        ids: list[str | None] = []
        texts: list[str] = []
        missing = 0
        error: BaseException | None = None
        if mode == "default" or mode == "id":  # the hot path: Document.id, else metadata
            for doc in documents:
                text = getattr(doc, "page_content", None)
                if type(text) is not str:
                    text = str(doc) if text is None else str(text)
                texts.append(text)
                found: Any = getattr(doc, "id", None)
                if (found is None or found == "") and key is not None:
                    meta = getattr(doc, "metadata", None)
                    if type(meta) is dict or isinstance(meta, Mapping):
                        found = meta.get(key)
                if found is None or found == "":
                    ids.append(None)
                else:
                    ids.append(found if type(found) is str else str(found))
            return ids, texts, missing, error
        for doc in documents:
            text = getattr(doc, "page_content", None)
            if type(text) is not str:
                text = str(doc) if text is None else str(text)
            texts.append(text)
            found = None
            if mode == "function":
                try:
                    found = self.fn(doc)  # type: ignore[misc]
                except Exception as exc:
                    missing += 1
                    error = error or exc
                if found is None or found == "":
                    found = _default_id(doc, DEFAULT_ID_KEY)
            elif mode == "metadata":
                meta = getattr(doc, "metadata", None)
                found = meta.get(key) if isinstance(meta, Mapping) else None
                if found is None or found == "":
                    missing += 1
                    found = _default_id(doc, None)
            elif mode != "content":
                found = _default_id(doc, key)
            ids.append(None if found is None or found == "" else str(found))
        return ids, texts, missing, error


def _default_id(doc: Any, key: str | None) -> Any:
    found = getattr(doc, "id", None)
    if (found is None or found == "") and key is not None:
        meta = getattr(doc, "metadata", None)
        if isinstance(meta, Mapping):
            found = meta.get(key)
    return None if found == "" else found


def document_id(doc: Any, doc_id: DocId = None, *, id_key: Any = UNSET_KEY) -> str:
    """A retrieved document's id by the ``doc_id=`` rule (see :class:`DocIdRule`).

    Never ``None``: a document without an id gets :func:`ragmeter.capture.content_doc_id`
    of its text, so it is scored (and joins to qrels keyed by that hash) instead of being
    dropped. ``id_key=`` (the metadata key of the default rule) is deprecated.

    >>> from langchain_core.documents import Document
    >>> document_id(Document("text", id="d1", metadata={"doc_id": "x"}))
    'd1'
    >>> document_id(Document("text", metadata={"doc_id": 7}))
    '7'
    >>> document_id(Document("text", id="d1", metadata={"src": "s"}), "metadata.src")
    's'
    >>> document_id(Document("Paris is the capital of France."))
    'sha256:557be7eca214f188'
    """
    return doc_id_rule(doc_id, id_key, owner="document_id", stacklevel=4).one(doc)


def doc_id_rule(doc_id: DocId, id_key: Any, *, owner: str, stacklevel: int = 4) -> DocIdRule:
    """The rule for ``doc_id=``, taking the deprecated ``id_key=`` into account."""
    if id_key is UNSET_KEY:
        return DocIdRule(doc_id)
    deprecated_option(owner, "id_key", "doc_id", stacklevel=stacklevel)
    if doc_id is not None:
        raise InvalidInputError(
            f"{owner}: pass doc_id= alone; id_key= is its deprecated older form "
            f"(id_key={id_key!r} is doc_id=None reading metadata[{id_key!r}])"
        )
    if id_key is not None and not isinstance(id_key, str):
        raise InvalidInputError(f"id_key must be a metadata key (str) or None, got {id_key!r}")
    return DocIdRule(None, id_key=id_key)


def doc_ids_and_texts(
    documents: Sequence[Any],
    *,
    doc_id: DocId = None,
    errors: list[str] | None = None,
    rule: DocIdRule | None = None,
) -> tuple[list[str], list[str]]:
    """Ids and texts of retrieved documents, in rank order, one pair per document.

    Ids follow ``rule`` (else ``DocIdRule(doc_id)``), content hashes filled in. Documents
    that fell back (no ``metadata.<key>``, a ``doc_id`` function returning ``None`` or
    raising) are noted in ``errors`` (one note per call).
    """
    rule = rule if rule is not None else DocIdRule(doc_id)
    ids, texts, missing, error = rule.ids_and_texts(documents)
    if errors is not None:
        note = fallback_note(rule, missing, len(ids), error)
        if note is not None:
            errors.append(note)
    return [content_doc_id(t) if d is None else d for d, t in zip(ids, texts, strict=True)], texts


def fallback_note(
    rule: DocIdRule, missing: int, total: int, error: BaseException | None
) -> str | None:
    """The capture note for documents whose id fell back, or ``None``."""
    if error is not None:
        return (
            f"doc_id raised {type(error).__name__}: {error} on {missing} of {total} "
            "document(s); their ids fell back to Document.id / metadata / content hash"
        )
    if missing and rule.mode == "metadata":
        return (
            f"{missing} of {total} retrieved document(s) had no metadata[{rule.key!r}] "
            "(doc_id); their Document.id (else a content hash) was used instead"
        )
    return None


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
