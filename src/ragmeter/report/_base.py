"""What both report types share: JSON and markdown rendering, and reading numbers back."""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, overload

from ragmeter.errors import InvalidInputError
from ragmeter.report._json import _Rows, _write_json
from ragmeter.report._summary import DistributionSummary


def _finite(value: Any, where: str) -> float:
    """``value`` as a finite float, or :class:`InvalidInputError` naming ``where``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise InvalidInputError(f"report {where} must be a finite number, got {value!r}")
    return number


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


class _ReportBase:
    """Rendering shared by both report types; subclasses provide the rows."""

    def _summary_rows(self) -> list[tuple[str, DistributionSummary]]:
        raise NotImplementedError

    def _items(self) -> Iterator[tuple[str, Any]]:
        """``to_dict()``'s items, with the per-item rows wrapped in :class:`_Rows`."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-ready)."""
        return {k: (v.rows if isinstance(v, _Rows) else v) for k, v in self._items()}

    @overload
    def to_json(self, fp: None = None, **kwargs: Any) -> str: ...

    @overload
    def to_json(self, fp: str | os.PathLike[str] | IO[str], **kwargs: Any) -> None: ...

    def to_json(
        self, fp: str | os.PathLike[str] | IO[str] | None = None, **kwargs: Any
    ) -> str | None:
        """The report as JSON: a string, or written to ``fp`` (a path or a text stream).

        With ``fp`` the JSON is written in pieces, one per-query (or per-sample) row at a
        time, so a 100k-query report never becomes one giant string; the text is the same
        as ``json.dumps(report.to_dict(), indent=2)``. ``kwargs`` other than those defaults
        go to :func:`json.dumps`. Always standard JSON: a report holds no NaN or infinity
        (the drivers refuse them), and ``allow_nan=False`` makes sure of it.
        """
        kwargs.setdefault("indent", 2)
        kwargs.setdefault("allow_nan", False)
        plain = kwargs == {"indent": 2, "allow_nan": False}
        if fp is None:
            if not plain:
                return json.dumps(self.to_dict(), **kwargs)
            buffer = io.StringIO()
            _write_json(self._items(), buffer)
            return buffer.getvalue()
        if isinstance(fp, (str, os.PathLike)):
            target = Path(fp)
            with open(target, "w", encoding="utf-8") as fh:
                self._dump(fh, plain, kwargs)
            return None
        self._dump(fp, plain, kwargs)
        return None

    def _dump(self, fh: IO[str], plain: bool, kwargs: dict[str, Any]) -> None:
        if plain:
            _write_json(self._items(), fh)
        else:
            json.dump(self.to_dict(), fh, **kwargs)

    def to_markdown(self) -> str:
        """A markdown table: one row per metric key, mean and spread."""
        lines = [
            "| metric | mean | median | std | min | max | n | missing |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        approximate: list[tuple[str, DistributionSummary]] = []
        for key, s in self._summary_rows():
            lines.append(
                f"| {key} | {s.mean:.4f} | {s.median:.4f} | {s.std:.4f} | {s.min:.4f} | "
                f"{s.max:.4f} | {s.count} | {s.missing} |"
            )
            if not s.exact:
                approximate.append((key, s))
        if approximate:
            lines.append("")
            lines.append(_approximate_note(approximate))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def to_text(self) -> str:
        raise NotImplementedError


def _approximate_note(rows: list[tuple[str, DistributionSummary]]) -> str:
    error = max(s.relative_error for _, s in rows)
    keys = ", ".join(k for k, _ in rows)
    return (
        f"median and percentiles of {keys} are approximate (each within a relative error of "
        f"{error:g}; per-item scores were not kept); mean, std, min and max are exact"
    )
