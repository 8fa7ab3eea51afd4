"""``RagmeterRecorder``: capture a ``RagSample`` from every run of a Haystack pipeline."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from ragmeter.capture import (
    FailedQueries,
    Hints,
    SampleStore,
    describe,
    fields_from_metadata,
    run_metadata,
    validated_sample,
)
from ragmeter.errors import InvalidInputError
from ragmeter.evaluation.retrieval import MissingQueries, dedupe_best_rank
from ragmeter.report import RetrievalEvalReport
from ragmeter.schema import RagSample
from ragmeter_haystack._documents import check_field, recorded_ids, reply_text, reply_usage
from ragmeter_haystack._pipeline import (
    check_component,
    consumed_outputs,
    find_component,
    nest_input,
)

__all__ = ["RagmeterRecorder"]

logger = logging.getLogger("ragmeter_haystack")
logger.addHandler(logging.NullHandler())

_QUESTION_INPUTS = ("query", "question")

SAMPLE_ID_HINT = (
    "Haystack: pass each query id to the recorder, recorder.run(data, sample_id=qid) (or "
    "metadata={'ragmeter_id': qid}); without it a sample's id is a new uuid."
)


def doc_id_hint(field: str) -> str:
    """How a Haystack user makes recorded ids the qrels' doc ids, given ``doc_id_field``."""
    return (
        f"Haystack: the recorder reads each document's doc_id_field={field!r}; if the qrels "
        "name documents another way, pass RagmeterRecorder(..., doc_id_field='content') "
        "(Haystack's own evaluators compare 'content' by default) or "
        "doc_id_field='meta.<key>', or write the documents with the qrels' ids "
        "(Document(id=...))."
    )


class RagmeterRecorder(SampleStore):
    """Run a Haystack pipeline as usual and record what it retrieved and answered.

    ``recorder.run(data)`` calls ``pipeline.run(data, include_outputs_from=...)`` asking
    for the outputs of the ``retriever`` and ``generator`` components, builds one
    :class:`~ragmeter.schema.RagSample` from them, and returns the pipeline's *normal*
    result (the extra outputs it asked for are removed again). ``run_async`` does the same
    with ``pipeline.run_async`` (Haystack 3.x ``Pipeline`` or 2.x ``AsyncPipeline``).

    What a sample holds:

    * ``id``: ``sample_id=``, else ``metadata["ragmeter_id"]``, else a new uuid. Use your
      query ids so :meth:`to_run` joins your qrels.
    * ``user_input``: the ``query_input`` value from ``data`` (default: the retriever's
      ``query``, else a ``query`` or ``question`` input).
    * ``retrieved_ids``: the retriever's ``documents`` as ``doc_id_field`` (``"id"``,
      ``"content"`` or ``"meta.<key>"``; a document without that field falls back to its
      ``id``), best first, each kept at its best rank (chunks of one source collapse to
      one entry). ``retrieved_texts``: their contents, all of them, in order.
    * ``retrieved_contexts``: the contents of the ``contexts`` component's documents (the
      retriever unless a ranker or joiner in between is named).
    * ``response``: the text of the generator's first reply (``ChatMessage.text``, a
      ``str``, or a ``GeneratedAnswer``'s ``data``); ``input_tokens``/``output_tokens``
      from its ``meta["usage"]`` when reported.
    * ``latency_ms`` of the whole run; ``error`` when the pipeline raised (the exception is
      re-raised unchanged after the sample is recorded).
    * ``reference``, ``reference_ids``, ``relevance`` from the keyword arguments or the
      ``ragmeter_*`` metadata keys (:mod:`ragmeter.capture`); your other ``metadata`` keys
      go, JSON-safe, to the sample's ``metadata["run_metadata"]`` (as in every adapter),
      next to ``metadata["framework"] == "haystack"``.

    By default the retriever is the one component with a ``documents`` output (a class
    named ``*Retriever*`` wins) and the generator the one with a ``replies`` output; name
    them when that is ambiguous. A failure while *capturing* never reaches your pipeline:
    it is logged once per recorder and recorded in the sample's
    ``metadata["capture_errors"]`` (a value that does not validate, such as a NaN grade, is
    left out and the rest of the sample kept; a document without ``doc_id_field`` is noted
    there too). The recorder is a :class:`~ragmeter.capture.SampleStore`: ``samples``,
    ``store``, ``to_run()``, ``to_qrels()``, ``clear()``, ``to_jsonl()``, ``evaluate()`` and
    ``evaluate_retrieval(qrels)`` work as in every ragmeter adapter.
    """

    def __init__(
        self,
        pipeline: Any,
        retriever: str | None = None,
        generator: str | None = None,
        *,
        contexts: str | None = None,
        query_input: str | None = None,
        doc_id_field: str = "id",
        documents_output: str = "documents",
        replies_output: str = "replies",
        max_samples: int | None = None,
    ) -> None:
        """Wrap ``pipeline``; nothing about it is changed.

        :param pipeline: A ``haystack.Pipeline`` (or 2.x ``AsyncPipeline``).
        :param retriever: Component whose ``documents_output`` is the ranking to record.
        :param generator: Component whose ``replies_output`` holds the answer.
        :param contexts: Component whose documents were handed to the generator
            (default: the retriever).
        :param query_input: Where the question is in ``data``: ``"<component>.<input>"`` or
            an input name.
        :param doc_id_field: ``"id"``, ``"content"`` or ``"meta.<key>"``: a document's id in
            the recorded run.
        :raises ValueError: When a named component is not in the pipeline (or lacks the
            output), or the default choice is ambiguous.
        """
        field = check_field(doc_id_field, name="doc_id_field")
        hints = Hints("haystack", SAMPLE_ID_HINT, doc_id_hint(field))
        super().__init__(max_samples=max_samples, hints=hints)
        self.pipeline = pipeline
        self.documents_output = documents_output
        self.replies_output = replies_output
        self.doc_id_field = field
        if retriever is not None:
            check_component(pipeline, retriever, role="retriever", socket=documents_output)
        else:
            retriever = find_component(
                pipeline, role="retriever", socket=documents_output, prefer="Retriever"
            )
        if generator is not None:
            check_component(pipeline, generator, role="generator", socket=replies_output)
        else:
            generator = find_component(
                pipeline, role="generator", socket=replies_output, prefer="Generator"
            )
        if contexts is not None:
            check_component(pipeline, contexts, role="contexts", socket=documents_output)
        if retriever is None and generator is None:
            raise InvalidInputError(
                "the pipeline has no component with a 'documents' or 'replies' output; name "
                "them with retriever='<component name>' and generator='<component name>'"
            )
        self.retriever = retriever
        self.generator = generator
        self.contexts = contexts if contexts is not None else retriever
        if query_input is not None and "." in query_input:
            nest_input(pipeline, query_input, None, role="query_input")
        self.query_input = query_input
        self._watched = {c for c in (retriever, generator, self.contexts) if c is not None}
        self._warn_lock = threading.Lock()
        self._warned = False

    @property
    def store(self) -> SampleStore:
        """The :class:`~ragmeter.capture.SampleStore` holding the samples: the recorder itself.

        Every adapter has ``.store`` (``handler.store.dropped`` counts what ``max_samples``
        evicted), so evaluation code does not depend on the framework.
        """
        return self

    def evaluate_retrieval(
        self,
        qrels: Mapping[str, Mapping[str, float]] | None = None,
        *,
        only_captured: bool = False,
        missing_queries: MissingQueries | None = None,
        failed_queries: FailedQueries = "zero",
        **kwargs: Any,
    ) -> RetrievalEvalReport:
        """Score the recorded run with ``evaluate_run`` (``qrels`` default: the samples' own).

        A judged query never run scores 0 (trec_eval ``-c``) unless ``only_captured=True``
        (= ``missing_queries="skip"``); a run whose pipeline raised scores 0 unless
        ``failed_queries="skip"``, and is listed in ``report.extra["capture"]["failed"]``;
        a repeated ``sample_id`` is scored as ``"<id>#2"``... See
        :meth:`ragmeter.capture.SampleStore.evaluate_retrieval`.
        """
        return super().evaluate_retrieval(
            qrels,
            only_captured=only_captured,
            missing_queries=missing_queries,
            failed_queries=failed_queries,
            **kwargs,
        )

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        data: dict[str, Any],
        *,
        sample_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reference: str | None = None,
        reference_ids: list[str] | None = None,
        relevance: Mapping[str, float] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Run the pipeline (``kwargs`` go to ``pipeline.run``) and record one sample.

        :returns: exactly what ``pipeline.run`` returns.
        """
        refs = {"reference": reference, "reference_ids": reference_ids, "relevance": relevance}
        include, added = self._include(kwargs.pop("include_outputs_from", None))
        start = time.perf_counter()
        try:
            result = self.pipeline.run(data, include_outputs_from=include, **kwargs)
        except Exception as exc:
            self._capture(data, None, start, exc, sample_id, metadata, refs)
            raise
        self._capture(data, result, start, None, sample_id, metadata, refs)
        return self._restore(result, added)

    async def run_async(
        self,
        data: dict[str, Any],
        *,
        sample_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reference: str | None = None,
        reference_ids: list[str] | None = None,
        relevance: Mapping[str, float] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """``await pipeline.run_async(...)`` and record one sample, like :meth:`run`."""
        refs = {"reference": reference, "reference_ids": reference_ids, "relevance": relevance}
        include, added = self._include(kwargs.pop("include_outputs_from", None))
        start = time.perf_counter()
        try:
            result = await self.pipeline.run_async(data, include_outputs_from=include, **kwargs)
        except Exception as exc:
            self._capture(data, None, start, exc, sample_id, metadata, refs)
            raise
        self._capture(data, result, start, None, sample_id, metadata, refs)
        return self._restore(result, added)

    def _include(self, user: Any) -> tuple[set[str], set[str]]:
        requested = set(user) if user else set()
        return requested | self._watched, self._watched - requested

    def _restore(self, result: dict[str, Any], added: set[str]) -> dict[str, Any]:
        """Drop the outputs only ``include_outputs_from`` put in the result (never raises)."""
        try:
            return self._strip(result, added)
        except Exception as exc:
            self._capture_failed_log(describe(exc), exc)
            return result

    def _strip(self, result: dict[str, Any], added: set[str]) -> dict[str, Any]:
        out = dict(result)
        for name in added:
            outputs = out.get(name)
            if not isinstance(outputs, Mapping):
                continue
            consumed = consumed_outputs(self.pipeline, name)
            kept = {k: v for k, v in outputs.items() if k not in consumed}
            if kept:
                out[name] = kept
            else:
                del out[name]
        return out

    # -- capture ---------------------------------------------------------------------------

    def _capture(
        self,
        data: Mapping[str, Any],
        result: Mapping[str, Any] | None,
        start: float,
        error: BaseException | None,
        sample_id: str | None,
        metadata: Mapping[str, Any] | None,
        refs: Mapping[str, Any],
    ) -> None:
        latency_ms = (time.perf_counter() - start) * 1000.0
        fields: dict[str, Any] = {}
        try:
            fields = fields_from_metadata(metadata)
            if sample_id is not None:
                fields["id"] = str(sample_id)
            fields.update({k: v for k, v in refs.items() if v is not None})
            fields["latency_ms"] = latency_ms
            meta: dict[str, Any] = {"framework": "haystack"}
            extra = run_metadata(metadata)
            if extra:
                meta["run_metadata"] = extra
            fields["metadata"] = meta
            if error is not None:
                fields["error"] = describe(error)
            question = self._question(data)
            if question is not None:
                fields["user_input"] = question
            notes: list[str] = []
            if result is not None:
                fields.update(self._from_outputs(result, notes))
            sample = validated_sample(fields, notes)
            if notes:
                self._capture_failed_log(notes[0])
            self.add(sample)
        except Exception as exc:
            self._capture_failed(exc, fields, latency_ms)

    def _capture_failed(self, exc: Exception, fields: Mapping[str, Any], latency_ms: float) -> None:
        message = self._capture_failed_log(describe(exc), exc)
        try:
            sid = fields.get("id")
            record: dict[str, Any] = {
                "latency_ms": latency_ms,
                "metadata": {"framework": "haystack", "capture_errors": [message]},
            }
            if isinstance(sid, str):
                record["id"] = sid
            sample = RagSample.model_validate(record)
            self.add(sample)
        except Exception:  # the store itself failed: nothing more can be done
            logger.debug("ragmeter could not record the capture error", exc_info=True)

    def _capture_failed_log(self, message: str, exc: Exception | None = None) -> str:
        """Log a capture error: a warning the first time per recorder, then DEBUG."""
        with self._warn_lock:
            first, self._warned = not self._warned, True
        if first:
            logger.warning(
                "ragmeter could not capture a Haystack pipeline run (%s); the pipeline result "
                "is unaffected, the sample records the error in metadata['capture_errors']. "
                "Further capture errors of this recorder are logged at DEBUG level.",
                message,
                exc_info=exc,
            )
        else:
            logger.debug("ragmeter capture error: %s", message)
        return message

    def _question(self, data: Mapping[str, Any]) -> str | None:
        target = self.query_input
        candidates: list[tuple[str | None, str]] = []
        if target is not None and "." in target:
            comp, socket = target.split(".", 1)
            candidates.append((comp, socket))
            candidates.append((None, socket))
        else:
            names = (target,) if target is not None else _QUESTION_INPUTS
            for name in names:
                if self.retriever is not None:
                    candidates.append((self.retriever, name))
                candidates.append((None, name))
                candidates.extend((c, name) for c in data if isinstance(data[c], Mapping))
        for where, key in candidates:
            scope = data.get(where) if where is not None else data
            if isinstance(scope, Mapping):
                value = scope.get(key)
                if isinstance(value, str):
                    return value
        return None

    def _documents(self, result: Mapping[str, Any], name: str | None) -> list[Any] | None:
        if name is None:
            return None
        outputs = result.get(name)
        if not isinstance(outputs, Mapping) or self.documents_output not in outputs:
            return None
        docs = outputs[self.documents_output]
        return list(docs) if docs is not None else []

    def _from_outputs(self, result: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        docs = self._documents(result, self.retriever)
        if docs is not None:
            ids, missing = recorded_ids(docs, self.doc_id_field)
            out["retrieved_ids"] = dedupe_best_rank(ids)
            if missing:
                notes.append(
                    f"{missing} of {len(docs)} retrieved document(s) had no value for "
                    f"doc_id_field={self.doc_id_field!r}; their Document.id was used instead"
                )
            out["retrieved_texts"] = [doc.content or "" for doc in docs]
        contexts = self._documents(result, self.contexts)
        if contexts is not None:
            out["retrieved_contexts"] = [doc.content or "" for doc in contexts]
        if self.generator is not None:
            outputs = result.get(self.generator)
            replies = outputs.get(self.replies_output) if isinstance(outputs, Mapping) else None
            if replies:
                first = replies[0]
                text = reply_text(first)
                if text is not None:
                    out["response"] = text
                out.update(reply_usage(first))
        return out
