"""The four optional C extensions are what users run by default; their build is optional only
for machines without a C compiler. Where one exists, a missing extension is a broken build
(each is named in ``pyproject.toml``'s ``[[tool.setuptools.ext-modules]]``), not a reason for
the tests that compare it with its Python reference to skip."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ragmeter.io import _otlp_fast
from ragmeter.io.trec import _compiled
from ragmeter.metrics import _kernel, columns

IN_USE: dict[str, Callable[[], bool]] = {
    "ragmeter.metrics._ckernel": lambda: _kernel.c_score_query is not None,
    "ragmeter.metrics._ccolumns": lambda: columns.c_score_columns is not None,
    "ragmeter.io._ctrec": lambda: _compiled.BUILT,
    "ragmeter.io._cotlp": lambda: _otlp_fast.BUILT,
}
"""Each extension, and whether the module that uses it found it."""


def test_every_extension_of_the_build_is_checked_here() -> None:
    text = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    tables = text.count("[[tool.setuptools.ext-modules]]")
    built = re.findall(r'^\[\[tool\.setuptools\.ext-modules\]\]\nname = "([^"]+)"', text, re.M)
    assert len(built) == tables == len(IN_USE) and set(built) == set(IN_USE)


@pytest.mark.parametrize("name", sorted(IN_USE))
def test_each_extension_is_built_wherever_a_compiler_exists(
    name: str, compiler_available: bool
) -> None:
    if not compiler_available:  # pragma: no cover - every CI machine has a compiler
        pytest.skip(f"the compiled kernel is not built ({name}): no C compiler or Python.h here")
    assert IN_USE[name](), (
        f"a C compiler and Python.h exist but {name} was not built (or not found by the "
        "module that uses it): reinstall with `pip install -e .` and read the build log"
    )
