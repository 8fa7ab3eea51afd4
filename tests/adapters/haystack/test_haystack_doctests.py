"""The docstring examples of ragmeter_haystack run (--doctest-modules covers src/ragmeter only)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

pytest.importorskip("haystack")

import ragmeter_haystack

MODULES = ["ragmeter_haystack"] + [
    f"ragmeter_haystack.{m.name}" for m in pkgutil.iter_modules(ragmeter_haystack.__path__)
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_the_examples_are_there() -> None:
    finder = doctest.DocTestFinder()
    counted = sum(
        len(t.examples) for name in MODULES for t in finder.find(importlib.import_module(name))
    )
    assert counted >= 10


def test_public_names_are_sorted_and_importable() -> None:
    assert ragmeter_haystack.__all__ == sorted(ragmeter_haystack.__all__)
    for name in ragmeter_haystack.__all__:
        assert getattr(ragmeter_haystack, name) is not None
