"""Issue 18: an unnamed ``FunctionJudge``'s identity follows the values its function reads.

Each case is a judge whose verdict comes from a value outside its code (a class attribute
read by a classmethod, a staticmethod or a bound method, an instance attribute, a closure
variable, a default argument, a module global). Through a real judge cache: the same value
is served from the cache; a changed value gets a new identity, so the judge is asked again
and the new verdict is the one reported.
"""

from __future__ import annotations

import enum
import json
import re
import types
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragmeter.judge import (
    Faithfulness,
    FunctionJudge,
    JudgeCache,
    JudgeIdentityWarning,
    Message,
    function_fingerprint,
    run_judges,
)
from ragmeter.schema import RagSample

SAMPLES = [
    RagSample(id=f"q{i}", user_input=f"q{i}?", response=f"a{i}", retrieved_contexts=[f"c{i}"])
    for i in range(2)
]

SCORE = 1.0  # read by global_verdict


def global_verdict(messages: Sequence[Message]) -> str:
    return json.dumps({"score": SCORE})


class Verdicts:
    """Verdicts read from class attributes, by every kind of method."""

    SCORE = 1.0

    @classmethod
    def from_cls(cls, messages: Sequence[Message]) -> str:
        return json.dumps({"score": cls.SCORE})

    @staticmethod
    def from_class_name(messages: Sequence[Message]) -> str:
        return json.dumps({"score": Verdicts.SCORE})

    def from_self(self, messages: Sequence[Message]) -> str:
        return json.dumps({"score": self.SCORE})  # a class attribute, through self

    def via_helper(self, messages: Sequence[Message]) -> str:
        return json.dumps({"score": self._helper()})

    def _helper(self) -> float:
        return float(getattr(type(self), "SCORE"))  # noqa: B009 (the name as a string)


class Inherited(Verdicts):
    """Reads ``SCORE`` from its base class."""


class Scored:
    def __init__(self, score: float) -> None:
        self.score = score

    def verdict(self, messages: Sequence[Message]) -> str:
        return json.dumps({"score": self.score})


class Slotted:
    __slots__ = ("score",)

    def __init__(self, score: float) -> None:
        self.score = score

    def __call__(self, messages: Sequence[Message]) -> str:
        return json.dumps({"score": self.score})


class Config:
    """A plain config object of this module: counts by its attributes."""

    def __init__(self, score: float) -> None:
        self.score = score


CONFIG = Config(1.0)


def config_verdict(messages: Sequence[Message]) -> str:
    return json.dumps({"score": CONFIG.score})


class Mode(enum.Enum):
    ONE = 1.0
    ZERO = 0.0


MODE = Mode.ONE


def enum_verdict(messages: Sequence[Message]) -> str:
    return json.dumps({"score": MODE.value})


def _closure() -> tuple[Callable[[Sequence[Message]], str], Callable[[float], None]]:
    score = 1.0

    def fn(messages: Sequence[Message]) -> str:
        return json.dumps({"score": score})

    def change(value: float) -> None:
        nonlocal score
        score = value

    return fn, change


def _case(name: str, mp: pytest.MonkeyPatch) -> tuple[Any, Callable[[], None]]:
    """The judge function of case ``name`` and how to change what it reads (1.0 -> 0.0)."""
    if name == "classmethod":
        return Verdicts.from_cls, lambda: mp.setattr(Verdicts, "SCORE", 0.0)
    if name == "classmethod, attribute of a base class":
        return Inherited.from_cls, lambda: mp.setattr(Verdicts, "SCORE", 0.0)
    if name == "classmethod, attribute overridden in the subclass":
        return Inherited.from_cls, lambda: mp.setattr(Inherited, "SCORE", 0.0, raising=False)
    if name == "staticmethod":
        return Verdicts.from_class_name, lambda: mp.setattr(Verdicts, "SCORE", 0.0)
    if name == "bound method, class attribute":
        return Verdicts().from_self, lambda: mp.setattr(Verdicts, "SCORE", 0.0)
    if name == "bound method, through a helper method and getattr":
        return Verdicts().via_helper, lambda: mp.setattr(Verdicts, "SCORE", 0.0)
    if name == "bound method, instance attribute":
        scored = Scored(1.0)
        return scored.verdict, lambda: mp.setattr(scored, "score", 0.0)
    if name == "callable object with __slots__":
        slotted = Slotted(1.0)
        return slotted, lambda: mp.setattr(slotted, "score", 0.0)
    if name == "closure":
        fn, change = _closure()
        return fn, lambda: change(0.0)
    if name == "default argument":

        def fn(messages: Sequence[Message], score: float = 1.0) -> str:
            return json.dumps({"score": score})

        return fn, lambda: mp.setattr(fn, "__defaults__", (0.0,))
    if name == "module global":
        return global_verdict, lambda: mp.setitem(global_verdict.__globals__, "SCORE", 0.0)
    if name == "module global config object":
        return config_verdict, lambda: mp.setattr(CONFIG, "score", 0.0)
    if name == "module global enum member":
        return enum_verdict, lambda: mp.setitem(enum_verdict.__globals__, "MODE", Mode.ZERO)
    raise AssertionError(name)


CASES = [
    "classmethod",
    "classmethod, attribute of a base class",
    "classmethod, attribute overridden in the subclass",
    "staticmethod",
    "bound method, class attribute",
    "bound method, through a helper method and getattr",
    "bound method, instance attribute",
    "callable object with __slots__",
    "closure",
    "default argument",
    "module global",
    "module global config object",
    "module global enum member",
]


@pytest.mark.parametrize("case", CASES)
def test_a_changed_value_is_a_new_identity_and_a_cache_miss(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fn, change = _case(case, monkeypatch)
    cache = JudgeCache(tmp_path / "verdicts.sqlite")

    def run() -> tuple[int, int, list[float | None]]:
        with warnings.catch_warnings():
            warnings.simplefilter("error", JudgeIdentityWarning)  # all of them count by value
            result = run_judges(SAMPLES, [Faithfulness(judge=FunctionJudge(fn))], cache=cache)
        scores = [result.scores[s.id]["judge_faithfulness"] for s in SAMPLES]
        return result.calls, result.cache_hits, scores

    before = dict(FunctionJudge(fn).identity)
    assert run() == (2, 0, [1.0, 1.0])
    assert run() == (0, 2, [1.0, 1.0])  # unchanged: served from the cache
    assert dict(FunctionJudge(fn).identity) == before
    change()
    after = dict(FunctionJudge(fn).identity)
    assert after["function"] == before["function"] and after["code"] != before["code"]
    assert run() == (2, 0, [0.0, 0.0])  # asked again: the new verdict, not the cached one
    assert run() == (0, 2, [0.0, 0.0])


def test_the_old_value_finds_its_verdicts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    before = function_fingerprint(Verdicts.from_cls)
    monkeypatch.setattr(Verdicts, "SCORE", 0.5)
    assert function_fingerprint(Verdicts.from_cls) != before
    monkeypatch.setattr(Verdicts, "SCORE", 1.0)
    assert function_fingerprint(Verdicts.from_cls) == before


def test_attributes_the_code_does_not_read_do_not_change_the_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = function_fingerprint(Verdicts.from_cls)
    monkeypatch.setattr(Verdicts, "UNRELATED", 5, raising=False)
    assert function_fingerprint(Verdicts.from_cls) == before


def test_a_changed_helper_method_is_a_new_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    judge = Verdicts()
    before = function_fingerprint(judge.via_helper)
    monkeypatch.setattr(Verdicts, "_helper", lambda self: 0.0)
    assert function_fingerprint(judge.via_helper) != before


ROUTES: dict[str, float] = {"default": 1.0}
PATTERN = re.compile(r"score")


def dict_verdict(messages: Sequence[Message]) -> str:
    return json.dumps({"score": ROUTES["default"]})


def test_values_counted_by_type_only_are_named_in_a_warning() -> None:
    with pytest.warns(JudgeIdentityWarning, match=r"global ROUTES \(builtins\.dict\)"):
        identity = dict(FunctionJudge(dict_verdict).identity)
    assert identity["function"].endswith("dict_verdict")

    client = types.SimpleNamespace(base_url="http://judge")  # an object of another module

    def with_client(messages: Sequence[Message]) -> str:
        return str(client.base_url)

    with pytest.warns(JudgeIdentityWarning, match=r"closure variable client \(types\."):
        function_fingerprint(with_client)


def test_no_warning_for_values_that_count_by_value_or_cannot_decide_a_verdict() -> None:
    class Locked:
        def __init__(self) -> None:
            import threading

            self._lock = threading.Lock()
            self.pattern = PATTERN
            self.api_key = object()  # a secret counts by its name only

        def __call__(self, messages: Sequence[Message]) -> str:
            with self._lock:
                return '{"score": 1}' if self.pattern.search(str(self.api_key)) else "{}"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        function_fingerprint(Locked())
        function_fingerprint(global_verdict)
        # A named model is the identity: nothing is fingerprinted, nothing to warn about.
        assert dict(FunctionJudge(dict_verdict, model="m").identity) == {"model": "m"}


def test_a_changed_dict_does_not_change_the_identity_as_the_warning_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.warns(JudgeIdentityWarning):
        before = function_fingerprint(dict_verdict)
    monkeypatch.setitem(ROUTES, "default", 0.0)
    with pytest.warns(JudgeIdentityWarning):
        assert function_fingerprint(dict_verdict) == before
