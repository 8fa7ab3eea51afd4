"""Is the winner real? BM25 against a weaker variant, and against pure noise, on Cranfield.

Runs offline on the collection bundled with ragmeter (225 judged queries)::

    python examples/compare_bm25.py

* **weaker**: the BM25 run with each query's top 10 shuffled (deterministically, seeded by
  the query id). The relevant documents are still in the top 10, just in a worse order,
  so NDCG@10 drops: the paired test should call that significant.
* **noise**: the BM25 run with each pair of neighbours whose BM25 scores are within 1%
  swapped. BM25 cannot tell those documents apart, so this is the same system with a
  different tie-break: some queries go up, some go down, and the test should say the
  difference is not significant.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run
from ragmeter.evaluation.retrieval import evaluate_run
from ragmeter.io.trec import Run
from ragmeter.stats import CompareResult, compare, compare_many


def shuffled_top(run: Mapping[str, Sequence[str]], depth: int = 10) -> dict[str, list[str]]:
    """A weaker system: the top ``depth`` of every ranking in a fixed random order."""
    out = {}
    for qid, docs in run.items():
        top = list(docs[:depth])
        random.Random(qid).shuffle(top)  # seeded by the query id: the same every run
        out[qid] = top + list(docs[depth:])
    return out


def near_tie_swaps(run: Run, within: float = 0.01) -> dict[str, list[str]]:
    """The same system: swap neighbours whose scores differ by at most ``within`` (relative)."""
    out = {}
    for qid, docs in run.items():
        scores = run.scores[qid]
        ranked = list(docs)
        i = 0
        while i < len(ranked) - 1:
            hi, lo = scores[ranked[i]], scores[ranked[i + 1]]
            if abs(hi - lo) <= within * abs(hi):
                ranked[i], ranked[i + 1] = ranked[i + 1], ranked[i]
                i += 2
            else:
                i += 1
        out[qid] = ranked
    return out


def main() -> dict[str, CompareResult]:
    _, _, qrels = load_cranfield()
    bm25 = load_cranfield_bm25_run()
    reports = {
        "bm25": evaluate_run(qrels, bm25),
        "weaker": evaluate_run(qrels, shuffled_top(bm25)),
        "noise": evaluate_run(qrels, near_tie_swaps(bm25)),
    }

    # One pair at a time: b - a on NDCG@10, paired by query id.
    weaker = compare(reports["bm25"], reports["weaker"], label_a="bm25", label_b="weaker")
    noise = compare(reports["bm25"], reports["noise"], label_a="bm25", label_b="noise")
    print(weaker, end="\n\n")
    print(noise, end="\n\n")

    # Both against the baseline at once, with Holm–Bonferroni adjusted p-values.
    print(compare_many(reports, baseline="bm25"))
    return {"weaker": weaker, "noise": noise}


if __name__ == "__main__":
    main()
