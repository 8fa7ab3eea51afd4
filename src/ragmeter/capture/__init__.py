"""What every framework adapter shares: scoped ids, the compact run record, the sample store.

Adapters only translate framework events into a :class:`RunRecord` (what a run asked,
retrieved and answered, held as references); storing, building the
:class:`~ragmeter.schema.RagSample` when it is first read, joining to qrels, draining,
writing JSONL and running a dataset happen here, and scoring goes through
:func:`ragmeter.evaluation.captured.evaluate_captured` (its rules are in
:mod:`ragmeter.evaluation.capture_rules`), identically for LangChain, Haystack and
LlamaIndex. A user who switches framework keeps ``.samples``, ``.drain()``, ``.to_run()``,
``.clear()``, ``.to_jsonl()``, ``.evaluate()``, ``.evaluate_retrieval()``,
``.capture(...)`` and ``.run_dataset(...)`` (:class:`StoreFront`).

**Stages.** Every captured sample keeps each step of the run that produced a ranking as a
named stage (each retriever call, a fusion, a reranker or postprocessor, a step the user
marked) and ``context``, the documents that reached the generator, which is what
``retrieved_ids`` holds and what is scored unless another stage is named (``stage=``).
Where the framework shows what reached the generator (Haystack: the prompt builder's
documents; LlamaIndex: the response's source nodes) that is the context; elsewhere one
rule (:func:`infer_context`) picks the last outermost stage, and when none can be
identified (two retrievers run in parallel and fused in plain Python) the sample says so
and the report counts it: never a pick that depends on thread timing.
``evaluate_retrieval(qrels, stages=True)`` scores every stage side by side
(:func:`ragmeter.stages.evaluate_stages`).

**Scoped ids.** ``with capture(id=qid, relevance=qrels[qid], reference=answer):`` gives
every top-level run started inside the block (in this thread or asyncio task: the scope is
a :class:`~contextvars.ContextVar`) that sample id and ground truth, in every adapter.
``handler.capture(...)`` is that handler's own scope: other observers do not see it, so
several handlers, tracers and event handlers can be attached at once, nested or side by
side, each with its own ids. ``propagate(fn)`` carries the open scopes into worker
threads. The frameworks' own ways still work: a run's metadata wins over a scope of every
observer's (``ragmeter.capture.capture``), a handler's own scope wins over the run's
metadata. The metadata keys a user can pass with a run (``config["metadata"]`` in
LangChain, ``metadata=`` in Haystack, ``instrument_tags`` in LlamaIndex):

=========================  ==================================================
``ragmeter_id``            the sample id (joins captured samples to qrels)
``ragmeter_reference``     the ground-truth answer (``reference``)
``ragmeter_references``    further acceptable answers (``references``)
``ragmeter_reference_ids`` relevant doc ids (``reference_ids``)
``ragmeter_relevance``     graded relevance ``{doc_id: grade}``
=========================  ==================================================

With ``record="tagged"`` an adapter records only runs that carry a sample id (a scope's,
or one of the above); ``"all"`` (the default) records every top-level run.

**Cheap capture.** While a pipeline runs, an adapter only keeps references (the documents'
ids and texts, the answer, timings; never the framework's own objects) in a
:class:`RunRecord`. Content hashes for documents without an id, JSON-safety of run
metadata, naming the stages and finding the context, and validation all happen in
:meth:`RunRecord.to_sample` when the sample is read; the record holds the built sample
only weakly, so reading samples does not grow the store.

Rules every adapter follows when captured samples are scored (no silent wrong number):

* **Repeated sample ids.** Every captured sample is scored. The second and later samples
  with one id are keyed ``"<id>#2"``, ``"<id>#3"``... in :meth:`SampleStore.to_run`,
  :meth:`~SampleStore.to_qrels` and ``evaluate_rag``'s ``per_sample`` alike, and
  :meth:`SampleStore.evaluate_retrieval` judges each against the qrels of ``<id>``; the
  report warns with the counts.
* **Failed runs.** A sample whose run raised before a ranking was captured (``error`` set,
  ``retrieved_ids`` ``None``) is reported apart (``report.extra["capture"]["failed"]`` and
  a warning) and scores 0 (``failed_queries="zero"``) or is left out
  (``failed_queries="skip"``). A judged query never captured follows ``missing_queries``
  (the deprecated ``only_captured=True`` is ``missing_queries="skip"``).
* **Forgotten ids.** When no captured sample id is a qrels query id the scoring is refused;
  when most are not, or when no (or few) retrieved doc ids appear in the qrels, the report
  warns and the adapter's logger logs it, naming the option that fixes it in that
  framework (:class:`Hints`).
* **No context.** A sample with several stages and none identifiable as the context has
  no ranking (``retrieved_ids`` is ``None``); it scores 0 and the report counts it in a
  warning that names the stages and the framework's fix.
* **Dropped samples.** A store bounded by ``max_samples`` that dropped samples says so
  on every report scored from it.

The package's modules, each importable on its own: ``_ids`` (ids, metadata keys, assembling
a sample), ``_rules`` (the options every adapter shares; the scoring rules and the
:class:`Hints` that name each framework's fix come from
:mod:`ragmeter.evaluation.capture_rules`), ``_scope`` (scoped ids), ``_stages`` (the steps
that produced rankings, and the context), ``_record`` (the compact run record), ``_store``
(the store, its views and drain), ``_front`` (the surface every adapter shares),
``_dataset`` (running a dataset).
"""

from __future__ import annotations

import logging

from ragmeter.capture._dataset import (
    Dataset,
    DatasetItem,
    DatasetJob,
    DatasetReport,
    load_dataset,
    prepare_dataset,
)
from ragmeter.capture._front import Attachment, DatasetFront, StoreFront
from ragmeter.capture._ids import (
    ID_KEY,
    METADATA_FIELDS,
    content_doc_id,
    describe,
    fields_from_metadata,
    jsonable,
    run_metadata,
    validated_sample,
)
from ragmeter.capture._record import NO_CONTEXT, CaptureConfig, RunRecord
from ragmeter.capture._rules import (
    FAILED_QUERIES,
    RECORD,
    RETRIEVAL,
    DocIdOption,
    FailedQueries,
    Hints,
    IdWatch,
    ProblemLog,
    Record,
    Retrieval,
    check_record,
    check_retrieval,
    check_stage,
    deprecated_option,
    deprecated_selection,
    doc_id_problem,
    sample_id_problem,
)
from ragmeter.capture._scope import Scope, capture, current_scope, propagate, scope_for
from ragmeter.capture._stages import (
    CallLike,
    CallRecord,
    StageRecord,
    call_record,
    frontier,
    infer_context,
    ranking,
    select_calls,
    stage_list,
    stage_names,
    timing_decides_order,
)
from ragmeter.capture._store import SampleStore, SampleView, missing_rule
from ragmeter.schema import sample_keys

__all__ = [
    "FAILED_QUERIES",
    "ID_KEY",
    "METADATA_FIELDS",
    "NO_CONTEXT",
    "RECORD",
    "RETRIEVAL",
    "Attachment",
    "CallLike",
    "CallRecord",
    "CaptureConfig",
    "Dataset",
    "DatasetFront",
    "DatasetItem",
    "DatasetJob",
    "DatasetReport",
    "DocIdOption",
    "FailedQueries",
    "Hints",
    "IdWatch",
    "ProblemLog",
    "Record",
    "Retrieval",
    "RunRecord",
    "SampleStore",
    "SampleView",
    "Scope",
    "StageRecord",
    "StoreFront",
    "call_record",
    "capture",
    "check_record",
    "check_retrieval",
    "check_stage",
    "content_doc_id",
    "current_scope",
    "deprecated_option",
    "deprecated_selection",
    "describe",
    "doc_id_problem",
    "fields_from_metadata",
    "frontier",
    "infer_context",
    "jsonable",
    "load_dataset",
    "missing_rule",
    "prepare_dataset",
    "propagate",
    "ranking",
    "run_metadata",
    "sample_id_problem",
    "sample_keys",
    "scope_for",
    "select_calls",
    "stage_list",
    "stage_names",
    "timing_decides_order",
    "validated_sample",
]

logger = logging.getLogger("ragmeter")
logger.addHandler(logging.NullHandler())
