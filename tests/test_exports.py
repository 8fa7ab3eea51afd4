"""The public surface: an explicit, sorted __all__ whose names all resolve, and a light import."""

from __future__ import annotations

import subprocess
import sys

import ragmeter


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions and dunders.
    if name.isupper():
        return (0, name)
    return (1, name) if name[0].isupper() else (2, name)


def test_all_is_sorted_and_resolves() -> None:
    assert ragmeter.__all__ == sorted(ragmeter.__all__, key=_isort_key)
    assert len(set(ragmeter.__all__)) == len(ragmeter.__all__)
    for name in ragmeter.__all__:
        assert hasattr(ragmeter, name), name


def test_import_is_light() -> None:
    code = (
        "import sys, ragmeter; "
        "heavy = [m for m in ('typer', 'rich', 'fastapi', 'uvicorn', 'pandas', 'numpy', "
        "'langchain_core', 'haystack', 'llama_index') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
