"""ragmeter for LlamaIndex: measure a query engine where it runs.

* :class:`RagmeterEventHandler` -- instrumentation capture: one
  :class:`~ragmeter.schema.RagSample` per top-level query or chat turn
  (``with handler.capture(id=qid):``, ``.run_dataset(engine, queries)``, ``.attach()``).
* :class:`RagmeterEvaluator` -- ragmeter's answer metrics as a ``BaseEvaluator``.
* :class:`RagmeterRetrievalMetric` -- trec_eval-exact retrieval metrics as a
  ``BaseRetrievalMetric`` for ``RetrieverEvaluator``.
* :func:`query_engine_retriever` -- an index or retriever as the callable
  :func:`ragmeter.evaluate_retrieval` runs.
* :func:`judge` -- any LlamaIndex LLM as the judge of ragmeter's LLM-judged metrics.
* :func:`embedder` -- any LlamaIndex ``BaseEmbedding`` as the model of ragmeter's
  embedding metrics.

Every number is computed by the ragmeter core; this package only translates.
"""

from __future__ import annotations

from ragmeter_llamaindex._embed import LlamaIndexEmbedder, embedder
from ragmeter_llamaindex._evaluator import RagmeterEvaluationResult, RagmeterEvaluator
from ragmeter_llamaindex._handler import RagmeterEventHandler
from ragmeter_llamaindex._judge import LlamaIndexJudge, judge
from ragmeter_llamaindex._metrics import RagmeterRetrievalMetric
from ragmeter_llamaindex._retriever import (
    check_doc_id,
    check_id_field,
    node_doc_id,
    query_engine_retriever,
)

__version__ = "0.1.0"

__all__ = [
    "LlamaIndexEmbedder",
    "LlamaIndexJudge",
    "RagmeterEvaluationResult",
    "RagmeterEvaluator",
    "RagmeterEventHandler",
    "RagmeterRetrievalMetric",
    "__version__",
    "check_doc_id",
    "check_id_field",
    "embedder",
    "judge",
    "node_doc_id",
    "query_engine_retriever",
]
