"""Mergeable, exact aggregates: what a streamed evaluation keeps instead of every score.

A streamed :func:`ragmeter.evaluate_rag` (or :func:`ragmeter.evaluate_run_file`) keeps one
:class:`Distribution` per metric, a few KiB whatever the number of samples, and merging the
distributions of any partition of the samples gives **bit-identical** results to one pass
over all of them (what a scale-out needs):

* :class:`ExactSum` holds a float sum exactly, as one integer scaled by ``2**1074`` (every
  finite float is a multiple of ``2**-1074``), folded in a block at a time at NumPy speed.
  Merging adds integers, so the exact sum, and every number computed from it, does not
  depend on how the values were split or ordered.
* :class:`Distribution` adds the count, the number of missing scores, exact minimum and
  maximum, the exact sum of squares, and the values themselves: exactly (a count per
  distinct value) while there are at most ``max_distinct`` distinct values -- every 0/1
  metric, ``precision@k``, most token ratios -- and otherwise in logarithmic buckets
  (the DDSketch algorithm, Masson, Rim and Lee, VLDB 2019, with a piecewise-linear
  logarithm so that bucketing uses only exact IEEE operations and gives the same buckets on
  every machine). A bucket's representative is within relative error ``relative_accuracy``
  (default 0.001) of every value in it.

From those: the mean is correctly rounded (``statistics.mean``) or, for retrieval reports,
``math.fsum(values) / n`` (trec_eval's sum, rounded once); the population standard deviation
is correctly rounded (``statistics.pstdev``); count, missing, min and max are exact; median
and percentiles (linear interpolation between order statistics, as NumPy's default) are
exact in the exact mode and otherwise each order statistic is within relative error
``relative_accuracy`` of the true one, so a percentile of scores of one sign is within
that relative error too.

>>> a, b = Distribution(), Distribution()
>>> a.add([0.1, 0.2]); b.add([0.4]); b.add_missing(1)
>>> a.merge(b)
>>> stats = a.stats()
>>> stats["count"], stats["missing"], stats["mean"], stats["exact"]
(3, 1, 0.23333333333333334, True)

One idea per module: ``_exact`` (exact sums), ``_summary`` (mean, deviation, percentiles
of a list), ``_distribution`` (the mergeable distribution), ``_ids`` (repeated sample ids).
"""

from __future__ import annotations

from ragmeter._gc import paused_gc
from ragmeter.aggregate._distribution import BLOCK, MAX_DISTINCT, RELATIVE_ACCURACY, Distribution
from ragmeter.aggregate._exact import ExactSum
from ragmeter.aggregate._ids import IdRoots, StreamKeys, id_root
from ragmeter.aggregate._summary import PERCENTILES, MeanRule, summarize_values

__all__ = [
    "BLOCK",
    "MAX_DISTINCT",
    "PERCENTILES",
    "RELATIVE_ACCURACY",
    "Distribution",
    "ExactSum",
    "IdRoots",
    "MeanRule",
    "StreamKeys",
    "id_root",
    "paused_gc",
    "summarize_values",
]
