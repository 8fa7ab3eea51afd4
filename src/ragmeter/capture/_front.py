"""``StoreFront``: the surface every adapter's handler, recorder or tracer offers."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ragmeter.capture._dataset import Dataset, DatasetReport, prepare_dataset
from ragmeter.capture._rules import FailedQueries
from ragmeter.capture._scope import Scope, capture
from ragmeter.capture._store import SampleStore, SampleView
from ragmeter.errors import InvalidInputError
from ragmeter.schema import RagSample

if TYPE_CHECKING:
    from ragmeter.evaluation.retrieval import MissingQueries
    from ragmeter.report import RagEvalReport, RetrievalEvalReport

__all__ = ["DatasetFront", "StoreFront"]


_AUTO: dict[int, list[Any]] = {}  # id(adapter) -> [open scopes, attached by them]
_AUTO_LOCK = threading.Lock()


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

    def to_run(self) -> dict[str, list[str]]:
        """``{sample_id: [doc_id, ...]}`` for :func:`ragmeter.evaluate_run` (a repeated id is
        keyed ``"<id>#2"``...)."""
        return self.store.to_run()

    def to_qrels(self) -> dict[str, dict[str, float]]:
        """``{sample_id: {doc_id: grade}}`` from the ground truth the samples carry."""
        return self.store.to_qrels()

    def to_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write the samples as JSONL; returns how many were written."""
        return self.store.to_jsonl(path)

    def evaluate(self, **kwargs: Any) -> RagEvalReport:
        """Score the samples with :func:`ragmeter.evaluate_rag` (keyword arguments pass through)."""
        return self.store.evaluate(**kwargs)

    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> RetrievalEvalReport:
        """Score the captured run with :func:`ragmeter.evaluate_run` (``qrels`` default: the
        ground truth the samples carry).

        A judged query never captured scores 0 (trec_eval ``-c``) unless
        ``only_captured=True`` (= ``missing_queries="skip"``); a sample whose run failed
        before a ranking was captured scores 0 unless ``failed_queries="skip"``, and is
        listed in ``report.extra["capture"]["failed"]``; a repeated sample id is scored as
        ``"<id>#2"``... See :meth:`SampleStore.evaluate_retrieval`.
        """
        return self.store.evaluate_retrieval(
            qrels,
            only_captured=only_captured,
            missing_queries=missing_queries,
            failed_queries=failed_queries,
            **kwargs,
        )

    def capture(
        self,
        id: str | int | None = None,
        *,
        reference: str | None = None,
        references: list[str] | None = None,
        reference_ids: list[str] | None = None,
        relevance: Mapping[str, float] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Scope:
        """``with handler.capture(id=qid, relevance=qrels[qid]):`` -- the runs inside get this
        sample id and ground truth (see :func:`capture`; threads and asyncio tasks each see
        their own). While a scope is open the adapter captures even if it was not attached
        (:meth:`_scope_opened`)."""
        scope = capture(
            id,
            reference=reference,
            references=references,
            reference_ids=reference_ids,
            relevance=relevance,
            metadata=metadata,
        )
        scope._owner = self
        return scope

    # -- attaching while capture() scopes are open ----------------------------------------

    def _attached(self) -> bool:
        """Whether the adapter already captures everything (no attaching needed)."""
        return True

    def _attach_for_scopes(self, on: bool) -> None:
        """Attach (``on``) or detach the adapter for open ``capture()`` scopes."""

    def _scope_opened(self, scope: Scope) -> None:
        """A ``capture()`` scope of this adapter opened: attach it while any is open, if it
        was not attached (the first scope attaches, the last one to close detaches)."""
        with _AUTO_LOCK:
            state = _AUTO.setdefault(id(self), [0, False])
            state[0] += 1
            if state[0] == 1 and not self._attached():
                self._attach_for_scopes(True)
                state[1] = True

    def _scope_closed(self, scope: Scope) -> None:
        with _AUTO_LOCK:
            state = _AUTO.get(id(self))
            if state is None:
                return
            state[0] -= 1
            if state[0] <= 0:
                del _AUTO[id(self)]
                if state[1]:
                    self._attach_for_scopes(False)


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
            concurrency=concurrency,
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
            concurrency=concurrency,
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

    @contextmanager
    def _attached_for_dataset(self) -> Iterator[None]:
        """Attach the adapter for a dataset run when it is not attached (and detach after)."""
        if self._attached():
            yield
            return
        self._attach_for_scopes(True)
        try:
            yield
        finally:
            self._attach_for_scopes(False)


def _no_more_options(options: Mapping[str, Any], framework: str) -> None:
    """Refuse ``run_dataset`` options the adapter did not take (a typo must not vanish)."""
    if options:
        raise InvalidInputError(
            f"run_dataset got option(s) {', '.join(sorted(options))} that the {framework} "
            "adapter does not take"
        )
