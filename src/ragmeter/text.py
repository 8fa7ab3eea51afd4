"""Text normalisation for the answer metrics: the official SQuAD recipe and content words.

Two tokenisers live here, one per family of metrics:

* :func:`normalize_answer` / :func:`answer_tokens` -- the **official SQuAD v1.1**
  normalisation used by ``exact_match``, ``token_f1``, ``context_recall`` and
  ``context_precision``: lower-case, delete ASCII punctuation (``string.punctuation``),
  replace the articles ``a``/``an``/``the`` by a space (regex ``\\b(a|an|the)\\b``), split on
  whitespace. Results are identical to the reference script's ``normalize_answer`` for every
  input (a faster path is taken when every token is made of word characters, and the regex
  otherwise).
* :func:`content_words` -- the word tokeniser of ``faithfulness``: lower-cased runs of
  Unicode letters and digits (a decimal number such as ``3.14`` or ``1,000`` stays one
  token), minus :data:`STOPWORDS`.

Both are pure functions of the text; the hot ones are memoised (bounded LRU caches, texts up
to :data:`MEMO_MAX_CHARS` characters), so a reference scored by four metrics is normalised
once.

>>> normalize_answer("The Eiffel Tower!")
'eiffel tower'
>>> answer_tokens("An apple, a day.")
('apple', 'day')
>>> sorted(content_words("Paris is not the capital of Spain, it costs 1,000 euros."))
['1,000', 'capital', 'costs', 'euros', 'not', 'paris', 'spain']
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any, Protocol, TypeVar, cast

__all__ = [
    "MEMO_MAX_CHARS",
    "SQUAD_ARTICLES",
    "STOPWORDS",
    "answer_token_set",
    "answer_tokens",
    "clear_caches",
    "content_words",
    "normalize_answer",
    "register_memo",
    "word_tokens",
]

_F = TypeVar("_F")
_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)

SQUAD_ARTICLES: frozenset[str] = frozenset({"a", "an", "the"})
"""The words SQuAD's normalisation removes."""

_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCT_TABLE = str.maketrans("", "", string.punctuation)
_PUNCT_BYTES = string.punctuation.encode("ascii")


def _table(mapping: dict[int, int]) -> bytes:
    """A bytes.translate table: ASCII upper-case folded to lower-case, then ``mapping``."""
    base = [c + 32 if 0x41 <= c <= 0x5A else c for c in range(256)]
    return bytes(mapping.get(c, base[c]) for c in range(256))


# ASCII fast path of the SQuAD normalisation, on bytes: one translate lower-cases and
# deletes the punctuation; the control characters that are neither word characters nor
# whitespace for str.split() become NUL, which sends the text to the regex path (where \b
# can fall inside a token).
_CONTROL = [*range(0x00, 0x09), *range(0x0E, 0x1C), 0x7F]
_SQUAD_TABLE = _table(dict.fromkeys(_CONTROL, 0))
# The same, with every character str.split() splits on turned into a space (haystacks).
_SPACES = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"
_SQUAD_HAY_TABLE = _table({**dict.fromkeys(_CONTROL, 0), **dict.fromkeys(_SPACES, 0x20)})

# Word tokens: runs of letters/digits; "." or "," between two digits joins a number.
_WORD_RE = re.compile(r"[^\W_]+(?:(?<=\d)[.,](?=\d)[^\W_]+)*")
_NOT_NUMBER_SEP = re.compile(rb"[.,](?:(?<![0-9].)|(?![0-9]))")
_DIGITS = b"0123456789"
_WORD_CHARS = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + _DIGITS
_NOT_DIGITS = bytes(c for c in range(256) if c not in _DIGITS)
# Digits become "0", "." and "," become ".", the rest a space: the text holds a number
# separator (a digit, "." or ",", a digit: the regex [0-9][.,][0-9]) iff this holds "0.0".
_NUMBER_SIGNS = bytes(0x30 if c in _DIGITS else 0x2E if c in b".," else 0x20 for c in range(256))
# ASCII word tokens: lower-cased, everything but [a-z0-9] becomes a space; the second table
# keeps "." and "," for text where one sits between two digits (the others are spaced out
# first). The _UTF8 tables leave the bytes of non-ASCII characters (0x80-0xFF) as they are.
_WORD_TABLE = _table({c: 0x20 for c in range(256) if c not in _WORD_CHARS})
_NUMBER_TABLE = _table({c: 0x20 for c in range(256) if c not in _WORD_CHARS + b".,"})
_UTF8_WORD_TABLE = _table({c: 0x20 for c in range(128) if c not in _WORD_CHARS})
_UTF8_NUMBER_TABLE = _table({c: 0x20 for c in range(128) if c not in _WORD_CHARS + b".,"})
_ASCII_BYTES = bytes(range(128))


def _ascii_words(raw: bytes) -> bytes:
    """ASCII ``raw`` lower-cased, with every non-word character turned into a space.

    A "." or "," between two digits is kept (``3.14`` stays one word). Whether the text has
    one is found with byte translations, which run at memory speed: text without a digit
    (one deleting translation) or without a digit-separator-digit triple needs no regex.
    """
    if raw.translate(None, _NOT_DIGITS) and b"0.0" in raw.translate(_NUMBER_SIGNS):
        return _NOT_NUMBER_SEP.sub(b" ", raw).translate(_NUMBER_TABLE)
    return raw.translate(_WORD_TABLE)


_MAX_DROPPED = 16
"""Distinct non-ASCII, non-alphanumeric characters :func:`_unicode_words` replaces one by
one (a pass over the text each); text with more goes to the regex, which is linear."""


def _unicode_words(lower: str) -> str | None:
    """The words of lower-cased, non-ASCII ``lower``, separated by spaces: ``" ".join`` of
    ``_WORD_RE.findall(lower)`` up to extra spaces; ``None`` when ``lower`` holds a
    non-ASCII decimal digit (only the regex applies the number rule to it) or more than
    :data:`_MAX_DROPPED` distinct non-ASCII characters that are not alphanumeric.

    The regex reads a character as part of a word iff it is alphanumeric (``\\w`` minus
    ``_``), and joins ``.``/``,`` between decimal digits. Here the text is UTF-8 encoded;
    the few distinct non-ASCII characters it holds are read off its non-ASCII bytes, those
    that are not alphanumeric are replaced by spaces (UTF-8 is self-synchronising: the bytes
    of a character only ever match at a character boundary), and the ASCII byte tables do
    the rest, leaving the remaining (alphanumeric, non-digit) characters' bytes as they are.
    Several times faster than the regex on text that is mostly ASCII.
    """
    raw = lower.encode("utf-8", "surrogatepass")
    dropped: list[str] = []
    for char in set(raw.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")):
        if char.isdecimal():
            return None
        if not char.isalnum():
            dropped.append(char)
    if len(dropped) > _MAX_DROPPED:
        return None
    for char in dropped:
        raw = raw.replace(char.encode("utf-8", "surrogatepass"), b" ")
    if raw.translate(None, _NOT_DIGITS) and b"0.0" in raw.translate(_NUMBER_SIGNS):
        out = _NOT_NUMBER_SEP.sub(b" ", raw).translate(_UTF8_NUMBER_TABLE)
    else:
        out = raw.translate(_UTF8_WORD_TABLE)
    return out.decode("utf-8")


def _unicode_word_list(text: str) -> list[str]:
    """:func:`word_tokens` of non-ASCII ``text``."""
    lower = text.lower()
    words = _unicode_words(lower)
    return _WORD_RE.findall(lower) if words is None else words.split()


STOPWORDS: frozenset[str] = frozenset(
    """
    a an the this that these those
    i me my mine we us our ours you your yours he him his she her hers it its they them
    their theirs one ones
    is are was were be been being am do does did done doing have has had having
    will would shall should can could may might must
    of to in on at by for with from into onto upon about above below over under between
    among through during before after since until within without against toward towards
    across along around behind beyond near off out up down per via as than
    and or nor so if then else also too both either neither each every all any some such
    which who whom whose what where when why how there here
    very just only even still again ever really quite rather
    however moreover furthermore therefore thus hence meanwhile otherwise indeed
    yes okay ok well
    s t d ll re ve m
    """.split()  # noqa: SIM905 - one word list, grouped by kind
)
"""Words that carry no checkable claim: articles, pronouns, auxiliaries, prepositions,
conjunctions, discourse markers and contraction tails. Negations (``not``, ``no``,
``never``), numbers and quantities are deliberately *not* stopwords: "Paris is not in Spain"
must find ``not`` in the context to count as supported."""


MEMO_MAX_CHARS = 4096
"""Texts up to this many characters are memoised; longer ones are processed every time (they
seldom repeat, and a full memo of long passages would hold hundreds of megabytes)."""


class _Memoised(Protocol[_T_co]):
    def __call__(self, text: str, /) -> _T_co: ...

    def cache_clear(self) -> None: ...


def _memo(maxsize: int) -> Callable[[Callable[[str], _T]], _Memoised[_T]]:
    """An LRU memo of a function of one text, bounded in entries *and* in text length."""

    def decorate(fn: Callable[[str], _T]) -> _Memoised[_T]:
        cached = lru_cache(maxsize=maxsize)(fn)

        def memoised(text: str) -> _T:
            return cached(text) if len(text) <= MEMO_MAX_CHARS else fn(text)

        memoised.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        memoised.__doc__ = fn.__doc__
        return cast(_Memoised[_T], memoised)

    return decorate


def _squad_split(text: str) -> list[str] | None:
    """Lower-cased, punctuation-free tokens (articles kept) when every token is made of word
    characters, so dropping whole-token articles equals SQuAD's regex; else ``None``."""
    if text.isascii():
        out = text.encode("ascii").translate(_SQUAD_TABLE, _PUNCT_BYTES)
        return None if 0 in out else out.decode("ascii").split()
    toks = text.lower().translate(_PUNCT_TABLE).split()
    return toks if "".join(toks).isalnum() else None


def _squad_regex(text: str) -> list[str]:
    return _ARTICLES_RE.sub(" ", text.lower().translate(_PUNCT_TABLE)).split()


@_memo(4096)
def _cached_tokens(text: str) -> tuple[str, ...]:
    if text.isascii():  # _squad_split's ASCII branch, inlined: this is the hot path
        out = text.encode("ascii").translate(_SQUAD_TABLE, _PUNCT_BYTES)
        if 0 not in out:  # (an int: bytes searches for a bytes needle are slow)
            return tuple([t for t in out.decode("ascii").split() if t not in SQUAD_ARTICLES])
    toks = _squad_split(text)
    if toks is None:
        return tuple(_squad_regex(text))
    return tuple([t for t in toks if t not in SQUAD_ARTICLES])


@_memo(4096)
def _reference_set(text: str) -> frozenset[str]:
    return frozenset(_cached_tokens(text))


@_memo(4096)
def _reference_needles(text: str) -> tuple[str, ...]:
    """``" tok "`` for each distinct SQuAD token of a reference, to search haystacks."""
    return tuple([" " + t + " " for t in dict.fromkeys(_cached_tokens(text))])


def _haystack(tokens: list[str]) -> str:
    return " " + " ".join(tokens) + " "


@_memo(2048)
def _passage(text: str) -> str:
    """A passage's SQuAD tokens (plus, possibly, the articles) as a *haystack*:
    space-separated and space-padded, so a token ``t`` occurs iff ``f" {t} "`` is a substring
    (a str: ``in`` on str is several times faster than on bytes).

    Internal: the articles may be left in, which is harmless because haystacks are only
    searched for reference tokens, and those never are articles.
    """
    if text.isascii():
        out = text.encode("ascii").translate(_SQUAD_HAY_TABLE, _PUNCT_BYTES)
        if 0 not in out:
            return " " + out.decode("ascii") + " "
    toks = _squad_split(text)
    return _haystack(_squad_regex(text) if toks is None else toks)


def _space_chunks(text: str, size: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` chunks of ``text`` of about ``size`` characters, each cut just
    before a space (the last one runs to the end): no chunk cuts a space-separated token."""
    start, end = 0, len(text)
    while start < end:
        stop = text.find(" ", start + size) if start + size < end else -1
        stop = end if stop < 0 else stop
        yield start, stop
        start = stop


def _word_haystack(text: str) -> str:
    """:func:`word_tokens` of ``text`` as a haystack (see :func:`_passage`); not memoised:
    faithfulness joins an answer's contexts and scans them once."""
    if text.isascii():
        return " " + _ascii_words(text.encode("ascii")).decode("ascii") + " "
    lower = text.lower()
    words = _unicode_words(lower)
    return _haystack(_WORD_RE.findall(lower)) if words is None else " " + words + " "


_MEMOS: list[Any] = [_cached_tokens, _reference_set, _reference_needles, _passage]


def register_memo(fn: _F) -> _F:
    """Have :func:`clear_caches` empty ``fn`` too (an ``lru_cache``-wrapped function)."""
    _MEMOS.append(fn)
    return fn


def clear_caches() -> None:
    """Empty the memo caches (for benchmarks; results never depend on them)."""
    for fn in _MEMOS:
        fn.cache_clear()


def answer_tokens(text: str) -> tuple[str, ...]:
    """The SQuAD-normalised tokens of ``text`` (see :func:`normalize_answer`), in order.

    >>> answer_tokens("The  quick-brown fox's den")
    ('quickbrown', 'foxs', 'den')
    """
    return _cached_tokens(text)


def answer_token_set(text: str) -> frozenset[str]:
    """The distinct SQuAD-normalised tokens of ``text`` (used for long context passages).

    >>> sorted(answer_token_set("Paris is the capital of France. Paris!"))
    ['capital', 'france', 'is', 'of', 'paris']
    """
    return _reference_set(text)


def normalize_answer(text: str) -> str:
    """The official SQuAD v1.1 ``normalize_answer``.

    Lower-case, delete ASCII punctuation, replace ``a``/``an``/``the`` (whole words) by a
    space, collapse whitespace. Non-ASCII punctuation (curly quotes, dashes) is kept, as in
    the reference script.

    >>> normalize_answer("  The Eiffel  Tower. ")
    'eiffel tower'
    >>> normalize_answer("“the” answer")
    '“ ” answer'
    """
    return " ".join(_cached_tokens(text))


def word_tokens(text: str) -> list[str]:
    """Lower-cased words of ``text``: runs of Unicode letters and digits.

    A decimal number (``3.14``, ``1,000``) stays one word.

    >>> word_tokens("Café costs 3.50 EUR, isn't it?")
    ['café', 'costs', '3.50', 'eur', 'isn', 't', 'it']
    """
    if text.isascii():
        return _ascii_words(text.encode("ascii")).decode("ascii").split()
    return _unicode_word_list(text)


def content_words(text: str) -> list[str]:
    """The words of ``text`` that can carry a claim: :func:`word_tokens` minus :data:`STOPWORDS`.

    Order is kept and repeats are not removed.

    >>> content_words("It was not the Eiffel Tower, it was the Louvre.")
    ['not', 'eiffel', 'tower', 'louvre']
    """
    return [w for w in word_tokens(text) if w not in STOPWORDS]
