"""The offline default embedder: wordllama's static embeddings, loaded from its own wheel.

``pip install 'ragmeter[semantic]'`` brings `wordllama <https://github.com/dleemiller/WordLlama>`_
(MIT licence), whose wheel ships the ``l2_supercat`` token-embedding matrix (32,000 tokens x
256 dimensions, float16, 16 MB, ``wordllama/weights/l2_supercat_256.safetensors``) and its
tokenizer (``wordllama/tokenizers/l2_supercat_tokenizer_config.json``). :func:`default_embedder`
reads both files by their path inside the installed package, so nothing is ever downloaded:
it works with the network off. (``WordLlama.load(disable_download=True)`` cannot be used for
this in 0.4.0: it looks for the tokenizer in ``wordllama/tokenizer/``, not ``tokenizers/``.)

What a vector is: the mean of the text's token embeddings (wordllama's ``embed`` with its
defaults: no special tokens, no truncation, **not** normalised to unit length), as plain
Python floats, 256 of them (or the first 128 or 64 for the smaller models, wordllama's
Matryoshka truncations of the same matrix). Compare vectors by cosine, not by dot product.
A text with no tokens (``""``) is the zero vector. A text's vector does not depend on the
batch it is embedded in, so cached and fresh vectors agree exactly.

The :attr:`~WordLlamaEmbedder.identity` names the model, the SHA-256 of the weights file
that was read and the package version; reports record it, and it keys the embedding cache.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.embed.protocol import Vector
from ragmeter.errors import (
    InvalidInputError,
    InvalidTypeError,
    MissingDependencyError,
    RagmeterError,
)

__all__ = ["DEFAULT_MODEL", "MODELS", "WordLlamaEmbedder", "default_embedder"]

DEFAULT_MODEL = "wordllama-l2_supercat-256"
"""The model :func:`default_embedder` loads when none is named."""

MODELS: Mapping[str, int] = {
    "wordllama-l2_supercat-256": 256,
    "wordllama-l2_supercat-128": 128,
    "wordllama-l2_supercat-64": 64,
}
"""The models that load offline, with their dimension (all read the one packaged matrix)."""

_WEIGHTS = Path("weights", "l2_supercat_256.safetensors")
_TOKENIZER = Path("tokenizers", "l2_supercat_tokenizer_config.json")
_TENSOR = "embedding.weight"
_PAD_CELLS = 1 << 16
"""Most (texts x longest text) token cells per wordllama call; it pads a batch to its longest
text, so one long context among short ones would otherwise cost batch x longest memory."""
_MAX_BATCH = 64
_SLICE_TOKENS = 1 << 13
"""A text too long for the padding budget is summed this many token vectors at a time."""


@dataclass(frozen=True, eq=False)
class WordLlamaEmbedder:
    """An :class:`~ragmeter.embed.Embedder` over wordllama's packaged static embeddings.

    Made by :func:`default_embedder`; pickles by model name, so a Dask worker loads the
    weights from its own installation instead of receiving 16 MB per task.
    """

    model: str
    """One of :data:`MODELS`."""
    identity: Mapping[str, Any]
    """``{"model": ..., "weights_sha256": ..., "package": "wordllama==<version>"}``."""
    _inference: Any = field(repr=False)

    @property
    def dimension(self) -> int:
        """How many floats each vector has."""
        return MODELS[self.model]

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, computed in a worker thread (the event loop never blocks)."""
        return await asyncio.to_thread(self.embed_sync, texts)

    def embed_sync(self, texts: Sequence[str]) -> list[Vector]:
        """:meth:`embed` without the event loop.

        >>> vectors = default_embedder().embed_sync(["Paris", ""])
        >>> [len(v) for v in vectors], vectors[1][:2]
        ([256, 256], [0.0, 0.0])
        """
        sizes = [_utf8_size(i, text, self.model) for i, text in enumerate(texts)]
        out: list[Vector] = [[] for _ in texts]
        for chunk in _chunks(sizes):
            if len(chunk) == 1 and sizes[chunk[0]] >= _PAD_CELLS:
                out[chunk[0]] = _embed_long(self._inference, texts[chunk[0]])
                continue
            batch = [texts[i] for i in chunk]
            matrix = self._inference.embed(batch, norm=False, batch_size=len(batch))
            for i, row in zip(chunk, matrix.tolist(), strict=True):
                out[i] = row
        return out

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (default_embedder, (self.model,))


def _utf8_size(i: int, text: object, model: str) -> int:
    """The UTF-8 length of text ``i``, or an error naming it when it is no text to embed."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"{model} embeds strings; text {i} is {type(text).__name__}")
    try:
        return len(text.encode())
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"text {i} is not valid Unicode: {exc.reason} at character {exc.start} "
            f"({text[exc.start : exc.start + 1]!r}); the tokenizer cannot read it"
        ) from None


def _embed_long(inference: Any, text: str) -> Vector:
    """wordllama's vector for one long text, its token vectors summed a slice at a time.

    Memory stays at one slice (wordllama's ``embed`` would hold all of the text's token
    vectors, twice); the sum runs row after row from the first token, in the order wordllama's
    own sum takes, so the vector is the same.
    """
    matrix = inference.embedding
    ids = np.asarray(inference.tokenize([text])[0].ids, dtype=np.int64)
    np.clip(ids, 0, matrix.shape[0] - 1, out=ids)
    total = np.zeros((1, matrix.shape[1]), dtype=np.float32)
    for start in range(0, len(ids), _SLICE_TOKENS):
        rows = np.concatenate([total, matrix[ids[start : start + _SLICE_TOKENS]]])
        total = rows.sum(axis=0, keepdims=True, dtype=np.float32)
    return [float(x) for x in (total[0] / np.float32(max(len(ids), 1))).tolist()]


def _chunks(sizes: Sequence[int]) -> list[list[int]]:
    """Indices grouped so each group's count x (largest size + 1) stays within the budget.

    Shortest first, so texts of similar length share a batch; a text over the budget is
    embedded alone. ``sizes`` are UTF-8 byte counts, an upper bound on token counts (plus one).

    >>> _chunks([5, 70000, 3])
    [[2, 0], [1]]
    """
    groups: list[list[int]] = []
    for i in sorted(range(len(sizes)), key=sizes.__getitem__):
        group = groups[-1] if groups else None
        if group and len(group) < _MAX_BATCH and (len(group) + 1) * (sizes[i] + 1) <= _PAD_CELLS:
            group.append(i)
        else:
            groups.append([i])
    return groups


_LOADED: dict[str, WordLlamaEmbedder] = {}
_LOCK = threading.Lock()


def default_embedder(model: str | None = None) -> WordLlamaEmbedder:
    """The offline embedder, loaded once per process (later calls return the same object).

    ``model`` is one of :data:`MODELS` (default :data:`DEFAULT_MODEL`). Raises
    :class:`~ragmeter.errors.MissingDependencyError` (an ``ImportError``) naming
    ``pip install 'ragmeter[semantic]'`` when wordllama is not installed.

    >>> e = default_embedder()
    >>> e is default_embedder(), e.identity["model"], e.dimension
    (True, 'wordllama-l2_supercat-256', 256)
    """
    name = DEFAULT_MODEL if model is None else model
    if not isinstance(name, str):
        raise InvalidTypeError(f"model must be a string, got {type(name).__name__}")
    if name not in MODELS:
        raise InvalidInputError(
            f"unknown offline embedding model {name!r}; the ones shipped in wordllama's wheel "
            f"are {', '.join(map(repr, MODELS))}. For any other model, wrap it with an adapter "
            "or ragmeter.embed.FunctionEmbedder."
        )
    with _LOCK:
        if name not in _LOADED:
            _LOADED[name] = _load(name)
        return _LOADED[name]


def _import_wordllama() -> tuple[Any, Any, Any, Path]:
    """``(WordLlamaInference, safetensors.numpy.load, tokenizers.Tokenizer, package folder)``.

    Importing wordllama calls ``logging.basicConfig(level=INFO)``, which would make every
    library's INFO logs print on stderr; the root logger is put back as it was.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
        from safetensors.numpy import load
        from tokenizers import Tokenizer
        from wordllama import WordLlamaInference
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "wordllama", "semantic") from exc
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)
    return WordLlamaInference, load, Tokenizer, Path(wordllama.__file__).parent


def _load(model: str, root: Path | None = None) -> WordLlamaEmbedder:
    """Read the weights and tokenizer under ``root`` (default: the installed package)."""
    inference_cls, load_tensors, tokenizer_cls, package = _import_wordllama()
    root = package if root is None else root
    version = importlib.metadata.version("wordllama")
    for path in (root / _WEIGHTS, root / _TOKENIZER):
        if not path.is_file():
            raise RagmeterError(
                f"wordllama {version} has no {path}: ragmeter's offline embedder reads the "
                "weights and tokenizer its wheel ships; reinstall with "
                "pip install --force-reinstall 'ragmeter[semantic]'"
            )
    data = (root / _WEIGHTS).read_bytes()
    matrix = load_tensors(data)[_TENSOR][:, : MODELS[model]]
    inference = inference_cls(matrix, tokenizer_cls.from_file(str(root / _TOKENIZER)))
    identity = {
        "model": model,
        "weights_sha256": hashlib.sha256(data).hexdigest(),
        "package": f"wordllama=={version}",
    }
    return WordLlamaEmbedder(model=model, identity=identity, _inference=inference)
