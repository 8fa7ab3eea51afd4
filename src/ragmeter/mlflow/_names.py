"""How a ragmeter result key is named in MLflow: ``"ndcg@10"`` becomes ``"ndcg_at_10"``.

MLflow metric names may hold only letters, digits, ``_``, ``-``, ``.``, ``/``, spaces and
(not on Windows) ``:``; ``@`` is refused. MLflow's own retrieval metrics are called
``precision_at_5`` and ``ndcg_at_10``, so ``@`` is spelled ``_at_``, and anything else
outside ``[A-Za-z0-9_.-]`` becomes ``_`` (``/`` too: it separates a name from its statistic,
as in ``ndcg_at_10/mean``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ragmeter.errors import InvalidInputError

__all__ = ["check_prefix", "metric_name", "metric_names"]

_OUTSIDE = re.compile(r"[^\w.\-]", re.ASCII)
_PREFIX = re.compile(r"^[\w.\-/]*$", re.ASCII)


def metric_name(key: str) -> str:
    """The MLflow name of the ragmeter result key ``key``.

    >>> metric_name("ndcg@10"), metric_name("map"), metric_name("judged@5")
    ('ndcg_at_10', 'map', 'judged_at_5')
    >>> metric_name("P(rel=2)@5")
    'P_rel_2__at_5'
    """
    return _OUTSIDE.sub("_", key.replace("@", "_at_"))


def metric_names(keys: Iterable[str]) -> dict[str, str]:
    """``{key: MLflow name}``; two keys that would share a name are refused, naming both."""
    names: dict[str, str] = {}
    seen: dict[str, str] = {}
    for key in keys:
        name = metric_name(key)
        if name in seen and seen[name] != key:
            raise InvalidInputError(
                f"metric keys {seen[name]!r} and {key!r} would both be logged to MLflow as "
                f"{name!r} (MLflow names allow only letters, digits, '_', '-', '.' and '/')"
            )
        seen[name] = key
        names[key] = name
    return names


def check_prefix(prefix: str | None) -> str:
    """``prefix`` checked as the start of an MLflow metric name (``None`` is ``""``).

    >>> check_prefix("dev/"), check_prefix(None)
    ('dev/', '')
    """
    if prefix is None:
        return ""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix) or prefix.startswith("/"):
        raise InvalidInputError(
            f"prefix must be a string of letters, digits, '_', '-', '.' and '/' (not first), "
            f"got {prefix!r}: it starts every metric name, tag, param and artifact path logged"
        )
    return prefix
