"""The options the commands share, and reading what they name (cut-offs, qrels)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated

import typer

from ragmeter.cli._app import CliError
from ragmeter.evaluation.retrieval import DEFAULT_K_VALUES
from ragmeter.io.beir import DEFAULT_QRELS_PATHS

# --------------------------------------------------------------------------- arguments


def _split_list(values: Sequence[str] | None) -> list[str]:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]``: an option may repeat or hold commas."""
    out: list[str] = []
    for value in values or ():
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return out


def parse_k_values(text: str, *, option: str = "--k") -> tuple[int, ...]:
    """Parse ``"1,3,10"`` into ``(1, 3, 10)``; :class:`CliError` for a non-int or ``< 1``.

    >>> parse_k_values("10,1, 3")
    (10, 1, 3)
    """
    ks: list[int] = []
    for part in _split_list([text]):
        try:
            k = int(part)
        except ValueError:
            raise CliError(
                f"{option} takes comma-separated cut-offs such as 1,5,10; {part!r} is not an int"
            ) from None
        if k < 1:
            raise CliError(f"{option}: every cut-off must be an int >= 1, got {k}")
        ks.append(k)
    if not ks:
        raise CliError(f"{option} is empty: give at least one cut-off, e.g. {option} 10")
    return tuple(ks)


def _existing_file(path: Path, what: str) -> Path:
    if not path.exists():
        raise CliError(f"{what} file not found: {path}")
    if path.is_dir():
        raise CliError(f"{what} path is a directory, expected a file: {path}")
    return path


def read_qrels(path: Path) -> Mapping[str, Mapping[str, float]]:
    """Read TREC qrels (``qid iter doc grade``) or a BEIR qrels TSV, detected from the file,
    or a BEIR directory (its ``qrels/test.tsv``, ...), as :func:`ragmeter.io.read_qrels`."""
    from ragmeter.io import read_qrels as read_either

    if not path.exists():
        raise CliError(f"qrels file not found: {path}")
    return read_either(path)


def _beir_qrels_path(directory: Path, qrels: str | None) -> Path:
    if not directory.is_dir():
        raise CliError(f"BEIR directory not found: {directory}")
    if qrels is not None:
        return _existing_file(directory / qrels, "qrels")
    for candidate in DEFAULT_QRELS_PATHS:
        if (directory / candidate).is_file():
            return directory / candidate
    raise CliError(
        f"no qrels file under {directory} (looked for {', '.join(DEFAULT_QRELS_PATHS)}); "
        "name it with --qrels-file"
    )


# --------------------------------------------------------------------------- options

KOpt = Annotated[
    str,
    typer.Option(
        "--k",
        "-k",
        help="Comma-separated cut-offs, e.g. 1,5,10 (each an int >= 1).",
    ),
]
MetricsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--metrics",
        "-m",
        help="Metrics to compute (comma-separated or repeated); default: all built-ins.",
    ),
]
LevelOpt = Annotated[
    float | None,
    typer.Option(
        "--relevance-level",
        "-l",
        help="A doc is relevant when its grade >= this (trec_eval -l); default: grade > 0.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]
TrecOpt = Annotated[
    bool, typer.Option("--trec", help="Print trec_eval-compatible lines (measure, query, value).")
]
PerQueryOpt = Annotated[
    bool, typer.Option("--per-query", "-q", help="Also print per-query scores (trec_eval -q).")
]
RunOpt = Annotated[Path, typer.Option("--run", "-r", help="TREC run file.", show_default=False)]
MissingOpt = Annotated[
    str,
    typer.Option(
        "--missing-queries",
        help="A judged query the run has no ranking for: 'zero' scores it 0 and counts it "
        "in the mean (= trec_eval -c); 'skip' averages over the run's queries only "
        "(trec_eval's default). Either way the count is printed.",
    ),
]

JudgedOnlyOpt = Annotated[
    bool,
    typer.Option(
        "--judged-only",
        "-J",
        help="Remove each ranking's unjudged docs before scoring, ranks closed up (trec_eval "
        "-J; condensed lists). Default: unjudged docs count as non-relevant.",
    ),
]
JudgedThresholdOpt = Annotated[
    float,
    typer.Option(
        "--judged-threshold",
        min=0.0,
        max=1.0,
        help="Warn when under this share of the top-k docs is judged (k: 10, or the cut-off "
        "nearest 10); 0 never warns.",
    ),
]

_DEFAULT_K = ",".join(str(k) for k in DEFAULT_K_VALUES)
#: The built-in metrics in the order the table shows them (the headline NDCG first).
DISPLAY_METRICS: tuple[str, ...] = ("ndcg", "recall", "precision", "map", "mrr", "hit_rate")


PerQueryOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--per-query-out",
        help="Also write every query's scores to FILE (.jsonl, .jsonl.gz or .parquet) as "
        "they are computed.",
        show_default=False,
    ),
]

# --------------------------------------------------------------------------- saving runs

SaveOpt = Annotated[
    str | None,
    typer.Option(
        "--save",
        help="Also save the report as a run named NAME in the run registry (its id is "
        "printed on stderr); see `ragmeter runs`.",
        show_default=False,
        rich_help_panel="Run registry",
    ),
]
TagOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tag",
        help="With --save: tag the run KEY=VALUE (repeatable), e.g. --tag model=bm25.",
        show_default=False,
        rich_help_panel="Run registry",
    ),
]
RegistryOpt = Annotated[
    Path | None,
    typer.Option(
        "--registry",
        help="The run registry's database file (default: $RAGMETER_REGISTRY, else "
        "./.ragmeter/runs.sqlite).",
        show_default=False,
        rich_help_panel="Run registry",
    ),
]
