"""``stage(name)``: mark a step of a chain whose documents are a stage (fusion in your own code)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast, overload

from langchain_core.runnables import RunnableBinding, RunnableLambda

from ragmeter.errors import InvalidInputError
from ragmeter.schema import CONTEXT, STAGE_KINDS
from ragmeter_langchain._runs import _KIND_KEY, STAGE_KEY

__all__ = ["StageMarker", "stage"]


def _identity(documents: Any) -> Any:
    return documents


def _check(name: object, kind: object) -> tuple[str, str]:
    if not isinstance(name, str) or not name or name == CONTEXT:
        raise InvalidInputError(
            f"stage name must be a non-empty str other than {CONTEXT!r} (the name of what "
            f"reached the generator), got {name!r}"
        )
    if kind not in STAGE_KINDS or kind == CONTEXT:
        kinds = ", ".join(repr(k) for k in STAGE_KINDS if k != CONTEXT)
        raise InvalidInputError(f"stage kind must be one of {kinds}, got {kind!r}")
    return name, str(kind)


def _marked(fn: Callable[..., Any], name: str, kind: str) -> RunnableBinding[Any, Any]:
    runnable = RunnableLambda(fn, name=name)
    marked = runnable.with_config(run_name=name, metadata={STAGE_KEY: name, _KIND_KEY: kind})
    return cast("RunnableBinding[Any, Any]", marked)  # what with_config returns


class StageMarker(RunnableBinding[Any, Any]):
    """A step that passes its documents on unchanged and records them as the stage ``name``
    (made by :func:`stage`); calling it on a function marks that function instead."""

    def __call__(self, fn: Callable[..., Any]) -> RunnableBinding[Any, Any]:
        """``@stage("fused")`` on a function: the function as a marked runnable."""
        metadata = (self.config or {}).get("metadata") or {}
        return _marked(fn, str(metadata[STAGE_KEY]), str(metadata[_KIND_KEY]))


@overload
def stage(name: str, fn: None = None, *, kind: str = "fusion") -> StageMarker: ...


@overload
def stage(
    name: str, fn: Callable[..., Any], *, kind: str = "fusion"
) -> RunnableBinding[Any, Any]: ...


def stage(
    name: str, fn: Callable[..., Any] | None = None, *, kind: str = "fusion"
) -> StageMarker | RunnableBinding[Any, Any]:
    """Record the documents of one step of a chain as the stage ``name``.

    LangChain reports retriever calls, but not what your own code makes of their rankings
    (reciprocal rank fusion in a ``RunnableLambda``, a hand-written reranker). Mark that
    step, and :class:`~ragmeter_langchain.RagmeterCallbackHandler` keeps its documents as a
    stage of the sample; as the last outermost step before the prompt, it is the
    ``context`` (what reached the model) even when the retrievers before it ran side by
    side. Three spellings:

    * ``... | RunnableLambda(rrf) | stage("fused") | prompt ...``: passes the documents on
      unchanged and records them;
    * ``stage("fused", rrf)``: ``rrf`` as a runnable, its output recorded;
    * ``@stage("fused")`` above ``def rrf(rankings): ...``: the same, as a decorator.

    ``kind`` says what the step does (``"fusion"``, ``"reranker"``, ``"retriever"`` or
    ``"stage"``). Raises :class:`~ragmeter.errors.InvalidInputError` for an empty name, the
    reserved name ``"context"`` or an unknown kind. The step's output must be a list of
    ``Document`` s (anything else is recorded as a failed stage, noted on the sample).

    >>> from langchain_core.documents import Document
    >>> marker = stage("fused")
    >>> [d.id for d in marker.invoke([Document("a", id="d1")])]
    ['d1']
    """
    name, kind = _check(name, kind)
    if fn is not None:
        if not callable(fn):
            raise InvalidInputError(f"stage({name!r}, fn): fn must be callable, got {fn!r}")
        return _marked(fn, name, kind)
    bound = _marked(_identity, name, kind)
    return StageMarker(bound=bound.bound, kwargs=bound.kwargs, config=bound.config)
