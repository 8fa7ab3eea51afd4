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


def test_every_error_ragmeter_raises_on_purpose_is_a_ragmeter_error() -> None:
    """One tree: the judge's errors and the server's setting errors included, each still
    the built-in a caller would catch."""
    import ragmeter
    from ragmeter.judge.metrics import VerdictError as from_metrics
    from ragmeter.judge.protocol import TransientJudgeError as from_protocol

    assert from_protocol is ragmeter.TransientJudgeError
    assert from_metrics is ragmeter.VerdictError
    for error in (ragmeter.TransientJudgeError, ragmeter.VerdictError, ragmeter.JudgeError):
        assert issubclass(error, ragmeter.RagmeterError)
    assert issubclass(ragmeter.VerdictError, ValueError)


def test_server_settings_and_empty_inputs_raise_the_tree_s_errors() -> None:
    import pytest

    import ragmeter
    from ragmeter.server import create_app

    with pytest.raises(ragmeter.InvalidInputError, match="max_samples must be an int >= 1"):
        create_app(max_samples=0)
    with pytest.raises(ragmeter.InvalidInputError, match="queue_timeout must be a finite"):
        create_app(queue_timeout=float("nan"))
    with pytest.raises(ragmeter.NoSamplesError, match="evaluate_rag got no samples"):
        ragmeter.evaluate_rag([])
