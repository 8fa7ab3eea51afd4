"""LLM-judged metrics with any framework's model as the judge: cached, bounded, honest."""

from ragmeter.judge.cache import JudgeCache, cache_key, default_cache_path
from ragmeter.judge.holes import RelevanceGrade, find_holes, parse_grade
from ragmeter.judge.metrics import (
    AnswerRelevancy,
    Correctness,
    Faithfulness,
    JudgeMetric,
    VerdictError,
    parse_verdict,
)
from ragmeter.judge.protocol import (
    FunctionJudge,
    Judge,
    JudgeIdentityWarning,
    JudgeReply,
    Message,
    TransientJudgeError,
    clean_identity,
    function_fingerprint,
    is_transient,
)
from ragmeter.judge.runner import (
    JudgeEstimate,
    JudgeOptions,
    JudgeRun,
    arun_judges,
    estimate_judges,
    run_judges,
)

__all__ = [
    "AnswerRelevancy",
    "Correctness",
    "Faithfulness",
    "FunctionJudge",
    "Judge",
    "JudgeCache",
    "JudgeEstimate",
    "JudgeIdentityWarning",
    "JudgeMetric",
    "JudgeOptions",
    "JudgeReply",
    "JudgeRun",
    "Message",
    "RelevanceGrade",
    "TransientJudgeError",
    "VerdictError",
    "arun_judges",
    "cache_key",
    "clean_identity",
    "default_cache_path",
    "estimate_judges",
    "find_holes",
    "function_fingerprint",
    "is_transient",
    "parse_grade",
    "parse_verdict",
    "run_judges",
]
