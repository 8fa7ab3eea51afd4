"""Dask plumbing shared by the drivers: partitions, the merge tree, computing on a client.

Nothing here knows a metric: a driver turns each partition into a partial with one task,
merges the partials in partition order with :func:`merge_tree`, and computes the result
with :func:`compute` (on the given or default ``distributed.Client``, else with Dask's
configured scheduler).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import dask

from ragmeter.errors import InvalidInputError

__all__ = [
    "active_client",
    "check_not_strings",
    "compute",
    "merge_tree",
    "partitions",
    "task_prefix",
]

T = TypeVar("T")


def task_prefix(kind: str) -> str:
    """A fresh key prefix (``ragmeter-<kind>-<hex>``): one evaluation's tasks on a dashboard."""
    return f"ragmeter-{kind}-{uuid.uuid4().hex[:12]}"


def is_dataframe(collection: object) -> bool:
    """True for a ``dask.dataframe.DataFrame`` (without importing dask.dataframe)."""
    if "dask.dataframe" not in sys.modules:
        return False
    import dask.dataframe as dd

    return isinstance(collection, dd.DataFrame)


def is_bag(collection: object) -> bool:
    """True for a ``dask.bag.Bag``."""
    import dask.bag as db

    return isinstance(collection, db.Bag)


def check_not_strings(frame: Any, columns: Sequence[str], what: str) -> None:
    """Refuse list (or mapping) columns that Dask turned into strings, with the fix.

    ``dask.dataframe`` converts object columns to strings by default
    (``dataframe.convert-string``), so a column of Python lists arrives as their reprs.
    """
    import pandas as pd

    for name in columns:
        dtype = frame.dtypes[name] if name in frame.columns else None
        text = isinstance(dtype, pd.StringDtype) or str(dtype) in ("string[pyarrow]", "str")
        if text:
            raise InvalidInputError(
                f"column {name!r} of the {what} dataframe holds strings, not lists or "
                "mappings: Dask converts object columns to strings by default. Build the "
                "dataframe inside dask.config.set({'dataframe.convert-string': False}), or "
                "give the column an Arrow list type (pd.ArrowDtype(pa.list_(pa.string()))), "
                "as dask.dataframe.read_parquet does"
            )


def partitions(collection: Any, what: str) -> list[Any]:
    """The partitions of a bag or a dataframe, one ``Delayed`` each, in order."""
    if is_bag(collection) or is_dataframe(collection):
        return list(collection.to_delayed(optimize_graph=True))
    raise InvalidInputError(
        f"{what} must be a dask.bag.Bag or a dask.dataframe.DataFrame, got "
        f"{type(collection).__name__}; for data in memory use ragmeter.{what.split()[0]} "
        "directly, or make a bag with dask.bag.from_sequence(items, npartitions=...)"
    )


def merge_tree(
    parts: Sequence[Any], merge: Callable[..., T], *, split_every: int, prefix: str
) -> Any:
    """One ``Delayed`` that merges ``parts`` in order, ``split_every`` at a time (a tree,
    so no task holds more than ``split_every`` partials and the client gets only the root)."""
    if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
        raise InvalidInputError(f"split_every must be an int >= 2, got {split_every!r}")
    level = list(parts)
    depth = 0
    while len(level) > 1:
        level = [
            dask.delayed(merge, pure=False)(
                *level[i : i + split_every], dask_key_name=f"{prefix}-merge-{depth}-{i}"
            )
            for i in range(0, len(level), split_every)
        ]
        depth += 1
    return level[0]


def active_client(client: Any) -> Any:
    """``client``, else the default ``distributed.Client`` if one is running, else ``None``."""
    if client is not None:
        return client
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def compute(obj: Any, client: Any, *, scheduler: str | None = None) -> Any:
    """Compute a ``Delayed`` (or a list of them) on ``client``, or with Dask's scheduler."""
    if client is not None:
        future = client.compute(obj)
        try:
            return client.gather(future)
        finally:
            if isinstance(future, list):
                for f in future:
                    f.release()
            else:
                future.release()
    if scheduler is not None:
        return dask.compute(obj, scheduler=scheduler)[0]
    return dask.compute(obj)[0]


def one_task(value: Any, prefix: str) -> Any:
    """``value`` as one task every partition depends on (sent once, not once per task)."""
    return dask.delayed(value, name=f"{prefix}-spec", traverse=False)
