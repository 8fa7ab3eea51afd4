"""The ``ragmeter`` Typer app, its output consoles, and the one map from errors to exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from ragmeter.errors import InvalidInputError, RagmeterError, describe_error

T = TypeVar("T")

app = typer.Typer(
    name="ragmeter",
    help="Measure RAG pipelines: trec_eval-exact retrieval metrics, no-LLM answer metrics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        from ragmeter._version import __version__

        typer.echo(f"ragmeter {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Measure RAG pipelines: trec_eval-exact retrieval metrics, no-LLM answer metrics."""


#: Progress bars appear for JSONL inputs at least this large (bytes), on a terminal only.
PROGRESS_MIN_BYTES = 1 << 20


class CliError(InvalidInputError):
    """A bad command-line argument (an option value, a missing file)."""


def _stdout() -> Console:
    return Console(highlight=False, soft_wrap=False)


def _print_table(table: Table, heading: str | None = None) -> None:
    """Print ``heading`` then ``table`` at its natural width (numbers are never cropped)."""
    out = _stdout()
    if heading:
        Console(highlight=False, soft_wrap=True).print(heading, style="bold", markup=False)
    need = Measurement.get(out, out.options.update_width(10_000), table).maximum
    if need > out.width:
        out = Console(highlight=False, soft_wrap=False, width=need)
    out.print(table)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Errors are reported on one stderr line, ``ragmeter: error: ...``, never as a
    traceback.
    """
    command = typer.main.get_command(app)
    if sys.stdout is None or sys.stdout.closed:
        # started with stdout closed (`ragmeter demo >&-`): whatever we print would be lost
        return _fail("standard output is closed, so the results could not be printed", 1)
    try:
        result = command.main(args=argv, prog_name="ragmeter", standalone_mode=False)
        sys.stdout.flush()  # a full disk or a closed pipe must not pass as success
    except BrokenPipeError:
        # the reader went away (`ragmeter ... | head -1`): the output is cut, so not exit 0;
        # point stdout at /dev/null so the interpreter's exit flush does not complain too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _fail("standard output was closed before all results were written", 1)
    except (RagmeterError, OSError) as exc:
        return _fail(describe_error(exc), _exit_code(exc))
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:
        # Command-line errors from click (vendored by recent typer, so matched by shape).
        kind = type(exc).__name__
        if kind == "NoArgsIsHelpError":
            # the error made the help text when it was raised: with rich installed typer
            # printed it then (its message is empty), else the message is the help text
            message = str(getattr(exc, "message", "") or "")
            if message.strip():
                typer.echo(message)
            return 2
        if kind == "Abort":
            return _fail("aborted", 130)
        format_message = getattr(exc, "format_message", None)
        exit_code = getattr(exc, "exit_code", None)
        if callable(format_message) and isinstance(exit_code, int):
            return _fail(str(format_message()), exit_code)
        raise
    return result if isinstance(result, int) else 0


def _fail(message: str, code: int) -> int:
    typer.echo(f"ragmeter: error: {_one_line(message)}", err=True)
    return code


def _exit_code(exc: RagmeterError | OSError) -> int:
    """The exit code of bad input: 2 for a bad command line (:class:`CliError`), 1 for bad
    data or a file that cannot be read."""
    return 2 if isinstance(exc, CliError) else 1


def error_exit(exc: RagmeterError | OSError) -> typer.Exit:
    """Say ``exc`` on one stderr line and return the :class:`typer.Exit` that ends the command
    with :func:`run`'s exit code for it (for a command that must end itself, e.g. one
    registered on another app)."""
    return typer.Exit(_fail(describe_error(exc), _exit_code(exc)))


def main() -> None:
    """Console-script entry point: ``ragmeter ...``."""
    sys.exit(run())
