"""ragmeter's metrics as columns of Haystack's ``EvaluationRunResult``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ragmeter.errors import InvalidInputError

__all__ = ["spread_metrics"]


def spread_metrics(
    results: Mapping[str, Mapping[str, Any]], *, prefix: bool | None = None
) -> dict[str, dict[str, Any]]:
    """Evaluation results with every ragmeter metric as its own ``EvaluationRunResult`` entry.

    ``results`` is what an evaluation pipeline returned (``{component: outputs}``). A
    ragmeter evaluator's outputs (``metrics`` and ``individual_metrics``) become one entry
    per metric, ``{"score": mean, "individual_scores": [...]}`` (``nan`` where a question
    could not be scored), so ``EvaluationRunResult(run_name, inputs,
    spread_metrics(results))`` reports NDCG@10, recall@5, MAP... side by side instead of
    only each component's headline ``score``. Other evaluators' outputs pass through
    unchanged. Entries are named after the metric (``"ndcg@10"``), or
    ``"<component>.<metric>"`` when ``prefix=True`` (``None``: only when two components
    report the same metric).

    >>> from ragmeter_haystack import RagmeterRetrievalEvaluator
    >>> from haystack import Document
    >>> out = RagmeterRetrievalEvaluator(metrics=["ndcg", "recall"], k_values=[1]).run(
    ...     ground_truth_documents=[[Document(id="a")], [Document(id="b")]],
    ...     retrieved_documents=[[Document(id="a")], [Document(id="c")]])
    >>> spread = spread_metrics({"retrieval": out})
    >>> sorted(spread), spread["recall@1"]["individual_scores"]
    (['ndcg@1', 'recall@1'], [1.0, 0.0])

    Raises :class:`~ragmeter.errors.InvalidInputError` when an entry is not a mapping.
    """
    spread: list[tuple[str, str, dict[str, Any]]] = []
    for name, outputs in results.items():
        if not isinstance(outputs, Mapping):
            raise InvalidInputError(
                f"results[{name!r}] must be a component's outputs (a mapping), got "
                f"{type(outputs).__name__}"
            )
        metrics, rows = outputs.get("metrics"), outputs.get("individual_metrics")
        if not isinstance(metrics, Mapping) or not isinstance(rows, list):
            spread.append((name, "", dict(outputs)))
            continue
        for key, mean in metrics.items():
            column = [
                math.nan if row is None or row.get(key) is None else float(row[key]) for row in rows
            ]
            spread.append((name, str(key), {"score": float(mean), "individual_scores": column}))
    keys = [key for _, key, _ in spread if key]
    clash = len(keys) != len(set(keys))
    use_prefix = clash if prefix is None else prefix
    out: dict[str, dict[str, Any]] = {}
    for name, key, entry in spread:
        label = name if not key else f"{name}.{key}" if use_prefix else key
        out[label] = entry
    return out
