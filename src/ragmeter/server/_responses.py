"""Answers: JSON reports (finite numbers), 413/422 bodies, error shapes."""

from __future__ import annotations

import json
import math
from typing import Any

from ragmeter.errors import (
    MissingDependencyError,
)

try:
    from fastapi.responses import JSONResponse
except ImportError as exc:  # pragma: no cover - exercised by a test that hides fastapi
    raise MissingDependencyError(exc.name or "fastapi", "server") from None


def _finite(value: Any) -> Any:
    """JSON-safe copy: non-finite floats (JSON has none) become ``null``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _report_content(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` made JSON-safe; a non-finite number (none should reach here: the metrics
    and reports refuse them) is sent as ``null`` *and* named in ``warnings``."""
    content: dict[str, Any] = _finite(report)
    if content != report:  # NaN != NaN, so this is also true when a NaN was replaced
        warnings = content.setdefault("warnings", [])
        if isinstance(warnings, list):
            warnings.append("a non-finite number (NaN or infinity) in this report was sent as null")
    return content


class _JSON(JSONResponse):
    """A JSON response that never fails to encode.

    A request may carry a lone surrogate (JSON's ``"\\ud800"``), which a Python str holds but
    UTF-8 cannot encode; echoed back in a claim, an id or an error message it would turn a
    good answer into a 500. Such a body is sent with non-ASCII characters escaped instead.
    """

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(
                content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
            ).encode("ascii")


def _unprocessable(loc: tuple[str | int, ...], exc: Exception) -> JSONResponse:
    return _JSON(
        status_code=422,
        content={"detail": [{"loc": list(loc), "msg": str(exc), "type": type(exc).__name__}]},
    )


_CLOSE = {"connection": "close"}


def _too_large(message: str, *, close: bool = False) -> JSONResponse:
    return _JSON(status_code=413, content={"detail": message}, headers=_CLOSE if close else None)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return _JSON(status_code=status, content={"detail": message}, headers=headers)
