"""Turning Haystack ``Document`` lists into ragmeter's run and qrels (no metric maths here).

A *field* names what identifies a document: ``"id"`` (``doc.id``), ``"content"``
(``doc.content``, as :func:`ragmeter.capture.content_doc_id`), or ``"meta.<key>"``
(``doc.meta["<key>"]``, nested keys with dots, e.g. ``"meta.source.url"``). The same
spelling picks a ground-truth grade: ``"score"`` (``doc.score``) or ``"meta.<key>"``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragmeter.capture import DocIdOption, content_doc_id
from ragmeter.errors import InvalidInputError

__all__ = [
    "UNMATCHABLE",
    "DocId",
    "capture_ids",
    "check_doc_id",
    "check_field",
    "check_grade_field",
    "describe_doc_id",
    "doc_id_option",
    "doc_key",
    "generator_output",
    "grade_of",
    "qrels_row",
    "ranked_ids",
    "recorded_ids",
    "reply_text",
    "reply_usage",
]

logger = logging.getLogger("ragmeter_haystack")
logger.addHandler(logging.NullHandler())

_MISSING = object()

_UNSET: Any = object()
"""The default of the deprecated ``doc_id_field=`` arguments (not given)."""

UNMATCHABLE = "\x00unmatchable:"
"""Prefix of the placeholder id a retrieved document without the comparison field gets."""


_FIELD_RULE = "'id', 'content' or 'meta.<key>' (e.g. 'meta.file_id')"
FIELDS = DocIdOption(("id", "content"), "meta.", _FIELD_RULE, functions=False)
"""A document field: ``Document.id``, its content, or a ``meta`` key (dots go deeper)."""
DOC_ID = DocIdOption(("id", "content"), "meta.", _FIELD_RULE)
"""The ``doc_id`` option: a document field (:data:`FIELDS`) or a function document -> id."""


def check_field(field: object, *, name: str = "document_comparison_field") -> str:
    """Return ``field`` if it is ``"id"``, ``"content"`` or ``"meta.<key>"``, else raise.

    >>> check_field("meta.file_id")
    'meta.file_id'
    """
    checked: str = FIELDS.check(field, name=name)
    return checked


DocId = str | Callable[[Any], "str | None"]
"""The ``doc_id`` option: ``"id"``, ``"content"``, ``"meta.<key>"`` or ``fn(document) -> id``."""


def check_doc_id(doc_id: object, *, name: str = "doc_id") -> DocId:
    """Return ``doc_id`` if it is a field (:func:`check_field`) or a function, else raise.

    >>> check_doc_id("meta.source_id")
    'meta.source_id'
    """
    checked: DocId = DOC_ID.check(doc_id, name=name)
    return checked


def doc_id_option(doc_id: Any, doc_id_field: Any, *, owner: str) -> DocId:
    """The checked ``doc_id``, taking the deprecated ``doc_id_field=`` into account."""
    checked: DocId = DOC_ID.resolve(
        doc_id, doc_id_field, owner=owner, older_name="doc_id_field", default="id", unset=_UNSET
    )
    return checked


describe_doc_id = DocIdOption.describe
"""``'meta.source_id'`` (quoted) for a field, the function's name for a function."""


def check_grade_field(field: object) -> str:
    """Return ``field`` if it is ``"score"`` or ``"meta.<key>"``, else raise."""
    if isinstance(field, str) and (
        field == "score" or (field.startswith("meta.") and len(field) > 5)
    ):
        return field
    raise InvalidInputError(
        f"relevance_field must be 'score' (Document.score) or 'meta.<key>' "
        f"(e.g. 'meta.grade'), got {field!r}"
    )


def _meta_value(meta: Any, path: str) -> Any:
    value = meta
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def doc_key(doc: Any, field: DocId) -> str | None:
    """The id ``field`` gives ``doc``, as a string; ``None`` when the document has none.

    >>> from haystack import Document
    >>> doc_key(Document(id="d1", content="x", meta={"src": {"page": 3}}), "meta.src.page")
    '3'
    >>> doc_key(Document(content="Paris"), "content")
    'sha256:5dd272b4f316b776'
    """
    if callable(field):
        value = field(doc)
    elif field == "id":
        value = getattr(doc, "id", None)
    elif field == "content":
        text = getattr(doc, "content", None)
        return content_doc_id(text) if isinstance(text, str) else None
    else:
        value = _meta_value(getattr(doc, "meta", None) or {}, field[5:])
        if value is _MISSING:
            return None
    return None if value is None else str(value)


def grade_of(doc: Any, field: str) -> float | None:
    """A ground-truth grade from ``doc.score`` or ``doc.meta[...]``; ``None`` if unset."""
    if field == "score":
        value = getattr(doc, "score", None)
    else:
        value = _meta_value(getattr(doc, "meta", None) or {}, field[5:])
        if value is _MISSING:
            value = None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(f"a grade must be a number, got {value!r} ({field})")
    grade = float(value)
    if math.isnan(grade):
        raise InvalidInputError(f"a grade must be a number, got NaN ({field})")
    return grade


def qrels_row(docs: Sequence[Any], *, index: int, field: str, grade_field: str) -> dict[str, float]:
    """One question's judgements ``{doc_key: grade}`` from its ground-truth documents.

    Grades come from ``grade_field``; when no document has one, every document is relevant
    with grade 1 (binary relevance). A document listed twice keeps its highest grade.
    Raises :class:`~ragmeter.errors.InvalidInputError` when some documents have a grade and
    others do not, or a document has no value for ``field``.
    """
    try:
        grades = [grade_of(d, grade_field) for d in docs]
    except InvalidInputError as exc:
        raise InvalidInputError(f"ground_truth_documents[{index}]: {exc}") from None
    graded = [i for i, g in enumerate(grades) if g is not None]
    if graded and len(graded) != len(grades):
        ungraded = [i for i, g in enumerate(grades) if g is None]
        raise InvalidInputError(
            f"ground_truth_documents[{index}] mixes graded and ungraded documents "
            f"(relevance_field={grade_field!r}): documents {graded} have a grade, {ungraded} "
            "have none. Give every ground-truth document of a question a grade, or none of them "
            "(binary relevance)."
        )
    row: dict[str, float] = {}
    for j, (doc, grade) in enumerate(zip(docs, grades, strict=True)):
        key = doc_key(doc, field)
        if key is None:
            raise InvalidInputError(
                f"ground_truth_documents[{index}][{j}] has no value for "
                f"document_comparison_field={field!r}, so it could never be matched; "
                "set it on the document or compare on another field"
            )
        value = 1.0 if grade is None else grade
        row[key] = max(row.get(key, value), value)
    return row


def ranked_ids(docs: Sequence[Any], *, field: str) -> list[str]:
    """A retrieved list as doc keys, best first, each document kept at its best rank.

    A document whose ``field`` is missing still takes its rank, as a document that matches
    nothing (so it counts against precision and pushes later hits down).

    >>> from haystack import Document
    >>> ranked_ids([Document(id="a"), Document(id="b"), Document(id="a")], field="id")
    ['a', 'b']
    """
    out: dict[str, None] = {}
    for rank, doc in enumerate(docs):
        key = doc_key(doc, field)
        out.setdefault(key if key is not None else f"{UNMATCHABLE}{rank}", None)
    return list(out)


def recorded_ids(docs: Sequence[Any], field: DocId) -> tuple[list[str], int]:
    """Retrieved documents as ids, best first, one per document, and how many fell back.

    A document without a value for ``field`` keeps its rank under its ``Document.id``
    (never dropped: dropping it would move every later document up a rank), and is counted
    in the second value so the caller can say so. Repeats are kept.

    >>> from haystack import Document
    >>> docs = [Document(id="a", meta={"src": "s1"}), Document(id="b"),
    ...         Document(id="c", meta={"src": "s1"})]
    >>> recorded_ids(docs, "meta.src")
    (['s1', 'b', 's1'], 1)
    """
    ids: list[str] = []
    missing = 0
    for doc in docs:
        key = doc_key(doc, field)
        if key is None:
            missing += 1
            key = str(doc.id)
        ids.append(key)
    return ids, missing


def reply_text(reply: Any) -> str | None:
    """The text of one generator reply: a ``ChatMessage``, a ``str`` or a ``GeneratedAnswer``."""
    if reply is None or isinstance(reply, str):
        return reply
    text = getattr(reply, "text", None)
    if isinstance(text, str):
        return text
    for attr in ("data", "content"):
        value = getattr(reply, attr, None)
        if isinstance(value, str):
            return value
    return None


def capture_ids(
    docs: Sequence[Any], doc_id: DocId
) -> tuple[list[str | None], list[str], int, BaseException | None]:
    """``(ids, texts, missing, error)`` of retrieved documents, one entry each, in rank order.

    The capture hot path: an id is ``None`` where it is the content hash of the text
    (``doc_id="content"``; hashed when the sample is read). A document without a value for
    ``doc_id`` keeps its rank under its ``Document.id`` and is counted in ``missing``;
    ``error`` is the first exception a ``doc_id`` function raised (those documents fall
    back the same way).
    """
    ids: list[str | None] = []
    texts: list[str] = []
    missing = 0
    error: BaseException | None = None
    if doc_id == "id":  # the common case, kept short
        for doc in docs:
            text = getattr(doc, "content", None)
            texts.append(text if type(text) is str else "")
            found = getattr(doc, "id", None)
            ids.append(found if type(found) is str else str(found))
        return ids, texts, missing, error
    for doc in docs:
        text = getattr(doc, "content", None)
        texts.append(text if type(text) is str else "")
        if doc_id == "id":
            found = getattr(doc, "id", None)
        elif doc_id == "content":
            if type(text) is str:
                ids.append(None)
                continue
            found = None
        else:
            try:
                found = doc_key(doc, doc_id)
            except Exception as exc:
                error = error or exc
                found = None
        if found is None:
            missing += 1
            found = getattr(doc, "id", None)
        ids.append(str(found))
    return ids, texts, missing, error


def generator_output(
    outputs: Mapping[str, Any], replies_output: str = "replies"
) -> tuple[str | None, int | None, int | None]:
    """``(text, input_tokens, output_tokens)`` of one generator run's outputs.

    The text is the first reply's (:func:`reply_text`); token counts come from that reply's
    ``meta["usage"]`` (chat generators), else from the first entry of a ``meta`` output
    (``OpenAIGenerator`` and other text generators: ``{"replies": [str], "meta": [{"usage":
    {...}}]}``).

    >>> generator_output({"replies": ["Paris"], "meta": [{"usage": {"prompt_tokens": 12,
    ...                                                             "completion_tokens": 1}}]})
    ('Paris', 12, 1)
    """
    replies = outputs.get(replies_output)
    if not replies:
        return None, None, None
    first = replies[0]
    usage = reply_usage(first)
    if not usage:
        metas = outputs.get("meta")
        if isinstance(metas, Sequence) and metas and isinstance(metas[0], Mapping):
            usage = _usage(metas[0].get("usage"))
    return reply_text(first), usage.get("input_tokens"), usage.get("output_tokens")


def reply_usage(reply: Any) -> dict[str, int]:
    """Token counts from a reply's ``meta["usage"]`` (OpenAI or Anthropic key names).

    >>> from haystack.dataclasses import ChatMessage
    >>> reply_usage(ChatMessage.from_assistant("hi", meta={"usage": {"prompt_tokens": 7}}))
    {'input_tokens': 7}
    """
    meta = getattr(reply, "meta", None)
    return _usage(meta.get("usage") if isinstance(meta, Mapping) else None)


def _usage(usage: Any) -> dict[str, int]:
    if not isinstance(usage, Mapping):
        return {}
    out: dict[str, int] = {}
    for field, keys in (
        ("input_tokens", ("prompt_tokens", "input_tokens")),
        ("output_tokens", ("completion_tokens", "output_tokens")),
    ):
        for key in keys:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                out[field] = value
                break
    return out
