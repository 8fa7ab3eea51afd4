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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from ragmeter.capture import (
    CaptureConfig,
    RunRecord,
    Scope,
    StageRecord,
)
from ragmeter.io.otel import TraceSpan
from ragmeter.schema import RagSample
from ragmeter.traces._documents import (
    DocIdRule,
)
from ragmeter.traces._json import (
    _join_id,
    _json_object,
    _json_text,
    _looks_json,
    _text_of,
)
from ragmeter.traces._sample import quick_sample
from ragmeter.traces._stages import _haystack_context, _stage_of

__all__ = ["Conversion", "TraceRun", "runs_of_trace"]


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

    def fresh_sample(self) -> RagSample:
        """A new sample of the run (see :meth:`RunRecord.fresh_sample`), made without
        validating again what :func:`~ragmeter.traces._sample.quick_sample` checked."""
        sample = quick_sample(self)
        return sample if sample is not None else super().fresh_sample()

    def framework_fields(
        self,
        fields: dict[str, Any],
        chosen: Sequence[StageRecord],
        pairs: Sequence[tuple[str, str]],
        names: Mapping[int, str],
    ) -> None:
        """Each stage's span id (``metadata["stage_span_ids"]``, by stage name), where
        per-document scores are written back, and for a stage whose span repeated a doc id
        (several chunks of one document) the span position of each id in ``ids``
        (``metadata["stage_positions"]``)."""
        self.stage_fields(fields, names)

    def stage_fields(
        self,
        fields: dict[str, Any],
        names: Mapping[int, str],
        firsts: Mapping[int, list[str] | None] | None = None,
    ) -> None:
        """:meth:`framework_fields`' work; ``firsts``: each stage's ids once (by ``id()`` of
        its record), where the caller has them already."""
        if not self.stage_spans:
            return
        spans: dict[str, str] = {}
        positions: dict[str, list[int]] = {}
        for stage in self.stages:
            span_id = self.stage_spans.get(id(stage))
            if span_id is None:
                continue
            name = names[id(stage)]
            spans[name] = span_id
            ids = stage.ids or []
            first = firsts.get(id(stage)) if firsts is not None else None
            if first is None:
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
    if scope in _SCOPES:
        return _SCOPES[scope]
    found = None
    if scope.startswith("openinference.instrumentation."):
        name = scope.rsplit(".", 1)[-1]
        found = _FRAMEWORKS.get(name, name)
    if len(_SCOPES) < 256:
        _SCOPES[scope] = found
    return found


_SCOPES: dict[str, str | None] = {}
"""The framework of each instrumentation scope seen (a trace's first span names one)."""


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
        if len(group) > 1:
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
        if child.span_id not in children:
            continue  # a leaf: nothing below it
        below = [*enclosing, stage] if stage else enclosing
        inner = _walk(child, children, run, options, below, counted, arm)
        answer = inner if inner is not None else answer
    return answer


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
        if not key.startswith("llm.output_messages."):
            continue
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


def _question(attrs: Mapping[str, Any], key: str | None) -> str | None:
    return _text_of(attrs.get("input.value"), key)
