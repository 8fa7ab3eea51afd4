"""The offline default embedder: wordllama's packaged weights, loaded with the network off.

Oracles: the wheel's own RECORD (the SHA-256 pip checked at install), wordllama's own loader
and ``embed`` (pointed at its package folder), and scipy's cosine distance.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import importlib.metadata
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.spatial.distance import cosine

from ragmeter.embed import Embedder
from ragmeter.embed import default as default_module
from ragmeter.embed.default import DEFAULT_MODEL, MODELS, default_embedder
from ragmeter.errors import InvalidInputError, InvalidTypeError, MissingDependencyError

SRC = Path(__file__).resolve().parents[2] / "src"
DOC = Path(__file__).resolve().parents[2] / "docs" / "semantic_default.md"

TEXTS = [
    "The capital of France is Paris",
    "Paris is France's capital",
    "Bananas are yellow",
    "",
    "   ",
    "Ünïcödé — 東京 🚀 text",
    "a long retrieved context that pads a batch " * 3000,  # over the padding budget
]


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports this worktree's ragmeter."""
    full_env = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120
    )


def _record_sha256(name: str) -> str:
    """The SHA-256 (hex) that the installed wheel's RECORD gives for the file ``name``."""
    dist = importlib.metadata.distribution("wordllama")
    (entry,) = [f for f in dist.files or [] if f.name == name and f.hash is not None]
    assert entry.hash is not None and entry.hash.mode == "sha256"
    value = entry.hash.value
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()


_OFFLINE = """
import json, socket, sys
attempts = []
def refuse(*args, **kwargs):
    attempts.append(repr(args[:2]))
    raise OSError("network is off in this test")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

import asyncio
from ragmeter.embed.default import default_embedder
e = default_embedder()
vectors = asyncio.run(e.embed(["The capital of France is Paris", "Paris is France's capital"]))
print(json.dumps({"identity": dict(e.identity), "dims": [len(v) for v in vectors],
                  "attempts": attempts}))
"""


def test_loads_and_embeds_with_the_network_off(tmp_path: Path) -> None:
    """Sockets refuse to connect, proxies point at a closed port (so native HTTP clients fail
    too) and HOME is empty (no cached download to fall back on): it still loads and embeds."""
    dead = "http://127.0.0.1:9"
    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"), "NO_PROXY": ""}
    env |= {"HTTP_PROXY": dead, "HTTPS_PROXY": dead, "ALL_PROXY": dead}
    env |= {"http_proxy": dead, "https_proxy": dead, "all_proxy": dead, "HF_HOME": str(tmp_path)}
    done = _run(_OFFLINE, env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["attempts"] == []
    assert out["dims"] == [256, 256]
    assert out["identity"]["weights_sha256"] == _record_sha256("l2_supercat_256.safetensors")
    assert list(tmp_path.iterdir()) == []  # nothing downloaded or cached under HOME


def test_identity_names_the_model_the_packaged_weights_and_the_version() -> None:
    first = default_module._load(DEFAULT_MODEL)  # two real loads, not the per-process cache
    second = default_module._load(DEFAULT_MODEL)
    assert first is not second
    assert first.identity == second.identity
    import wordllama

    weights = Path(wordllama.__file__).parent / "weights" / "l2_supercat_256.safetensors"
    assert first.identity == {
        "model": "wordllama-l2_supercat-256",
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "package": f"wordllama=={importlib.metadata.version('wordllama')}",
    }
    assert first.identity["weights_sha256"] == _record_sha256(weights.name)
    assert default_embedder() is default_embedder(DEFAULT_MODEL)
    assert isinstance(default_embedder(), Embedder)
    small = default_embedder("wordllama-l2_supercat-64").identity
    assert small["model"] == "wordllama-l2_supercat-64"
    assert small["weights_sha256"] == first.identity["weights_sha256"]


@pytest.mark.parametrize("model", list(MODELS))
def test_vectors_are_wordllama_s_own(model: str) -> None:
    """Equal to what wordllama's own loader gives (its cache folder pointed at its package
    folder, the one way its disable_download finds the tokenizer), batching included."""
    import wordllama

    package = Path(wordllama.__file__).parent
    dim = MODELS[model]
    own = wordllama.WordLlama.load(
        cache_dir=package, disable_download=True, trunc_dim=None if dim == 256 else dim
    )
    expected = own.embed(TEXTS, norm=False)
    got = np.array(default_embedder(model).embed_sync(TEXTS), dtype=np.float32)
    assert got.shape == (len(TEXTS), dim)
    np.testing.assert_array_equal(got, expected)
    alone = np.array([default_embedder(model).embed_sync([t])[0] for t in TEXTS], np.float32)
    np.testing.assert_array_equal(alone, expected)  # a vector does not depend on its batch


def test_vectors_are_plain_floats_not_normalised_and_empty_is_zero() -> None:
    vectors = asyncio.run(default_embedder().embed(TEXTS[:4]))
    assert all(type(x) is float for v in vectors for x in v)
    norms = [float(np.linalg.norm(v)) for v in vectors]
    assert all(abs(n - 1.0) > 0.1 for n in norms[:3])  # wordllama's mean, not unit length
    assert vectors[3] == [0.0] * 256


def test_concurrent_calls_from_threads_give_the_same_vectors() -> None:
    """The metrics run several batches at once, each in a worker thread, on one embedder."""
    e = default_embedder()
    batches = [[f"{text} {i}" for text in TEXTS] for i in range(8)]

    async def all_at_once() -> list[list[list[float]]]:
        return list(await asyncio.gather(*(e.embed(batch) for batch in batches)))

    assert asyncio.run(all_at_once()) == [e.embed_sync(batch) for batch in batches]


def test_similar_sentences_are_closer_than_unrelated_ones() -> None:
    a, b, c, d = default_embedder().embed_sync(
        [
            "The capital of France is Paris",
            "Paris is France's capital",
            "Bananas are yellow",
            "What is the capital city of France?",
        ]
    )
    similar, unrelated = 1 - cosine(a, b), 1 - cosine(a, c)
    assert similar > unrelated + 0.5
    assert 1 - cosine(a, d) > 1 - cosine(c, d)


def test_without_the_extra_the_error_names_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['wordllama'] = None\n"
        "from ragmeter.embed.default import default_embedder\n"  # importable without it
        "from ragmeter.errors import MissingDependencyError\n"
        "try:\n    default_embedder()\n"
        "except MissingDependencyError as exc:\n"
        "    print(isinstance(exc, ImportError), exc)\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "True this feature needs the optional package 'wordllama': pip install 'ragmeter[semantic]'"
    )


def test_in_process_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ragmeter\[semantic\]'"):
        default_module._load(DEFAULT_MODEL)


def test_loading_leaves_the_root_logger_as_it_was() -> None:
    """wordllama's import calls logging.basicConfig(level=INFO); the loader undoes it."""
    probe = "import logging; r = logging.getLogger(); print(len(r.handlers), r.level)"
    bare = _run(f"import wordllama; {probe}")
    assert bare.stdout.split() == ["1", "20"], bare.stderr  # what the guard protects against
    guarded = _run(
        f"from ragmeter.embed.default import default_embedder; default_embedder(); {probe}"
    )
    assert guarded.stdout.split() == ["0", "30"], guarded.stderr


def test_a_packaged_file_that_is_missing_is_named(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"has no .*l2_supercat_256\.safetensors.*reinstall"):
        default_module._load(DEFAULT_MODEL, tmp_path)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(InvalidInputError, match=r"'wordllama-l3_supercat-256'.*shipped"):
        default_embedder("wordllama-l3_supercat-256")
    with pytest.raises(InvalidTypeError, match="model must be a string"):
        default_embedder(256)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="text 1 is bytes"):
        default_embedder().embed_sync(["fine", b"raw"])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match=r"text 2 is not valid Unicode.*character 1"):
        default_embedder().embed_sync(["fine", "ok", "a\ud800b"])


def test_pickles_by_name_and_loads_in_another_process() -> None:
    e = default_embedder("wordllama-l2_supercat-128")
    data = pickle.dumps(e)
    assert len(data) < 1000  # the name, not 16 MB of weights
    assert pickle.loads(data) is e
    code = (
        "import json, pickle, sys\n"
        "e = pickle.loads(sys.stdin.buffer.read())\n"
        "print(json.dumps([dict(e.identity), e.embed_sync(['Paris'])]))\n"
    )
    full_env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", code], input=data, capture_output=True, env=full_env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    identity, vectors = json.loads(done.stdout)
    assert identity == dict(e.identity)
    assert vectors == e.embed_sync(["Paris"])


@given(st.lists(st.integers(min_value=0, max_value=200_000), max_size=300))
def test_batches_respect_the_padding_budget(sizes: list[int]) -> None:
    groups = default_module._chunks(sizes)
    assert sorted(i for g in groups for i in g) == list(range(len(sizes)))
    for group in groups:
        assert len(group) <= default_module._MAX_BATCH
        longest = max(sizes[i] for i in group)
        assert len(group) == 1 or len(group) * (longest + 1) <= default_module._PAD_CELLS


def test_the_doc_example_prints_what_it_shows(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = DOC.read_text(encoding="utf-8").split("```")
    (code,) = [b.removeprefix("python\n") for b in blocks if b.startswith("python\n")]
    shown = blocks[blocks.index(f"python\n{code}") + 2]
    exec(compile(code, str(DOC), "exec"), {})
    assert capsys.readouterr().out == shown.strip("\n") + "\n"
