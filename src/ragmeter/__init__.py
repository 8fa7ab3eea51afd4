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
from ragmeter.metrics.ann import Scored, mean_rank_of_first_relevant, recall_against_exact
from ragmeter.metrics.grounding import (
    DEFAULT_ABSTENTION_PHRASES,
    Answer,
    AnswerScore,
    AssembledContext,
    groundedness,
    is_abstention,
    score_answer,
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
from ragmeter.spans import (
    Chunk,
    EvalItem,
    GoldSpan,
    Span,
    character_f1,
    character_precision,
    character_recall,
    coverage_fraction,
    gold_coverage_by_chunk,
    merge_spans,
    retrieved_character_count,
    span_qrels,
)
from ragmeter.stats import (
    CompareResult,
    ComparisonTable,
    GateResult,
    compare,
    compare_many,
    gate,
    holm_bonferroni,
)

__all__ = [
    "DEFAULT_ABSTENTION_PHRASES",
    "METRICS",
    "RETRIEVAL_METRICS",
    "Answer",
    "AnswerScore",
    "AssembledContext",
    "Chunk",
    "CompareResult",
    "ComparisonTable",
    "Conventions",
    "DataFormatError",
    "DistributionSummary",
    "DuplicateDocumentError",
    "EvalItem",
    "GateResult",
    "GoldSpan",
    "InvalidInputError",
    "MetricRegistry",
    "MissingDependencyError",
    "NoScorableQueriesError",
    "RagEvalReport",
    "RagmeterError",
    "RetrievalEvalReport",
    "RetrievalMetric",
    "Run",
    "Scored",
    "Span",
    "UnknownMetricError",
    "WarningLog",
    "__version__",
    "available_metrics",
    "average_precision",
    "character_f1",
    "character_precision",
    "character_recall",
    "compare",
    "compare_many",
    "coverage_fraction",
    "dcg_at_k",
    "evaluate_retrieval",
    "evaluate_run",
    "gate",
    "get_metric",
    "gold_coverage_by_chunk",
    "groundedness",
    "hit_rate_at_k",
    "holm_bonferroni",
    "is_abstention",
    "load_cranfield",
    "load_cranfield_bm25_run",
    "mean_rank_of_first_relevant",
    "merge_spans",
    "ndcg_at_k",
    "per_query",
    "precision_at_k",
    "read_beir",
    "read_trec_qrels",
    "read_trec_run",
    "recall_against_exact",
    "recall_at_k",
    "reciprocal_rank",
    "retrieved_character_count",
    "score_answer",
    "span_qrels",
    "write_beir",
    "write_trec_qrels",
    "write_trec_run",
]
