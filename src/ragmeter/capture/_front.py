"""``StoreFront``: the surface every adapter's handler, recorder or tracer offers."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, overload

from ragmeter.capture._dataset import (
    Dataset,
    DatasetReport,
    check_concurrency,
    prepare_dataset,
)
from ragmeter.capture._rules import FailedQueries
from ragmeter.capture._scope import Scope, capture
from ragmeter.capture._store import SampleStore, SampleView, missing_rule
from ragmeter.errors import InvalidInputError
from ragmeter.schema import RagSample

if TYPE_CHECKING:
    from ragmeter.evaluation.retrieval import MissingQueries
    from ragmeter.report import RagEvalReport, RetrievalEvalReport
    from ragmeter.stages import StageReport

__all__ = ["Attachment", "DatasetFront", "StoreFront"]


class Attachment:
    """When an observer is registered with its framework: while it is attached explicitly
    (``attach()``) or while any of its ``capture()`` scopes or dataset runs is open.

    ``register(True)``/``register(False)`` is the adapter's own registration (Haystack's
    tracer hub, LlamaIndex's dispatcher); it is called only when that state changes, so
    ``attach()``, scopes and ``detach()`` may come in any order and the framework ends
    exactly as it was before. Thread-safe.
    """

    __slots__ = ("_lock", "_register", "explicit", "registered", "scopes")

    def __init__(self, register: Callable[[bool], None]) -> None:
        self._register = register
        self._lock = threading.RLock()
        self.explicit = False
        self.scopes = 0
        self.registered = False

    def attach(self) -> None:
        """Attached explicitly (idempotent)."""
        with self._lock:
            self.explicit = True
            self._sync()

    def detach(self) -> None:
        """No longer attached explicitly (stays registered while a scope is open)."""
        with self._lock:
            self.explicit = False
            self._sync()

    def open(self) -> None:
        """A scope or dataset run opened."""
        with self._lock:
            self.scopes += 1
            self._sync()

    def close(self) -> None:
        """A scope or dataset run closed."""
        with self._lock:
            self.scopes = max(0, self.scopes - 1)
            self._sync()

    def refresh(self) -> None:
        """Register again if wanted (the framework may have been reset meanwhile)."""
        with self._lock:
            if self.explicit or self.scopes:
                self._register(True)
                self.registered = True

    def _sync(self) -> None:
        wanted = self.explicit or self.scopes > 0
        if wanted != self.registered:
            self._register(wanted)
            self.registered = wanted


class StoreFront:
    """What every adapter's handler, recorder or tracer offers on top of its :attr:`store`.

    A mixin: the adapter class defines :attr:`store` (a :class:`SampleStore`) and gets
    ``samples``, ``len()``, :meth:`drain`, :meth:`clear`, :meth:`to_run`, :meth:`to_qrels`,
    :meth:`to_jsonl`, :meth:`evaluate`, :meth:`evaluate_retrieval` and :meth:`capture`, the
    same in LangChain, Haystack and LlamaIndex, so evaluation code does not depend on the
    framework. The dataset loop (``run_dataset``) is built on :meth:`_run_dataset`.
    """

    @property
    def store(self) -> SampleStore:
        """The :class:`SampleStore` holding the captured samples."""
        raise NotImplementedError

    @property
    def samples(self) -> SampleView:
        """The captured samples in completion order (a :class:`SampleView`: no copy)."""
        return self.store.samples

    def __len__(self) -> int:
        return len(self.store)

    def __bool__(self) -> bool:
        # a handler is always truthy, however few samples it holds (frameworks test
        # ``handler or default``: LangChain's configure hooks do)
        return True

    def drain(self) -> list[RagSample]:
        """Remove and return every captured sample in one step (none lost to a race).

        Use it to ship samples periodically from a long-running service: each run that
        finished is returned by exactly one ``drain()``. Runs still in flight are kept and
        become samples when they finish.
        """
        return self.store.drain()

    def clear(self) -> None:
        """Forget the captured samples (runs still in flight finish and are stored normally)."""
        self.store.clear()

    def to_run(self, stage: str | None = None) -> dict[str, list[str]]:
        """``{sample_id: [doc_id, ...]}`` for :func:`ragmeter.evaluate_run`: what reached the
        generator (``context``), or with ``stage`` that stage's ranking (a repeated id is
        keyed ``"<id>#2"``...)."""
        return self.store.to_run(stage)

    def to_qrels(self) -> dict[str, dict[str, float]]:
        """``{sample_id: {doc_id: grade}}`` from the ground truth the samples carry."""
        return self.store.to_qrels()

    def to_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write the samples as JSONL; returns how many were written."""
        return self.store.to_jsonl(path)

    def evaluate(self, **kwargs: Any) -> RagEvalReport:
        """Score the samples with :func:`ragmeter.evaluate_rag` (keyword arguments pass through)."""
        return self.store.evaluate(**kwargs)

    @overload
    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        stage: str | None = None,
        stages: Literal[False, None] = None,
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> RetrievalEvalReport: ...

    @overload
    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        stage: str | None = None,
        stages: Literal[True] | Sequence[str],
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> StageReport: ...

    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        stage: str | None = None,
        stages: bool | Sequence[str] | None = None,
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> RetrievalEvalReport | StageReport:
        """Score the captured rankings with :func:`ragmeter.evaluate_run` (``qrels`` default:
        the ground truth the samples carry).

        The ranking scored is what reached the generator (``context``), or with
        ``stage="<name>"`` that stage's; ``stages=True`` scores every stage and returns a
        :class:`~ragmeter.stages.StageReport` (what each step gained or lost, with a paired
        confidence interval). A judged query never captured scores 0 (trec_eval ``-c``)
        unless ``missing_queries="skip"`` (the deprecated ``only_captured=True``); a sample
        whose run failed before a ranking was captured scores 0 unless
        ``failed_queries="skip"``, and is listed in ``report.extra["capture"]["failed"]``; a
        repeated sample id is scored as ``"<id>#2"``... See
        :meth:`SampleStore.evaluate_retrieval`.
        """
        evaluate: Any = self.store.evaluate_retrieval  # one call for both overloads
        result: RetrievalEvalReport | StageReport = evaluate(
            qrels,
            stage=stage,
            stages=stages,
            missing_queries=missing_rule(only_captured, missing_queries, stacklevel=2),
            failed_queries=failed_queries,
            **kwargs,
        )
        return result

    def capture(
        self,
        id: str | int | None = None,
        *,
        reference: str | None = None,
        references: list[str] | None = None,
        reference_ids: list[str] | None = None,
        relevance: Mapping[str, float] | None = None,
        metadata: Mapping[str, Any] | None = None,
        batch: Mapping[str, str] | None = None,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        answers: Mapping[str, str] | None = None,
    ) -> Scope:
        """``with handler.capture(id=qid, relevance=qrels[qid]):`` -- the runs inside get this
        sample id and ground truth (see :func:`capture`; threads and asyncio tasks each see
        their own). ``batch={qid: question}`` (with ``qrels=``/``answers=``) names several
        runs at once, each by its question (a LangChain ``batch``). The scope is this
        adapter's own: other observers do not see it. While a scope is open the adapter
        captures even if it was not attached (:meth:`_scope_opened`)."""
        scope = capture(
            id,
            reference=reference,
            references=references,
            reference_ids=reference_ids,
            relevance=relevance,
            metadata=metadata,
            batch=batch,
            qrels=qrels,
            answers=answers,
        )
        scope._owner = self
        return scope

    # -- attaching while capture() scopes are open ----------------------------------------

    def _attachment(self) -> Attachment | None:
        """The adapter's :class:`Attachment` (``None``: it needs no registering)."""
        return None

    def _scope_opened(self, scope: Scope) -> None:
        """A ``capture()`` scope of this adapter opened: it is registered while any is open
        (and while attached explicitly)."""
        attachment = self._attachment()
        if attachment is not None:
            attachment.open()

    def _scope_closed(self, scope: Scope) -> None:
        attachment = self._attachment()
        if attachment is not None:
            attachment.close()


class DatasetFront(StoreFront):
    """A :class:`StoreFront` that runs a framework object over a dataset: ``run_dataset`` and
    ``arun_dataset`` (the handlers and the Haystack tracer). The adapter implements
    :meth:`_dataset_call`, how one query runs ``target`` in its framework."""

    def run_dataset(
        self,
        target: Any,
        dataset: Dataset,
        *,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        concurrency: int = 4,
        progress: bool = True,
        k_values: Iterable[int] | None = None,
        metrics: Iterable[str] | None = None,
        answer_metrics: Sequence[Any] | None = None,
        failed_queries: FailedQueries = "zero",
        **options: Any,
    ) -> DatasetReport:
        """Run ``target`` on every query of ``dataset`` and score the captured samples.

        ``target`` is what the framework runs: a LangChain runnable (``invoke(query,
        config=config)``; option ``config=``), a LlamaIndex query or chat engine
        (``query``/``chat``), a Haystack pipeline (``run`` with the query in ``inputs=``,
        default every open ``query`` and ``question`` input). The rest is
        :func:`~ragmeter.capture.prepare_dataset`'s; the adapter is attached for the run if
        it was not. An option the adapter does not know is an
        :class:`~ragmeter.errors.InvalidInputError`.
        """
        call = self._dataset_call(target, options, asynchronous=False)
        _no_more_options(options, self.store.hints.name)
        job = prepare_dataset(
            dataset,
            qrels=qrels,
            concurrency=self._dataset_workers(target, check_concurrency(concurrency)),
            progress=progress,
            k_values=k_values,
            metrics=metrics,
            answer_metrics=answer_metrics,
            failed_queries=failed_queries,
        )
        with self._attached_for_dataset():
            return job.run(call, self.store)

    async def arun_dataset(
        self,
        target: Any,
        dataset: Dataset,
        *,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        concurrency: int = 4,
        progress: bool = True,
        k_values: Iterable[int] | None = None,
        metrics: Iterable[str] | None = None,
        answer_metrics: Sequence[Any] | None = None,
        failed_queries: FailedQueries = "zero",
        **options: Any,
    ) -> DatasetReport:
        """:meth:`run_dataset` with the framework's async entry point (``ainvoke``,
        ``aquery``/``achat``), ``concurrency`` tasks at a time."""
        call = self._dataset_call(target, options, asynchronous=True)
        _no_more_options(options, self.store.hints.name)
        job = prepare_dataset(
            dataset,
            qrels=qrels,
            concurrency=self._dataset_workers(target, check_concurrency(concurrency)),
            progress=progress,
            k_values=k_values,
            metrics=metrics,
            answer_metrics=answer_metrics,
            failed_queries=failed_queries,
        )
        with self._attached_for_dataset():
            return await job.arun(call, self.store)

    def _dataset_call(
        self, target: Any, options: dict[str, Any], *, asynchronous: bool
    ) -> Callable[[str], Any]:
        """The adapter's hook: ``query -> result`` running ``target`` (an awaitable result when
        ``asynchronous``); it takes its own keys out of ``options`` (``run_dataset``'s
        keyword options), and what is left is refused."""
        raise NotImplementedError

    def _dataset_workers(self, target: Any, concurrency: int) -> int:
        """How many queries of ``target`` may run at once (the adapter may lower it: an
        object that is not thread-safe runs one query at a time)."""
        return concurrency

    @contextmanager
    def _attached_for_dataset(self) -> Iterator[None]:
        """Keep the adapter registered while a dataset runs."""
        attachment = self._attachment()
        if attachment is None:
            yield
            return
        attachment.open()
        try:
            yield
        finally:
            attachment.close()


def _no_more_options(options: Mapping[str, Any], framework: str) -> None:
    """Refuse ``run_dataset`` options the adapter did not take (a typo must not vanish)."""
    if options:
        raise InvalidInputError(
            f"run_dataset got option(s) {', '.join(sorted(options))} that the {framework} "
            "adapter does not take"
        )
