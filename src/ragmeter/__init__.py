"""ragmeter: trustworthy, offline metrics for RAG pipelines.

Retrieval numbers follow trec_eval's conventions to the last digit; answer metrics need
no LLM. See the README for the conventions table.
"""

from ragmeter._version import __version__
from ragmeter.capture import SampleStore, content_doc_id
from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run
from ragmeter.errors import (
    DataFormatError,
    DuplicateDocumentError,
    InvalidInputError,
    JudgeCacheError,
    MissingDependencyError,
    NoSamplesError,
    NoScorableQueriesError,
    RagmeterError,
    UnknownMetricError,
)
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.evaluation.retrieval import (
    evaluate_retrieval,
    evaluate_run,
    evaluate_run_file,
    per_query,
)
from ragmeter.io import read_qrels
from ragmeter.io.arrow import read_parquet
from ragmeter.io.beir import read_beir, write_beir
from ragmeter.io.jsonl import JsonlReader, read_jsonl, write_jsonl
from ragmeter.io.scores import read_scores, write_scores
from ragmeter.io.trec import (
    Run,
    iter_trec_run,
    parse_trec_run,
    read_trec_qrels,
    read_trec_run,
    write_trec_qrels,
    write_trec_run,
)
from ragmeter.judge import (
    AnswerRelevancy,
    Correctness,
    Faithfulness,
    FunctionJudge,
    Judge,
    JudgeCache,
    JudgeMetric,
    JudgeOptions,
    JudgeReply,
    Message,
    TransientJudgeError,
    estimate_judges,
)
from ragmeter.metrics.ann import Scored, mean_rank_of_first_relevant, recall_against_exact
from ragmeter.metrics.base import RAG_METRICS, RagMetric
from ragmeter.metrics.faithfulness import extract_claims, faithfulness
from ragmeter.metrics.grounding import (
    DEFAULT_ABSTENTION_PHRASES,
    Answer,
    AnswerScore,
    AssembledContext,
    groundedness,
    is_abstention,
    score_answer,
)
from ragmeter.metrics.lexical import context_precision, context_recall, exact_match, token_f1
from ragmeter.metrics.operational import CostUSD, LatencyMs, TotalTokens, cost_usd
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
from ragmeter.ragas_bridge import as_ragas_dataset
from ragmeter.report import (
    Conventions,
    DistributionSummary,
    RagEvalReport,
    RetrievalEvalReport,
    WarningLog,
)
from ragmeter.schema import RagSample
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
from ragmeter.text import normalize_answer

__all__ = [
    "DEFAULT_ABSTENTION_PHRASES",
    "METRICS",
    "RAG_METRICS",
    "RETRIEVAL_METRICS",
    "Answer",
    "AnswerRelevancy",
    "AnswerScore",
    "AssembledContext",
    "Chunk",
    "CompareResult",
    "ComparisonTable",
    "Conventions",
    "Correctness",
    "CostUSD",
    "DataFormatError",
    "DistributionSummary",
    "DuplicateDocumentError",
    "EvalItem",
    "Faithfulness",
    "FunctionJudge",
    "GateResult",
    "GoldSpan",
    "InvalidInputError",
    "JsonlReader",
    "Judge",
    "JudgeCache",
    "JudgeCacheError",
    "JudgeMetric",
    "JudgeOptions",
    "JudgeReply",
    "LatencyMs",
    "Message",
    "MetricRegistry",
    "MissingDependencyError",
    "NoSamplesError",
    "NoScorableQueriesError",
    "RagEvalReport",
    "RagMetric",
    "RagSample",
    "RagmeterError",
    "RetrievalEvalReport",
    "RetrievalMetric",
    "Run",
    "SampleStore",
    "Scored",
    "Span",
    "TotalTokens",
    "TransientJudgeError",
    "UnknownMetricError",
    "WarningLog",
    "__version__",
    "as_ragas_dataset",
    "available_metrics",
    "average_precision",
    "character_f1",
    "character_precision",
    "character_recall",
    "compare",
    "compare_many",
    "content_doc_id",
    "context_precision",
    "context_recall",
    "cost_usd",
    "coverage_fraction",
    "dcg_at_k",
    "estimate_judges",
    "evaluate_rag",
    "evaluate_retrieval",
    "evaluate_run",
    "evaluate_run_file",
    "exact_match",
    "extract_claims",
    "faithfulness",
    "gate",
    "get_metric",
    "gold_coverage_by_chunk",
    "groundedness",
    "hit_rate_at_k",
    "holm_bonferroni",
    "is_abstention",
    "iter_trec_run",
    "load_cranfield",
    "load_cranfield_bm25_run",
    "mean_rank_of_first_relevant",
    "merge_spans",
    "ndcg_at_k",
    "normalize_answer",
    "parse_trec_run",
    "per_query",
    "precision_at_k",
    "read_beir",
    "read_jsonl",
    "read_parquet",
    "read_qrels",
    "read_scores",
    "read_trec_qrels",
    "read_trec_run",
    "recall_against_exact",
    "recall_at_k",
    "reciprocal_rank",
    "retrieved_character_count",
    "score_answer",
    "span_qrels",
    "token_f1",
    "write_beir",
    "write_jsonl",
    "write_scores",
    "write_trec_qrels",
    "write_trec_run",
]
