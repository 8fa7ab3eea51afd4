"""One captured LlamaIndex query or chat turn (:class:`LlamaIndexRun`) and what it reads
from LlamaIndex's objects: token usage, node texts, packed scores.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.schema import QueryBundle

from ragmeter.capture import CaptureConfig, RunRecord, StageRecord, jsonable
from ragmeter.schema import RagSample
from ragmeter_llamaindex._retriever import DocId, describe_id_field

__all__ = ["LlamaIndexRun", "token_usage"]


def _query_text(query: Any) -> str | None:
    if isinstance(query, QueryBundle):
        return query.query_str
    return None if query is None else str(query)


def _text(node: Any) -> str:
    text = getattr(node, "text", None)
    return text if type(text) is str else str(node.get_content())


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def token_usage(response: Any) -> tuple[int | None, int | None]:
    """``(input, output)`` tokens an LLM response reports, ``None`` where it reports none.

    Read like LlamaIndex's ``TokenCountingHandler``: ``response.raw["usage"]`` (a dict or
    an object such as OpenAI's ``CompletionUsage``), else ``additional_kwargs``; OpenAI
    (``prompt_tokens``/``completion_tokens``) and Anthropic (``input_tokens``/
    ``output_tokens``) names.

    >>> from llama_index.core.llms import CompletionResponse
    >>> token_usage(CompletionResponse(text="hi", raw={"usage": {"prompt_tokens": 9,
    ...                                                          "completion_tokens": 2}}))
    (9, 2)
    """
    raw_response = getattr(response, "raw", None)
    extra = getattr(response, "additional_kwargs", None)
    if raw_response is None and not extra:
        return None, None
    raw = _raw_usage(raw_response)
    for source in (raw, extra):
        if source is None:
            continue
        get = source.get if isinstance(source, Mapping) else lambda k, s=source: getattr(s, k, None)
        inp = _int(get("prompt_tokens"))
        inp = inp if inp is not None else _int(get("input_tokens"))
        out = _int(get("completion_tokens"))
        out = out if out is not None else _int(get("output_tokens"))
        if inp is not None or out is not None:
            return inp, out
    return None, None


def _raw_usage(raw: Any) -> Any:
    if raw is None:
        return None
    if isinstance(raw, Mapping):
        return raw.get("usage")
    return getattr(raw, "usage", None)


class LlamaIndexRun(RunRecord):
    """One top-level query or chat turn (a :class:`~ragmeter.capture.RunRecord`).

    Adds the texts the LLM saw when they are not a ranking of retrieved nodes (``seen``;
    otherwise they are the context stage's), the node ids of the response's sources, the
    stream status and the id rule to the shared record.
    """

    __slots__ = (
        "doc_id",
        "ignored",
        "last",
        "seen",
        "source_ids",
        "span",
        "status",
        "stream_ms",
    )

    def __init__(
        self, config: CaptureConfig, tags: Mapping[str, Any] | None, doc_id: DocId, span: str
    ) -> None:
        super().__init__(config, meta=tags)
        self.doc_id = doc_id
        self.span: str | None = span  # the top-level span's id, while it is open
        self.last: tuple[StageRecord, Sequence[Any]] | None = None  # last call and its nodes
        self.seen: tuple[str, ...] | None = None  # source texts that are no ranking
        self.source_ids: tuple[str, ...] | None = None  # node ids of unmatched sources
        self.status: str | None = None
        self.stream_ms: float | None = None
        self.ignored = not self.wanted

    def framework_metadata(self) -> dict[str, Any]:
        return {"doc_id": describe_id_field(self.doc_id).strip("'")}

    def framework_fields(
        self,
        fields: dict[str, Any],
        chosen: Sequence[StageRecord],
        pairs: Sequence[tuple[str, str]],
        names: Mapping[int, str],
    ) -> None:
        meta = fields["metadata"]
        node_ids: list[str] = []
        scores: list[Any] = []
        texts: list[str] = []
        for call in chosen:
            own_ids, own_scores = _extra(call)
            node_ids.extend(own_ids if own_ids is not None else call.ids or ())
            scores.extend(_scores(own_scores))
            texts.extend(call.texts)
        meta["node_ids"] = node_ids
        meta["scores"] = scores
        context = self.context
        if context is not None:
            own_ids = _extra(context)[0]
            meta["source_node_ids"] = list(own_ids if own_ids is not None else context.ids or ())
        elif self.source_ids is not None:
            meta["source_node_ids"] = list(self.source_ids)
        if self.status is not None:
            meta["response_status"] = self.status
        if self.stream_ms is not None:
            meta["stream_complete_ms"] = self.stream_ms
        fields["retrieved_texts"] = texts if chosen else None
        if self.seen is not None:  # what the LLM saw, though no ranking
            fields["retrieved_contexts"] = list(self.seen)
        elif context is not None:
            fields["retrieved_contexts"] = list(context.texts)
        elif fields.get("retrieved_contexts") is None:
            fields["retrieved_contexts"] = texts or None

    def stream_done(self, text: str | None, status: str) -> None:
        """What became of a streamed answer (the caller read it, or closed it early)."""
        ms = (time.perf_counter() - self.start) * 1000.0 if text is not None else None

        def raw() -> None:
            if text is not None:
                self.response = text
            self.status = status
            self.stream_ms = ms

        def built(sample: RagSample) -> None:
            if text is not None:
                sample.response = text
            sample.metadata["response_status"] = status
            if ms is not None:
                sample.metadata["stream_complete_ms"] = ms

        self.amend(raw, built)


def _extra(call: StageRecord) -> tuple[tuple[str, ...] | None, Any]:
    """``(node_ids or None, packed scores)`` of a call (``None``: the node ids are its ids)."""
    extra = call.extra
    if extra is None:
        return None, ()
    return (None, extra) if type(extra) is bytes else extra


def _packed(scores: list[Any]) -> Any:
    """Scores packed as doubles (8 bytes each) when they are all numbers."""
    try:
        return struct.pack(f"{len(scores)}d", *scores)
    except (struct.error, TypeError):  # a node without a score
        return tuple(scores)


def _scores(packed: Any) -> list[Any]:
    values = struct.unpack(f"{len(packed) // 8}d", packed) if type(packed) is bytes else packed
    return [jsonable(s) for s in values]
