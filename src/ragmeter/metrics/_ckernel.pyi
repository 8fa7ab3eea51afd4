"""Type stub of the optional compiled kernel (``_ckernel.c``); see ``_kernel.py``."""

from array import array
from collections.abc import Callable, Mapping, Sequence

def score_query(
    ranked: Sequence[str],
    judgements: Mapping[str, float],
    ks: Sequence[int],
    codes: Sequence[int],
    relevance_level: float | None,
) -> list[float] | None: ...
def configure(
    fallback: Callable[..., list[float] | None], repeated_error: type[BaseException]
) -> None: ...
def column_sums(values: array[float], width: int) -> list[float] | None: ...
def pack_doubles(values: list[float]) -> bytes: ...
