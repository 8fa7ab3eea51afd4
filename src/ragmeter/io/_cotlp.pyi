"""Type stub of the optional compiled span maker (``_cotlp.c``); see ``_otlp_fast.py``."""

from collections.abc import Callable
from typing import Any

def spans(
    data: Any,
    make: Callable[..., Any],
    hex_id: Callable[[Any, int, str], str],
    error_codes: frozenset[Any],
    remote_parent: int,
    other: Callable[[Any], Any],
    /,
) -> list[Any]: ...
def attributes(items: list[Any] | None, other: Callable[[Any], Any], /) -> dict[str, Any]: ...
