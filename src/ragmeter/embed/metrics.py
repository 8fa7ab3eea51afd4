"""The embedding metrics: what each one embeds for a sample, and how it scores the vectors.

Three metrics, each a :class:`~ragmeter.metrics.base.RagMetric` with an ``embedder`` (any
:class:`~ragmeter.embed.Embedder`; ``None`` = the offline default model of
``ragmeter[semantic]``, loaded when the metric first runs):

* :class:`SemanticSimilarity` (``semantic_similarity``): cosine of the answer's vector and
  the reference's; with several references, the best of them (as ``token_f1``). With
  ``threshold``, 1.0 when that cosine is ``>= threshold`` and 0.0 otherwise.
* :class:`SemanticContextRecall` (``semantic_context_recall``): the share of the reference's
  sentences whose best cosine with any sentence of the retrieved contexts is ``>=
  threshold``.
* :class:`SemanticContextPrecision` (``semantic_context_precision``): the share of the
  retrieved contexts whose vector reaches ``threshold`` with the reference's or the
  answer's.

The math and its conventions (raw cosine, zero vectors, ``>=``, sentence splitting) are in
:mod:`ragmeter.embed.similarity`. The frameworks' own answer-similarity evaluators compute
the same number as ``semantic_similarity`` given the same model; where they differ:

=================  ===================  =====================  ===========================
                   Haystack SAS         LlamaIndex semantic    Ragas SemanticSimilarity
                   (bi-encoder)         similarity evaluator
=================  ===================  =====================  ===========================
similarity         ``util.cos_sim``     dot / (norm * norm)    dot of L2-normalised vectors
threshold          none                 ``passing`` if >= 0.8  score = (cos >= t) when t
                                        (score stays cosine)   is truthy (0 = no threshold)
empty answer       embeds ``""``        embeds ``""``          embeds ``" "`` instead
missing answer     ``ValueError``       ``ValueError``         embeds ``" "``
=================  ===================  =====================  ===========================

ragmeter scores an empty (blank) answer 0.0 without embedding it and notes it on the
report (``extra["embed_notes"]``); a sample with no reference is not scored (``None``, not
counted in ``coverage``), like every other metric that lacks what it needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

from ragmeter.embed.protocol import Embedder
from ragmeter.embed.similarity import (
    DEFAULT_MATCH_THRESHOLD,
    Matrix,
    best_matches,
    check_threshold,
    cosine,
    cosines,
    is_zero,
    sentences,
)
from ragmeter.errors import InvalidInputError, MissingDependencyError
from ragmeter.metrics.base import RagMetric, RagMetricRegistry
from ragmeter.schema import RagSample

__all__ = [
    "EMBED_METRICS",
    "EmbedMetric",
    "Scored",
    "SemanticContextPrecision",
    "SemanticContextRecall",
    "SemanticSimilarity",
    "load_default_embedder",
]

EMPTY_ANSWER = "empty answer (scored 0.0, not embedded)"
ZERO_VECTOR = "zero vector (its cosine is 0.0)"
NO_CONTEXT_TEXT = "no context has text (scored 0.0)"

Scored = tuple[float, list[str], dict[str, Any] | None]
"""What a metric makes of one sample's vectors: the score, notes, and drill-down detail."""

Vectors = Mapping[str, Sequence[float] | Matrix]
"""Text -> its vector (a list of floats, or a row of a numpy matrix)."""


def load_default_embedder() -> Embedder:
    """The offline default embedder of ``ragmeter[semantic]``
    (:func:`ragmeter.embed.default.default_embedder`); a
    :class:`~ragmeter.errors.MissingDependencyError` naming the extra when it is missing."""
    try:
        default = importlib.import_module("ragmeter.embed.default")
    except MissingDependencyError:
        raise
    except ImportError:
        raise MissingDependencyError("wordllama", "semantic") from None
    embedder: Embedder = default.default_embedder()
    return embedder


class EmbedMetric(RagMetric):
    """Shared machinery of the embedding metrics (see the module docstring).

    Subclasses define ``name``, ``needs``, ``requirement`` (what a sample needs, for
    messages), :meth:`applies_to`, :meth:`texts` and :meth:`compute`.
    """

    version: ClassVar[str] = "1"
    requirement: ClassVar[str] = ""
    default_threshold: ClassVar[float | None] = None
    threshold_required: ClassVar[bool] = False

    def __init__(
        self, embedder: Embedder | None = None, *, threshold: float | str | None = "default"
    ) -> None:
        if embedder is not None and not isinstance(embedder, Embedder):
            raise InvalidInputError(
                f"{type(self).__name__}(embedder=...) needs an embedder with .identity and "
                f"async .embed(texts); got {type(embedder).__name__}. Wrap a framework model "
                "with ragmeter_langchain.embedder(...), ragmeter_llamaindex.embedder(...), "
                "ragmeter_haystack.embedder(...) or ragmeter.embed.FunctionEmbedder(fn)"
            )
        chosen = self.default_threshold if threshold == "default" else threshold
        self.threshold = check_threshold(chosen, name=f"{self.name} threshold")
        if self.threshold is None and self.threshold_required:
            raise InvalidInputError(
                f"{self.name} needs a threshold (a cosine in [-1, 1]); got None"
            )
        self.embedder = embedder

    def texts(self, sample: RagSample) -> list[str]:
        """The non-blank texts whose vectors :meth:`compute` needs for ``sample``."""
        raise NotImplementedError

    def compute(self, sample: RagSample, vectors: Vectors) -> Scored:
        """Score ``sample`` from ``vectors`` (text -> vector, holding every :meth:`texts`)."""
        raise NotImplementedError

    def compute_many(self, samples: Sequence[RagSample], vectors: Vectors) -> list[Scored]:
        """:meth:`compute` for each of ``samples`` (each one it applies to, every text's
        vector at hand); a metric may do it in one vectorised pass, with the same results."""
        return [self.compute(sample, vectors) for sample in samples]

    def score(self, sample: RagSample) -> float | None:
        """Score one sample on its own (no cache, one batch per call of the model).

        :func:`ragmeter.evaluate_rag` does not use this: it embeds every distinct text of
        a run once, in batches, through the cache.
        """
        if not self.applies_to(sample):
            return None
        from ragmeter.embed.runner import run_embeddings

        run = run_embeddings([sample], [self], cache=None)
        return run.scores.get(sample.id, {}).get(self.name)

    def __repr__(self) -> str:
        model = None if self.embedder is None else dict(self.embedder.identity).get("model")
        shown = "default" if self.embedder is None else repr(model)
        return f"{type(self).__name__}(embedder={shown}, threshold={self.threshold!r})"


def _references(sample: RagSample) -> list[str]:
    return [r for r in sample.all_references() if r.strip()]


def _contexts(sample: RagSample) -> list[str]:
    return list(sample.retrieved_contexts or [])


def _zero_note(vectors: Vectors, texts: Sequence[str]) -> list[str]:
    return [ZERO_VECTOR] if any(is_zero(vectors[t]) for t in texts) else []


def _matrix(vectors: Vectors, texts: Sequence[str]) -> Matrix:
    import numpy as np

    if not texts:
        return np.zeros((0, 0), dtype=np.float64)
    return np.asarray([vectors[t] for t in texts], dtype=np.float64)


class SemanticSimilarity(EmbedMetric):
    """Cosine similarity of the answer and the reference (best over references), in
    ``[-1, 1]``; with ``threshold``, 1.0 or 0.0. A blank answer scores 0.0 (a note).

    >>> from ragmeter.embed.protocol import FunctionEmbedder
    >>> e = FunctionEmbedder(lambda ts: [[1.0, float(len(t) > 5)] for t in ts], model="toy")
    >>> SemanticSimilarity(e).score(RagSample(response="Paris", reference="In Paris."))
    0.7071067811865475
    >>> SemanticSimilarity(e, threshold=0.7).score(RagSample(response="Paris", reference="x"))
    1.0
    """

    name: ClassVar[str] = "semantic_similarity"
    needs: ClassVar[frozenset[str]] = frozenset({"response", "reference"})
    requirement: ClassVar[str] = "a response (may be empty) and a non-blank reference"

    def applies_to(self, sample: RagSample) -> bool:
        """A response (an empty one too: it scores 0.0) and a non-blank reference."""
        return sample.response is not None and bool(_references(sample))

    def texts(self, sample: RagSample) -> list[str]:
        """The answer (unless blank) and the non-blank references, as they are."""
        response = sample.response or ""
        return ([response] if response.strip() else []) + _references(sample)

    def compute(self, sample: RagSample, vectors: Vectors) -> Scored:
        """See the class docstring."""
        response = sample.response or ""
        if not response.strip():
            return 0.0, [EMPTY_ANSWER], None
        refs = _references(sample)
        best = max(cosine(vectors[response], vectors[r]) for r in refs)
        return self._scored(best, any(is_zero(vectors[t]) for t in [response, *refs]))

    def compute_many(self, samples: Sequence[RagSample], vectors: Vectors) -> list[Scored]:
        """:meth:`compute` for many samples: every (answer, reference) cosine in vectorised
        passes by :func:`~ragmeter.embed.similarity.cosines`, each distinct text's vector
        scaled once (equal to :meth:`compute` to ~1e-16)."""
        rows: dict[str, int] = {}  # text -> its row in the matrix
        left: list[int] = []
        right: list[int] = []
        owners: list[int] = []  # pair -> the index of its sample
        for k, sample in enumerate(samples):
            response = sample.response or ""
            if response.strip():
                for ref in _references(sample):
                    left.append(rows.setdefault(response, len(rows)))
                    right.append(rows.setdefault(ref, len(rows)))
                    owners.append(k)
        matrix = _matrix(vectors, list(rows))
        nonzero = cast(list[bool], matrix.any(axis=1).tolist()) if rows else []
        zero = [not x for x in nonzero]
        best: dict[int, float] = {}
        has_zero: dict[int, bool] = {}
        for k, a, b, value in zip(owners, left, right, cosines(matrix, left, right), strict=True):
            best[k] = max(best[k], value) if k in best else value
            has_zero[k] = has_zero.get(k, False) or zero[a] or zero[b]
        return [
            self._scored(best[k], has_zero[k]) if k in best else (0.0, [EMPTY_ANSWER], None)
            for k in range(len(samples))
        ]

    def _scored(self, best: float, has_zero: bool) -> Scored:
        notes = [ZERO_VECTOR] if has_zero else []
        if self.threshold is None:
            return best, notes, None
        return (1.0 if best >= self.threshold else 0.0), notes, {"cosine": best}


class SemanticContextRecall(EmbedMetric):
    """Share of the reference's sentences whose best cosine with a sentence of the
    retrieved contexts is ``>= threshold`` (default
    :data:`~ragmeter.embed.similarity.DEFAULT_MATCH_THRESHOLD`). Contexts with no text at
    all score 0.0 (a note)."""

    name: ClassVar[str] = "semantic_context_recall"
    needs: ClassVar[frozenset[str]] = frozenset({"reference", "retrieved_contexts"})
    requirement: ClassVar[str] = "a non-blank reference and retrieved_contexts"
    default_threshold: ClassVar[float | None] = DEFAULT_MATCH_THRESHOLD
    threshold_required: ClassVar[bool] = True

    def applies_to(self, sample: RagSample) -> bool:
        """A non-blank reference and a non-empty list of contexts."""
        return bool(_references(sample)) and bool(_contexts(sample))

    def texts(self, sample: RagSample) -> list[str]:
        """The sentences of the references and of the contexts."""
        refs = [s for r in _references(sample) for s in sentences(r)]
        return refs + [s for c in _contexts(sample) for s in sentences(c)]

    def compute(self, sample: RagSample, vectors: Vectors) -> Scored:
        """See the class docstring."""
        wanted = list(dict.fromkeys(s for r in _references(sample) for s in sentences(r)))
        found = list(dict.fromkeys(s for c in _contexts(sample) for s in sentences(c)))
        if not found:
            return 0.0, [NO_CONTEXT_TEXT], None
        best = best_matches(_matrix(vectors, wanted), _matrix(vectors, found))
        assert self.threshold is not None  # threshold_required
        missed = [s for s, b in zip(wanted, best, strict=True) if b < self.threshold]
        notes = _zero_note(vectors, [*wanted, *found])
        detail = {"missed": missed} if missed else None
        return (len(wanted) - len(missed)) / len(wanted), notes, detail


class SemanticContextPrecision(EmbedMetric):
    """Share of the retrieved contexts whose vector reaches ``threshold`` with the
    reference's or the answer's (a blank context never does). Needs the contexts and a
    non-blank reference or answer."""

    name: ClassVar[str] = "semantic_context_precision"
    needs: ClassVar[frozenset[str]] = frozenset({"retrieved_contexts"})
    requirement: ClassVar[str] = "retrieved_contexts and a non-blank reference or response"
    default_threshold: ClassVar[float | None] = DEFAULT_MATCH_THRESHOLD
    threshold_required: ClassVar[bool] = True

    def _targets(self, sample: RagSample) -> list[str]:
        response = sample.response or ""
        return _references(sample) + ([response] if response.strip() else [])

    def applies_to(self, sample: RagSample) -> bool:
        """Contexts, and a non-blank reference or response."""
        return bool(_contexts(sample)) and bool(self._targets(sample))

    def texts(self, sample: RagSample) -> list[str]:
        """The non-blank contexts, the references and the answer, as they are."""
        return [c for c in _contexts(sample) if c.strip()] + self._targets(sample)

    def compute(self, sample: RagSample, vectors: Vectors) -> Scored:
        """See the class docstring."""
        contexts = _contexts(sample)
        targets = list(dict.fromkeys(self._targets(sample)))
        texts = [c for c in contexts if c.strip()]
        best = dict(
            zip(
                texts, best_matches(_matrix(vectors, texts), _matrix(vectors, targets)), strict=True
            )
        )
        assert self.threshold is not None  # threshold_required
        matched = [c.strip() != "" and best[c] >= self.threshold for c in contexts]
        notes = _zero_note(vectors, [*texts, *targets])
        detail = {"matched": matched}
        return sum(matched) / len(contexts), notes, detail


EMBED_METRICS = RagMetricRegistry()
"""The embedding metrics by name (``semantic_similarity``, ``semantic_context_recall``,
``semantic_context_precision``); by name they use the offline default embedder. They are
kept out of :data:`~ragmeter.metrics.base.RAG_METRICS` (metrics that call no model):
:func:`ragmeter.evaluate_rag` takes their names and objects all the same."""

for _cls in (SemanticSimilarity, SemanticContextRecall, SemanticContextPrecision):
    EMBED_METRICS.register(_cls())
