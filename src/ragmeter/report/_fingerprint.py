"""Fingerprints that tell whether two reports were computed on the same ground truth
(:class:`DatasetFingerprint`) and under the same settings (:class:`ConfigFingerprint`).

A fingerprint is a sha256 of a canonical, order-independent encoding: the same qrels in
another order (or with ``1`` for ``1.0``) give the same digest; one judgement more gives
another, and :meth:`DatasetFingerprint.differences` says what changed, in words. The
dataset fingerprint covers the ground truth only (judgements, query texts, a sample's
question and references), never what the system under test produced.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmeter.errors import InvalidInputError
from ragmeter.schema import RagSample, coerce_sample

__all__ = [
    "METRIC_DEFINITIONS",
    "ConfigFingerprint",
    "DatasetFingerprint",
    "SampleDigests",
]

METRIC_DEFINITIONS = "1"
"""The version of ragmeter's metric definitions, part of every config fingerprint: it
changes only when a metric's definition (not its speed) changes, so a patch release does not
make old runs incomparable."""

_SHOWN = 5
"""How many ids a difference message lists before ``...``."""


def _grade_text(grade: Any) -> float:
    """A grade in canonical form (``1`` and ``1.0`` are one grade)."""
    number = float(grade)
    return 0.0 if number == 0 else number


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:_SHOWN])
    return f"({shown}, ...)" if len(ids) > _SHOWN else f"({shown})"


_PLURALS = {"query": "queries"}


def _count(n: int, noun: str) -> str:
    """``"1 query"``, ``"4 queries"``, ``"12 judgements"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {_PLURALS.get(noun, noun + 's')}"


_NOUNS = {
    "qrels": ("qrels", "judgement", "query", "queries"),
    "samples": ("samples", "reference", "sample", "samples"),
}


@dataclass(frozen=True)
class DatasetFingerprint:
    """What a report was scored against: ``kind`` ``"qrels"`` (the judgements, with the
    query texts when the driver had them) or ``"samples"`` (each RAG sample's id, question,
    references, reference contexts and judged ids: the ground truth, not the answer or the
    retrieved contexts).

    ``digest`` is the sha256 of the canonical encoding (independent of order); ``items``
    counts the judged queries (samples), ``entries`` the judgement lines (ground-truth
    pieces); ``per_item`` maps each id to its ``(entries, 16-hex digest)``, so
    :meth:`differences` can name the queries that changed (empty when read from JSON).

    >>> a = DatasetFingerprint.of_qrels({"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}})
    >>> b = DatasetFingerprint.of_qrels({"q2": {"d3": 2.0}, "q1": {"d2": 0, "d1": 1}})
    >>> a == b, a.items, a.entries
    (True, 2, 3)
    >>> c = DatasetFingerprint.of_qrels({"q1": {"d1": 1, "d2": 0, "d4": 1}, "q3": {"d5": 1}})
    >>> a.differences(c)
    ['qrels changed: 1 judgement added in 1 query (q1); 1 query added (q3); 1 query removed (q2)']
    """

    kind: str
    digest: str
    items: int
    entries: int
    per_item: Mapping[str, tuple[int, str]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of_qrels(
        cls, qrels: Mapping[Any, Mapping[Any, Any]], queries: Mapping[Any, str] | None = None
    ) -> DatasetFingerprint:
        """The fingerprint of ``qrels`` (``{query_id: {doc_id: grade}}``; every judgement
        counts, grade 0 too) and, when given, the texts of the judged queries."""
        items: dict[str, tuple[int, str]] = {}
        digests: dict[str, str] = {}
        entries = 0
        for qid, judgements in qrels.items():
            key = str(qid)
            pairs = sorted((str(d), _grade_text(g)) for d, g in judgements.items())
            text = None if queries is None else queries.get(qid, queries.get(key))
            digest = _sha(json.dumps([text, pairs], ensure_ascii=False))
            digests[key] = digest
            items[key] = (len(pairs), digest[:16])
            entries += len(pairs)
        return cls._made("qrels", digests, items, entries)

    @classmethod
    def of_samples(cls, samples: Iterable[Any]) -> DatasetFingerprint:
        """The fingerprint of RAG samples' ground truth (see :class:`SampleDigests`)."""
        digests = SampleDigests()
        for sample in samples:
            digests.add(sample)
        return digests.fingerprint()

    @classmethod
    def _made(
        cls, kind: str, digests: Mapping[str, str], items: dict[str, tuple[int, str]], entries: int
    ) -> DatasetFingerprint:
        body = "".join(f"{json.dumps(k)}\t{digests[k]}\n" for k in sorted(digests))
        return cls(kind, _sha(f"{kind}\n{body}"), len(items), entries, items)

    def differences(self, other: DatasetFingerprint) -> list[str]:
        """What differs from ``other`` (``self`` is a, ``other`` b; "added" means in b
        only), in words; empty when the digests match."""
        if self.kind != other.kind:
            return [f"dataset kind {self.kind} vs {other.kind}"]
        if self.digest == other.digest:
            return []
        name, entry, item, items = _NOUNS.get(self.kind, (self.kind, "entry", "item", "items"))
        if not self.per_item or not other.per_item:
            return [
                f"{name} changed: {items} {self.items} vs {other.items}, "
                f"{entry}s {self.entries} vs {other.entries} "
                f"(digest {self.digest[:12]} vs {other.digest[:12]})"
            ]
        a, b = self.per_item, other.per_item
        added = [k for k in b if k not in a]
        removed = [k for k in a if k not in b]
        grew: list[str] = []
        shrank: list[str] = []
        changed: list[str] = []
        plus = minus = 0
        for key in a:
            if key in b and a[key][1] != b[key][1]:
                delta = b[key][0] - a[key][0]
                plus += max(delta, 0)
                minus += max(-delta, 0)
                (grew if delta > 0 else shrank if delta < 0 else changed).append(key)
        parts: list[str] = []
        if plus:
            parts.append(f"{_count(plus, entry)} added in {_count(len(grew), item)} {_ids(grew)}")
        if minus:
            parts.append(
                f"{_count(minus, entry)} removed in {_count(len(shrank), item)} {_ids(shrank)}"
            )
        if changed:
            what = "grades or doc ids" if self.kind == "qrels" else "content"
            parts.append(f"{_count(len(changed), item)} with other {what} {_ids(changed)}")
        if added:
            parts.append(f"{len(added)} {item if len(added) == 1 else items} added {_ids(added)}")
        if removed:
            word = item if len(removed) == 1 else items
            parts.append(f"{len(removed)} {word} removed {_ids(removed)}")
        return [f"{name} changed: " + "; ".join(parts or ["same ids, other content"])]

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form, without ``per_item``."""
        return {
            "kind": self.kind,
            "digest": self.digest,
            "items": self.items,
            "entries": self.entries,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetFingerprint:
        """Rebuild from :meth:`to_dict` output (``per_item`` is empty)."""
        try:
            return cls(
                str(data["kind"]), str(data["digest"]), int(data["items"]), int(data["entries"])
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"not a dataset fingerprint: {dict(data)!r} ({exc})") from None


class SampleDigests:
    """Builds a ``"samples"`` :class:`DatasetFingerprint` one sample at a time, cheap
    enough to run while a stream is scored; two builders :meth:`merge`.

    A sample's ground truth is its ``id``, ``user_input``, ``reference``, ``references``,
    ``reference_contexts``, judged ids (``relevance``, else ``reference_ids``, as a set) and
    ``gold_spans``; its entries count the references, reference contexts, judged ids and
    gold spans. The digest is order-independent in constant memory: the sum modulo
    ``2**256`` of each sample's sha256, hashed once more. With ``keep_items`` (the default)
    each sample's ``(entries, digest)`` is kept too (a repeated id keyed ``<id>#2``,
    ``<id>#3``, ... as in ``per_sample``) for :meth:`DatasetFingerprint.differences`; a
    streamed pass keeps none, so its memory does not grow with the samples. ``source``
    defers the work: the samples of that sequence are added when :meth:`fingerprint` is
    first called (it must not change in between).

    >>> d = SampleDigests()
    >>> d.add({"id": "s1", "user_input": "2 + 2?", "reference": "4", "response": "5"})
    >>> fp = d.fingerprint()
    >>> fp.kind, fp.items, fp.entries, list(fp.per_item)
    ('samples', 1, 1, ['s1'])
    """

    def __init__(self, *, keep_items: bool = True, source: Sequence[Any] | None = None) -> None:
        self.total = 0
        """The sum of the samples' hashes (taken modulo ``2**256`` when read)."""
        self.count = 0
        self.entries = 0
        self.rows: list[tuple[str, int, str]] | None = [] if keep_items else None
        """``(sample id, entries, digest)`` per sample, in order (``None``: not kept)."""
        self.source = source

    def add(self, sample: Any) -> None:
        """Add one sample (a :class:`~ragmeter.schema.RagSample`, or a mapping that
        :func:`~ragmeter.schema.coerce_sample` takes)."""
        if type(sample) is not RagSample:
            sample = coerce_sample(sample, index=self.count)
        relevance = sample.relevance
        judged: Any = ()
        if relevance is not None:
            judged = sorted(f"{len(d)}:{d}={_grade_text(g)!r}" for d, g in relevance.items())
        elif sample.reference_ids:
            judged = sorted({f"{len(d)}:{d}" for d in sample.reference_ids})
        spans = sample.gold_spans
        if spans:
            spans = [json.dumps(s.model_dump(), sort_keys=True, default=str) for s in spans]
        sid, question, reference = sample.id, sample.user_input, sample.reference
        references = sample.references or ()
        contexts = sample.reference_contexts or ()
        text = (
            f"{len(sid)}:{sid}\x00"
            f"{'-' if question is None else f'{len(question)}:{question}'}\x00"
            f"{'-' if reference is None else f'{len(reference)}:{reference}'}\x00"
            f"{_texts(references) if references else ''}\x00"
            f"{_texts(contexts) if contexts else ''}\x00"
            f"{_texts(judged) if judged else ''}\x00{_texts(spans) if spans else ''}"
        )
        raw = _sha256(text.encode("utf-8", "surrogatepass")).digest()
        count = (reference is not None) + len(references) + len(contexts) + len(judged)
        if spans:
            count += len(spans)
        self.total += _from_bytes(raw, "big")  # reduced modulo 2**256 when read
        self.count += 1
        self.entries += count
        if self.rows is not None:
            self.rows.append((sid, count, raw.hex()))

    def _take_source(self) -> None:
        source, self.source = self.source, None
        for sample in source or ():
            self.add(sample)

    def merge(self, later: SampleDigests) -> None:
        """Fold in the builder of the samples that come right after this one's (the
        per-sample digests stay kept only if both kept them)."""
        self._take_source()
        later._take_source()
        self.total = (self.total + later.total) & _MASK
        self.count += later.count
        self.entries += later.entries
        if self.rows is not None and later.rows is not None:
            self.rows.extend(later.rows)
        else:
            self.rows = None

    def fingerprint(self) -> DatasetFingerprint:
        """The fingerprint of the samples added so far."""
        self._take_source()
        items: dict[str, tuple[int, str]] = {}
        seen: dict[str, int] = {}
        for sid, count, digest in self.rows or ():
            n = seen[sid] = seen.get(sid, 0) + 1
            items[sid if n == 1 else f"{sid}#{n}"] = (count, digest[:16])
        self.total &= _MASK
        digest = _sha(f"samples\n{self.total:064x}")
        return DatasetFingerprint("samples", digest, self.count, self.entries, items)


_MASK = (1 << 256) - 1


_sha256 = hashlib.sha256
_from_bytes = int.from_bytes


def _texts(values: Any) -> str:
    """Texts in an unambiguous form: their number, then each one's length and text."""
    return f"{len(values)}[" + "".join([f"{len(v)}:{v}" for v in map(str, values)])


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return str(int(value))
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


@dataclass(frozen=True)
class ConfigFingerprint:
    """The settings that change a report's numbers: the metric keys, cut-offs, relevance
    level, rules for missing queries (``averaging``), ties, duplicates and unjudged docs,
    the metric-definition version, the judge's and embedder's identity. JSON-ready;
    ``digest`` is the sha256 of its canonical JSON. ragmeter's own version is not part of
    it (a patch release leaves runs comparable; the registry shows it apart).

    >>> a = ConfigFingerprint.of({"metrics": ["ndcg@10"], "relevance_level": 1})
    >>> b = ConfigFingerprint.of({"metrics": ["ndcg@10", "ndcg@20"], "relevance_level": 2})
    >>> a.differences(b)
    ['metrics: ndcg@20 only in b', 'relevance_level 1 vs 2']
    """

    settings: Mapping[str, Any]
    digest: str

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> ConfigFingerprint:
        """The fingerprint of ``settings`` (JSON-ready values)."""
        plain = json.loads(json.dumps(dict(settings), allow_nan=False))
        return cls(plain, _sha(json.dumps(plain, sort_keys=True, separators=(",", ":"))))

    def differences(self, other: ConfigFingerprint) -> list[str]:
        """Each setting that differs from ``other``'s, in words (``self`` is a)."""
        return _setting_differences(self.settings, other.settings, "")

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return {"settings": dict(self.settings), "digest": self.digest}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfigFingerprint:
        """Rebuild from :meth:`to_dict` output; refuses a digest that does not match."""
        settings = data.get("settings")
        if not isinstance(settings, Mapping):
            raise InvalidInputError(f"not a config fingerprint: {dict(data)!r}")
        made = cls.of(settings)
        if data.get("digest") not in (None, made.digest):
            raise InvalidInputError(
                f"config fingerprint digest {data.get('digest')!r} does not match its settings "
                f"(they hash to {made.digest!r}): the data was edited or damaged"
            )
        return made


def _setting_differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str) -> list[str]:
    """Each setting that differs, in words; a mapping on both sides is compared key by key
    (``judges.faithfulness.model judge-a vs judge-b``)."""
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key), b.get(key)
        name = f"{prefix}{key}"
        if left == right:
            continue
        if isinstance(left, Mapping) and isinstance(right, Mapping):
            out.extend(_setting_differences(left, right, f"{name}."))
            continue
        if isinstance(left, list) and isinstance(right, list) and key == "metrics":
            only_a = [m for m in left if m not in right]
            only_b = [m for m in right if m not in left]
            parts = [f"{', '.join(only_a)} only in a"] if only_a else []
            parts += [f"{', '.join(only_b)} only in b"] if only_b else []
            out.append(f"{name}: {'; '.join(parts or ['same keys, other order'])}")
            continue
        out.append(f"{name} {_show(left)} vs {_show(right)}")
    return out
