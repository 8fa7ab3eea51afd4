"""Word tokens (``ragmeter.text``): the byte-table fast paths give the Unicode regex's words.

``word_tokens`` (faithfulness' tokeniser) is defined by ``_WORD_RE.findall(text.lower())``:
runs of alphanumeric characters, a ``.`` or ``,`` between two decimal digits kept inside a
number. ASCII text and text whose non-ASCII characters are not decimal digits take faster
paths (byte translations); these tests hold them to the regex, character class by character
class, on generated and on real text.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.metrics.faithfulness import _context_words
from ragmeter.text import (
    _WORD_RE,
    STOPWORDS,
    _ascii_words,
    _space_chunks,
    _unicode_words,
    _word_haystack,
    content_words,
    word_tokens,
)

# Characters whose classes matter: ASCII letters, digits and separators; non-ASCII letters
# (some whose lower case is longer, or depends on the neighbours: "İ", final sigma),
# non-ASCII digits of three kinds (decimal "٣", superscript "²", fraction "½"), combining
# marks, non-ASCII spaces and punctuation, a lone surrogate, control characters.
_ASCII = list("aZ9 .,;-_'\t\n\x00\x1c\x7f")
_LETTERS = ["é", "É", "ß", "ﬁ", "İ", "Σ", "ς", "ж", "中", "\u0301", "\u0307"]
_DIGITS = ["٣", "²", "½"]
_OTHERS = ["\u00a0", "\u2028", "\u3000", "\u2014", "\u2019", "\u201c", "\ud800", "€"]
_PIECES = ["3.14", "1,000", "٣.5", "5.٣", "x²", "Café", " the "]
_CHARS = st.sampled_from([*_ASCII, *_LETTERS, *_DIGITS, *_OTHERS, *_PIECES])
_TEXT = st.lists(_CHARS, max_size=40).map("".join)


def _regex_words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower())


@settings(max_examples=1000, deadline=None)
@given(_TEXT)
def test_word_tokens_equal_the_regex(text: str) -> None:
    assert word_tokens(text) == _regex_words(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_word_tokens_equal_the_regex_on_any_text(text: str) -> None:
    assert word_tokens(text) == _regex_words(text)


@settings(max_examples=500, deadline=None)
@given(_TEXT)
def test_unicode_fast_path(text: str) -> None:
    lower = text.lower()
    words = _unicode_words(lower)
    has_decimal = any(c.isdecimal() and not c.isascii() for c in lower)
    assert (words is None) == has_decimal  # only a non-ASCII digit needs the regex here
    if words is not None:
        assert words.split() == _regex_words(text)
        assert not any(c.isspace() and c != " " for c in words)


@settings(max_examples=500, deadline=None)
@given(_TEXT)
def test_word_haystack_holds_exactly_the_words(text: str) -> None:
    hay = _word_haystack(text)
    assert hay.startswith(" ") and hay.endswith(" ")
    assert not any(c.isspace() and c != " " for c in hay)  # separators are spaces
    assert [t for t in hay.split(" ") if t] == word_tokens(text)
    assert content_words(text) == [w for w in word_tokens(text) if w not in STOPWORDS]


def test_many_distinct_symbols_go_to_the_regex() -> None:
    # each distinct non-word character costs one pass over the text: past a few, the
    # (linear) regex is used instead
    symbols = [chr(0x2190 + i) for i in range(200)]  # arrows and maths operators
    text = "a" + "b".join(symbols) * 50 + " café 3.14"
    assert _unicode_words(text) is None
    assert word_tokens(text) == _regex_words(text)
    assert _unicode_words("x" + "y".join(symbols[:16]) + " café") is not None


def test_ascii_number_rule_on_every_short_byte_string() -> None:
    # every arrangement of digits, separators, letters, spaces and NUL up to 6 bytes: the
    # byte tables (and the translation that tells whether a number separator is present)
    # against the regex
    for size in range(1, 7):
        for combo in itertools.product(b"09.,a \x00", repeat=size):
            raw = bytes(combo)
            assert _ascii_words(raw).split() == [
                w.encode("ascii") for w in _regex_words(raw.decode("ascii"))
            ], raw


def test_real_text(data_dir: Path) -> None:
    articles = json.loads((data_dir / "squad" / "small.json").read_text())["data"]
    texts = [p["context"] for a in articles for p in a["paragraphs"]]
    texts += [q["question"] for a in articles for p in a["paragraphs"] for q in p["qas"]]
    texts += [
        ans["text"]
        for a in articles
        for p in a["paragraphs"]
        for q in p["qas"]
        for ans in q["answers"]
    ]
    non_ascii = 0
    for text in texts:
        non_ascii += not text.isascii()
        assert word_tokens(text) == _regex_words(text)
        assert [t for t in _word_haystack(text).split(" ") if t] == _regex_words(text)
    assert non_ascii > 30  # accents, dashes, Greek letters, maths symbols
    joined = " ".join(texts)
    assert _context_words(joined) == set(_regex_words(joined))  # > 64 KiB: in chunks


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["ab", " ", "  ", "x y", "3.14", "é"]), max_size=30), st.data())
def test_space_chunks_cover_the_text_and_cut_before_spaces(
    parts: list[str], data: st.DataObject
) -> None:
    text = "".join(parts)
    size = data.draw(st.integers(min_value=1, max_value=12))
    chunks = list(_space_chunks(text, size))
    assert "".join(text[a:b] for a, b in chunks) == text
    assert all(b - a >= min(size, len(text) - a) for a, b in chunks)
    assert all(text[b] == " " for _, b in chunks[:-1])  # cut just before a space


def test_random_long_texts() -> None:
    # long mixed texts: whole-text tokenising and the chunked context tokeniser agree
    rng = random.Random(8)
    alphabet = [*"ab9 .,\t", "é", "Σ", "ς", "—", "\u00a0", "3.14", "İ"]
    for _ in range(20):
        text = "".join(rng.choices(alphabet, k=rng.randint(1, 200_000)))
        assert word_tokens(text) == _regex_words(text)
        assert _context_words(text) == set(_regex_words(text))
