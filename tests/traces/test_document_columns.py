"""The shortcuts in reading a span's documents give what the careful reading gives.

``_documents`` reads a span laid out as the last one of its size by where its documents are,
or a list straight to the count of the last span read (a retriever returns the same number
each time), and ``_ids_and_texts`` takes all-text columns as they are; the
reference here is the same module with those shortcuts switched off (the position-by-position
reading and the per-document tests), over generated attributes with gaps, missing fields,
``None`` and non-text values, and every remembered count."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmeter.traces import _documents as documents
from ragmeter.traces import _layout as layout
from ragmeter.traces._documents import Docs

_LISTS = ("retrieval.documents", "reranker.output_documents", "reranker.input_documents")
_VALUE = st.one_of(
    st.none(),
    st.sampled_from(["d1", "d2", "", "text"]),
    st.integers(0, 3),
    st.just(1.5),
    st.just(("a", "b")),
)
_FIELD = st.one_of(st.just(None), _VALUE)  # None first: mostly absent, sometimes a value
_POSITION = st.fixed_dictionaries({"id": _VALUE, "content": _VALUE, "metadata": _FIELD})


def _attrs(lists: dict[str, list[dict[str, Any]]], absent: set[tuple[str, int, str]]) -> Any:
    out: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
    for name, positions in lists.items():
        for i, fields in enumerate(positions):
            for part, value in fields.items():
                if (name, i, part) not in absent:
                    out[f"{name}.{i}.document.{part}"] = value
    return out


def _columns(found: dict[str, Docs]) -> dict[str, tuple[list[Any], list[Any], list[Any]]]:
    return {name: (d.ids, d.texts, d.metas) for name, d in found.items()}


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lists=st.dictionaries(st.sampled_from(_LISTS), st.lists(_POSITION, max_size=9), max_size=3),
    absent=st.sets(
        st.tuples(
            st.sampled_from(_LISTS),
            st.integers(0, 8),
            st.sampled_from(["id", "content", "metadata"]),
        ),
        max_size=6,
    ),
    remembered=st.integers(0, 12),
    with_metadata=st.booleans(),
    expected=st.sampled_from(_LISTS[:2]),
    data=st.data(),
)
def test_reading_to_the_last_count_or_layout_is_the_careful_reading(
    lists: dict[str, list[dict[str, Any]]],
    absent: set[tuple[str, int, str]],
    remembered: int,
    with_metadata: bool,
    expected: str,
    data: st.DataObject,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``attrs`` is read after a span with the same keys (other values, ``None`` among them)
    was: by its layout when it has one, else to the remembered count, else carefully."""
    attrs = _attrs(lists, absent)
    fields = ("id", "content", "metadata") if with_metadata else ("id", "content")
    with monkeypatch.context() as m:
        m.setattr(documents, "_as_last_time", lambda *args: None)
        m.setattr(documents, "by_layout", lambda *args: None)
        reference = documents._documents(attrs, fields, 0, expected)
    earlier = dict(zip(attrs, data.draw(st.lists(_VALUE, min_size=len(attrs))), strict=False))
    with monkeypatch.context() as m:
        m.setattr(documents, "_LAST_COUNT", dict.fromkeys(_LISTS, remembered))
        m.setattr(layout, "_LAYOUTS", {})
        documents._documents(earlier, fields, 0, expected)  # its layout is remembered
        fast = documents._documents(attrs, fields, 0, expected)
    assert _columns(fast[0]) == _columns(reference[0]) and fast[1] == reference[1]
    rule_ids: list[Any] = []
    for docs in fast[0].values():
        for rule in (None, "id", "content", "metadata.source"):
            got = documents._ids_and_texts(docs, rule)
            texts = [t if t.__class__ is str else documents._text(t) for t in docs.texts]
            if rule is None or rule == "id":
                ids = [i if i.__class__ is str and i else documents._plain_id(i) for i in docs.ids]
            else:
                ids = [documents._doc_id(doc, rule) for doc in docs.dicts()]
            hashed = 0 if rule == "content" else ids.count(None)
            assert got == (ids, texts, hashed)
            rule_ids.append(got[0])
        assert documents.all_missing(docs.ids) == all(i is None or i == "" for i in docs.ids)
    assert documents.all_missing([]) is True
