"""What every framework adapter shares: id rules, metadata keys and the sample store.

Adapters only translate framework events into :class:`~ragmeter.schema.RagSample` fields;
storing, joining to qrels, writing JSONL and scoring happen here, identically for
LangChain, Haystack and LlamaIndex. A user who switches framework keeps ``.samples``,
``.to_run()``, ``.clear()``, ``.to_jsonl()`` and ``.evaluate()``.

Metadata keys a user can pass with a run (``config["metadata"]`` in LangChain, a
``sample_id=``/metadata argument in Haystack, ``instrument_tags`` in LlamaIndex):

=========================  ==================================================
``ragmeter_id``            the sample id (joins captured samples to qrels)
``ragmeter_reference``     the ground-truth answer (``reference``)
``ragmeter_references``    further acceptable answers (``references``)
``ragmeter_reference_ids`` relevant doc ids (``reference_ids``)
``ragmeter_relevance``     graded relevance ``{doc_id: grade}``
=========================  ==================================================
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ragmeter.schema import RagSample, samples_to_qrels, samples_to_run

if TYPE_CHECKING:
    from ragmeter.report import RagEvalReport, RetrievalEvalReport

__all__ = [
    "ID_KEY",
    "METADATA_FIELDS",
    "SampleStore",
    "content_doc_id",
    "describe",
    "fields_from_metadata",
    "jsonable",
    "run_metadata",
    "validated_sample",
]

logger = logging.getLogger("ragmeter")
logger.addHandler(logging.NullHandler())

ID_KEY = "ragmeter_id"
METADATA_FIELDS: dict[str, str] = {
    "ragmeter_id": "id",
    "ragmeter_reference": "reference",
    "ragmeter_references": "references",
    "ragmeter_reference_ids": "reference_ids",
    "ragmeter_relevance": "relevance",
}
"""Run-metadata key -> RagSample field it fills."""


def content_doc_id(text: str) -> str:
    """A stable id for a document that has none: ``"sha256:"`` + 16 hex chars of its text.

    The same text always gets the same id (across processes and machines), so a run
    captured twice joins to the same qrels.

    >>> content_doc_id("Paris is the capital of France.")
    'sha256:557be7eca214f188'
    """
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def fields_from_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The RagSample fields a run's metadata sets (see the module table).

    >>> fields_from_metadata({"ragmeter_id": "q12", "ragmeter_reference_ids": ["d1"], "x": 1})
    {'id': 'q12', 'reference_ids': ['d1']}
    """
    out: dict[str, Any] = {}
    if not metadata:
        return out
    for key, field in METADATA_FIELDS.items():
        if key in metadata and metadata[key] is not None:
            value = metadata[key]
            out[field] = str(value) if field == "id" else value
    return out


# Assembling a captured sample without ever failing the user's run: what is captured is
# JSON-safe, the user's own run metadata sits under ``metadata["run_metadata"]``, and a field
# that does not validate is left out and noted in ``metadata["capture_errors"]`` instead of
# costing the whole sample. Every adapter builds its samples with these.


def describe(exc: BaseException) -> str:
    """``"ValueError: message"``: how a captured exception is recorded."""
    return f"{type(exc).__name__}: {exc}"


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` made JSON-safe (``to_jsonl`` must not fail on captured metadata).

    Strings, ints, bools and ``None`` stay; a NaN or infinite float and any other object
    become their ``str``; mappings and lists are converted item by item (8 levels deep).

    >>> jsonable({"when": float("nan"), "ids": (1, "a"), 2: {3}})
    {'when': 'nan', 'ids': [1, 'a'], '2': '{3}'}
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth < 8:
        if isinstance(value, Mapping):
            return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [jsonable(v, depth + 1) for v in value]
    return str(value)


def run_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The user's run metadata minus the ``ragmeter_*`` keys that fill sample fields, JSON-safe.

    >>> run_metadata({"ragmeter_id": "q1", "team": "search"})
    {'team': 'search'}
    """
    if not metadata:
        return {}
    return {str(k): jsonable(v) for k, v in metadata.items() if k not in METADATA_FIELDS}


def validated_sample(fields: dict[str, Any], errors: list[str]) -> RagSample:
    """A ``RagSample`` from ``fields``; a field that does not validate is left out.

    What was left out, and why, is appended to ``errors``; a non-empty ``errors`` becomes
    ``metadata["capture_errors"]``. Only ``id`` and ``metadata`` are always kept.

    >>> errors: list[str] = []
    >>> s = validated_sample({"id": "q1", "latency_ms": -1.0, "response": "ok"}, errors)
    >>> s.id, s.response, s.latency_ms, s.metadata["capture_errors"] == errors
    ('q1', 'ok', None, True)
    >>> errors
    ['invalid latency_ms left out: Input should be greater than or equal to 0 (got -1.0)']
    """
    try:
        return RagSample.model_validate(_with_errors(fields, errors))
    except ValidationError as exc:
        problems = exc.errors()
    bad = sorted({str(p["loc"][0]) for p in problems if p.get("loc")} - {"id", "metadata"})
    msg, got = (problems[0]["msg"], problems[0].get("input")) if problems else ("?", None)
    errors.append(f"invalid {', '.join(bad) or 'sample'} left out: {msg} (got {got!r:.80})")
    kept = {k: v for k, v in fields.items() if k not in bad}
    try:
        return RagSample.model_validate(_with_errors(kept, errors))
    except ValidationError:
        core = {k: fields[k] for k in ("id",) if isinstance(fields.get(k), str)}
        return RagSample.model_validate(_with_errors(core, errors))


def _with_errors(fields: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    if not errors:
        return fields
    meta = dict(fields.get("metadata") or {})
    meta["capture_errors"] = list(errors)
    return {**fields, "metadata": meta}


class SampleStore:
    """A thread-safe, append-only list of captured samples (the adapters' shared surface).

    ``max_samples`` bounds memory: when set, the oldest samples are dropped past it (and
    ``dropped`` counts them).

    >>> store = SampleStore()
    >>> store.add(RagSample(id="q1", retrieved_ids=["d1", "d2"], reference_ids=["d2"]))
    >>> store.to_run()
    {'q1': ['d1', 'd2']}
    >>> store.evaluate_retrieval({"q1": {"d2": 1}}, k_values=(2,), metrics=["recall"]).metrics
    {'recall@2': 1.0}
    """

    def __init__(self, *, max_samples: int | None = None) -> None:
        self._lock = threading.RLock()
        self._samples: list[RagSample] = []
        self.max_samples = max_samples
        self.dropped = 0

    def add(self, sample: RagSample) -> None:
        """Append one finished sample."""
        with self._lock:
            self._samples.append(sample)
            if self.max_samples is not None and len(self._samples) > self.max_samples:
                excess = len(self._samples) - self.max_samples
                del self._samples[:excess]
                self.dropped += excess

    @property
    def samples(self) -> list[RagSample]:
        """The captured samples in completion order (a copy)."""
        with self._lock:
            return list(self._samples)

    def clear(self) -> None:
        """Forget every captured sample."""
        with self._lock:
            self._samples.clear()
            self.dropped = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._samples)

    def to_run(self) -> dict[str, list[str]]:
        """``{sample_id: [doc_id, ...]}``, ready for :func:`ragmeter.evaluate_run`."""
        return samples_to_run(self.samples)

    def to_qrels(self) -> dict[str, dict[str, float]]:
        """``{sample_id: {doc_id: grade}}`` from the relevance the samples carry."""
        return samples_to_qrels(self.samples)

    def to_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write the samples as JSONL (see :mod:`ragmeter.io.jsonl`); returns the count."""
        from ragmeter.io.jsonl import write_jsonl

        return write_jsonl(self.samples, path)

    def evaluate(self, **kwargs: Any) -> RagEvalReport:
        """Score the captured samples with :func:`ragmeter.evaluate_rag` (kwargs pass through)."""
        from ragmeter.evaluation.rag import evaluate_rag

        return evaluate_rag(self.samples, **kwargs)

    def evaluate_retrieval(
        self, qrels: Mapping[str, Mapping[str, float]] | None = None, **kwargs: Any
    ) -> RetrievalEvalReport:
        """Score the captured run with :func:`ragmeter.evaluate_run`.

        ``qrels`` defaults to the relevance carried by the samples themselves.
        """
        from ragmeter.evaluation.retrieval import evaluate_run

        return evaluate_run(
            qrels if qrels is not None else self.to_qrels(), self.to_run(), **kwargs
        )

    def extend(self, samples: Iterable[RagSample]) -> None:
        """Append several samples."""
        for s in samples:
            self.add(s)
