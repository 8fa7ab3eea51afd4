"""Which spans are stages, and the stage each one makes: retriever and reranker spans,
marked steps, Haystack joiners; Haystack's context; stage names as the adapters give them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ragmeter.capture import StageRecord, content_doc_id, frontier
from ragmeter.io.otel import TraceSpan
from ragmeter.traces._documents import (
    _DOC_STARTS,
    DocIdRule,
    Docs,
    _as_documents,
    _documents,
    _ids_and_texts,
    _output_documents,
    all_missing,
)
from ragmeter.traces._json import _dotted, _json_object, _text_of

if TYPE_CHECKING:
    from ragmeter.traces._convert import Conversion, TraceRun


def _stage_of(
    span: TraceSpan,
    parent_span: TraceSpan,
    run: TraceRun,
    options: Conversion,
    enclosing: list[StageRecord],
) -> StageRecord | None:
    """The stage ``span`` is, if it is one: a retriever or reranker span with documents, a
    step marked with ``ragmeter_stage`` metadata (LangChain's ``stage()``), or a Haystack
    component whose output is documents (a joiner)."""
    attrs = span.attributes
    kind_of = span.kind or (_kind_from_documents(attrs) if span.dropped else "")
    if kind_of in ("RETRIEVER", "RERANKER"):
        own = "reranker.output_documents" if kind_of == "RERANKER" else "retrieval.documents"
        documents, missing = _documents(attrs, options.fields, span.dropped, own)
        if missing or span.dropped:
            _note_truncated(span, run, options, missing)
        kind = "reranker" if kind_of == "RERANKER" else "retriever"
        if not documents and span.error is None:
            output = _output_documents(attrs)
            if output is None and parent_span.kind == kind_of:
                return None  # an inner call of the same retriever (LlamaIndex's _retrieve)
            documents = {"output": output or Docs([], [])}
        return _make_stage(
            span, run, options, enclosing, documents, kind, _span_stage_name(span, run), False
        )
    if span.kind != "CHAIN":
        return None
    raw_meta = attrs.get("metadata")
    marked = isinstance(raw_meta, Mapping) or (
        isinstance(raw_meta, str) and "ragmeter_stage" in raw_meta
    )  # most steps carry metadata; only a marked one needs it parsed
    meta = (_json_object(raw_meta) or {}) if marked else {}
    marked_name = meta.get("ragmeter_stage")
    if isinstance(marked_name, str) and marked_name:
        output = _output_documents(attrs)
        kind, name = str(meta.get("ragmeter_stage_kind") or "retriever"), marked_name
    elif run.framework == "haystack":
        output = _output_documents(attrs, key="documents")
        kind, name = "fusion", _span_stage_name(span, run)
    else:
        return None
    if output is None:
        return None
    return _make_stage(span, run, options, enclosing, {"output": output}, kind, name, True)


def _kind_from_documents(attrs: Mapping[str, Any]) -> str:
    """The kind of a span whose kind attribute the attribute limit dropped (it is set
    first): its documents say it retrieved (or reranked)."""
    if not any(key.startswith(_DOC_STARTS) for key in attrs):
        return ""
    return "RERANKER" if any(key.startswith("reranker.") for key in attrs) else "RETRIEVER"


def _note_truncated(span: TraceSpan, run: TraceRun, options: Conversion, missing: int) -> None:
    """A retriever or reranker span lost attributes (the SDK keeps 128 by default and drops
    the first): its ranking is incomplete, so the run says so and the count goes up."""
    options.counts["truncated_rankings"] = options.counts.get("truncated_rankings", 0) + 1
    what = f"{missing} document positions are missing" if missing else "attributes were dropped"
    run.note(
        f"stage {span.name!r}: {what} ({span.dropped} attributes dropped by the span's "
        "attribute limit): its ranking is incomplete; raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT "
        "(OpenTelemetry keeps 128 attributes a span by default)"
    )


def _make_stage(
    span: TraceSpan,
    run: TraceRun,
    options: Conversion,
    enclosing: list[StageRecord],
    documents: Mapping[str, Docs],
    kind: str,
    name: str,
    marked: bool,
) -> StageRecord:
    attrs = span.attributes
    parent = enclosing[-1] if enclosing else None
    query = attrs.get("reranker.query") if kind == "reranker" else None
    if query is None:
        query = _text_of(attrs.get("input.value"), options.question_key)
    stage = StageRecord(name, query, len(enclosing), kind=kind, parent=parent)
    stage.thread = 0  # a trace does not say; overlapping times say two stages were concurrent
    stage.start = span.start / 1e9
    if parent is not None and not marked:
        parent.nest()
    own = "reranker.output_documents" if span.kind == "RERANKER" else "retrieval.documents"
    output = documents.get(own, documents.get("output"))
    if output is None and kind == "reranker":
        output = documents.get("retrieval.documents")
    if output is None and span.error is not None:
        stage.failed(span.error)
    else:
        _finish_stage(stage, span, run, options, output or Docs([], []), documents, marked, parent)
    stage.end = span.end / 1e9
    run.add_stage(stage)
    run.stage_spans[id(stage)] = span.span_id
    return stage


def _finish_stage(
    stage: StageRecord,
    span: TraceSpan,
    run: TraceRun,
    options: Conversion,
    output: Docs,
    documents: Mapping[str, Docs],
    marked: bool,
    parent: StageRecord | None,
) -> None:
    if output and all_missing(output.ids, output.text_ids):
        fallback = _output_documents(span.attributes)  # LangChain: ids only in output.value
        if fallback is not None and len(fallback) == len(output):
            output = Docs(fallback.ids, output.texts, output.metas)
    ids, texts, hashed = _ids_and_texts(output, options.doc_id)
    if hashed:
        options.counts["hashed_doc_ids"] += hashed
        run.note(
            f"doc_id: {hashed} documents of stage {stage.name!r} carry no id (document.id); "
            "their ids are hashes of their text. Pass doc_id='metadata.<key>' to read the id "
            "from their metadata"
        )
    stage.done(ids, texts)
    consumed = documents.get("reranker.input_documents")
    if consumed is not None:
        source = _consumed(consumed, run.stages, options.doc_id)
        if source is not None:
            stage.inputs = (source,)
    elif marked:
        stage.inputs = frontier(run.stages, parent) or None


def _haystack_context(span: TraceSpan, run: TraceRun, options: Conversion) -> None:
    """What reached the generator in Haystack: the documents a prompt builder was given
    (``kwargs.documents`` in its ``input.value``), as the native adapter takes them."""
    if not span.name.endswith("PromptBuilder.run"):
        return
    data = _json_object(span.attributes.get("input.value"))
    items = _dotted(data, "kwargs.documents") if data else None
    documents = _as_documents(items) if isinstance(items, list) else None
    if documents is None:
        return
    ids, texts, _ = _ids_and_texts(documents, options.doc_id)
    for stage in reversed(run.stages):
        if stage.finished and stage.ids == ids:
            run.context = stage
            return
    context = StageRecord("context", run.user_input, 0, kind="context")
    context.thread = 0
    context.start = span.start / 1e9
    context.done(ids, texts)
    context.end = span.start / 1e9
    run.context = context


def _span_stage_name(span: TraceSpan, run: TraceRun) -> str:
    """The stage name the native adapter would give, as far as the span says: LangChain's run
    name as is; LlamaIndex's and Haystack's class, without the method
    (``BM25Retriever.retrieve`` -> ``BM25Retriever``)."""
    if run.framework in ("llamaindex", "haystack") and "." in span.name:
        return span.name.split(".", 1)[0]
    return span.name


def _consumed(
    documents: Docs, stages: Iterable[StageRecord], rule: DocIdRule
) -> StageRecord | None:
    """The earlier stage whose ranking a reranker was given (its documents, in order; a
    document without an id is known by the hash of its text, as the stages know it)."""
    ids, texts, _ = _ids_and_texts(documents, rule)
    if None in ids:
        ids = [content_doc_id(t) if i is None else i for i, t in zip(ids, texts, strict=True)]
    for stage in reversed(list(stages)):
        if stage.finished and stage.ids == ids:
            return stage
    return None
