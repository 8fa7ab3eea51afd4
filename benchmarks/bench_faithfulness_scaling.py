"""Benchmark: claim faithfulness is near-linear in the size of the answer and of the contexts.

``faithfulness(answer, contexts)`` used to look each claim's words up as ``" word "``
substrings of a haystack of all the contexts, so its cost was claims x context size: a
4.5 MiB request body took ~34 s of CPU. It now tokenises the contexts once per sample into a
set of words (see ``ragmeter.metrics.faithfulness._context_words``), and each claim word is
one hash lookup.

Three shapes at 1 MiB and 10 MiB, CPU seconds (``time.process_time``), best of ``--repeat``:

* ``both``: an answer of S MiB and contexts of S MiB (2 S MiB of input);
* ``answer``: an answer of S MiB against 10 KiB of contexts;
* ``contexts``: a 10 KiB answer against S MiB of contexts (in 1 KiB passages).

The time per MiB of input at 1 and 10 MiB, and their ratio (1.0 = exactly linear; a
claims x contexts kernel gives about 10), are printed. ``--old`` also times the previous
substring search (a copy, below) on ``both`` at 0.25, 0.5 and 1 MiB, to show what changed.
Text is synthetic English-like prose with a fixed seed: sentences of 8-20 words, about a
third of the answer's sentences copied from the contexts.

    python benchmarks/bench_faithfulness_scaling.py            # about 3 min (both metrics)
    python benchmarks/bench_faithfulness_scaling.py --metric faithfulness   # about 10 s
    python benchmarks/bench_faithfulness_scaling.py --real     # plus real text (Cranfield)
    python benchmarks/bench_faithfulness_scaling.py --old      # plus a few s for the old kernel

Results (2 shared cores, Python 3.11; ratio = time per MiB at 10 MiB / at 1 MiB):

=========  =============  ==============  =====
shape      1 MiB: s/MiB   10 MiB: s/MiB   ratio
=========  =============  ==============  =====
both       0.039          0.040           1.03
answer     0.058          0.059           1.02
contexts   0.017          0.018           1.07
=========  =============  ==============  =====

(``both`` at 10 MiB is 20 MiB of input and 128k claims: 0.80 s.) The previous substring
kernel on ``both``: 0.26, 0.45, 0.84 s per MiB at S = 0.25, 0.5, 1 MiB (the cost per MiB
doubles with the size: quadratic; 1.68 s at 1 MiB against 0.075 s now, 22x, and about
170 s extrapolated to 10 MiB against 0.8 s).

``faithfulness_strict`` (issue 22; one run of both metrics on a busy machine, so the plain
numbers above are from a quieter earlier run; repeated runs vary by about 30%):

=========  =============  ==============  =====
shape      1 MiB: s/MiB   10 MiB: s/MiB   ratio
=========  =============  ==============  =====
both       0.818          1.157           1.41
answer     0.291          0.418           1.44
contexts   0.228          0.279           1.22
=========  =============  ==============  =====

Its work per claim is capped (64 candidate passages), so ``both`` -- where the tiny
vocabulary makes every passage a candidate for every claim -- gets dearer per MiB only until
every unsupported claim's search is capped (23 s for 20 MiB). ``--real``: Cranfield's 1,400
abstracts (1.47 MiB) against 5,000 claims quoted from them: 1.000 under both metrics, 0.65 s
strict, none capped; the same claims with shuffled words: 1.000 plain, 0.047 strict.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

from ragmeter.metrics.faithfulness import _CLAIM_SPLIT, extract_claims, faithfulness
from ragmeter.metrics.faithfulness_strict import _faithfulness_strict, faithfulness_strict
from ragmeter.text import STOPWORDS, _word_haystack, word_tokens

MIB = 1024 * 1024
CRANFIELD = "tests/data/cranfield_beir/corpus.jsonl"
_WORDS_TEXT = (
    "paris france capital city river seine tower museum louvre art history king queen war "
    "battle army empire republic president election vote law court judge trial science "
    "physics energy atom electron particle light speed wave theory model data network "
    "computer software program language python code test result number value million year "
    "century population country border ocean island mountain climate rain snow summer winter "
    "north south east west first second largest smallest oldest famous known built founded "
    "1889 3.14 1,000 not never no"
)
_GLUE_TEXT = "the a an of in on is was and to with for by from that it as at this"
WORDS = _WORDS_TEXT.split()
GLUE = _GLUE_TEXT.split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(GLUE) if rng.random() < 0.35 else rng.choice(WORDS)]
    words += [
        rng.choice(GLUE) if rng.random() < 0.35 else rng.choice(WORDS)
        for _ in range(rng.randint(7, 19))
    ]
    # a rare word now and then, so not every claim is supported
    if rng.random() < 0.3:
        words.append(f"term{rng.randint(0, 10**6)}")
    text = " ".join(words)
    return text[:1].upper() + text[1:] + "."


def make_contexts(size: int, rng: random.Random) -> list[str]:
    """About ``size`` bytes of 1 KiB passages."""
    passages: list[str] = []
    total = 0
    while total < size:
        passage = ""
        while len(passage) < 1024:
            passage += _sentence(rng) + " "
        passages.append(passage)
        total += len(passage) + 1
    return passages


def make_answer(size: int, contexts: list[str], rng: random.Random) -> str:
    """About ``size`` bytes of sentences, a third of them quoted from ``contexts``."""
    parts: list[str] = []
    total = 0
    while total < size:
        if contexts and rng.random() < 0.33:
            sentence = rng.choice(rng.choice(contexts).split(". ")).strip()
            sentence = sentence.rstrip(".") + "."
        else:
            sentence = _sentence(rng)
        parts.append(sentence)
        total += len(sentence) + 1
    return " ".join(parts)


def old_faithfulness(answer: str, contexts: list[str]) -> float:
    """The previous kernel: every claim word is a substring search of the contexts."""
    hay = _word_haystack(" ".join(contexts))
    supported = total = 0
    for piece in _CLAIM_SPLIT.split(answer):
        claim = piece.strip()
        words = set(word_tokens(claim)) - STOPWORDS if claim else set()
        if words:
            total += 1
            supported += sum(f" {w} " in hay for w in words) / len(words) >= 0.8
    return supported / total if total else 1.0


def best_time(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def shapes(mib: float, seed: int) -> dict[str, tuple[str, list[str]]]:
    rng = random.Random(seed)
    size = int(mib * MIB)
    small = 10 * 1024
    big_contexts = make_contexts(size, rng)
    small_contexts = make_contexts(small, rng)
    return {
        "both": (make_answer(size, big_contexts, rng), big_contexts),
        "answer": (make_answer(size, small_contexts, rng), small_contexts),
        "contexts": (make_answer(small, big_contexts, rng), big_contexts),
    }


def input_mib(answer: str, contexts: list[str]) -> float:
    return (len(answer) + sum(len(c) for c in contexts)) / MIB


def real_text(path: Path, seed: int, repeat: int) -> None:
    """Cranfield's 1,400 abstracts (1.5 MB of real text, one passage each) against 5,000
    claims quoted from them, then the same claims with their words shuffled (word salad)."""
    docs = [json.loads(line) for line in path.read_text().splitlines()]
    passages = [f"{doc.get('title', '')}. {doc['text']}" for doc in docs]
    rng = random.Random(seed)
    quotable = [c for p in passages for c in extract_claims(p) if len(c.split()) > 5]
    quoted = [rng.choice(quotable) for _ in range(5000)]
    salad = []
    for claim in quoted:
        words = claim.split()
        rng.shuffle(words)
        salad.append(" ".join(words))
    print(f"real text: {len(passages)} passages, {input_mib('', passages):.2f} MiB")
    for name, claims in (("quoted", quoted), ("shuffled", salad)):
        answer = ". ".join(claims) + "."
        for metric in (faithfulness, faithfulness_strict):
            seconds = best_time(lambda a=answer, m=metric: m(a, passages), repeat)
            score = metric(answer, passages)[0]
            print(f"  {name:8} {metric.__name__:20} score {score:5.3f}  {seconds:6.3f} s")
    capped = _faithfulness_strict(". ".join(quoted) + ".", passages, 0.8, 0.5)[3]
    print(f"  quoted claims whose strict search was capped: {len(capped)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--old", action="store_true", help="also time the previous kernel")
    parser.add_argument(
        "--real",
        type=Path,
        nargs="?",
        const=Path(__file__).resolve().parents[1] / CRANFIELD,
        help=f"also score real text (default: {CRANFIELD})",
    )
    parser.add_argument(
        "--metric", choices=("both", "faithfulness", "faithfulness_strict"), default="both"
    )
    args = parser.parse_args()

    metrics: dict[str, Callable[[str, list[str]], tuple[float, list[str], list[str]]]] = {
        "faithfulness": faithfulness,
        "faithfulness_strict": faithfulness_strict,
    }
    if args.metric != "both":
        metrics = {args.metric: metrics[args.metric]}
    for name, metric in metrics.items():
        print(f"{name}:")
        per_mib: dict[tuple[str, int], float] = {}
        for mib in (1, 10):
            for shape, (answer, contexts) in shapes(mib, args.seed).items():
                size = input_mib(answer, contexts)
                seconds = best_time(lambda a=answer, c=contexts, m=metric: m(a, c), args.repeat)
                per_mib[shape, mib] = seconds / size
                score, supported, unsupported = metric(answer, contexts)
                claims = len(supported) + len(unsupported)
                print(
                    f"{shape:9} {mib:>3} MiB  input {size:6.2f} MiB  {claims:7d} claims  "
                    f"score {score:5.3f}  {seconds:7.3f} s  {seconds / size:6.3f} s/MiB"
                )
        print()
        print("shape      1 MiB: s/MiB  10 MiB: s/MiB  ratio")
        for shape in ("both", "answer", "contexts"):
            one, ten = per_mib[shape, 1], per_mib[shape, 10]
            print(f"{shape:9}  {one:12.3f}  {ten:13.3f}  {ten / one:5.2f}")
        print()

    if args.real:
        real_text(args.real, args.seed, args.repeat)

    if args.old:
        print("\nprevious substring kernel, shape 'both' (answer and contexts of S MiB each):")
        for mib in (0.25, 0.5, 1):
            answer, contexts = shapes(mib, args.seed)["both"]
            assert old_faithfulness(answer, contexts) == faithfulness(answer, contexts)[0]
            size = input_mib(answer, contexts)
            old = best_time(lambda a=answer, c=contexts: old_faithfulness(a, c), 1)
            new = best_time(lambda a=answer, c=contexts: faithfulness(a, c), args.repeat)
            print(
                f"S = {mib:4} MiB: old {old:7.2f} s ({old / size:5.2f} s/MiB), "
                f"new {new:6.3f} s ({new / size:5.3f} s/MiB), {old / new:5.1f}x"
            )


if __name__ == "__main__":
    main()
