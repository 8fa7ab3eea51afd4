"""ragmeter for Haystack: trec_eval-exact evaluator components and pipeline capture.

* :class:`RagmeterRetrievalEvaluator` and :class:`RagmeterAnswerEvaluator` are Haystack
  ``@component`` evaluators (serialisable, usable in an evaluation ``Pipeline``).
* :class:`RagmeterTracer` is a Haystack tracer that records a
  :class:`ragmeter.schema.RagSample` per pipeline run, without wrapping ``run`` (pipelines
  loaded from YAML or served by Hayhooks too).
* :class:`RagmeterRecorder` wraps a RAG pipeline's ``run``/``run_async`` (a drop-in) and
  records a sample per run.
* :func:`spread_metrics` puts each ragmeter metric in its own ``EvaluationRunResult`` column.
* :func:`pipeline_retriever` turns a pipeline into the callable
  :func:`ragmeter.evaluation.retrieval.evaluate_retrieval` takes.
* :func:`judge` makes a Haystack chat generator the judge of ragmeter's LLM-judged metrics.
* :func:`embedder` makes a Haystack text or document embedder the model of ragmeter's
  embedding metrics.

Loading a saved pipeline that contains these components needs this package on Haystack's
deserialization allowlist (Haystack >= 3):
``Pipeline.loads(text, allowed_modules=["ragmeter_haystack"])`` or :func:`allow_deserialization`.
"""

from ragmeter_haystack._embed import HaystackEmbedder, embedder
from ragmeter_haystack._judge import HaystackJudge, judge
from ragmeter_haystack._recorder import RagmeterRecorder
from ragmeter_haystack._results import spread_metrics
from ragmeter_haystack._retriever import pipeline_retriever
from ragmeter_haystack._tracer import RagmeterTracer
from ragmeter_haystack.answer_evaluator import RagmeterAnswerEvaluator
from ragmeter_haystack.retrieval_evaluator import RagmeterRetrievalEvaluator

__all__ = [
    "ALLOWED_MODULES",
    "HaystackEmbedder",
    "HaystackJudge",
    "RagmeterAnswerEvaluator",
    "RagmeterRecorder",
    "RagmeterRetrievalEvaluator",
    "RagmeterTracer",
    "allow_deserialization",
    "embedder",
    "judge",
    "pipeline_retriever",
    "spread_metrics",
]

ALLOWED_MODULES: list[str] = ["ragmeter_haystack"]
"""What to pass as ``allowed_modules=`` to ``Pipeline.loads``/``load``/``from_dict``."""


def allow_deserialization() -> None:
    """Put ``ragmeter_haystack`` on Haystack's process-wide deserialization allowlist.

    Haystack 3 refuses to import a component class from a module outside its allowlist when
    loading a pipeline. Call this once (or pass ``allowed_modules=ALLOWED_MODULES`` per load,
    or set ``HAYSTACK_DESERIALIZATION_ALLOWLIST=ragmeter_haystack``). Haystack 2, which has
    no allowlist, needs nothing: the call does nothing there.
    """
    try:
        from haystack.core.serialization import allow_deserialization_module
    except ImportError:  # Haystack 2.x: no allowlist
        return
    allow_deserialization_module("ragmeter_haystack")
