"""What the adapters' embedder bridges share: an identity from a model's public settings,
and the check that a model returned one vector per text."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ragmeter.embed.protocol import Vector, as_floats
from ragmeter.errors import RagmeterError
from ragmeter.judge import clean_identity

__all__ = ["is_plain", "model_identity", "vectors_for"]


def is_plain(value: Any) -> bool:
    """A value fit for an identity: a JSON scalar, or lists/dicts of them (no client objects,
    whose ``str`` would carry a memory address and change every run).

    >>> is_plain({"model": "m", "dims": [1, 2]}), is_plain(object())
    (True, False)
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(is_plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and is_plain(v) for k, v in value.items())
    return False


def model_identity(
    framework: str, model: object, settings: Mapping[str, Any], drop: Collection[str] = ()
) -> dict[str, Any]:
    """``{"framework", "class", **settings}``: the model's public settings (names not
    starting with ``_``, not in ``drop``: settings that change how the model is called, never
    which vectors it returns), plain values only, secrets removed by
    :func:`~ragmeter.judge.clean_identity`.

    >>> model_identity("langchain", 1.0, {"model": "m", "api_key": "sk", "timeout": 5, "_c": 0},
    ...                drop={"timeout"})
    {'framework': 'langchain', 'class': 'float', 'model': 'm'}
    """
    kept = {
        str(k): v
        for k, v in settings.items()
        if not str(k).startswith("_") and str(k) not in drop and is_plain(v)
    }
    return {"framework": framework, "class": type(model).__name__, **clean_identity(kept)}


def vectors_for(
    texts: Sequence[str], vectors: Sequence[Sequence[float] | None], source: str
) -> list[Vector]:
    """``vectors`` as lists of floats, one per text in order, or an error naming ``source``
    (the framework, class and method) when the count is wrong or a vector is missing.

    >>> vectors_for(["a"], [(1, 2)], "m.embed")
    [[1.0, 2.0]]
    >>> vectors_for(["a", "b"], [[1.0]], "m.embed")
    Traceback (most recent call last):
    ragmeter.errors.RagmeterError: m.embed returned 1 vectors for 2 texts
    """
    if len(vectors) != len(texts):
        raise RagmeterError(f"{source} returned {len(vectors)} vectors for {len(texts)} texts")
    for text, vector in zip(texts, vectors, strict=True):
        if vector is None:
            raise RagmeterError(f"{source} gave no embedding for the text {text[:60]!r}")
    return as_floats(vectors)
