"""A trace's span tree as samples: one :class:`TraceRun` per top-level CHAIN/AGENT span.

The rules, the same as the native adapters' wherever a trace says as much as the framework:

* **Which spans are runs**: the outermost spans of ``root_kinds`` (``CHAIN`` and ``AGENT``
  by default) in the trace; an uninstrumented parent (an HTTP server span) is looked through.
* **Question**: the run's ``input.value``; when it is JSON (the Haystack instrumentor writes
  the run's keyword arguments there), the string under ``question_key`` (a dotted path) or,
  without one, under the first of ``query``, ``question``, ``query_str``, ``input``,
  ``user_input``, ``text`` (the shallowest match wins).
* **Answer**: the run's ``output.value`` when it is text, else the last LLM span's output
  message, else a string found in the JSON output (``replies``, ``answer``, ``response``...).
* **Stages**: every ``RETRIEVER`` span (``retrieval.documents``) and ``RERANKER`` span
  (``reranker.output_documents``) inside the run is a stage named after its span, with its
  depth (stages enclosing it), time and ranking; a reranker's input documents name the
  stage it consumed. The context (what reached the LLM) is chosen by the adapters' rule
  (:func:`ragmeter.capture.infer_context`): the one outermost stage no other consumed, or
  the last to finish unless another overlapped it in time; a run where none can be
  identified says so and is counted.
* **Doc ids**: ``document.id``; with ``doc_id="metadata.<key>"`` that metadata value,
  ``"content"`` a hash of the text, or a function ``document dict -> id``; a document with
  no id gets a content hash and the run a note (counted).
* **Ids and ground truth**: ``join_key`` (a dotted path into the run span's attributes, e.g.
  ``"metadata.query_id"`` or ``"session.id"``) gives the sample id, else the run's
  ``ragmeter_*`` metadata as in the adapters, else ``queries`` (``{query_id: text}``)
  matched by normalised question text, else the trace id. ``trace_id`` and ``span_id``
  are kept in ``sample.metadata``; latency, token counts and the model come from the spans.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from ragmeter.capture import (
    CaptureConfig,
    RunRecord,
    Scope,
    StageRecord,
    frontier,
    stage_names,
)
from ragmeter.io.otel import TraceSpan

__all__ = ["Conversion", "TraceRun", "runs_of_trace"]

DocIdRule = str | Callable[[Mapping[str, Any]], Any] | None

_QUESTION_KEYS = ("query", "question", "query_str", "input", "user_input", "text")
_ANSWER_KEYS = ("replies", "answer", "response", "output", "content", "text", "result")
_OUT_MESSAGE = re.compile(r"^llm\.output_messages\.(\d+)\.message\.content$")
_SPACES = re.compile(r"\s+")


def normalise(text: str) -> str:
    """The form questions are matched in: case-folded, whitespace collapsed, trimmed.

    >>> normalise("  What is   BM25?\\n")
    'what is bm25?'
    """
    return _SPACES.sub(" ", text).strip().casefold()


@dataclass
class Conversion:
    """The options of a conversion and what it counted (``counts``, JSON-ready)."""

    doc_id: DocIdRule = None
    join_key: str | None = None
    question_key: str | None = None
    root_kinds: tuple[str, ...] = ("CHAIN", "AGENT")
    queries: Mapping[str, str] | None = None
    framework: str | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        """The document fields the doc-id rule reads (the text is always read)."""
        rule = self.doc_id
        if rule is None or rule == "id":
            return ("id", "content")
        return ("id", "content", "metadata")

    counts: dict[str, int] = field(
        default_factory=lambda: {
            "traces": 0,
            "runs": 0,
            "no_run": 0,
            "no_retriever": 0,
            "hashed_doc_ids": 0,
            "joined": 0,
            "not_joined": 0,
        }
    )
    _by_text: dict[str, str] | None = None

    def query_for(self, question: str | None) -> str | None:
        """The query id whose text is ``question`` (normalised), if ``queries`` were given."""
        if self.queries is None or question is None:
            return None
        if self._by_text is None:
            self._by_text = {normalise(text): qid for qid, text in self.queries.items()}
        return self._by_text.get(normalise(question))


class TraceRun(RunRecord):
    """One run read from a trace: a :class:`~ragmeter.capture.RunRecord` whose times, stages
    and ids come from spans (its sample id defaults to the trace id)."""

    __slots__ = ("framework", "model", "span_id", "stage_spans", "trace_id")

    def __init__(
        self,
        config: CaptureConfig,
        span: TraceSpan,
        meta: Mapping[str, Any] | None,
        scope: Scope | None = None,
    ) -> None:
        super().__init__(config, meta=meta, scope=scope)
        self.trace_id = span.trace_id
        self.span_id = span.span_id
        self.model: str | None = None
        self.stage_spans: dict[int, str] = {}  # id(stage record) -> its span's id
        self.framework: str | None = None
        self.start = span.start / 1e9
        self.end = span.end / 1e9 if span.end else None

    def default_id(self) -> str | None:
        return self.trace_id

    def framework_fields(
        self,
        fields: dict[str, Any],
        chosen: Sequence[StageRecord],
        pairs: Sequence[tuple[str, str]],
    ) -> None:
        """Each stage's span id (``metadata["stage_span_ids"]``, by stage name), where
        per-document scores are written back, and for a stage whose span repeated a doc id
        (several chunks of one document) the span position of each id in ``ids``
        (``metadata["stage_positions"]``)."""
        if not self.stage_spans:
            return
        names = stage_names(self.stages)[0]
        spans: dict[str, str] = {}
        positions: dict[str, list[int]] = {}
        for name, stage in zip(names, self.stages, strict=True):
            if id(stage) not in self.stage_spans:
                continue
            spans[name] = self.stage_spans[id(stage)]
            ids = stage.ids or []
            first = list(dict.fromkeys(ids))
            if len(first) != len(ids):  # repeats (chunks of one doc): where each first was
                where = {doc: i for i, doc in reversed(list(enumerate(ids)))}
                positions[name] = [where[doc] for doc in first]
        fields["metadata"]["stage_span_ids"] = spans
        if positions:
            fields["metadata"]["stage_positions"] = positions

    def framework_metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {"trace_id": self.trace_id, "span_id": self.span_id}
        if self.framework is not None:
            out["framework"] = self.framework
        if self.model is not None:
            out["model"] = self.model
        return out


_START_END = attrgetter("start", "end")

_FRAMEWORKS = {"langchain": "langchain", "llama_index": "llamaindex", "haystack": "haystack"}


def _framework(scope: str) -> str | None:
    """``"langchain"`` from ``openinference.instrumentation.langchain`` (the adapters' names)."""
    if not scope.startswith("openinference.instrumentation."):
        return None
    name = scope.rsplit(".", 1)[-1]
    return _FRAMEWORKS.get(name, name)


def _framework_of(spans: Sequence[TraceSpan]) -> str | None:
    """The framework that made a trace: its instrumentation scope, or, where the source
    keeps none (a Phoenix export), what its instrumentor names spans: Haystack's
    ``Pipeline.run``, LlamaIndex's ``<Class>.retrieve`` / ``.query``, LangChain's
    ``Runnable...``."""
    for span in spans:
        found = _framework(span.scope)
        if found is not None:
            return found
    names = {span.name for span in spans}
    if names & {"Pipeline.run", "AsyncPipeline.run"}:
        return "haystack"
    if any(n.endswith((".retrieve", ".query", ".aquery", "._postprocess_nodes")) for n in names):
        return "llamaindex"
    if any(n.startswith("Runnable") for n in names):
        return "langchain"
    return None


def runs_of_trace(
    spans: Sequence[TraceSpan],
    config: CaptureConfig,
    options: Conversion,
    scope: Scope | None = None,
    *,
    scopes: Mapping[str, Scope | None] | None = None,
) -> list[TraceRun]:
    """The runs of one trace (its spans, any order), counted in ``options.counts``;
    ``scope`` is the ``capture()`` scope that was open when the trace started (live), or
    ``scopes`` the one open when each of its local roots (by span id) started."""
    counts = options.counts
    counts["traces"] += 1
    by_id: dict[str, TraceSpan] = {}
    for span in spans:
        if span.span_id in by_id:  # exported twice (a retried batch): the first one counts
            counts["duplicate_spans"] = counts.get("duplicate_spans", 0) + 1
        else:
            by_id[span.span_id] = span
    children: dict[str | None, list[TraceSpan]] = {}
    for span in by_id.values():
        known = span.parent_id in by_id and span.parent_id != span.span_id
        if span.parent_id is not None and not known:  # its parent was not exported
            counts["orphan_spans"] = counts.get("orphan_spans", 0) + 1
        children.setdefault(span.parent_id if known else None, []).append(span)
    for group in children.values():
        group.sort(key=_START_END)
    roots: list[TraceSpan] = []
    pending = list(children.get(None, ()))
    while pending:  # the outermost spans of a root kind, looking through other spans
        span = pending.pop(0)
        if span.kind in options.root_kinds:
            roots.append(span)
        else:
            pending[:0] = children.get(span.span_id, ())
    if not roots:
        counts["no_run"] += 1
        return []
    framework = options.framework or _framework_of(spans)
    runs = [
        _run(
            root, children, config, options, _scope_of(root, by_id, scope, scopes), framework, by_id
        )
        for root in roots
    ]
    counts["runs"] += len(runs)
    return runs


def _run(
    root: TraceSpan,
    children: Mapping[str | None, list[TraceSpan]],
    config: CaptureConfig,
    options: Conversion,
    scope: Scope | None,
    framework: str | None,
    by_id: Mapping[str, TraceSpan],
) -> TraceRun:
    attrs = root.attributes
    meta = _json_object(attrs.get("metadata"))
    run = TraceRun(config, root, meta, scope)
    run.framework = framework
    run.user_input = _question(attrs, options.question_key)
    sample_id = _join(root, options.join_key, by_id) if options.join_key else None
    if sample_id is None and options.queries is not None and not (meta or {}).get("ragmeter_id"):
        sample_id = options.query_for(run.user_input)
    if options.join_key or options.queries is not None:
        options.counts["joined" if sample_id is not None else "not_joined"] += 1
    run.sample_id = sample_id
    answer = attrs.get("output.value")
    mime = attrs.get("output.mime_type")
    llm_answer = _walk(root, children, run, options, [])
    if isinstance(answer, str) and mime != "application/json" and not _looks_json(answer):
        run.response = answer
    elif llm_answer is not None:
        run.response = llm_answer
    else:
        run.response = _json_text(answer, _ANSWER_KEYS)
    if not run.stages:
        options.counts["no_retriever"] += 1
    if root.error is not None:
        run.error = root.error
    return run


def _scope_of(
    run: TraceSpan,
    by_id: Mapping[str, TraceSpan],
    scope: Scope | None,
    scopes: Mapping[str, Scope | None] | None,
) -> Scope | None:
    """The scope a run was started in: that of the local root above it (live capture)."""
    if not scopes:
        return scope
    span, seen = run, set()
    while span.parent_id in by_id and span.span_id not in seen:
        seen.add(span.span_id)
        span = by_id[span.parent_id]  # type: ignore[index]
    return scopes.get(span.span_id, scope)


def _join(root: TraceSpan, key: str, by_id: Mapping[str, TraceSpan]) -> str | None:
    """The join key's value on the run's span, else on the nearest span above it that has
    it (an HTTP request's span carrying ``session.id``)."""
    span: TraceSpan | None = root
    seen: set[str] = set()
    while span is not None and span.span_id not in seen:
        seen.add(span.span_id)
        found = _join_id(span.attributes, key)
        if found is not None:
            return found
        span = by_id.get(span.parent_id) if span.parent_id else None
    return None


def _walk(
    span: TraceSpan,
    children: Mapping[str | None, list[TraceSpan]],
    run: TraceRun,
    options: Conversion,
    enclosing: list[StageRecord],
    counted_tokens: bool = False,
    branch: tuple[tuple[int, str], ...] = (),
) -> str | None:
    """Add the stages and LLM calls under ``span``; the last LLM output text, if any.
    ``counted_tokens``: an enclosing LLM span reported token counts (a wrapper's span around
    the provider's own), so the ones inside are the same tokens. ``branch``: the arms of
    LangChain ``RunnableParallel`` forks the span runs in (steps in two arms of one fork ran
    side by side, whatever their times say; the adapter knows it the same way)."""
    answer: str | None = None
    fork = span.name.startswith("RunnableParallel")
    for child in children.get(span.span_id, ()):
        arm = (*branch, (int(span.span_id, 16), child.name)) if fork else branch
        stage = _stage_of(child, span, run, options, enclosing)
        if stage is not None and arm:
            stage.branch = arm
        counted = counted_tokens
        if child.kind == "LLM":
            text, has_counts = _llm(child, run, counted_tokens)
            counted = counted_tokens or has_counts
            answer = text if text is not None else answer
        if run.context is None and run.framework == "haystack":
            _haystack_context(child, run, options)
        below = [*enclosing, stage] if stage else enclosing
        inner = _walk(child, children, run, options, below, counted, arm)
        answer = inner if inner is not None else answer
    return answer


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
            documents = {"output": output or []}
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
    documents: Mapping[str, list[dict[str, Any]]],
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
        _finish_stage(stage, span, run, options, output or [], documents, marked, parent)
    stage.end = span.end / 1e9
    run.add_stage(stage)
    run.stage_spans[id(stage)] = span.span_id
    return stage


def _finish_stage(
    stage: StageRecord,
    span: TraceSpan,
    run: TraceRun,
    options: Conversion,
    output: list[dict[str, Any]],
    documents: Mapping[str, list[dict[str, Any]]],
    marked: bool,
    parent: StageRecord | None,
) -> None:
    if output and all(d.get("id") in (None, "") for d in output):
        fallback = _output_documents(span.attributes)  # LangChain: ids only in output.value
        if fallback is not None and len(fallback) == len(output):
            output = [{**d, "id": alt.get("id")} for d, alt in zip(output, fallback, strict=True)]
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


_REPR_ID = re.compile(r"^Document\(id=([^,)]+)")
_REPR_CONTENT = re.compile(r"content: '(.*?)'(?:, (?:meta|score|embedding)|\)$)", re.S)


def _output_documents(
    attrs: Mapping[str, Any], key: str | None = None
) -> list[dict[str, Any]] | None:
    """Documents in a span's JSON ``output.value``: a list of LangChain documents (``id``,
    ``page_content``, ``metadata``), or under ``"documents"``; Haystack writes each as its
    repr (``Document(id=d1, content: '...', ...)``)."""
    value = attrs.get("output.value")
    if not isinstance(value, str) or not _looks_json(value):
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if isinstance(data, Mapping):
        data = data.get(key or "documents")
    elif key is not None:
        return None
    if not isinstance(data, list):
        return None
    return _as_documents(data)


def _as_documents(items: Sequence[Any]) -> list[dict[str, Any]] | None:
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Mapping) and ("page_content" in item or "content" in item):
            text = item.get("page_content", item.get("content"))
            out.append({"id": item.get("id"), "content": text, "metadata": item.get("metadata")})
        elif isinstance(item, str) and item.startswith("Document("):
            ident = _REPR_ID.match(item)
            text = _REPR_CONTENT.search(item)
            out.append(
                {
                    "id": ident.group(1) if ident else None,
                    "content": text.group(1) if text else item,
                }
            )
        else:
            return None
    return out


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
    documents: list[dict[str, Any]], stages: Iterable[StageRecord], rule: DocIdRule
) -> StageRecord | None:
    """The earlier stage whose ranking a reranker was given (its documents, in order)."""
    ids = _ids_and_texts(documents, rule)[0]
    for stage in reversed(list(stages)):
        if stage.finished and stage.ids == ids:
            return stage
    return None


def _llm(span: TraceSpan, run: TraceRun, counted: bool) -> tuple[str | None, bool]:
    """The LLM span's output text, and whether it reported token counts (added to the run
    unless an enclosing LLM span already counted them)."""
    attrs = span.attributes
    prompt = _count(attrs.get("llm.token_count.prompt"))
    completion = _count(attrs.get("llm.token_count.completion"))
    has_counts = prompt is not None or completion is not None
    if has_counts and not counted:
        run.add_tokens(prompt, completion)
    model = attrs.get("llm.model_name")
    if isinstance(model, str) and model:
        run.model = model
    last: tuple[int, str] | None = None
    for key, value in attrs.items():
        match = _OUT_MESSAGE.match(key)
        if match and isinstance(value, str) and (last is None or int(match.group(1)) >= last[0]):
            last = (int(match.group(1)), value)
    if last is not None:
        return last[1], has_counts
    output = attrs.get("output.value")
    text = output if isinstance(output, str) and not _looks_json(output) else None
    return text, has_counts


def _count(value: Any) -> int | None:
    """A token count: a non-negative int (a float that is one, as a DataFrame with gaps
    holds it)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _documents(
    attrs: Mapping[str, Any],
    fields: tuple[str, ...] = ("id", "content", "metadata"),
    dropped: int = 0,
    expected: str = "retrieval.documents",
) -> tuple[dict[str, list[dict[str, Any]]], int]:
    """``{"retrieval.documents": [{"id": ..., "content": ...}, ...], ...}`` from flat keys
    (``retrieval.documents.3.document.id``), in position order, and how many positions are
    missing before the last one (a span whose first attributes were dropped by the SDK's
    attribute limit keeps only its last documents).

    Positions 0, 1, ... are looked up directly (the usual, complete case); a span that lost
    attributes (``dropped``), has documents past the first empty position, or none at the
    first position of its ``expected`` list while holding document keys, is read key by key
    instead."""
    if dropped:
        return _scan_documents(attrs, fields)
    found: dict[str, list[dict[str, Any]]] = {}
    get = attrs.get
    with_metadata = "metadata" in fields
    for name in _DOC_LISTS:
        ids, texts = _keys(name, "id"), _keys(name, "content")
        metas = _keys(name, "metadata")
        docs: list[dict[str, Any]] = []
        i = 0
        while True:
            if i + 3 > len(ids):
                _grow_keys(i + 3)
                ids, texts, metas = (
                    _keys(name, "id"),
                    _keys(name, "content"),
                    _keys(name, "metadata"),
                )
            ident, text = get(ids[i]), get(texts[i])
            meta = get(metas[i]) if with_metadata else None
            if ident is None and text is None and meta is None:
                break
            docs.append({"id": ident, "content": text, "metadata": meta})
            i += 1
        for later in (i + 1, i + 2):  # a gap: documents after an empty position
            if get(ids[later]) is not None or get(texts[later]) is not None:
                return _scan_documents(attrs, fields)
        if docs:
            found[name] = docs
    if expected not in found and any(key.startswith(_DOC_STARTS) for key in attrs):
        return _scan_documents(attrs, fields)  # no first position: a gap at the start?
    return found, 0


def _scan_documents(
    attrs: Mapping[str, Any], fields: tuple[str, ...]
) -> tuple[dict[str, list[dict[str, Any]]], int]:
    """:func:`_documents` by reading every key (positions with gaps)."""
    by_position: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attrs.items():
        if not key.startswith(_DOC_STARTS):
            continue
        for prefix, name in _DOC_PREFIXES:
            if key.startswith(prefix):
                index, _, part = key[len(prefix) :].partition(".document.")
                if part in fields and index.isdigit():
                    docs = by_position.setdefault(name, {})
                    docs.setdefault(int(index), {})[part] = value
                break
    out: dict[str, list[dict[str, Any]]] = {}
    missing = 0
    for name, docs in by_position.items():
        positions = sorted(docs)
        missing += positions[-1] + 1 - len(positions)
        out[name] = [docs[i] for i in positions]
    return out, missing


_DOC_LISTS = ("retrieval.documents", "reranker.output_documents", "reranker.input_documents")
_KEY_CACHE: dict[tuple[str, str], list[str]] = {}
_KEY_COUNT = [64]
"""How many positions' flat keys (``retrieval.documents.7.document.id``) are made, once."""


def _keys(name: str, part: str) -> list[str]:
    keys = _KEY_CACHE.get((name, part))
    if keys is None or len(keys) < _KEY_COUNT[0]:
        keys = _KEY_CACHE[name, part] = [
            f"{name}.{i}.document.{part}" for i in range(_KEY_COUNT[0])
        ]
    return keys


def _grow_keys(needed: int) -> None:
    while _KEY_COUNT[0] < needed:
        _KEY_COUNT[0] *= 2


_DOC_PREFIXES = (
    ("retrieval.documents.", "retrieval.documents"),
    ("reranker.output_documents.", "reranker.output_documents"),
    ("reranker.input_documents.", "reranker.input_documents"),
)
_DOC_STARTS = tuple(prefix for prefix, _ in _DOC_PREFIXES)


def _ids_and_texts(
    documents: Sequence[Mapping[str, Any]], rule: DocIdRule
) -> tuple[list[str | None], list[str], int]:
    texts = [
        text if (text := doc.get("content")).__class__ is str else _text(text) for doc in documents
    ]
    if rule is None or rule == "id":
        ids = [
            ident if (ident := doc.get("id")).__class__ is str and ident else _plain_id(ident)
            for doc in documents
        ]
    else:
        ids = [_doc_id(doc, rule) for doc in documents]
    hashed = 0 if rule == "content" else ids.count(None)
    return ids, texts, hashed


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _plain_id(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _doc_id(doc: Mapping[str, Any], rule: DocIdRule) -> str | None:
    if rule is None or rule == "id":
        value = doc.get("id")
    elif rule == "content":
        return None
    elif callable(rule):
        value = rule(doc)
    else:
        meta = _json_object(doc.get("metadata")) or {}
        value = _dotted(meta, rule[len("metadata.") :])
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def _question(attrs: Mapping[str, Any], key: str | None) -> str | None:
    return _text_of(attrs.get("input.value"), key)


def _text_of(value: Any, key: str | None) -> str | None:
    if not isinstance(value, str):
        return None if value is None else str(value)
    if not _looks_json(value):
        return value
    try:
        data = json.loads(value)
    except ValueError:
        return value
    if key is not None:
        found = _dotted(data, key)
        return found if isinstance(found, str) else None
    if isinstance(data, str):
        return data
    return _json_text(data, _QUESTION_KEYS)


def _json_text(value: Any, keys: Sequence[str]) -> str | None:
    """The first string under one of ``keys`` in ``value`` (JSON text or data), the shallowest
    first (breadth-first)."""
    if isinstance(value, str):
        if not _looks_json(value):
            return value
        try:
            value = json.loads(value)
        except ValueError:
            return str(value)
    stack = [value]
    while stack:
        item = stack.pop(0)
        if isinstance(item, Mapping):
            for key in keys:
                found = item.get(key)
                if isinstance(found, str):
                    return found
                if isinstance(found, list) and found and isinstance(found[-1], str):
                    return found[-1]
            stack.extend(v for v in item.values() if isinstance(v, (Mapping, list)))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, (Mapping, list)))
    return None


def _looks_json(text: str) -> bool:
    stripped = text.lstrip()
    return stripped[:1] in ("{", "[")


def _json_object(value: Any) -> dict[str, Any] | None:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str) and _looks_json(value):
        try:
            data = json.loads(value)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None
    return None


def _dotted(data: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def _join_id(attrs: Mapping[str, Any], key: str) -> str | None:
    """The sample id under ``key``: an attribute (``session.id``), or a dotted path into a
    JSON attribute (``metadata.query_id``: the longest attribute name that matches)."""
    value = attrs.get(key)
    if value is None:
        parts = key.split(".")
        for split in range(len(parts) - 1, 0, -1):
            name = ".".join(parts[:split])
            if name in attrs:
                value = _dotted(_json_object(attrs[name]), ".".join(parts[split:]))
                break
    if value is None or value == "":
        return None
    if isinstance(value, (list, tuple)):
        return str(value[0]) if value else None
    return str(value)
