"""One row of ``mlflow.genai.evaluate`` read as a :class:`~ragmeter.schema.RagSample`.

A scorer is called with ``inputs``, ``outputs``, ``expectations`` and the row's ``trace``.
They become the sample's fields the way MLflow's own built-in scorers read them:

* ``user_input`` from ``inputs`` and ``response`` from ``outputs``: a string as is; a dict's
  ``"messages"`` (chat: the last message's ``content``), an OpenAI ``"choices"`` list, or
  one of the keys ``question``/``query``/``input``/``request``/``user_input`` (inputs),
  ``response``/``answer``/``output``/``content``/``text`` (outputs), or its only value when
  that is a string. Other ``inputs`` become their JSON text (no deterministic metric reads
  the question); other ``outputs`` are refused, naming the keys looked for.
* ``reference`` (several: ``references``) from ``expectations["expected_response"]``
  (a string or a list of strings); ragmeter's own ``reference``/``references`` keys work too.
* ``retrieved_contexts`` and ``retrieved_ids``: the documents of the trace's top-level
  ``RETRIEVER`` spans (those with no ``RETRIEVER`` span above them: MLflow's rule for
  ``RetrievalGroundedness``), the spans in the order they started, each span's documents in
  its order. A document's text is its ``page_content`` (or ``content``, ``text``), its id
  ``metadata["doc_uri"]``, MLflow's document id; ``retrieved_ids`` is set only when every
  document has one.
* ``reference_ids`` and ``reference_contexts`` from
  ``expectations["expected_retrieved_context"]`` (a list of ``{"doc_uri": ..., "content":
  ...}``: the relevant documents, grade 1); graded judgements as
  ``expectations["relevance"] = {doc_uri: grade}``.
* ``id``: the trace id (a fixed ``"mlflow-row"`` without a trace); ``latency_ms``: the
  trace's ``execution_duration``; ``input_tokens``/``output_tokens``: its ``token_usage``.

A field the row does not carry stays ``None``, so a metric that needs it scores ``None`` (no
assessment), as ragmeter skips such a sample rather than scoring it 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ragmeter.errors import InvalidInputError
from ragmeter.schema import RagSample

__all__ = ["retrieved_documents", "row_sample"]

_INPUT_KEYS = ("question", "query", "input", "request", "user_input")
_OUTPUT_KEYS = ("response", "answer", "output", "content", "text")
_DOC_TEXT_KEYS = ("page_content", "content", "text")
_RETRIEVER = "RETRIEVER"


def _message_text(value: Mapping[str, Any]) -> str | None:
    messages = value.get("messages")
    if isinstance(messages, Sequence) and messages and isinstance(messages[-1], Mapping):
        content = messages[-1].get("content")
        if isinstance(content, str):
            return content
    choices = value.get("choices")
    if isinstance(choices, Sequence) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message")
        if isinstance(message, Mapping) and isinstance(message.get("content"), str):
            return str(message["content"])
    return None


def _text(value: Any, keys: tuple[str, ...], what: str) -> str | None:
    """``value`` (a row's outputs) as text, or :class:`InvalidInputError`; see the module
    docstring."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        found = _message_text(value)
        if found is not None:
            return found
        for key in keys:
            if isinstance(value.get(key), str):
                return str(value[key])
        if len(value) == 1:
            (only,) = value.values()
            if isinstance(only, str):
                return only
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise InvalidInputError(
        f"cannot read the row's {what} as text: got {type(value).__name__} {shown}; pass a "
        f"string, a chat dict with 'messages', or a dict with one of the keys {', '.join(keys)}"
    )


def _question(inputs: Any) -> str | None:
    try:
        return _text(inputs, _INPUT_KEYS, "inputs")
    except InvalidInputError:
        return json.dumps(inputs, default=str, sort_keys=True)


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return list(value)
    raise InvalidInputError(f"{where} must be a string or a list of strings, got {value!r}")


def _document(doc: Any) -> tuple[str | None, str | None]:
    """``(doc_uri, text)`` of one document a retriever span returned."""
    if hasattr(doc, "to_dict"):  # mlflow.entities.Document
        doc = doc.to_dict()
    if not isinstance(doc, Mapping):
        return None, doc if isinstance(doc, str) else None
    text = next((doc[k] for k in _DOC_TEXT_KEYS if isinstance(doc.get(k), str)), None)
    metadata = doc.get("metadata")
    uri = metadata.get("doc_uri") if isinstance(metadata, Mapping) else None
    return (str(uri) if uri is not None else None), text


def _top_level_retrievers(trace: Any) -> list[Any]:
    spans = list(trace.data.spans)
    by_id = {span.span_id: span for span in spans}
    top = []
    for span in spans:
        if span.span_type != _RETRIEVER:
            continue
        parent = by_id.get(span.parent_id)
        while parent is not None and parent.span_type != _RETRIEVER:
            parent = by_id.get(parent.parent_id)
        if parent is None:
            top.append(span)
    top.sort(key=lambda span: span.start_time_ns)
    return top


def retrieved_documents(trace: Any) -> list[tuple[str | None, str | None]] | None:
    """``(doc_uri, text)`` of each document the trace's top-level ``RETRIEVER`` spans
    returned, in order; ``None`` when there is no trace or it has no such span."""
    if trace is None or getattr(trace, "data", None) is None:
        return None
    spans = _top_level_retrievers(trace)
    if not spans:
        return None
    documents: list[tuple[str | None, str | None]] = []
    for span in spans:
        outputs = span.outputs
        if isinstance(outputs, str):
            try:
                outputs = json.loads(outputs)
            except ValueError:
                outputs = [outputs]
        if isinstance(outputs, Mapping):
            outputs = [outputs]
        documents.extend(_document(doc) for doc in outputs or ())
    return documents


def _expected_context(value: Any) -> tuple[list[str] | None, list[str] | None]:
    """``(reference_ids, reference_contexts)`` from ``expected_retrieved_context``."""
    where = "expectations['expected_retrieved_context']"
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise InvalidInputError(f"{where} must be a list of {{'doc_uri', 'content'}} dicts")
    ids: list[str] = []
    texts: list[str] = []
    for i, doc in enumerate(value):
        if not isinstance(doc, Mapping):
            raise InvalidInputError(f"{where}[{i}] must be a dict, got {doc!r}")
        if doc.get("doc_uri") is not None:
            ids.append(str(doc["doc_uri"]))
        if isinstance(doc.get("content"), str):
            texts.append(doc["content"])
    return (ids if len(ids) == len(value) else None), (texts if len(texts) == len(value) else None)


def _expectation_fields(expectations: Mapping[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    refs: list[str] = []
    for key in ("expected_response", "reference", "references"):
        if expectations.get(key) is not None:
            refs.extend(_strings(expectations[key], f"expectations[{key!r}]"))
    if refs:
        fields["reference"], fields["references"] = refs[0], refs[1:] or None
    if expectations.get("expected_retrieved_context") is not None:
        ids, texts = _expected_context(expectations["expected_retrieved_context"])
        fields["reference_ids"], fields["reference_contexts"] = ids, texts
    if expectations.get("relevance") is not None:
        fields["relevance"] = expectations["relevance"]
    return fields


def _trace_fields(info: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    duration = getattr(info, "execution_duration", None)
    if isinstance(duration, (int, float)) and not isinstance(duration, bool):
        fields["latency_ms"] = float(duration)
    usage = getattr(info, "token_usage", None)
    if isinstance(usage, Mapping):
        for key in ("input_tokens", "output_tokens"):
            if isinstance(usage.get(key), int):
                fields[key] = usage[key]
    return fields


def row_sample(
    *,
    inputs: Any = None,
    outputs: Any = None,
    expectations: Mapping[str, Any] | None = None,
    trace: Any = None,
) -> RagSample:
    """The :class:`~ragmeter.schema.RagSample` of one evaluation row (see the module doc).

    >>> s = row_sample(inputs={"question": "Capital of France?"}, outputs="Paris",
    ...                expectations={"expected_response": "Paris"})
    >>> s.user_input, s.response, s.reference
    ('Capital of France?', 'Paris', 'Paris')
    """
    fields: dict[str, Any] = {
        "id": str(trace.info.trace_id) if trace is not None else "mlflow-row",
        "user_input": _question(inputs),
        "response": _text(outputs, _OUTPUT_KEYS, "outputs"),
    }
    if expectations:
        fields.update(_expectation_fields(expectations))
    if trace is not None:
        fields.update(_trace_fields(trace.info))
    documents = retrieved_documents(trace)
    if documents is not None:
        fields["retrieved_contexts"] = [text for _, text in documents if text is not None]
        uris = [uri for uri, _ in documents if uri is not None]
        fields["retrieved_ids"] = uris if len(uris) == len(documents) else None
    try:
        return RagSample(**fields)
    except ValueError as exc:
        raise InvalidInputError(f"row of trace {fields['id']!r}: {exc}") from None
