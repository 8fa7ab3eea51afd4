"""``ragmeter.metrics.trec.evaluate(..., ["all_trec"])`` against pytrec_eval, same measures.

Both libraries get the same synthetic qrels and ``{doc: score}`` run (``bench_retrieval``'s
generator: 10,000 queries x 100 docs by default) and compute every measure of trec_eval's
``all_trec`` set that pytrec_eval supports, per query; the script checks that the values
agree and prints each library's CPU time (best of ``--repeat``) and the ratio.

    python benchmarks/bench_trec_measures.py [--queries 10000] [--depth 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

from bench_retrieval import make_data

from ragmeter.metrics.trec import NICKNAMES, evaluate


def _cpu(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = math.inf, None
    for _ in range(repeat):
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
    return best, out


def main() -> None:
    import pytrec_eval

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    qrels, _, scored = make_data(args.queries, args.depth)
    measures = sorted(set(NICKNAMES["all_trec"]) & set(pytrec_eval.supported_measures))
    measures = [m for m in measures if m not in ("runid", "relstring")]

    def ours() -> Any:
        return evaluate(qrels, scored, measures, legacy_recall_cutoffs=True)

    def theirs() -> Any:
        return pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(scored)

    t_ours, mine = _cpu(ours, args.repeat)
    t_theirs, ref = _cpu(theirs, args.repeat)
    worst = max(
        abs(mine.per_query[q][name] - value)
        for q, values in ref.items()
        for name, value in values.items()
        if not math.isnan(value)
    )
    print(
        f"{args.queries} queries x {args.depth} docs, {len(measures)} measures "
        f"({len(ref[next(iter(ref))])} values per query)"
    )
    print(f"ragmeter.metrics.trec  {t_ours:7.3f} s CPU")
    print(f"pytrec_eval            {t_theirs:7.3f} s CPU")
    print(f"ratio (ragmeter / pytrec_eval) {t_ours / t_theirs:.2f}; largest difference {worst:.1e}")


if __name__ == "__main__":
    main()
