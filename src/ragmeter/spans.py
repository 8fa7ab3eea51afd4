"""Character-level evidence: spans of source documents, and the scores over them (seed 004).

Offsets are half-open ``[start, end)`` character positions in a source document, so
``text[start:end]`` is the literal slice and adjacent spans share a boundary without
overlapping. Gold evidence is stored as spans, not chunk ids, so it stays valid when the
corpus is re-chunked; :func:`span_qrels` resolves it to whatever chunks a configuration
produced, and the character scores measure how much of what came back is evidence.

Conventions shared by every function here:

* A set of spans is taken as the **union** of its characters: overlapping or touching spans
  are merged first, so a character retrieved twice counts once.
* Spans in different documents never overlap.
* Gold means gold spans with ``grade > 0``. A grade-0 span is "judged irrelevant" (the IR
  convention ragmeter's qrels follow), so it is not evidence a retriever should find.
  (``contextgrid`` counts grade-0 spans as gold in its character scores; ragmeter
  deliberately does not. With only grade > 0 gold the two agree.)
* Chunk ids must be unique within a chunking: one id with two different spans is an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ragmeter.errors import InvalidInputError

__all__ = [
    "DEFAULT_MIN_COVERAGE",
    "Chunk",
    "EvalItem",
    "GoldSpan",
    "Span",
    "character_f1",
    "character_precision",
    "character_recall",
    "coverage_fraction",
    "gold_coverage_by_chunk",
    "merge_spans",
    "retrieved_character_count",
    "span_qrels",
]

DEFAULT_MIN_COVERAGE = 0.5
""":func:`span_qrels`' default: a chunk is relevant when it holds >= half of a gold span."""


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open character range ``[start, end)`` of document ``doc_id``.

    >>> Span("doc1", 100, 270).length
    170
    >>> Span("doc1", 5, 2)
    Traceback (most recent call last):
    ...
    ragmeter.errors.InvalidInputError: Span('doc1', 5, 2): start must be <= end
    """

    doc_id: str
    start: int
    end: int

    def __post_init__(self) -> None:
        if not isinstance(self.doc_id, str):
            raise InvalidInputError(
                f"Span({self.doc_id!r}, {self.start!r}, {self.end!r}): doc_id must be a str, "
                f"got {type(self.doc_id).__name__}"
            )
        for name in ("start", "end"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(
                    f"Span({self.doc_id!r}, {self.start!r}, {self.end!r}): {name} must be an "
                    f"int >= 0, got {value!r}"
                )
        if self.start > self.end:
            raise InvalidInputError(
                f"Span({self.doc_id!r}, {self.start}, {self.end}): start must be <= end"
            )

    @property
    def length(self) -> int:
        """Number of characters covered."""
        return self.end - self.start

    @property
    def is_empty(self) -> bool:
        """True when the span covers no character (``start == end``)."""
        return self.start == self.end

    def overlap_length(self, other: Span) -> int:
        """Characters shared with ``other``; 0 across documents.

        >>> Span("d", 0, 10).overlap_length(Span("d", 5, 20))
        5
        """
        if self.doc_id != other.doc_id:
            return 0
        return max(0, min(self.end, other.end) - max(self.start, other.start))


@dataclass(frozen=True, slots=True)
class GoldSpan:
    """A non-empty span of gold evidence with an IR grade (2 fully relevant, 1 partial, 0 not)."""

    span: Span
    grade: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.span, Span):
            raise InvalidInputError(
                f"GoldSpan.span must be a Span, got {type(self.span).__name__}: {self.span!r}"
            )
        if self.span.is_empty:
            raise InvalidInputError(
                f"gold span {self.span!r} covers no character; gold evidence must be non-empty"
            )
        if isinstance(self.grade, bool) or not isinstance(self.grade, int) or self.grade < 0:
            raise InvalidInputError(f"GoldSpan.grade must be an int >= 0, got {self.grade!r}")


@dataclass(frozen=True, slots=True)
class Chunk:
    """A retrievable piece of a document: its id, where it sits, and its text.

    ``text`` is not checked against ``span``: parsers normalise whitespace, so a chunk's text
    need not be the literal slice its span addresses. Scores here read only ``span``.
    """

    id: str
    span: Span
    text: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InvalidInputError(f"Chunk.id must be a non-empty str, got {self.id!r}")
        if not isinstance(self.span, Span):
            raise InvalidInputError(
                f"chunk {self.id!r}: span must be a Span, got {type(self.span).__name__}"
            )
        if not isinstance(self.text, str):
            raise InvalidInputError(
                f"chunk {self.id!r}: text must be a str, got {type(self.text).__name__}"
            )


@dataclass(frozen=True, slots=True)
class EvalItem:
    """One question and its evidence: ``gold`` spans located in a parse, and/or ``anchors``.

    ``anchors`` are quotes of the evidence that have not (yet) been located as spans -- the
    portable form that survives a change of parser. Lists are stored as tuples.

    >>> item = EvalItem("q1", "Refund window?", anchors=("within 30 days",))
    >>> item.is_answerable, item.is_resolved
    (True, False)
    """

    id: str
    question: str
    gold: tuple[GoldSpan, ...] = ()
    anchors: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InvalidInputError(f"EvalItem.id must be a non-empty str, got {self.id!r}")
        if not isinstance(self.question, str) or not self.question.strip():
            raise InvalidInputError(f"eval item {self.id!r} has an empty question")
        gold = tuple(self.gold)
        for i, g in enumerate(gold):
            if not isinstance(g, GoldSpan):
                raise InvalidInputError(
                    f"eval item {self.id!r}: gold[{i}] must be a GoldSpan, got {g!r}"
                )
        anchors = tuple(self.anchors)
        for i, a in enumerate(anchors):
            if not isinstance(a, str) or not a.strip():
                raise InvalidInputError(
                    f"eval item {self.id!r}: anchors[{i}] must be a non-empty quote, got {a!r}"
                )
        object.__setattr__(self, "gold", gold)
        object.__setattr__(self, "anchors", anchors)

    @property
    def is_answerable(self) -> bool:
        """True when the item carries evidence in either form (gold spans or anchors).

        False only for a question deliberately included with no evidence -- the case that
        tests whether a system declines. A grade-0 span still counts as evidence here.
        """
        return bool(self.gold or self.anchors)

    @property
    def is_resolved(self) -> bool:
        """True when the evidence has been located as spans in this parse (``gold`` non-empty).

        Stricter than :attr:`is_answerable`: ``anchors and not is_resolved`` means the
        parse lost the quoted evidence, so there is nothing to answer from.
        """
        return bool(self.gold)

    @property
    def gold_spans(self) -> tuple[Span, ...]:
        """The spans of the relevant (``grade > 0``) gold."""
        return tuple(g.span for g in self.gold if g.grade > 0)


# -- interval algebra (private helpers trust their input) -----------------------------------


def merge_spans(spans: Iterable[Span]) -> list[Span]:
    """The union of ``spans`` as a minimal disjoint list, sorted by ``(doc_id, start)``.

    Overlapping and touching spans merge; empty spans vanish.

    >>> merge_spans([Span("d", 5, 9), Span("d", 0, 5), Span("e", 1, 1)])
    [Span(doc_id='d', start=0, end=9)]
    """
    return _merge(_check_spans(spans, "spans"))


def _merge(spans: Iterable[Span]) -> list[Span]:
    ordered = sorted((s for s in spans if s.start < s.end), key=lambda s: (s.doc_id, s.start))
    merged: list[Span] = []
    for s in ordered:
        last = merged[-1] if merged else None
        if last is not None and last.doc_id == s.doc_id and s.start <= last.end:
            if s.end > last.end:
                merged[-1] = Span(s.doc_id, last.start, s.end)
        else:
            merged.append(s)
    return merged


def _total(merged: Sequence[Span]) -> int:
    return sum(s.end - s.start for s in merged)


def _intersection(left: Sequence[Span], right: Sequence[Span]) -> int:
    """Characters in both unions; both arguments are outputs of :func:`_merge`."""
    total = i = j = 0
    while i < len(left) and j < len(right):
        a, b = left[i], right[j]
        if a.doc_id != b.doc_id:
            if a.doc_id < b.doc_id:
                i += 1
            else:
                j += 1
            continue
        total += max(0, min(a.end, b.end) - max(a.start, b.start))
        if a.end <= b.end:
            i += 1
        else:
            j += 1
    return total


def _check_spans(spans: Iterable[Span], name: str) -> list[Span]:
    if isinstance(spans, Span):
        raise InvalidInputError(f"{name} must be an iterable of Span, not one Span: wrap it")
    out = list(spans)
    for i, s in enumerate(out):
        if not isinstance(s, Span):
            raise InvalidInputError(f"{name}[{i}] must be a Span, got {type(s).__name__}: {s!r}")
    return out


def _check_chunks(chunks: Iterable[Chunk], name: str) -> list[Chunk]:
    if isinstance(chunks, Chunk):
        raise InvalidInputError(f"{name} must be an iterable of Chunk, not one Chunk: wrap it")
    out = list(chunks)
    seen: dict[str, Span] = {}
    for i, c in enumerate(out):
        if not isinstance(c, Chunk):
            raise InvalidInputError(f"{name}[{i}] must be a Chunk, got {type(c).__name__}: {c!r}")
        if seen.setdefault(c.id, c.span) != c.span:
            raise InvalidInputError(
                f"{name}: chunk id {c.id!r} is used for two different spans, "
                f"{seen[c.id]!r} and {c.span!r}; chunk ids must be unique within a chunking"
            )
    return out


def _check_gold(gold: Iterable[GoldSpan], name: str) -> tuple[GoldSpan, ...]:
    if isinstance(gold, GoldSpan):
        raise InvalidInputError(f"{name} must be an iterable of GoldSpan, not one: wrap it")
    out = tuple(gold)
    for i, g in enumerate(out):
        if not isinstance(g, GoldSpan):
            raise InvalidInputError(
                f"{name}[{i}] must be a GoldSpan, got {type(g).__name__}: {g!r}"
            )
    return out


def _check_item(item: EvalItem) -> EvalItem:
    if not isinstance(item, EvalItem):
        raise InvalidInputError(f"item must be an EvalItem, got {type(item).__name__}: {item!r}")
    return item


def _recall_precision(gold: Iterable[Span], retrieved: Iterable[Span]) -> tuple[float, float]:
    """(character recall, character precision) of two span sets; inputs are trusted."""
    g, r = _merge(gold), _merge(retrieved)
    gold_total, retrieved_total = _total(g), _total(r)
    if gold_total == 0 and retrieved_total == 0:
        return 0.0, 0.0
    both = _intersection(g, r)
    recall = both / gold_total if gold_total else 0.0
    precision = both / retrieved_total if retrieved_total else 0.0
    return recall, precision


def _f1(recall: float, precision: float) -> float:
    return 0.0 if recall + precision == 0 else 2 * precision * recall / (precision + recall)


# -- public scores ---------------------------------------------------------------------------


def coverage_fraction(target: Span, others: Iterable[Span]) -> float:
    """Fraction of ``target``'s characters covered by ``others``, in [0, 1].

    Overlaps among ``others`` count once; spans in another document contribute nothing;
    ``0.0`` for an empty ``target``.

    >>> gold = Span("refund.md", 100, 200)
    >>> coverage_fraction(gold, [Span("refund.md", 80, 150), Span("refund.md", 150, 190)])
    0.9
    >>> coverage_fraction(gold, [Span("other.md", 100, 200)])
    0.0
    """
    if not isinstance(target, Span):
        raise InvalidInputError(f"target must be a Span, got {type(target).__name__}: {target!r}")
    others_list = _check_spans(others, "others")
    if target.is_empty:
        return 0.0
    return _intersection([target], _merge(others_list)) / target.length


def character_recall(item: EvalItem, retrieved: Iterable[Chunk]) -> float:
    """Fraction of the item's gold characters present anywhere in ``retrieved``, in [0, 1].

    Union-based: gold split across two chunks is fully recalled when both come back.
    ``0.0`` when the item has no gold spans (with ``grade > 0``).
    """
    item = _check_item(item)
    chunks = _check_chunks(retrieved, "retrieved")
    return _recall_precision(item.gold_spans, [c.span for c in chunks])[0]


def character_precision(item: EvalItem, retrieved: Iterable[Chunk]) -> float:
    """Fraction of the retrieved characters (union) that are gold, in [0, 1].

    The score that exposes context waste. ``0.0`` when nothing (no character) was retrieved.

    >>> item = EvalItem("q1", "Settlement?", gold=(GoldSpan(Span("doc1", 100, 270)),))
    >>> character_precision(item, [Chunk("c1", Span("doc1", 0, 2000), "x" * 2000)])
    0.085
    """
    item = _check_item(item)
    chunks = _check_chunks(retrieved, "retrieved")
    return _recall_precision(item.gold_spans, [c.span for c in chunks])[1]


def character_f1(item: EvalItem, retrieved: Iterable[Chunk]) -> float:
    """Harmonic mean of :func:`character_recall` and :func:`character_precision`, in [0, 1].

    ``0.0`` when both are 0.
    """
    item = _check_item(item)
    chunks = _check_chunks(retrieved, "retrieved")
    return _f1(*_recall_precision(item.gold_spans, [c.span for c in chunks]))


def retrieved_character_count(retrieved: Iterable[Chunk]) -> int:
    """Characters retrieved, overlapping spans merged and counted once.

    >>> big, small = Chunk("c1", Span("d", 0, 2000)), Chunk("c2", Span("d", 100, 270))
    >>> retrieved_character_count([big, small])
    2000
    """
    return _total(_merge(c.span for c in _check_chunks(retrieved, "retrieved")))


def gold_coverage_by_chunk(item: EvalItem, chunks: Sequence[Chunk]) -> dict[str, float]:
    """Per chunk id, the fraction of the item's gold characters that chunk alone holds.

    Feeds a "this chunk holds 60% of the evidence" display. ``{}`` when the item has no gold.
    """
    item = _check_item(item)
    checked = _check_chunks(chunks, "chunks")
    gold = _merge(item.gold_spans)
    gold_total = _total(gold)
    if gold_total == 0:
        return {}
    return {c.id: _intersection(gold, _merge([c.span])) / gold_total for c in checked}


def span_qrels(
    items: Iterable[EvalItem] | Mapping[str, Iterable[GoldSpan]],
    chunks: Iterable[Chunk],
    *,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
) -> dict[str, dict[str, int]]:
    """Resolve span-level gold to graded chunk qrels ``{item_id: {chunk_id: grade}}``.

    A chunk is relevant to a gold span when it holds at least ``min_coverage`` of the gold
    span's characters (coverage, not IoU, so a large chunk that holds all the evidence is not
    penalised for its size -- chunk size is usually the thing being compared). A chunk
    relevant to several gold spans takes the highest grade. Grade-0 gold marks nothing.
    Items with no relevant chunk are left out: ``evaluate_run`` would skip them anyway,
    so check :func:`coverage_fraction` for evidence no chunk reaches (e.g. a gold span split
    across chunks that each hold less than ``min_coverage`` of it).

    ``items`` are :class:`EvalItem` objects or a mapping ``{item_id: [GoldSpan, ...]}``.
    ``min_coverage`` must be in (0, 1]. Raises :class:`~ragmeter.errors.InvalidInputError`
    on a bad threshold, a repeated item id, or a chunk id used for two spans.

    >>> gold = {"q1": [GoldSpan(Span("doc1", 100, 270))]}
    >>> big = [Chunk("b0", Span("doc1", 0, 2000))]
    >>> small = [Chunk(f"s{i}", Span("doc1", i * 200, (i + 1) * 200)) for i in range(10)]
    >>> span_qrels(gold, big), span_qrels(gold, small)
    ({'q1': {'b0': 2}}, {'q1': {'s0': 2}})
    """
    if (
        isinstance(min_coverage, bool)
        or not isinstance(min_coverage, (int, float))
        or not 0.0 < min_coverage <= 1.0
    ):
        raise InvalidInputError(
            f"min_coverage must be a number in (0, 1], got {min_coverage!r} "
            "(0 would mark every chunk that merely touches the evidence relevant)"
        )
    if isinstance(items, Mapping):
        pairs = [(str(k), _check_gold(v, f"items[{k!r}]")) for k, v in items.items()]
    else:
        pairs = [(_check_item(it).id, it.gold) for it in items]
    checked = _check_chunks(chunks, "chunks")
    by_doc: dict[str, list[Chunk]] = {}
    for c in checked:
        by_doc.setdefault(c.span.doc_id, []).append(c)

    qrels: dict[str, dict[str, int]] = {}
    for item_id, gold in pairs:
        if item_id in qrels:
            raise InvalidInputError(f"item id {item_id!r} appears more than once")
        grades: dict[str, int] = {}
        for g in gold:
            if g.grade <= 0:
                continue
            for c in by_doc.get(g.span.doc_id, ()):
                if c.span.overlap_length(g.span) / g.span.length >= min_coverage:
                    grades[c.id] = max(grades.get(c.id, 0), g.grade)
        qrels[item_id] = grades
    return {k: dict(sorted(v.items())) for k, v in qrels.items() if v}
