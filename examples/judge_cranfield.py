"""LLM-judged metrics on Cranfield RAG samples, with each framework's model as the judge.

Builds RAG samples from the bundled Cranfield collection (question, the top-3 documents of
the bundled BM25 run as contexts, an extractive answer, the first sentence of the most
relevant document as the reference), then scores ``Faithfulness``, ``AnswerRelevancy``
and ``Correctness`` with a judge model from each framework:

* LangChain: a chat model (``ragmeter_langchain.judge(chat_model)``);
* LlamaIndex: ``MockLLM`` (``ragmeter_llamaindex.judge(llm)``);
* Haystack: ``MockChatGenerator`` (``ragmeter_haystack.judge(chat_generator)``).

The models are offline stand-ins that all answer with the same deterministic verdict
(the share of the answer's words found in the rest of the prompt), so the three frameworks
must agree. Each framework's evaluation runs twice against one cache: the first run sends
every judge call, the second is served entirely from the cache (``judge_calls 0``) and
gives the same numbers. Swap in ``ChatOpenAI``, ``OpenAI`` or ``OpenAIChatGenerator`` for
real use: nothing else changes.

    python examples/judge_cranfield.py                      # 5 queries, a temporary cache
    python examples/judge_cranfield.py --queries 20 --cache judge-cache.sqlite
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage
from langchain_core.language_models.chat_models import SimpleChatModel
from langchain_core.messages import BaseMessage
from llama_index.core.llms import MockLLM
from ragmeter_haystack import judge as haystack_judge
from ragmeter_langchain import judge as langchain_judge
from ragmeter_llamaindex import judge as llamaindex_judge

from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run
from ragmeter.evaluation.rag import evaluate_rag
from ragmeter.judge import AnswerRelevancy, Correctness, Faithfulness, Judge, JudgeOptions
from ragmeter.report import RagEvalReport
from ragmeter.schema import RagSample

TOP_K = 3
_WORD = re.compile(r"[a-z0-9]+")
# fmt: off
_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "how", "in",
    "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "what",
    "which", "with",
})
# fmt: on


# --------------------------------------------------------------------------- samples


def _sentences(text: str) -> list[str]:
    """Cranfield texts are ``title .\\ntitle . body``: the body's sentences."""
    body = text.split("\n", 1)[-1]
    return [s.strip() + " ." for s in body.split(" . ") if len(s.split()) > 3]


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def cranfield_samples(n_queries: int = 5) -> list[RagSample]:
    """RAG samples for the first ``n_queries`` Cranfield queries (by BM25 run order)."""
    corpus, queries, qrels = load_cranfield()
    run = load_cranfield_bm25_run()
    samples = []
    for qid in list(run)[:n_queries]:
        question = queries[qid]
        top = run[qid][:TOP_K]
        contexts = [corpus[d] for d in top]
        # Extractive answer: the retrieved sentence sharing the most words with the question.
        asked = _words(question)
        candidates = [s for c in contexts for s in _sentences(c)]
        answer = max(candidates, key=lambda s: len(asked & _words(s)))
        best = max(qrels[qid].items(), key=lambda item: (item[1], -int(item[0])))[0]
        samples.append(
            RagSample(
                id=f"cranfield-{qid}",
                user_input=question,
                response=answer,
                retrieved_contexts=contexts,
                retrieved_ids=top,
                relevance=qrels[qid],
                reference=_sentences(corpus[best])[0],
            )
        )
    return samples


# --------------------------------------------------------------------------- fake judges


def fake_verdict(prompt: str) -> str:
    """A deterministic stand-in for a judge model: the share of the answer's words that
    appear in the rest of the prompt (contexts, question or reference), as a JSON verdict."""
    before, _, after = prompt.partition("Answer:\n")
    answer = after.split("\n\n", 1)[0]
    words = _words(answer)
    found = words & _words(before)
    score = round(len(found) / len(words), 2) if words else 0.0
    return json.dumps({"score": score, "reason": f"{len(found)} of {len(words)} words found"})


class VerdictChatModel(SimpleChatModel):
    """A LangChain chat model (LangChain's own ``SimpleChatModel`` base) answering verdicts."""

    @property
    def _llm_type(self) -> str:
        return "fake-verdict"

    def _call(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> str:
        return fake_verdict(str(messages[-1].content))


def _last_text(messages: Sequence[Any]) -> str:
    return fake_verdict(str(getattr(messages[-1], "content", "")))


def haystack_verdict(messages: list[ChatMessage]) -> str:
    """``MockChatGenerator(response_fn=...)``: reply with the verdict for the prompt."""
    return fake_verdict(messages[-1].text or "")


def framework_judges() -> dict[str, Judge]:
    """One judge per framework, each wrapping that framework's (fake) model."""
    return {
        "LangChain (VerdictChatModel)": langchain_judge(VerdictChatModel()),
        # MockLLM echoes its prompt; messages_to_prompt makes that prompt the verdict.
        "LlamaIndex (MockLLM)": llamaindex_judge(MockLLM(messages_to_prompt=_last_text)),
        "Haystack (MockChatGenerator)": haystack_judge(
            MockChatGenerator(response_fn=haystack_verdict, model="fake-verdict")
        ),
    }


# --------------------------------------------------------------------------- main


def evaluate(samples: list[RagSample], judge: Judge, cache: Path) -> RagEvalReport:
    return evaluate_rag(
        samples,
        metrics=[
            "token_f1",
            "ndcg",
            Faithfulness(judge=judge),
            AnswerRelevancy(judge=judge),
            Correctness(judge=judge),
        ],
        k_values=TOP_K,
        judge_cache=cache,
        judge_options=JudgeOptions(concurrency=4, timeout=30),
    )


def main(argv: Sequence[str] | None = None) -> dict[str, list[RagEvalReport]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--queries", type=int, default=5, help="Cranfield queries (default 5)")
    parser.add_argument("--cache", type=Path, help="judge cache file (default: a temp dir)")
    args = parser.parse_args(argv)

    samples = cranfield_samples(args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or Path(tmp) / "judge-cache.sqlite"
        print(f"Cranfield RAG samples: {len(samples)} queries, top-{TOP_K} BM25 contexts")
        print(f"judge cache: {cache}")
        results: dict[str, list[RagEvalReport]] = {}
        for name, judge in framework_judges().items():
            print(f"\n=== {name} ===")
            reports = []
            for attempt in (1, 2):
                report = evaluate(samples, judge, cache)
                reports.append(report)
                print(
                    f"--- run {attempt}: judge_calls={report.judge_calls} "
                    f"judge_cache_hits={report.judge_cache_hits}"
                )
                print(report.to_text())
            first, second = reports
            from_cache = second.judge_calls == 0 and second.judge_cache_hits == (
                first.judge_calls + first.judge_cache_hits
            )
            print(
                f"second run served entirely from the cache: {from_cache}; "
                f"same numbers: {first.per_sample == second.per_sample}"
            )
            results[name] = reports
    judged = [reports[0].per_sample for reports in results.values()]
    print(f"\nall three frameworks' judges agree: {all(p == judged[0] for p in judged)}")
    return results


if __name__ == "__main__":
    main()
