"""Benchmark: ``semantic_similarity`` in ragmeter against the frameworks' own evaluators, one model.

The same 10,000 (answer, reference) samples, scored with the **same** Sentence Transformers
model object (loaded once, handed to each framework's wrapper) by Haystack's
``SASEvaluator`` (bi-encoder, one ``run``), LlamaIndex's ``SemanticSimilarityEvaluator``
(``BatchEvalRunner(workers=2).aevaluate_response_strs``, over a thin ``BaseEmbedding`` that
calls the model's ``encode`` as ``HuggingFaceEmbedding`` does), Ragas' current
``SemanticSimilarity`` (its ``HuggingFaceEmbeddings`` provider, ``abatch_score``), and
ragmeter's ``evaluate_rag(samples, metrics=[SemanticSimilarity(embedder=...)])`` through the
Haystack and LlamaIndex bridges: cold with no cache, cold writing a new cache file, and warm
(0 model calls, asserted); plus the offline default (``metrics=["semantic_similarity"]``,
wordllama) with a new cache file. Every contender's per-sample scores are compared with
SAS's (max abs difference) in the same run.

**Data**: Cranfield sentences with the duplication of a real evaluation set (references
shared by paraphrased questions, repeated and stock answers; see :func:`make_samples`);
``--unique`` makes every text distinct. **Models** (built offline in a temporary folder,
seeded random weights, loaded by path): ``static`` (a ``StaticEmbedding``: microseconds a
text, so the libraries' own work shows), ``tiny-bert`` and ``minilm`` (random BERTs of the
shapes of ``google/bert_uncased_L-2_H-128_A-2`` and ``all-MiniLM-L6-v2``: model compute
dominates).

**How**: one process, contenders interleaved with the order rotating each round; CPU
seconds (``time.process_time``, all threads) and wall seconds, best of ``--repeat`` rounds
with the spread (worst/best); ratios are each contender's time over ragmeter's (Haystack
bridge, no cache), best against best and the median of the same-round ratios (steadier when
other jobs share the machine). Torch uses ``--threads`` intra-op threads (default 1).

    python benchmarks/bench_semantic.py                      # static model, best of 3
    python benchmarks/bench_semantic.py --model tiny-bert --slow-once LlamaIndex Ragas
    python benchmarks/bench_semantic.py --unique
    python benchmarks/bench_semantic.py --samples 1000 --repeat 1   # a quick look

Method, results and ratios: ``docs/semantic_speed.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.datasets import load_cranfield
from ragmeter.embed import EmbedCache, SemanticSimilarity
from ragmeter.evaluation.rag import evaluate_rag

STOCK_ANSWERS = ["the context does not say .", "i do not know .", "no information is given ."]
LEAD_INS = ["the answer is that", "according to the paper ,", "in short ,", "it was found that"]


# ------------------------------------------------------------------------------------- data


def corpus_sentences() -> tuple[list[str], list[str]]:
    """Cranfield's sentences of 8-40 words, and its queries (lower case, spaced punctuation)."""
    corpus, queries, _ = load_cranfield()
    sentences = []
    for text in corpus.values():
        for part in text.split(" . "):
            words = part.strip(" .").split()
            if 8 <= len(words) <= 40:
                sentences.append(" ".join(words) + " .")
    return sorted(set(sentences)), list(queries.values())


def _edited(rng: random.Random, reference: str) -> str:
    """A paraphrase-like edit: some words dropped, a phrase moved, maybe a lead-in."""
    words = [w for w in reference.split() if w == "." or rng.random() > 0.2]
    if len(words) > 6:
        cut = rng.randrange(1, len(words) - 3)
        span = words[cut : cut + 3]
        words = span + words[:cut] + words[cut + 3 :]
    if rng.random() < 0.4:
        words = rng.choice(LEAD_INS).split() + words
    return " ".join(words)


def make_samples(n: int, seed: int = 22) -> list[dict[str, str]]:
    """``n`` samples (id, user_input, response, reference): each reference is asked by 1-7
    paraphrased questions; 35% of answers repeat an earlier answer to the same reference, 5%
    are a stock answer, 5% copy the reference, 15% are another sentence (a wrong answer),
    the rest edited copies of the reference. No answer is empty (there the conventions
    differ: ``docs/semantic.md``)."""
    rng = random.Random(seed)
    sentences, queries = corpus_sentences()
    samples: list[dict[str, str]] = []
    while len(samples) < n:
        reference = rng.choice(sentences)
        question = rng.choice(queries)
        answers: list[str] = []
        for variant in range(rng.randint(1, 7)):
            draw = rng.random()
            if answers and draw < 0.35:
                answer = rng.choice(answers)
            elif draw < 0.40:
                answer = rng.choice(STOCK_ANSWERS)
            elif draw < 0.45:
                answer = reference
            elif draw < 0.60:
                answer = rng.choice(sentences)
            else:
                answer = _edited(rng, reference)
            answers.append(answer)
            samples.append(
                {
                    "id": f"s{len(samples)}",
                    "user_input": f"{question} (variant {variant})",
                    "response": answer,
                    "reference": reference,
                }
            )
    return samples[:n]


def describe(samples: list[dict[str, str]]) -> dict[str, Any]:
    texts = [s[k] for s in samples for k in ("response", "reference")]
    lengths = [len(t.split()) for t in texts]
    return {
        "samples": len(samples),
        "text_occurrences": len(texts),
        "distinct_texts": len(set(texts)),
        "duplication_rate": round(1 - len(set(texts)) / len(texts), 4),
        "distinct_references": len({s["reference"] for s in samples}),
        "distinct_answers": len({s["response"] for s in samples}),
        "mean_words": round(sum(lengths) / len(lengths), 1),
    }


# ----------------------------------------------------------------------------------- models


def _vocabulary(samples: list[dict[str, str]]) -> list[str]:
    words = {w for s in samples for k in ("response", "reference") for w in s[k].split()}
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]


def build_static(folder: Path, vocabulary: list[str], dim: int = 256, seed: int = 7) -> str:
    """A StaticEmbedding Sentence Transformers model over ``vocabulary``, saved to ``folder``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import BertConfig

    vocab = {w: i for i, w in enumerate(vocabulary)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    weights = np.random.default_rng(seed).normal(size=(len(vocab), dim)).astype(np.float32)
    model = SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=weights)])
    model.save(str(folder))
    # SASEvaluator.warm_up reads config.json to tell a bi-encoder from a cross-encoder
    BertConfig(architectures=["BertModel"]).save_pretrained(str(folder))
    return str(folder)


BERT_SHAPES = {
    # (layers, width, heads): the shapes of google/bert_uncased_L-2_H-128_A-2 and MiniLM-L6
    "tiny-bert": (2, 128, 2),
    "minilm": (6, 384, 12),
}


def build_bert(folder: Path, vocabulary: list[str], shape: str, seed: int = 7) -> str:
    """A randomly initialised BERT of ``BERT_SHAPES[shape]`` with mean pooling, saved."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    layers, width, heads = BERT_SHAPES[shape]
    raw = folder / "raw"
    raw.mkdir(parents=True)
    (raw / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(raw / "vocab.txt"), do_lower_case=True).save_pretrained(
        str(raw)
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocabulary),
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * width,
        architectures=["BertModel"],
    )
    BertModel(config).save_pretrained(str(raw))
    transformer = Transformer(str(raw), max_seq_length=128)
    width_of = getattr(transformer, "get_embedding_dimension", None)  # sentence-transformers 6
    dimension = width_of() if width_of else transformer.get_word_embedding_dimension()
    pooling = Pooling(dimension, pooling_mode="mean")
    out = folder / "model"
    SentenceTransformer(modules=[transformer, pooling]).save(str(out))
    return str(out)


def llamaindex_model(model: Any, name: str) -> Any:
    """A LlamaIndex ``BaseEmbedding`` around the shared Sentence Transformers model: what
    ``HuggingFaceEmbedding`` does (``encode``, batches of ``embed_batch_size``, 10 by
    default), without loading its own copy."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    class SharedSentenceTransformer(BaseEmbedding):
        _model: Any = PrivateAttr()

        def __init__(self, st_model: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._model = st_model

        def _encode(self, texts: list[str]) -> list[list[float]]:
            vectors = self._model.encode(
                texts, batch_size=self.embed_batch_size, show_progress_bar=False
            )
            return [[float(x) for x in row] for row in vectors.tolist()]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._encode([text])[0]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._encode([query])[0]

        async def _aget_text_embedding(self, text: str) -> list[float]:
            return self._get_text_embedding(text)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._encode(texts)

        async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._encode(texts)

    return SharedSentenceTransformer(model, model_name=name)


def padded_tokens(tokenizer: Any, samples: list[dict[str, str]], batch: int = 32) -> dict[str, int]:
    """Tokens the model reads (each text padded to its batch's longest) when Sentence
    Transformers' ``encode`` gets: SAS's two calls (all answers, all references); the
    distinct texts in ragmeter's batches of 64, first-seen order, sorted by characters, and
    sorted by :func:`ragmeter.embed.runner.text_length` (what the runner does). ``encode``
    sorts each call's texts by characters (longest first) and cuts them in ``batch``."""
    from ragmeter.embed.runner import text_length

    answers, references = [s["response"] for s in samples], [s["reference"] for s in samples]
    distinct = list(dict.fromkeys(answers + references))
    count = {t: len(tokenizer(t)["input_ids"]) for t in distinct}

    def encode(texts: list[str]) -> int:
        ordered = sorted(texts, key=len, reverse=True)
        return sum(
            len(part) * max(count[t] for t in part)
            for part in (ordered[i : i + batch] for i in range(0, len(ordered), batch))
        )

    def in_calls(texts: list[str]) -> int:
        return sum(encode(texts[i : i + 64]) for i in range(0, len(texts), 64))

    return {
        "sas_tokens": sum(count[t] for t in answers + references),
        "sas_read": encode(answers) + encode(references),
        "distinct_tokens": sum(count.values()),
        "ragmeter_read_first_seen": in_calls(distinct),
        "ragmeter_read_by_characters": in_calls(sorted(distinct, key=len)),
        "ragmeter_read_by_text_length": in_calls(sorted(distinct, key=text_length)),
    }


# ------------------------------------------------------------------------------- contenders

Scores = list[float]

MODEL_CPU = [0.0]
"""CPU seconds spent inside the shared model's ``encode`` (every thread), so far."""


def count_model_cpu(model: Any) -> None:
    """Wrap ``model.encode`` so each call adds its thread's CPU seconds to ``MODEL_CPU``:
    the model's own work, apart from the library's around it."""
    encode = model.encode

    def counted(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return encode(*args, **kwargs)
        finally:
            MODEL_CPU[0] += time.thread_time() - start

    model.encode = counted


class Contenders:
    """Each contender: a name and a callable that scores every sample (setup done here)."""

    def __init__(self, path: str, samples: list[dict[str, str]], workdir: Path) -> None:
        import ragmeter_haystack
        import ragmeter_llamaindex
        from haystack.components.evaluators import SASEvaluator
        from haystack_integrations.components.embedders.sentence_transformers import (
            SentenceTransformersDocumentEmbedder,
        )
        from llama_index.core.evaluation import BatchEvalRunner, SemanticSimilarityEvaluator
        from ragas.embeddings import HuggingFaceEmbeddings as RagasHuggingFaceEmbeddings
        from ragas.metrics.collections import SemanticSimilarity as RagasSemanticSimilarity
        from sentence_transformers import SentenceTransformer

        self.samples = samples
        self.workdir = workdir
        self.model = SentenceTransformer(path, device="cpu")  # THE model everyone uses
        count_model_cpu(self.model)
        self.sas = SASEvaluator(model=path)
        self.sas.warm_up()
        assert isinstance(self.sas._similarity_model, SentenceTransformer)  # bi-encoder
        self.sas._similarity_model = self.model
        docs = SentenceTransformersDocumentEmbedder(model=path, progress_bar=False)
        docs.warm_up()
        assert docs.embedding_backend is not None
        docs.embedding_backend.model = self.model
        self.li_model = llamaindex_model(self.model, path)
        self.li_runner = BatchEvalRunner(
            {"semantic_similarity": SemanticSimilarityEvaluator(embed_model=self.li_model)},
            workers=2,
        )
        ragas_embeddings = RagasHuggingFaceEmbeddings(model=path, device="cpu")
        ragas_embeddings.model_instance = self.model
        self.ragas = RagasSemanticSimilarity(embeddings=ragas_embeddings)
        self.via_haystack = SemanticSimilarity(embedder=ragmeter_haystack.embedder(docs))
        self.via_llamaindex = SemanticSimilarity(
            embedder=ragmeter_llamaindex.embedder(self.li_model)
        )
        self.warm_cache = workdir / "warm.sqlite"
        self.rounds = 0

    def sas_scores(self) -> Scores:
        out = self.sas.run(
            ground_truth_answers=[s["reference"] for s in self.samples],
            predicted_answers=[s["response"] for s in self.samples],
        )
        return [float(x) for x in out["individual_scores"]]

    def llamaindex_scores(self) -> Scores:
        results = asyncio.run(
            self.li_runner.aevaluate_response_strs(
                queries=[s["user_input"] for s in self.samples],
                response_strs=[s["response"] for s in self.samples],
                reference=[s["reference"] for s in self.samples],
            )
        )
        return [float(r.score) for r in results["semantic_similarity"]]  # type: ignore[arg-type]

    def ragas_scores(self) -> Scores:
        inputs = [{"reference": s["reference"], "response": s["response"]} for s in self.samples]
        return [float(r.value) for r in asyncio.run(self.ragas.abatch_score(inputs))]

    def ragmeter_scores(self, metric: Any, cache: Any, expect_calls: bool = True) -> Scores:
        report = evaluate_rag(self.samples, metrics=[metric], embed_cache=cache)
        assert (report.extra["embed_calls"] > 0) == expect_calls, report.extra["embed_calls"]
        return [report.per_sample[s["id"]]["semantic_similarity"] for s in self.samples]

    def fresh_cache(self) -> Path:
        self.rounds += 1
        return self.workdir / f"cold-{self.rounds}.sqlite"

    def table(self) -> dict[str, Callable[[], Scores]]:
        """The contenders, by name (the warm cache is filled here, untimed)."""
        self.ragmeter_scores(self.via_haystack, EmbedCache(self.warm_cache))
        return {
            "Haystack SASEvaluator": self.sas_scores,
            "LlamaIndex SemanticSimilarityEvaluator": self.llamaindex_scores,
            "Ragas SemanticSimilarity": self.ragas_scores,
            "ragmeter via Haystack bridge, no cache": lambda: self.ragmeter_scores(
                self.via_haystack, None
            ),
            "ragmeter via LlamaIndex bridge, no cache": lambda: self.ragmeter_scores(
                self.via_llamaindex, None
            ),
            "ragmeter via Haystack bridge, new cache file": lambda: self.ragmeter_scores(
                self.via_haystack, EmbedCache(self.fresh_cache())
            ),
            "ragmeter, warm cache": lambda: self.ragmeter_scores(
                self.via_haystack, EmbedCache(self.warm_cache), expect_calls=False
            ),
        }


def default_contender(samples: list[dict[str, str]], workdir: Path) -> tuple[Any, float]:
    """The offline default's contender, and the seconds its one-off model load took."""
    from ragmeter.embed.default import default_embedder

    start = time.perf_counter()
    default_embedder()
    load = time.perf_counter() - start
    counter = iter(range(10**6))

    def run() -> Scores:
        cache = EmbedCache(workdir / f"default-{next(counter)}.sqlite")
        report = evaluate_rag(samples, metrics=["semantic_similarity"], embed_cache=cache)
        return [report.per_sample[s["id"]]["semantic_similarity"] for s in samples]

    return run, load


# ----------------------------------------------------------------------------------- timing


def timed(fn: Callable[[], Scores]) -> tuple[Scores, float, float, float]:
    """``fn()``, its CPU seconds (all threads), wall seconds and the CPU seconds inside the
    shared model's ``encode``, after a garbage collection."""
    gc.collect()
    cpu, wall, model = time.process_time(), time.perf_counter(), MODEL_CPU[0]
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall, MODEL_CPU[0] - model


# contender -> round -> (CPU s, wall s, CPU s inside the model's encode)
Times = dict[str, dict[int, tuple[float, float, float]]]


def run_rounds(
    table: dict[str, Callable[[], Scores]], repeat: int, slow: set[str]
) -> tuple[Times, dict[str, Scores]]:
    """Interleaved rounds, the order rotating; contenders in ``slow`` run in round 1 only."""
    names = list(table)
    times: Times = {n: {} for n in names}
    scores: dict[str, Scores] = {}
    for r in range(repeat):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            if r and name in slow:
                continue
            out, cpu, wall, model = timed(table[name])
            times[name][r] = (cpu, wall, model)
            scores.setdefault(name, out)
            print(
                f"  round {r + 1}: {name}: {cpu:.2f} s CPU ({model:.2f} in the model's encode), "
                f"{wall:.2f} s wall",
                flush=True,
            )
    return times, scores


def summarise(
    times: Times, scores: dict[str, Scores], base: str, ours: str
) -> list[dict[str, Any]]:
    """Per contender: best CPU and wall seconds, spread (worst/best), the best-vs-best ratio
    to ``ours`` and the median of the same-round ratios (steadier on a loaded machine), and
    the max abs score difference from ``base``."""
    reference = np.asarray(scores[base], dtype=np.float64)
    rows = []
    for name, runs in times.items():
        cpus, walls = [c for c, _, _ in runs.values()], [w for _, w, _ in runs.values()]
        best = min(runs, key=lambda r: runs[r][0])  # the round of the best CPU time
        diff: float | None = None  # the offline default is another model
        if "offline default" not in name:
            got = np.asarray(scores[name], dtype=np.float64)
            diff = float(np.max(np.abs(got - reference)))
        paired = [(runs[r][0] / times[ours][r][0], runs[r][1] / times[ours][r][1]) for r in runs]
        ours_cpu = min(c for c, _, _ in times[ours].values())
        ours_wall = min(w for _, w, _ in times[ours].values())
        rows.append(
            {
                "contender": name,
                "rounds": len(runs),
                "cpu_best": round(min(cpus), 3),
                "cpu_spread": round(max(cpus) / min(cpus), 2),
                "model_cpu_of_best": round(runs[best][2], 3),
                "wall_best": round(min(walls), 3),
                "wall_spread": round(max(walls) / min(walls), 2),
                "cpu_ratio_best": round(min(cpus) / ours_cpu, 2),
                "wall_ratio_best": round(min(walls) / ours_wall, 2),
                "cpu_ratio_same_round": round(statistics.median(c for c, _ in paired), 2),
                "wall_ratio_same_round": round(statistics.median(w for _, w in paired), 2),
                f"max_abs_diff_vs_{base.split()[0]}": diff,
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]], ours: str) -> None:
    print(
        f"\n{'contender':54} {'rounds':>6} {'CPU s':>7} {'model':>6} {'spread':>6} {'wall s':>7} "
        f"{'spread':>6} {'max|diff|':>9}  ratio CPU, wall: best, same round"
    )
    for row in rows:
        diff = next(v for k, v in row.items() if k.startswith("max_abs_diff"))
        shown = "n/a" if diff is None else format(diff, ".1e")
        print(
            f"{row['contender']:54} {row['rounds']:>6} {row['cpu_best']:>7.2f} "
            f"{row['model_cpu_of_best']:>6.2f} "
            f"{row['cpu_spread']:>6.2f} {row['wall_best']:>7.2f} {row['wall_spread']:>6.2f} "
            f"{shown:>9}  {row['cpu_ratio_best']:>5.1f}x {row['wall_ratio_best']:>5.1f}x "
            f"{row['cpu_ratio_same_round']:>5.1f}x {row['wall_ratio_same_round']:>5.1f}x"
        )
    print(f"(ratio: the contender's time / {ours!r}'s; model: CPU s inside the model's encode)")


def versions() -> dict[str, str]:
    from importlib.metadata import version

    names = ["ragmeter", "haystack-ai", "sentence-transformers-haystack", "llama-index-core"]
    names += ["ragas", "sentence-transformers", "torch", "wordllama"]
    return {"python": platform.python_version(), **{n: version(n) for n in names}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", choices=["static", *BERT_SHAPES], default="static")
    parser.add_argument(
        "--unique", action="store_true", help="make every text distinct (no duplication)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument(
        "--slow-once", nargs="*", default=[], help="contenders (name starts) timed in round 1 only"
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    samples = make_samples(args.samples)
    if args.unique:
        for i, sample in enumerate(samples):
            sample["response"] += f" ( answer {i} )"
            sample["reference"] += f" ( reference {i} )"
    data = describe(samples)
    print(json.dumps(data))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        folder, vocabulary = workdir / "st-model", _vocabulary(samples)
        if args.model == "static":
            path = build_static(folder, vocabulary)
        else:
            path = build_bert(folder, vocabulary, args.model)
        contenders = Contenders(path, samples, workdir)
        tokenizer = getattr(contenders.model, "tokenizer", None)
        padding = padded_tokens(tokenizer, samples) if args.model != "static" else {}
        print(json.dumps(padding), flush=True)
        table = contenders.table()
        table["ragmeter offline default (wordllama), new cache file"], load = default_contender(
            samples, workdir
        )
        slow = {n for n in table for p in args.slow_once if n.startswith(p)}
        times, scores = run_rounds(table, args.repeat, slow)
    ours = "ragmeter via Haystack bridge, no cache"
    rows = summarise(times, scores, "Haystack SASEvaluator", ours)
    print_table(rows, ours)
    print(f"offline default: one-off model load {load:.2f} s (not in the times above)")
    print(f"load average (1, 5, 15 min) before {load_before}, after {os.getloadavg()}")
    if args.json:
        result = {
            "model": args.model,
            "unique": args.unique,
            "threads": args.threads,
            "repeat": args.repeat,
            "data": data,
            "default_load_seconds": round(load, 3),
            "padded_tokens": padding,
            "load_average_before_after": [load_before, os.getloadavg()],
            "versions": versions(),
            "rows": rows,
        }
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
