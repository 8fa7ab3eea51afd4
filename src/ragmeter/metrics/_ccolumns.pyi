"""Type stub of the optional compiled columnar kernel (``_ccolumns.c``); see ``columns.py``."""

from typing import Any

def score_columns(
    chunks: list[tuple[Any, tuple[Any, Any], Any]],
    qrels: Any,
    ks: Any,
    codes: Any,
    level: float | None,
    values: Any,
    status: Any,
    lengths: Any,
    found: Any,
) -> int: ...
def prepare(
    query_ids: tuple[Any, Any],
    jstart: Any,
    jdocs: tuple[Any, Any] | list[tuple[Any, Any]],
    jgrade: Any,
) -> Any: ...
def repeats_within(parts: list[tuple[Any, Any]], heads: Any) -> bool: ...
