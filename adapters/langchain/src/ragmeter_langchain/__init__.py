"""ragmeter for LangChain: measure an existing chain without changing it.

>>> from ragmeter_langchain import RagmeterCallbackHandler
>>> handler = RagmeterCallbackHandler()
>>> # with handler.capture(id=qid, relevance=qrels[qid]):
>>> #     chain.invoke(question)
>>> # report = handler.run_dataset(chain, queries, qrels=qrels)
>>> handler.samples
[]
"""

from ragmeter_langchain._convert import document_id
from ragmeter_langchain._embed import LangChainEmbedder, embedder
from ragmeter_langchain._handler import RagmeterCallbackHandler
from ragmeter_langchain._judge import LangChainJudge, judge
from ragmeter_langchain._retriever import as_retriever_fn
from ragmeter_langchain._stage import StageMarker, stage

__version__ = "0.1.0"

__all__ = [
    "LangChainEmbedder",
    "LangChainJudge",
    "RagmeterCallbackHandler",
    "StageMarker",
    "__version__",
    "as_retriever_fn",
    "document_id",
    "embedder",
    "judge",
    "stage",
]
