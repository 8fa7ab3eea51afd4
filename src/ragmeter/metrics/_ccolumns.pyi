"""Type stub of the optional compiled columnar kernel (``_ccolumns.c``); see ``columns.py``."""

from typing import Any

def score_columns(
    chunks: list[tuple[tuple[Any, Any], tuple[Any, Any], Any]],
    query_ids: tuple[Any, Any],
    jstart: Any,
    jdocs: tuple[Any, Any],
    jgrade: Any,
    ks: Any,
    codes: Any,
    level: float | None,
    values: Any,
    status: Any,
    lengths: Any,
    found: Any,
    slots: Any = None,
) -> int: ...
def query_slots(query_ids: tuple[Any, Any]) -> bytearray: ...
