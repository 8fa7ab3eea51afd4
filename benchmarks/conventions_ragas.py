"""Ragas' own retrieval-flavoured metrics on the worked example of ``docs/conventions.md``.

Ragas is heavy (LangChain, OpenAI client, datasets, ...) and no dependency of ragmeter, so
this script is run by hand from a separate virtual environment, never by pytest::

    python3 -m venv /tmp/ragas-venv
    /tmp/ragas-venv/bin/pip install ragas==0.4.3 rapidfuzz "langchain-community==0.4.1"
    /tmp/ragas-venv/bin/python benchmarks/conventions_ragas.py

It runs only Ragas' offline metrics (no LLM, no embeddings, no network):
``IDBasedContextPrecision``, ``IDBasedContextRecall`` (set-based, on ids) and
``NonLLMContextPrecisionWithReference`` (Ragas' rank-aware "context precision", an average
precision whose denominator is the relevant items *retrieved*, with relevance decided by
string similarity >= 0.5 to a reference context). It prints one markdown row per input and
the Ragas version, the numbers quoted in ``docs/conventions.md``.

(``langchain-community`` 0.4.2 dropped ``chat_models.vertexai``, which ``import ragas``
0.4.3 needs, hence the pin.)
"""

from __future__ import annotations

import asyncio
import logging
import math
import warnings
from importlib.metadata import version

# ragas 0.4.3 flags these imports as deprecated in favour of ragas.metrics.collections, which
# does not have them yet; keep the output readable.
warnings.filterwarnings("ignore", category=DeprecationWarning)

from ragas import EvaluationDataset, SingleTurnSample, evaluate  # noqa: E402
from ragas.metrics import (  # noqa: E402
    IDBasedContextPrecision,
    IDBasedContextRecall,
    NonLLMContextPrecisionWithReference,
)

# The worked example (same as tests/examples/test_conventions_example.py): graded qrels, grade 0
# for the judged non-relevant "n"; "u" is unjudged. Ragas has no grades: the reference
# contexts are the relevant docs (grade > 0).
QRELS = {"a": 2, "b": 1, "c": 1, "d": 1, "n": 0}
RANKED = ["n", "a", "u", "b", "c"]
REPEATED = ["n", "a", "a", "b", "c"]
K = 3

# Texts chosen so that different docs are far apart (normalised Levenshtein similarity
# < 0.5) and a doc matches only itself; NonLLMContextPrecisionWithReference needs texts.
TEXTS = {
    "a": "Paris is the capital and largest city of France.",
    "b": "The Eiffel Tower was completed in 1889 for a world fair.",
    "c": "Lyon sits where the Rhone meets the Saone river.",
    "d": "Marseille is a port on the Mediterranean coast.",
    "n": "Bananas are berries; strawberries, botanically, are not.",
    "u": "Quantum chromodynamics describes the strong interaction.",
}


def _fmt(x: float) -> str:
    return "NaN" if math.isnan(x) else f"{x:.4f}"


async def _scores(retrieved: list[str], reference: list[str]) -> tuple[float, float, float]:
    ids = SingleTurnSample(retrieved_context_ids=retrieved, reference_context_ids=reference)
    texts = SingleTurnSample(
        retrieved_contexts=[TEXTS[d] for d in retrieved],
        reference_contexts=[TEXTS[d] for d in reference],
    )
    precision = await IDBasedContextPrecision().single_turn_ascore(ids)
    recall = await IDBasedContextRecall().single_turn_ascore(ids)
    ap = await NonLLMContextPrecisionWithReference().single_turn_ascore(texts)
    return float(precision), float(recall), float(ap)


async def main() -> None:
    relevant = [d for d, g in QRELS.items() if g > 0]
    print(f"ragas {version('ragas')}; reference (relevant) ids: {relevant}")
    print("| input | IDBasedContextPrecision | IDBasedContextRecall | NonLLMContextPrecision |")
    print("| --- | --- | --- | --- |")
    cases = {
        f"top-{K} {RANKED[:K]}": RANKED[:K],
        f"full list {RANKED}": RANKED,
        f"repeated, top-{K} {REPEATED[:K]}": REPEATED[:K],
        f"repeated, full list {REPEATED}": REPEATED,
        "no relevant retrieved ['n', 'u']": ["n", "u"],
    }
    for label, retrieved in cases.items():
        p, r, ap = await _scores(retrieved, relevant)
        print(f"| {label} | {_fmt(p)} | {_fmt(r)} | {_fmt(ap)} |")
    # Edge cases for the conventions table: no reference ids, nothing retrieved.
    edge_no_ref = await IDBasedContextRecall().single_turn_ascore(
        SingleTurnSample(retrieved_context_ids=["a"], reference_context_ids=[])
    )
    edge_no_ret = await IDBasedContextPrecision().single_turn_ascore(
        SingleTurnSample(retrieved_context_ids=[], reference_context_ids=["a"])
    )
    print(f"no reference ids -> IDBasedContextRecall {_fmt(float(edge_no_ref))}")
    print(f"nothing retrieved -> IDBasedContextPrecision {_fmt(float(edge_no_ret))}")


def aggregate() -> None:
    """How ``ragas.evaluate`` averages: NaN scores are left out of the mean (nanmean)."""
    samples = [
        SingleTurnSample(
            retrieved_context_ids=RANKED[:K], reference_context_ids=["a", "b", "c", "d"]
        ),
        SingleTurnSample(retrieved_context_ids=[], reference_context_ids=["a"]),  # nothing back
        SingleTurnSample(retrieved_context_ids=["a"], reference_context_ids=[]),  # nothing relevant
    ]
    result = evaluate(
        EvaluationDataset(samples=samples),
        metrics=[IDBasedContextPrecision(), IDBasedContextRecall()],
        show_progress=False,
    )
    per_sample = result.to_pandas()[["id_based_context_precision", "id_based_context_recall"]]
    print("ragas.evaluate over [top-3 example, nothing retrieved, nothing relevant]:")
    print(per_sample.to_string())
    print(f"means: {result}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(main())
    aggregate()
