"""Type stub of the optional compiled kernel (``_ckernel.c``); see ``_kernel.py``."""

from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

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
def zip_dict(
    keys: list[Any] | dict[Any, Any], values: list[Any] | int, str_only: bool = ...
) -> dict[Any, Any] | None: ...

class RunLoop:
    """A run's ``(query_id, ranking)`` pairs scored in one C loop (see ``_ckernel_run.c``)."""

    def __init__(
        self,
        index: dict[str, int],
        judgements: list[Mapping[str, float]],
        ks: Sequence[int],
        codes: Sequence[int],
        level: float | None,
        cut: int,
        jpos: int,
        examples: int,
        run_ids: list[str],
        ranked_at: list[int],
        positions: list[int],
        ids: list[str],
        values: array[float],
        /,
    ) -> None: ...
    def feed(self, iterator: Iterator[Any], need_judged: bool, /) -> Any: ...
    @property
    def counts(self) -> tuple[int, int, int, int, int]: ...

def rows_dict(
    ids: list[str],
    values: Any,
    width: int,
    keys: tuple[str, ...],
    order: list[int] | None,
) -> dict[str, dict[str, float]]: ...
