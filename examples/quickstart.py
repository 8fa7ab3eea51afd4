"""Quickstart: score a retriever and a run on the bundled Cranfield collection, offline.

Run: python examples/quickstart.py
"""

from __future__ import annotations

import ragmeter


def main() -> None:
    corpus, queries, qrels = ragmeter.load_cranfield()

    # 1. A precomputed run (TREC file read in trec_eval's order) -> trec_eval's numbers.
    run = ragmeter.load_cranfield_bm25_run()
    report = ragmeter.evaluate_run(qrels, run, k_values=(1, 5, 10, 100))
    print(report)
    print(f"NDCG@10 = {report.primary:.4f}")

    # 2. Any callable retriever: here a tiny term-overlap ranker over the corpus.
    index = {doc_id: set(text.lower().split()) for doc_id, text in corpus.items()}

    def retriever(query: str, *, limit: int = 10) -> list[tuple[str, float]]:
        terms = set(query.lower().split())
        scored = sorted(
            ((doc_id, float(len(terms & words))) for doc_id, words in index.items()),
            key=lambda pair: (-pair[1], pair[0]),
        )
        return scored[:limit]

    overlap = ragmeter.evaluate_retrieval(retriever, qrels, queries, k_values=(10,))
    print(f"term-overlap NDCG@10 = {overlap.primary:.4f} over {overlap.n_queries} queries")


if __name__ == "__main__":
    main()
