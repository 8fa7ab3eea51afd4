"""``RagmeterCallbackHandler``: one :class:`~ragmeter.schema.RagSample` per root run.

The handler is the LangChain-facing shell: it checks its options, hands every callback
event to :class:`~ragmeter_langchain._runs.Runs` (which keeps the run tree and builds the
samples) and exposes the captured data with the surface every ragmeter adapter shares.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from ragmeter.capture import FailedQueries, Hints, SampleStore, check_retrieval
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import MissingQueries
from ragmeter.report import RagEvalReport, RetrievalEvalReport
from ragmeter.schema import RagSample
from ragmeter_langchain._convert import DEFAULT_ID_KEY, DocIdFn, TextFn
from ragmeter_langchain._runs import FRAMEWORK, UNSET, Options, ResponseFrom, Retrieval, Runs

__all__ = ["RagmeterCallbackHandler"]

_RESPONSE_FROM = ("llm", "output")

SAMPLE_ID_HINT = (
    "LangChain: pass each run's query id in its config, config={'metadata': {'ragmeter_id': "
    "qid}} (for batch, a list of configs, one per input); without it a sample's id is the "
    "run's run_id."
)


def doc_id_hint(options: Options) -> str:
    """How a LangChain user makes retrieved ids the qrels' doc ids, given the current options."""
    if options.doc_id is not None:
        now = "your doc_id= function decides each id"
    else:
        key = "" if options.id_key is None else f"metadata[{options.id_key!r}], else "
        now = f"ids are Document.id, else {key}a content hash ('sha256:...')"
    return (
        f"LangChain: {now}. Pass RagmeterCallbackHandler(doc_id=lambda doc: "
        "doc.metadata['<your id key>']) or id_key='<metadata key>', or give the documents "
        "the qrels' ids (vector stores: add_documents(docs, ids=[...]))."
    )


class RagmeterCallbackHandler(BaseCallbackHandler):
    """Capture every root run of a LangChain runnable as a :class:`~ragmeter.schema.RagSample`.

    Attach it per call: ``chain.invoke(q, config={"callbacks": [handler]})``. Each root run
    (an ``invoke``, each input of a ``batch``, an ``ainvoke``, an ``astream``) becomes one
    sample, appended to :attr:`samples` when the run ends (completion order):

    * ``id``: ``config["metadata"]["ragmeter_id"]`` when given (so samples join to qrels),
      else the root run's LangChain ``run_id`` (so a sample joins to its trace). The other
      ``ragmeter_*`` metadata keys of :mod:`ragmeter.capture` set ``reference``,
      ``references``, ``reference_ids`` and ``relevance``.
    * ``user_input``: the root input (``input_key`` rule, see below).
    * ``retrieved_ids`` / ``retrieved_contexts``: the documents of the *outermost* retriever
      call (one not nested in another retriever), the last one to finish when it ran several
      times (``retrieval="first"`` takes the first, ``"merge"`` joins them all);
      ``retriever_name`` picks calls of one named retriever instead, at any depth. Ids:
      ``doc_id(doc)`` if given, else ``Document.id``, else ``metadata[id_key]``, else a
      content hash (:func:`ragmeter.capture.content_doc_id`); a document is never dropped.
      ``retrieved_ids`` lists each id once, at its best rank (a ranking repeats no document;
      chunks of one source collapse), ``retrieved_contexts`` every distinct text in rank
      order. Every retriever call (name, query, depth, raw ids, latency, error) is kept in
      ``metadata["retriever_calls"]``, with ``used`` marking the one(s) chosen. When the
      candidates ran concurrently (``RunnableParallel``, ``asyncio.gather``), which one is
      "last" or "first" depends on thread timing: ``capture_errors`` says so, and
      ``retriever_name`` makes the pick deterministic.
    * ``response``: the text of the last LLM / chat-model call to finish, else the root
      output (``response_from="output"`` reads the root output, with ``output_key``).
    * ``latency_ms`` (root start to end), ``input_tokens``/``output_tokens`` summed over the
      model calls that report usage, ``error`` when the root run raised.
    * ``metadata``: ``framework`` (``"langchain"``), ``run_id``, ``run_name``, ``tags``,
      ``run_metadata`` (the run's other metadata, made JSON-safe; the same key in every
      adapter), ``retriever_calls``, ``llm_calls`` and, if anything in the capture itself
      went wrong (say a ``ragmeter_relevance`` that does not validate: it is left out, the
      rest of the sample kept), ``capture_errors``.

    ``input_key`` / ``output_key``: ``None`` reads a plain string or message, or a dict's
    ``question``/``input``/``query`` (output: ``answer``/``output``/``result``/``response``/
    ``text``) key; a string reads that key; a callable gets the whole value.

    The handler never raises into the chain: a failure while capturing is recorded in the
    sample's ``metadata["capture_errors"]`` and logged once per kind. It does not read
    streamed tokens. State is guarded by a lock (LangChain calls handlers from worker
    threads); ``max_samples`` bounds the stored samples, ``max_open_runs`` the runs in
    flight (the oldest open run is dropped past it, see :attr:`dropped_runs`).

    Raises :class:`~ragmeter.errors.InvalidInputError` for an unknown ``retrieval`` or
    ``response_from`` and a ``max_open_runs`` below 1.
    """

    raise_error: bool = False
    run_inline: bool = True  # cheap and non-blocking: no executor hop under asyncio

    def __init__(
        self,
        *,
        input_key: str | TextFn | None = None,
        output_key: str | TextFn | None = None,
        response_from: ResponseFrom | None = None,
        retrieval: Retrieval = "last",
        retriever_name: str | None = None,
        id_key: str | None = DEFAULT_ID_KEY,
        doc_id: DocIdFn | None = None,
        max_samples: int | None = None,
        max_open_runs: int = 10_000,
    ) -> None:
        super().__init__()
        retrieval = check_retrieval(retrieval)
        if response_from is not None and response_from not in _RESPONSE_FROM:
            raise InvalidInputError(
                f"response_from must be 'llm' or 'output' (or None: 'output' when output_key "
                f"is given, else 'llm'), got {response_from!r}"
            )
        if (
            isinstance(max_open_runs, bool)
            or not isinstance(max_open_runs, int)
            or max_open_runs < 1
        ):
            raise InvalidInputError(f"max_open_runs must be an int >= 1, got {max_open_runs!r}")
        self.options = Options(
            input_key=input_key,
            output_key=output_key,
            response_from=response_from or ("output" if output_key is not None else "llm"),
            retrieval=retrieval,
            retriever_name=retriever_name,
            id_key=id_key,
            doc_id=doc_id,
            max_open_runs=max_open_runs,
        )
        hints = Hints(FRAMEWORK, SAMPLE_ID_HINT, doc_id_hint(self.options))
        self._store = SampleStore(max_samples=max_samples, hints=hints)
        self._runs = Runs(self.options, self._store)

    # -- the captured data (the surface every ragmeter adapter shares) --------------------

    @property
    def store(self) -> SampleStore:
        """The :class:`~ragmeter.capture.SampleStore` holding the captured samples."""
        return self._store

    @property
    def samples(self) -> list[RagSample]:
        """The captured samples in completion order (a copy)."""
        return self._store.samples

    def __len__(self) -> int:
        return len(self._store)

    @property
    def open_runs(self) -> int:
        """How many root runs have started and not yet ended."""
        with self._runs.lock:
            return len(self._runs.roots)

    @property
    def dropped_runs(self) -> int:
        """Root runs dropped without a sample because ``max_open_runs`` were open at once."""
        return self._runs.dropped_runs

    def to_run(self) -> dict[str, list[str]]:
        """``{sample_id: [doc_id, ...]}`` for :func:`ragmeter.evaluation.retrieval.evaluate_run`."""
        return self._store.to_run()

    def to_qrels(self) -> dict[str, dict[str, float]]:
        """``{sample_id: {doc_id: grade}}`` from ``ragmeter_relevance`` / ``_reference_ids``."""
        return self._store.to_qrels()

    def to_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write the samples as JSONL; returns how many were written."""
        return self._store.to_jsonl(path)

    def evaluate(self, **kwargs: Any) -> RagEvalReport:
        """Score the samples with ``ragmeter.evaluate_rag`` (keyword arguments pass through)."""
        return self._store.evaluate(**kwargs)

    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> RetrievalEvalReport:
        """Score the captured run with ``evaluate_run`` (``qrels`` default: the samples' own).

        A judged query never captured scores 0 (trec_eval ``-c``) unless
        ``only_captured=True`` (= ``missing_queries="skip"``); a sample whose run failed
        before a ranking was captured scores 0 unless ``failed_queries="skip"``, and is
        listed in ``report.extra["capture"]["failed"]``; a repeated ``ragmeter_id`` is scored
        as ``"<id>#2"``... See :meth:`ragmeter.capture.SampleStore.evaluate_retrieval`.
        """
        return self._store.evaluate_retrieval(
            qrels,
            only_captured=only_captured,
            missing_queries=missing_queries,
            failed_queries=failed_queries,
            **kwargs,
        )

    def clear(self) -> None:
        """Forget the captured samples (runs still in flight are kept and finish normally)."""
        self._store.clear()

    # -- LangChain events -------------------------------------------------------------------

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: dict[str, Any] | Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A chain (any runnable) started."""
        try:
            self._runs.start(run_id, parent_run_id, serialized, kwargs, inputs, tags, metadata)
        except Exception as exc:
            self._runs.failed("on_chain_start", run_id, exc)

    def on_chain_end(self, outputs: dict[str, Any] | Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A chain ended; a root chain becomes a sample."""
        self._runs.finish(run_id, output=outputs, kwargs=kwargs)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A chain raised; a root chain becomes a sample with ``error`` set."""
        self._runs.finish(run_id, error=error, kwargs=kwargs)

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A retriever started: open a retriever call on the root's record."""
        try:
            self._runs.start(
                run_id,
                parent_run_id,
                serialized,
                kwargs,
                query,
                tags,
                metadata,
                retriever=True,
            )
        except Exception as exc:
            self._runs.failed("on_retriever_start", run_id, exc)

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        """A retriever returned: record its documents' ids and texts in rank order."""
        try:
            self._runs.retriever_end(run_id, documents)
        except Exception as exc:
            self._runs.failed("on_retriever_end", run_id, exc)
        self._runs.finish(run_id, output=documents, kwargs=kwargs)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A retriever raised: keep the failed call for drill-down."""
        try:
            self._runs.retriever_error(run_id, error)
        except Exception as exc:
            self._runs.failed("on_retriever_error", run_id, exc)
        self._runs.finish(run_id, error=error, kwargs=kwargs)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A (text-completion) LLM started."""
        try:
            first = prompts[0] if prompts else None
            self._runs.start(run_id, parent_run_id, serialized, kwargs, first, tags, metadata)
        except Exception as exc:
            self._runs.failed("on_llm_start", run_id, exc)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A chat model started."""
        try:
            first = messages[0] if messages else None
            self._runs.start(run_id, parent_run_id, serialized, kwargs, first, tags, metadata)
        except Exception as exc:
            self._runs.failed("on_chat_model_start", run_id, exc)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A model call ended: its text becomes the candidate response; usage is summed."""
        try:
            self._runs.llm_end(run_id, response)
        except Exception as exc:
            self._runs.failed("on_llm_end", run_id, exc)
        self._runs.finish(run_id, output=UNSET, kwargs=kwargs)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A model call raised."""
        self._runs.finish(run_id, error=error, kwargs=kwargs)

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A tool started (tracked so retrievers it calls join the right run)."""
        try:
            given = inputs if inputs is not None else input_str
            self._runs.start(run_id, parent_run_id, serialized, kwargs, given, tags, metadata)
        except Exception as exc:
            self._runs.failed("on_tool_start", run_id, exc)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool ended."""
        self._runs.finish(run_id, output=output, kwargs=kwargs)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool raised."""
        self._runs.finish(run_id, error=error, kwargs=kwargs)
