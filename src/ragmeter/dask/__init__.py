"""ragmeter on Dask: the same reports, bit for bit, from partitions scored on a cluster.

:func:`evaluate_rag` takes a ``dask.bag.Bag`` of samples or a ``dask.dataframe.DataFrame``
with sample columns; :func:`evaluate_run` takes qrels and a run partitioned as a bag of
``(query_id, ranking)`` pairs, a dataframe, or a list of TREC run files. Each partition is
scored by one task into a mergeable partial (exact sums, counts, value counts or log
buckets), the partials are merged in a tree of tasks, and the client finishes the report
with the code that finishes one on one machine. So the means are **bit-identical** to
:func:`ragmeter.evaluate_rag` / :func:`ragmeter.evaluate_run` whatever the partitioning,
and a worker lost mid-run costs only the recomputation of its tasks: Dask recomputes each
lost partial once, and the report merges exactly one result per partition.

Needs ``pip install 'ragmeter[dask]'`` (``dask[distributed]``); ``import ragmeter`` never
imports Dask. Connect to a cluster with ``distributed.Client("tcp://scheduler:8786")``
before calling (or pass ``client=``); without a client Dask's local scheduler is used. Judge
and embedding metrics run on the workers, with caches every worker opens (``judge_cache=``,
``embed_cache=``). See ``docs/dask.md``.

>>> import dask, dask.bag as db, ragmeter
>>> qrels = {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 1}, "q3": {"d9": 1}}
>>> run = {"q1": ["d1", "d4"], "q2": ["d3", "d5", "d2"], "q3": ["d7"]}
>>> with dask.config.set(scheduler="sync"):
...     report = evaluate_run(qrels, db.from_sequence(run.items(), npartitions=2),
...                           k_values=(1, 3))
>>> report.metrics == ragmeter.evaluate_run(qrels, run, k_values=(1, 3)).metrics
True
>>> samples = [{"id": f"s{i}", "response": "Paris", "reference": ["Paris", "Lyon"][i % 2]}
...            for i in range(5)]
>>> with dask.config.set(scheduler="sync"):
...     rag = evaluate_rag(db.from_sequence(samples, npartitions=3), metrics=["exact_match"])
>>> rag.metrics, rag.summary("exact_match").count
({'exact_match': 0.6}, 5)
"""

from __future__ import annotations

from ragmeter.dask._rag import evaluate_rag
from ragmeter.dask._retrieval import evaluate_run

__all__ = ["evaluate_rag", "evaluate_run"]
