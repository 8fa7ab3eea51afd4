"""Type stub of the optional compiled columnar kernel (``_ccolumns.c``); see ``columns.py``."""

from typing import Any

def score_columns(
    queries: list[Any],
    docs: list[Any],
    scores: list[Any],
    offsets: Any,
    data: Any,
    jstart: Any,
    jdoc: Any,
    jgrade: Any,
    ks: Any,
    codes: Any,
    level: float | None,
    values: Any,
    status: Any,
    lengths: Any,
    found: Any,
) -> int: ...
