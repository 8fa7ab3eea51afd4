"""What every framework adapter shares: scoped ids, the compact run record, the sample store.

Adapters only translate framework events into a :class:`RunRecord` (what a run asked,
retrieved and answered, held as references); storing, building the
:class:`~ragmeter.schema.RagSample` when it is first read, joining to qrels, draining,
writing JSONL, running a dataset and scoring happen here, identically for LangChain,
Haystack and LlamaIndex. A user who switches framework keeps ``.samples``, ``.drain()``,
``.to_run()``, ``.clear()``, ``.to_jsonl()``, ``.evaluate()``, ``.evaluate_retrieval()``,
``.capture(...)`` and ``.run_dataset(...)`` (:class:`StoreFront`).

**Scoped ids.** ``with capture(id=qid, relevance=qrels[qid], reference=answer):`` gives
every top-level run started inside the block (in this thread or asyncio task: the scope is
a :class:`~contextvars.ContextVar`) that sample id and ground truth, in every adapter.
The frameworks' own ways still work and win over the scope; the metadata keys a user can
pass with a run (``config["metadata"]`` in LangChain, ``metadata=`` in Haystack,
``instrument_tags`` in LlamaIndex):

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
ids and texts, the answer, timings) in a :class:`RunRecord`. Content hashes for documents
without an id, JSON-safety of run metadata, choosing among several retriever calls and
validation all happen in :meth:`RunRecord.to_sample`, once, when the sample is first read.

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
  (``only_captured=True`` is ``missing_queries="skip"``).
* **Forgotten ids.** When no captured sample id is a qrels query id the scoring is refused;
  when most are not, or when no (or few) retrieved doc ids appear in the qrels, the report
  warns and the adapter's logger logs it, naming the option that fixes it in that
  framework (:class:`Hints`).
* **Several retriever calls.** :func:`select_calls` picks the ranking a sample scores
  (``"last"``, ``"first"`` or ``"merge"``, or the calls of one named retriever) and notes
  when the pick depends on thread timing (calls that ran concurrently).

The package's modules, each importable on its own: ``_ids`` (ids, metadata keys, assembling
a sample), ``_rules`` (options, warnings that name each framework's fix), ``_scope``
(scoped ids), ``_calls`` (retriever calls and which one a sample scores), ``_record`` (the
compact run record), ``_store`` (the store, its views and drain), ``_front`` (the surface
every adapter shares), ``_dataset`` (running a dataset).
"""

from __future__ import annotations

import logging

from ragmeter.capture._calls import CallLike, CallRecord, call_record, ranking, select_calls
from ragmeter.capture._dataset import (
    Dataset,
    DatasetItem,
    DatasetJob,
    DatasetReport,
    load_dataset,
    prepare_dataset,
)
from ragmeter.capture._front import DatasetFront, StoreFront
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
from ragmeter.capture._record import CaptureConfig, RunRecord
from ragmeter.capture._rules import (
    FAILED_QUERIES,
    RECORD,
    RETRIEVAL,
    FailedQueries,
    Hints,
    IdWatch,
    ProblemLog,
    Record,
    Retrieval,
    check_record,
    check_retrieval,
    deprecated_option,
    doc_id_problem,
    sample_id_problem,
)
from ragmeter.capture._scope import Scope, capture, current_scope
from ragmeter.capture._store import SampleStore, SampleView
from ragmeter.schema import sample_keys

__all__ = [
    "FAILED_QUERIES",
    "ID_KEY",
    "METADATA_FIELDS",
    "RECORD",
    "RETRIEVAL",
    "CallLike",
    "CallRecord",
    "CaptureConfig",
    "Dataset",
    "DatasetFront",
    "DatasetItem",
    "DatasetJob",
    "DatasetReport",
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
    "StoreFront",
    "call_record",
    "capture",
    "check_record",
    "check_retrieval",
    "content_doc_id",
    "current_scope",
    "deprecated_option",
    "describe",
    "doc_id_problem",
    "fields_from_metadata",
    "jsonable",
    "load_dataset",
    "prepare_dataset",
    "ranking",
    "run_metadata",
    "sample_id_problem",
    "sample_keys",
    "select_calls",
    "validated_sample",
]

logger = logging.getLogger("ragmeter")
logger.addHandler(logging.NullHandler())
