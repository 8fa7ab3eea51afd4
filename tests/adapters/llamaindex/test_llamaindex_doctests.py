"""The docstring examples of ragmeter_llamaindex run (--doctest-modules covers src/ragmeter)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest
import ragmeter_llamaindex

MODULES = ["ragmeter_llamaindex"] + [
    f"ragmeter_llamaindex.{m.name}" for m in pkgutil.iter_modules(ragmeter_llamaindex.__path__)
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
    assert counted >= 8


def test_public_surface_is_sorted_and_importable() -> None:
    assert ragmeter_llamaindex.__all__ == sorted(ragmeter_llamaindex.__all__)
    for name in ragmeter_llamaindex.__all__:
        assert getattr(ragmeter_llamaindex, name) is not None
