"""ragmeter: trustworthy, offline metrics for RAG pipelines.

Retrieval numbers follow trec_eval's conventions to the last digit; answer metrics need
no LLM. See the README for the conventions table.
"""

from ragmeter._version import __version__
from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run
from ragmeter.errors import (
    DataFormatError,
    DuplicateDocumentError,
    InvalidInputError,
    MissingDependencyError,
    NoScorableQueriesError,
    RagmeterError,
    UnknownMetricError,
)
from ragmeter.evaluation.retrieval import evaluate_retrieval, evaluate_run, per_query
from ragmeter.io.beir import read_beir, write_beir
from ragmeter.io.trec import (
    Run,
    read_trec_qrels,
    read_trec_run,
    write_trec_qrels,
    write_trec_run,
)
from ragmeter.metrics.ranking import (
    average_precision,
    dcg_at_k,
    hit_rate_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
)
from ragmeter.metrics.registry import (
    METRICS,
    RETRIEVAL_METRICS,
    MetricRegistry,
    RetrievalMetric,
    available_metrics,
    get_metric,
)
from ragmeter.report import (
    Conventions,
    DistributionSummary,
    RagEvalReport,
    RetrievalEvalReport,
    WarningLog,
)

__all__ = [
    "Conventions",
    "DataFormatError",
    "DistributionSummary",
    "DuplicateDocumentError",
    "InvalidInputError",
    "METRICS",
    "MetricRegistry",
    "MissingDependencyError",
    "NoScorableQueriesError",
    "RETRIEVAL_METRICS",
    "RagEvalReport",
    "RagmeterError",
    "RetrievalEvalReport",
    "RetrievalMetric",
    "Run",
    "UnknownMetricError",
    "WarningLog",
    "__version__",
    "available_metrics",
    "average_precision",
    "dcg_at_k",
    "evaluate_retrieval",
    "evaluate_run",
    "get_metric",
    "hit_rate_at_k",
    "load_cranfield",
    "load_cranfield_bm25_run",
    "ndcg_at_k",
    "per_query",
    "precision_at_k",
    "read_beir",
    "read_trec_qrels",
    "read_trec_run",
    "recall_at_k",
    "reciprocal_rank",
    "write_beir",
    "write_trec_qrels",
    "write_trec_run",
]
