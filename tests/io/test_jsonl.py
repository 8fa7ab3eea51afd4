"""JSONL samples: lossless round trip, streaming in constant memory, malformed lines."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragmeter.errors import DataFormatError, InvalidInputError
from ragmeter.io.jsonl import JsonlReader, read_jsonl, write_jsonl
from ragmeter.schema import RagSample
from ragmeter.spans import GoldSpan, Span

_text = st.text(max_size=12)
_opt_texts = st.none() | st.lists(_text, max_size=3)
_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)


@st.composite
def _samples(draw: st.DrawFn) -> RagSample:
    span = st.builds(
        lambda d, a, b: Span(d, min(a, b), max(a, b)),
        _text,
        st.integers(0, 50),
        st.integers(0, 50),
    )
    return RagSample(
        id=draw(st.text(min_size=1, max_size=8)),
        user_input=draw(st.none() | _text),
        response=draw(st.none() | _text),
        retrieved_contexts=draw(_opt_texts),
        reference=draw(st.none() | _text),
        references=draw(_opt_texts),
        reference_contexts=draw(_opt_texts),
        retrieved_ids=draw(_opt_texts),
        retrieved_texts=draw(_opt_texts),
        reference_ids=draw(_opt_texts),
        relevance=draw(
            st.none() | st.dictionaries(_text, st.integers(-1, 3) | st.floats(0, 3), max_size=3)
        ),
        latency_ms=draw(st.none() | st.floats(0, 1e6)),
        input_tokens=draw(st.none() | st.integers(0, 10**6)),
        output_tokens=draw(st.none() | st.integers(0, 10**6)),
        gold_spans=draw(
            st.none()
            | st.lists(
                st.builds(
                    lambda d, a, n, g: GoldSpan(Span(d, a, a + n), g),
                    _text,
                    st.integers(0, 50),
                    st.integers(1, 20),
                    st.integers(0, 2),
                ),
                max_size=2,
            )
        ),
        retrieved_spans=draw(st.none() | st.lists(span, max_size=2)),
        error=draw(st.none() | _text),
        metadata=draw(
            st.dictionaries(_text, _json_leaf | st.lists(_json_leaf, max_size=2), max_size=3)
        ),
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_samples(), max_size=5))
def test_round_trip_is_lossless(tmp_path: Path, samples: list[RagSample]) -> None:
    for name in ("s.jsonl", "s.jsonl.gz"):
        path = tmp_path / name
        assert write_jsonl(samples, path) == len(samples)
        assert list(read_jsonl(path)) == samples


def test_rag_eval_names_and_mappings(tmp_path: Path) -> None:
    path = tmp_path / "rag_eval.jsonl"
    path.write_text(
        '\ufeff{"question": "q", "answer": "a", "context": ["c"], "golden_documents": ["g"], '
        '"retrieved": ["r"], "id": 7, "extra": {"k": 1}}\n\n   \n',
        encoding="utf-8",
    )
    (sample,) = list(read_jsonl(path))
    assert sample.id == "7"
    assert (sample.user_input, sample.response) == ("q", "a")
    assert sample.retrieved_contexts == ["c"]
    assert sample.reference_contexts == ["g"]
    assert sample.retrieved_texts == ["r"]
    assert sample.metadata == {"extra": {"k": 1}}
    out = tmp_path / "out.jsonl"
    assert write_jsonl([{"question": "q", "answer": "a"}], out) == 1
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["user_input"] == "q" and record["response"] == "a" and "id" in record
    assert "metadata" not in record and "reference" not in record


def _write(path: Path, lines: list[str | bytes]) -> Path:
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))
    return path


def test_malformed_lines_raise_with_path_and_line(tmp_path: Path) -> None:
    good = json.dumps({"question": "q", "answer": "a"})
    cases = {
        "{bad": r"bad\.jsonl:2: not valid JSON: Expecting property name",
        "[1, 2]": r"bad\.jsonl:2: expected a JSON object, got list",
        '{"latency_ms": -1}': r"bad\.jsonl:2: sample: field 'latency_ms': Input should be greater",
        '{"retrieved_contexts": "one string"}': r":2: sample: field 'retrieved_contexts'",
        b'{"answer": "\xff"}': r"bad\.jsonl:2: not valid UTF-8",
    }
    for line, message in cases.items():
        path = _write(tmp_path / "bad.jsonl", [good, line, good])
        reader = read_jsonl(path)
        with pytest.raises(DataFormatError, match=message) as info:
            list(reader)
        assert info.value.line == 2
        assert info.value.path == str(path)


def test_skip_errors_records_and_resets(tmp_path: Path) -> None:
    good = json.dumps({"question": "q", "answer": "a"})
    path = _write(tmp_path / "mixed.jsonl", [good, "oops", "", '"str"', good])
    reader = read_jsonl(path, skip_errors=True)
    assert len(list(reader)) == 2
    assert [line for line, _ in reader.skipped] == [2, 4]
    assert "expected a JSON object, got str" in reader.skipped[1][1]
    assert len(list(reader)) == 2  # re-iterable; skipped is rebuilt, not appended
    assert len(reader.skipped) == 2


def test_reading_is_lazy(tmp_path: Path) -> None:
    good = json.dumps({"question": "q", "answer": "a"})
    path = _write(tmp_path / "late.jsonl", [good, good, "{broken"])
    stream = iter(read_jsonl(path))
    assert next(stream).response == "a"
    assert next(stream).response == "a"
    with pytest.raises(DataFormatError, match=":3:"):
        next(stream)


def test_missing_file_and_unwritable_values(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="JSONL file not found"):
        read_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(InvalidInputError, match=r"sample 1 \(id 'b'\) cannot be written as JSON"):
        write_jsonl(
            [RagSample(id="a"), RagSample(id="b", metadata={"x": float("nan")})],
            tmp_path / "o.jsonl",
        )
    with pytest.raises(InvalidInputError, match=r"sample 0 .*cannot be written as JSON"):
        write_jsonl([RagSample(id="c", metadata={"when": object()})], tmp_path / "o.jsonl")
    with pytest.raises(InvalidInputError, match="sample 0: field 'input_tokens'"):
        write_jsonl([{"input_tokens": -1}], tmp_path / "o.jsonl")


def test_streaming_uses_constant_memory(tmp_path: Path) -> None:
    """Peak memory while reading does not grow with the file (8k vs 1k lines)."""
    line = json.dumps(
        {"question": "what is x?", "answer": "x is y. " * 5, "context": ["some context " * 20] * 3}
    )

    def peak(n: int) -> tuple[int, int]:
        path = tmp_path / f"big{n}.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            for i in range(n):
                fh.write(line.replace("what", f"w{i}") + "\n")
        tracemalloc.start()
        count = sum(1 for _ in read_jsonl(path))
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return count, top

    small_count, small_peak = peak(1_000)
    big_count, big_peak = peak(8_000)
    assert (small_count, big_count) == (1_000, 8_000)
    assert big_peak < 2 * small_peak + 256 * 1024
    assert big_peak < 2 * 1024 * 1024  # the 8k-line file is ~7 MB uncompressed


def test_repr(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", ["{}"])
    reader = read_jsonl(path, skip_errors=True)
    assert isinstance(reader, JsonlReader)
    assert repr(reader) == f"JsonlReader({str(path)!r}, skip_errors=True)"


def test_lone_surrogates_round_trip(tmp_path: Path) -> None:
    # a str may hold a lone surrogate (from JSON's "\ud800"); UTF-8 cannot encode it
    path = tmp_path / "surrogates.jsonl"
    samples = [RagSample(id="s\ud800", response="caf\u00e9 \udc00", retrieved_contexts=["x"])]
    assert write_jsonl([*samples, RagSample(id="plain", response="caf\u00e9")], path) == 2
    lines = path.read_bytes().splitlines()
    assert b"\\ud800" in lines[0] and "caf\u00e9".encode() in lines[1]  # others stay UTF-8
    assert next(iter(read_jsonl(path))) == samples[0]
