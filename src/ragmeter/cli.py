"""The ``ragmeter`` command line: parse, call the core, render.

Loaded only by the ``ragmeter`` console script and ``python -m ragmeter`` (``import
ragmeter`` never imports typer or rich). Commands:

* ``ragmeter demo`` scores the bundled Cranfield BM25 run (NDCG@10 0.3458, trec_eval's value);
* ``ragmeter eval DATA.jsonl`` scores RAG samples (rag-eval's options); ``--judge
  MODULE:FACTORY`` adds LLM-judged metrics with a judge built by user code (``--dry-run``
  prints what that would cost and sends nothing);
* ``ragmeter retrieval --qrels FILE|DIR --run FILE`` and ``ragmeter beir DIR --run FILE`` score
  a TREC run, with ``--trec`` printing trec_eval-compatible lines;
* ``ragmeter stages SAMPLES.jsonl`` scores every stage of captured samples (retrievers,
  fusion, rerankers, the context) and what each step gained or lost, with a paired CI;
* ``ragmeter serve`` starts the HTTP server (extra ``server``).

Output goes to stdout (a table, ``--json`` or ``--trec``); progress and warnings go to
stderr. Bad input exits with a non-zero code and one line on stderr,
``ragmeter: error: <what and where>``, never a traceback: exit code 2 for a bad command
line (a missing or unknown option, a bad option value, a file that does not exist), 1 for
bad data (a malformed line, an unknown metric, nothing to score).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sqlite3
import sys
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from ragmeter.errors import InvalidInputError, NoSamplesError, RagmeterError, describe_error
from ragmeter.evaluation.retrieval import DEFAULT_K_VALUES, evaluate_run
from ragmeter.io.beir import DEFAULT_QRELS_PATHS, read_beir_qrels
from ragmeter.io.trec import read_trec_run
from ragmeter.report import RagEvalReport, RetrievalEvalReport

if TYPE_CHECKING:
    from ragmeter.judge import Judge, JudgeCache, JudgeMetric
    from ragmeter.schema import RagSample

__all__ = ["app", "main", "run", "trec_eval_lines"]

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


# --------------------------------------------------------------------------- rendering

_TREC_NAMES: dict[str, str] = {
    "ndcg": "ndcg_cut_{k}",
    "precision": "P_{k}",
    "recall": "recall_{k}",
    "map": "map_cut_{k}",
    "hit_rate": "success_{k}",
}
_TREC_UNCUT: dict[str, str] = {"map": "map", "mrr": "recip_rank"}


def trec_measure(key: str) -> str:
    """trec_eval's measure name for a ragmeter result key; the key itself when it has none.

    >>> trec_measure("ndcg@10"), trec_measure("precision@5"), trec_measure("mrr")
    ('ndcg_cut_10', 'P_5', 'recip_rank')
    >>> trec_measure("mrr@10")  # trec_eval has no cut-off reciprocal rank
    'mrr@10'
    """
    name, _, k = key.partition("@")
    if not k:
        return _TREC_UNCUT.get(name, name)
    template = _TREC_NAMES.get(name)
    return template.format(k=k) if template else key


_TREC_ORDER: tuple[str, ...] = ("map", "mrr", "precision@", "recall@", "ndcg@", "map@", "hit_rate@")


def _trec_sort_key(key: str) -> tuple[int, int]:
    """trec_eval's print order: map, recip_rank, P, recall, ndcg_cut, map_cut, success."""
    name, at, k = key.partition("@")
    group = name + at
    rank = _TREC_ORDER.index(group) if group in _TREC_ORDER else len(_TREC_ORDER)
    return (rank, int(k) if k.isdigit() else -1)


def trec_eval_lines(report: RetrievalEvalReport, *, per_query: bool = False) -> list[str]:
    """The report as trec_eval prints it: ``measure<pad>\\tquery\\tvalue``, 4 decimals.

    Per-query rows (trec_eval ``-q``) come first, queries in string order, then the
    ``all`` rows starting with ``num_q``. Measures are named as trec_eval names them
    (``ndcg_cut_10``, ``P_10``, ``recall_100``, ``map``, ``map_cut_10``, ``recip_rank``,
    ``success_10``); a key trec_eval has no measure for keeps its ragmeter name. Means are
    over the scored queries: with judged queries missing from the run as zeros under
    ``missing_queries="zero"`` (trec_eval ``-c``), over the run's queries only under
    ``"skip"`` (trec_eval's default).
    """
    keys = sorted(report.metrics, key=_trec_sort_key)
    lines: list[str] = []
    if per_query:
        for qid in sorted(report.per_query):
            row = report.per_query[qid]
            lines.extend(f"{trec_measure(k):<22}\t{qid}\t{row[k]:.4f}" for k in keys if k in row)
    lines.append(f"{'num_q':<22}\tall\t{report.n_queries}")
    lines.extend(f"{trec_measure(k):<22}\tall\t{report.metrics[k]:.4f}" for k in keys)
    return lines


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _grid(keys: Iterable[str]) -> tuple[list[str], list[int], bool]:
    """Split result keys into metric names (in order), sorted cut-offs, and 'has uncut'."""
    names: list[str] = []
    ks: set[int] = set()
    uncut = False
    for key in keys:
        name, _, k = key.partition("@")
        if name not in names:
            names.append(name)
        if k:
            ks.add(int(k))
        else:
            uncut = True
    return names, sorted(ks), uncut


def _cells(values: Mapping[str, float], names: list[str], cols: list[str]) -> list[str]:
    return [_fmt(values.get(f"{name}{col}" if col else name)) for name in names for col in cols]


def retrieval_table(report: RetrievalEvalReport) -> Table:
    """A rich table: one row per metric, one column per cut-off, ``all`` for uncut ones."""
    names, ks, uncut = _grid(report.metrics)
    cols = [f"@{c}" for c in ks] + ([""] if uncut else [])
    table = Table()
    table.add_column("metric", style="bold")
    for col in cols:
        table.add_column(col or "all", justify="right")
    for name in names:
        table.add_row(name, *_cells(report.metrics, [name], cols))
    return table


def per_query_table(report: RetrievalEvalReport) -> Table:
    """Per-query scores: a block of rows per query (one per metric), a column per cut-off."""
    names, ks, uncut = _grid(report.metrics)
    cols = [f"@{c}" for c in ks] + ([""] if uncut else [])
    table = Table()
    table.add_column("query", style="bold")
    table.add_column("metric")
    for col in cols:
        table.add_column(col or "all", justify="right")
    for qid in sorted(report.per_query):
        row = report.per_query[qid]
        for i, name in enumerate(names):
            table.add_row(
                qid if i == 0 else "",
                name,
                *_cells(row, [name], cols),
                end_section=i == len(names) - 1,
            )
    return table


def rag_table(report: RagEvalReport) -> Table:
    """A rich table: metric, mean, median, coverage (samples it applied to), direction."""
    table = Table()
    for name, justify in (
        ("metric", "left"),
        ("mean", "right"),
        ("median", "right"),
        ("coverage", "right"),
        ("better", "left"),
    ):
        table.add_column(name, justify=justify, style="bold" if name == "metric" else None)  # type: ignore[arg-type]
    for key, value in report.metrics.items():
        summary = report.summaries.get(key)
        covered = report.coverage.get(key, 0)
        table.add_row(
            key,
            _fmt(value if covered or key not in report.coverage else None),
            _fmt(summary.median if summary is not None and summary.count else None),
            f"{covered}/{report.n_samples}",
            "higher" if report.higher_is_better.get(key, True) else "lower",
        )
    return table


def _emit_retrieval(
    report: RetrievalEvalReport,
    *,
    as_json: bool,
    trec: bool,
    per_query: bool,
    title: str | None = None,
) -> None:
    if as_json and trec:
        raise CliError("--json and --trec are two output formats; choose one")
    if as_json:
        _print_json(report)
    elif trec:
        typer.echo("\n".join(trec_eval_lines(report, per_query=per_query)))
    else:
        heading = title or f"Retrieval evaluation: {report.n_queries} queries scored"
        _print_table(retrieval_table(report), heading)
        conv = report.conventions
        level = "> 0" if conv.relevance_level is None else f">= {conv.relevance_level:g}"
        note = f"relevant: grade {level}; ties: {conv.ties}"
        Console(highlight=False, soft_wrap=True).print(note, style="dim", markup=False)
        if per_query:
            _print_table(per_query_table(report), f"Per-query scores ({report.n_queries} queries)")
    if report.warnings and not as_json:
        err = _stderr()
        for warning in report.warnings:
            err.print(f"warning: {warning}", markup=False)


def _print_json(report: RetrievalEvalReport | RagEvalReport) -> None:
    """The report as JSON on stdout, written a row at a time (never one giant string)."""
    report.to_json(sys.stdout)
    sys.stdout.write("\n")


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


def _score_files(
    qrels: Mapping[str, Mapping[str, float]],
    run_path: Path,
    k: str,
    metrics: Sequence[str] | None,
    relevance_level: float | None,
    missing_queries: str,
    per_query_out: Path | None = None,
) -> RetrievalEvalReport:
    """Score a run file query by query when its queries' lines are together (a run of any
    size in little memory); otherwise read it whole. Both give the same report."""
    from ragmeter.evaluation.retrieval import evaluate_run_file
    from ragmeter.io.scores import score_format, write_scores
    from ragmeter.io.trec import UngroupedRunError

    ks = parse_k_values(k)
    names = _split_list(metrics) or list(DISPLAY_METRICS)
    if missing_queries not in ("zero", "skip"):
        raise CliError(f"--missing-queries must be 'zero' or 'skip', got {missing_queries!r}")
    _existing_file(run_path, "run")
    if per_query_out is not None:
        try:
            score_format(per_query_out)
        except InvalidInputError as exc:
            raise CliError(f"--per-query-out: {exc}") from None
    mode: Any = "skip" if missing_queries == "skip" else "zero"
    try:
        report = evaluate_run_file(
            qrels,
            run_path,
            k_values=ks,
            metrics=names,
            relevance_level=relevance_level,
            missing_queries=mode,
        )
    except UngroupedRunError:  # a query's lines are spread over the file: read it whole
        report = evaluate_run(
            qrels,
            read_trec_run(run_path),
            k_values=ks,
            metrics=names,
            relevance_level=relevance_level,
            missing_queries=mode,
        )
    if per_query_out is not None:  # the per-query rows are small: kept for --json/--trec -q
        write_scores(report, per_query_out)
        report.extra["per_query_file"] = str(per_query_out)
    return report


@app.command()
def retrieval(
    qrels: Annotated[
        Path,
        typer.Option(
            "--qrels",
            help="Qrels: TREC (qid iter doc grade) or BEIR TSV, or a BEIR directory.",
            show_default=False,
        ),
    ],
    run: RunOpt,
    k: KOpt = _DEFAULT_K,
    metrics: MetricsOpt = None,
    relevance_level: LevelOpt = None,
    missing_queries: MissingOpt = "zero",
    as_json: JsonOpt = False,
    trec: TrecOpt = False,
    per_query: PerQueryOpt = False,
    per_query_out: PerQueryOutOpt = None,
) -> None:
    """Score a TREC run against qrels (TREC or BEIR format, detected, or a BEIR directory)
    like trec_eval."""
    report = _score_files(
        read_qrels(qrels), run, k, metrics, relevance_level, missing_queries, per_query_out
    )
    _emit_retrieval(report, as_json=as_json, trec=trec, per_query=per_query)


@app.command()
def beir(
    directory: Annotated[
        Path,
        typer.Argument(help="A BEIR dataset directory (qrels/test.tsv, ...).", show_default=False),
    ],
    run: RunOpt,
    qrels_file: Annotated[
        str | None,
        typer.Option(
            "--qrels-file",
            help="Qrels path inside DIRECTORY; default: the first of "
            + ", ".join(DEFAULT_QRELS_PATHS),
        ),
    ] = None,
    k: KOpt = _DEFAULT_K,
    metrics: MetricsOpt = None,
    relevance_level: LevelOpt = None,
    missing_queries: MissingOpt = "zero",
    as_json: JsonOpt = False,
    trec: TrecOpt = False,
    per_query: PerQueryOpt = False,
    per_query_out: PerQueryOutOpt = None,
) -> None:
    """Score a TREC run against a BEIR dataset's qrels (the corpus is not loaded)."""
    path = _beir_qrels_path(directory, qrels_file)
    report = _score_files(
        read_beir_qrels(path), run, k, metrics, relevance_level, missing_queries, per_query_out
    )
    _emit_retrieval(report, as_json=as_json, trec=trec, per_query=per_query)


@app.command()
def demo(
    as_json: JsonOpt = False,
    trec: TrecOpt = False,
) -> None:
    """Score the bundled Cranfield BM25 run (offline); NDCG@10 is trec_eval's 0.3458."""
    from ragmeter.datasets import load_cranfield, load_cranfield_bm25_run

    _, _, qrels = load_cranfield()
    report = evaluate_run(qrels, load_cranfield_bm25_run(), metrics=DISPLAY_METRICS)
    _emit_retrieval(
        report,
        as_json=as_json,
        trec=trec,
        per_query=False,
        title=f"Cranfield 1400, BM25 depth-100 run: {report.n_queries} queries scored",
    )


# --------------------------------------------------------------------------- eval


def _with_progress(
    items: Iterable[T], *, total: int | None, enabled: bool
) -> Generator[T, None, None]:
    """Yield ``items`` while advancing a rich progress bar on stderr (when ``enabled``)."""
    if not enabled:
        yield from items
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    progress = Progress(
        TextColumn("reading samples"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_stderr(),
        transient=True,
    )
    with progress:
        task = progress.add_task("samples", total=total)
        pending = 0
        for item in items:
            yield item
            pending += 1
            if pending == 256:  # advancing per item would cost more than a cheap metric
                progress.advance(task, pending)
                pending = 0
        progress.advance(task, pending)


def _count_lines(path: Path) -> int:
    count = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            count += block.count(b"\n")
    return count


def _progress_wanted(path: Path, as_json: bool) -> bool:
    return not as_json and sys.stderr.isatty() and path.stat().st_size >= PROGRESS_MIN_BYTES


# --------------------------------------------------------------------------- judges

_JUDGE_PANEL = "LLM judge"

#: ``--judge-metrics`` names, in the order they are scored and shown.
JUDGE_METRICS: tuple[str, ...] = ("faithfulness", "answer_relevancy", "correctness")

#: Framework -> (adapter module, its pip distribution, what the factory returned).
_ADAPTERS: dict[str, tuple[str, str, str]] = {
    "langchain": ("ragmeter_langchain", "ragmeter-langchain", "LangChain chat model"),
    "llamaindex": ("ragmeter_llamaindex", "ragmeter-llamaindex", "LlamaIndex LLM"),
    "haystack": ("ragmeter_haystack", "ragmeter-haystack", "Haystack chat generator"),
}

_SPEC_HELP = "MODULE:FACTORY, e.g. mypkg.judges:make_judge or path/to/judges.py:make_judge"


def _spec_error(spec: str, message: str) -> CliError:
    return CliError(f"--judge {spec}: {message}")


def _load_module(spec: str, target: str) -> ModuleType:
    """Import ``target``: a file path (``*.py`` or containing a slash) or a dotted module
    name, importable from the current directory as well as ``sys.path``."""
    if target.endswith(".py") or "/" in target or os.sep in target:
        path = Path(target)
        if not path.is_file():
            raise _spec_error(spec, f"file not found: {path}")
        parent = str(path.resolve().parent)
        if parent not in sys.path:
            sys.path.insert(0, parent)  # like `python path/to/file.py`: siblings import
        name = path.stem
        if not name.isidentifier() or name in sys.modules:
            name = f"_ragmeter_judge_{abs(hash(str(path.resolve())))}"
        loader_spec = importlib.util.spec_from_file_location(name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise _spec_error(spec, f"cannot import {path} as a Python module")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        try:
            loader_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    if not all(part.isidentifier() for part in target.split(".")):
        raise _spec_error(spec, f"{target!r} is not a module name or a .py file; use {_SPEC_HELP}")
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)  # console scripts, unlike `python -m`, do not add it
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (target == missing or target.startswith(missing + ".")):
            raise _spec_error(
                spec, f"no module named {missing!r} (looked in {cwd} and on sys.path)"
            ) from None
        raise


def load_judge_factory(spec: str) -> Callable[[], object]:
    """The factory named by ``spec`` (``MODULE:FACTORY``; ``FACTORY`` may be dotted).

    Raises :class:`CliError` (exit 2) for a malformed spec, a module or file that does not
    exist or an attribute that is missing or not callable, and
    :class:`~ragmeter.errors.InvalidInputError` (exit 1) when importing the module fails.
    """
    target, colon, attr = spec.rpartition(":")
    if not colon or not target or not attr:
        raise _spec_error(spec, f"expected {_SPEC_HELP}")
    if not all(part.isidentifier() for part in attr.split(".")):
        raise _spec_error(spec, f"{attr!r} is not a Python name; expected {_SPEC_HELP}")
    try:
        obj: object = _load_module(spec, target)
    except CliError:
        raise
    except Exception as exc:
        raise InvalidInputError(
            f"--judge {spec}: importing {target} failed: {type(exc).__name__}: {exc}"
        ) from None
    for i, part in enumerate(attr.split(".")):
        if not hasattr(obj, part):
            owner = target if i == 0 else ".".join(attr.split(".")[:i])
            public = (
                sorted(n for n, v in vars(obj).items() if callable(v) and not n.startswith("_"))
                if hasattr(obj, "__dict__")
                else []
            )
            hint = f" (it has: {', '.join(public[:8])})" if public else ""
            raise _spec_error(spec, f"{owner} has no attribute {part!r}{hint}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise _spec_error(spec, f"{attr} is a {type(obj).__name__}, not a callable factory")
    return obj


def _framework_of(obj: object) -> str | None:
    """Which framework's model ``obj`` is, by its class names (no framework is imported)."""
    for cls in type(obj).__mro__:
        module = getattr(cls, "__module__", "") or ""
        if cls.__name__ == "BaseChatModel" and module.startswith("langchain_core."):
            return "langchain"
        if cls.__name__ == "LLM" and module.startswith("llama_index."):
            return "llamaindex"
    meta = type(type(obj))
    if meta.__name__ == "ComponentMeta" and meta.__module__.startswith("haystack."):
        return "haystack"
    return None


def as_judge(obj: object, *, spec: str = "FACTORY") -> Judge:
    """``obj`` as a :class:`ragmeter.judge.Judge`: a judge as is, a LangChain chat model,
    LlamaIndex LLM or Haystack chat generator through its adapter's ``judge()``.

    Raises :class:`~ragmeter.errors.InvalidInputError` (exit 1) for anything else, or when
    the matching adapter is not installed (naming the package to install).
    """
    from ragmeter.judge.protocol import Judge

    if isinstance(obj, Judge):
        return obj
    framework = _framework_of(obj)
    if framework is None:
        raise InvalidInputError(
            f"--judge {spec}: the factory returned a {type(obj).__name__} object, which is "
            "not a judge: return an object with .identity and async .complete(messages) (e.g. "
            "ragmeter.judge.FunctionJudge(fn)), a LangChain chat model, a LlamaIndex LLM or a "
            "Haystack chat generator"
        )
    module_name, dist, what = _ADAPTERS[framework]
    try:
        adapter = importlib.import_module(module_name)
    except ImportError:
        raise InvalidInputError(
            f"--judge {spec}: the factory returned a {what} ({type(obj).__name__}); using it "
            f"as a judge needs the adapter: pip install {dist}"
        ) from None
    try:
        wrapped: Judge = adapter.judge(obj)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"--judge {spec}: {exc}") from None
    return wrapped


def _make_judge(spec: str) -> Judge:
    factory = load_judge_factory(spec)
    try:
        obj = factory()
    except Exception as exc:
        raise InvalidInputError(
            f"--judge {spec}: the factory raised {type(exc).__name__}: {exc}"
        ) from None
    return as_judge(obj, spec=spec)


def _judge_metric_names(values: Sequence[str] | None) -> list[str]:
    """Normalise ``--judge-metrics`` (``judge_`` prefix and dashes allowed); CliError if unknown."""
    names: list[str] = []
    for raw in _split_list(values):
        name = raw.lower().replace("-", "_").removeprefix("judge_")
        if name not in JUDGE_METRICS:
            raise CliError(
                f"--judge-metrics: unknown judge metric {raw!r}; choose from "
                + ", ".join(JUDGE_METRICS)
            )
        if name not in names:
            names.append(name)
    return sorted(names, key=JUDGE_METRICS.index)


def _judge_metrics(
    judge: Judge, names: list[str], repeats: int, samples: Sequence[RagSample]
) -> tuple[list[JudgeMetric], list[str]]:
    """The judge metrics to run, and notes on defaults left out because no sample fits.

    Named metrics that no sample can satisfy are refused (exit 1), like ``--metrics``.
    """
    from ragmeter.judge.metrics import AnswerRelevancy, Correctness, Faithfulness

    classes: dict[str, type[JudgeMetric]] = {
        "faithfulness": Faithfulness,
        "answer_relevancy": AnswerRelevancy,
        "correctness": Correctness,
    }
    chosen: list[JudgeMetric] = []
    notes: list[str] = []
    for name in names or JUDGE_METRICS:
        metric = classes[name](judge=judge, repeats=repeats)
        if any(metric.applies_to(s) for s in samples):
            chosen.append(metric)
            continue
        why = (
            f"{metric.name} needs {', '.join(sorted(metric.needs))} on a sample; none of the "
            f"{len(samples)} samples has all of them"
        )
        if names:
            raise InvalidInputError(f"--judge-metrics {name}: {why}")
        notes.append(why)
    if not chosen:
        raise InvalidInputError("no sample can be judged: " + "; ".join(notes))
    return chosen, notes


def _judge_cache_path(path: Path | None, disabled: bool) -> Path | None:
    from ragmeter.judge.cache import default_cache_path

    if disabled:
        if path is not None:
            raise CliError("--judge-cache and --no-judge-cache contradict each other; pick one")
        return None
    if path is None:
        return default_cache_path()
    return path / "judge-cache.sqlite" if path.is_dir() else path


def _open_judge_cache(path: Path | None, *, create: bool = True) -> JudgeCache | None:
    """Open the cache at ``path`` (``None`` = no cache); a file that is not a judge cache
    (not SQLite, corrupted, another application's database) is bad data (exit 1, one line
    naming the path, the problem and what to do). A cache this user cannot write is opened
    read-only (new verdicts are then not stored: a warning says how many). With
    ``create=False`` a missing file is not created (dry run)."""
    from ragmeter.errors import JudgeCacheError
    from ragmeter.judge.cache import JudgeCache

    if path is None or (not create and not path.exists()):
        return None
    try:
        cache = JudgeCache(path)
        len(cache)  # reads the table: a damaged file fails here, not half-way
    except JudgeCacheError as exc:
        hint = exc.hint.replace("use another cache path", "pass another --judge-cache PATH")
        raise InvalidInputError(
            f"--judge-cache {path}: not a usable judge cache: the file {exc.problem}. "
            f"To go on, {hint}, or pass --no-judge-cache"
        ) from None
    except sqlite3.Error as exc:  # pragma: no cover - JudgeCache maps these itself
        raise InvalidInputError(f"--judge-cache {path}: not a usable judge cache ({exc})") from None
    return cache


def _stderr_is_tty() -> bool:
    return sys.stderr.isatty()


@contextmanager
def _judge_progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar of judge calls on stderr; yields the runner's ``progress``
    callback, or ``None`` when not ``enabled``."""
    if not enabled:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    bar = Progress(
        TextColumn("judging"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_stderr(),
        transient=True,
    )
    with bar:
        task = bar.add_task("judge calls", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _judge_options(
    concurrency: int | None,
    rpm: float | None,
    timeout: float | None,
    max_calls: int | None,
    max_tokens: int | None,
) -> Any:
    from ragmeter.judge.runner import JudgeOptions

    if rpm is not None and not rpm > 0:
        raise CliError(f"--rpm must be > 0 requests per minute, got {rpm:g}")
    if timeout is not None and not timeout > 0:
        raise CliError(f"--timeout must be > 0 seconds, got {timeout:g}")
    given: dict[str, Any] = {
        "concurrency": concurrency,
        "requests_per_minute": rpm,
        "timeout": timeout,
        "max_calls": max_calls,
        "max_tokens": max_tokens,
    }
    return JudgeOptions(**{k: v for k, v in given.items() if v is not None})


def _print_estimate(estimate: Any, cache_path: Path | None, *, as_json: bool) -> None:
    import json

    if as_json:
        data = {
            "dry_run": True,
            "calls": estimate.calls,
            "cached": estimate.cached,
            "input_tokens": estimate.input_tokens,
            "samples": estimate.samples,
            "metrics": list(estimate.metrics),
            "cache": None if cache_path is None else str(cache_path),
        }
        typer.echo(json.dumps(data, indent=2))
        return
    out = Console(highlight=False, soft_wrap=True)
    out.print(
        f"Dry run: {estimate.samples} samples, judge metrics {', '.join(estimate.metrics)}",
        style="bold",
        markup=False,
    )
    cache_note = "no cache" if cache_path is None else f"cache {cache_path}"
    for line in (
        f"judge calls to send: {estimate.calls}",
        f"already cached:      {estimate.cached} ({cache_note})",
        f"estimated input tokens: {estimate.input_tokens} (about 4 characters per token)",
        "nothing was sent to the judge",
    ):
        out.print(line, markup=False)


def _print_judge_summary(
    report: RagEvalReport, keys: Sequence[str], cache_path: Path | None
) -> None:
    """Judge calls, cache hits and the incomplete note under the table (stdout); why judge
    scores are missing, grouped, on stderr."""
    out = Console(highlight=False, soft_wrap=True)
    where = "no cache" if cache_path is None else f"cache {cache_path}"
    line = (
        f"judge calls: {report.judge_calls} sent, {report.judge_cache_hits} served from the "
        f"cache ({where})"
    )
    tokens_in = int(report.extra.get("judge_input_tokens", 0) or 0)
    tokens_out = int(report.extra.get("judge_output_tokens", 0) or 0)
    if tokens_in or tokens_out:
        line += f"; tokens: {tokens_in} in, {tokens_out} out"
    out.print(line, markup=False)
    if report.incomplete:
        missing = sum(
            "budget exhausted" in str((row.get(k) or {}).get("reason", ""))
            for row in report.details.values()
            for k in keys
        )
        resume = " (finished calls are cached: a re-run resumes)" if cache_path else ""
        out.print(
            f"incomplete: {report.extra.get('stop_reason')}; {missing} judge scores were not "
            f"asked for (None){resume}",
            style="bold",
            markup=False,
        )
    err = _stderr()
    for key in keys:
        reasons: Counter[str] = Counter()
        for sid in report.per_sample:
            why = (report.details.get(sid, {}).get(key) or {}).get("reason")
            if why:
                reasons[str(why)] += 1
        for why, count in reasons.most_common(3):
            err.print(f"{key}: {count} sample(s) not scored: {why}", markup=False)
        if len(reasons) > 3:
            err.print(f"{key}: ... and {len(reasons) - 3} other reasons", markup=False)


@app.command("eval")
def eval_command(
    data: Annotated[
        Path, typer.Argument(help="JSONL file of samples (ragmeter or rag-eval fields).")
    ],
    k: Annotated[int, typer.Option("--k", "-k", min=1, help="Cut-off for retrieval metrics.")] = 5,
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            "-m",
            help="Metrics to compute (comma-separated or repeated); default: every metric "
            "some sample can be scored on.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    skip_errors: Annotated[
        bool,
        typer.Option("--skip-errors", help="Skip malformed lines (counted) instead of failing."),
    ] = False,
    claims_only: Annotated[
        bool,
        typer.Option("--claims-only", help="Faithfulness only (no retrieval or other metrics)."),
    ] = False,
    input_price: Annotated[
        float | None,
        typer.Option(min=0, help="USD per million prompt tokens (for cost_usd)."),
    ] = None,
    output_price: Annotated[
        float | None,
        typer.Option(min=0, help="USD per million completion tokens (for cost_usd)."),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="Add LLM-judged metrics with the judge a factory in your code returns "
            "(MODULE:FACTORY or path/to/file.py:FACTORY, called with no arguments): a "
            "ragmeter judge, or a LangChain / LlamaIndex / Haystack chat model.",
            rich_help_panel=_JUDGE_PANEL,
        ),
    ] = None,
    judge_metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--judge-metrics",
            help="Judge metrics: faithfulness, answer_relevancy, correctness; default: each "
            "that some sample can be scored on.",
            rich_help_panel=_JUDGE_PANEL,
        ),
    ] = None,
    judge_cache: Annotated[
        Path | None,
        typer.Option(
            "--judge-cache",
            help="SQLite cache of judge calls (file or directory); default: the user cache "
            "dir ($RAGMETER_CACHE_DIR, else ~/.cache/ragmeter).",
            rich_help_panel=_JUDGE_PANEL,
            show_default=False,
        ),
    ] = None,
    no_judge_cache: Annotated[
        bool,
        typer.Option(
            "--no-judge-cache", help="Call the judge for everything.", rich_help_panel=_JUDGE_PANEL
        ),
    ] = False,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Judge calls in flight at once.",
            show_default="8",
            rich_help_panel=_JUDGE_PANEL,
        ),
    ] = None,
    rpm: Annotated[
        float | None,
        typer.Option(
            "--rpm", help="At most this many judge calls per minute.", rich_help_panel=_JUDGE_PANEL
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds per judge call.", show_default="60", rich_help_panel=_JUDGE_PANEL
        ),
    ] = None,
    max_calls: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Stop after this many judge calls (the report is marked incomplete).",
            rich_help_panel=_JUDGE_PANEL,
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Stop once the judge has used this many tokens (as the model reports them).",
            rich_help_panel=_JUDGE_PANEL,
        ),
    ] = None,
    repeats: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Ask the judge N times per sample; the mean is the score, the spread is in "
            "--json details.",
            show_default="1",
            rich_help_panel=_JUDGE_PANEL,
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print how many judge calls and input tokens the run would need; send nothing.",
            rich_help_panel=_JUDGE_PANEL,
        ),
    ] = False,
    per_sample_out: Annotated[
        Path | None,
        typer.Option(
            "--per-sample-out",
            help="Write every sample's scores to FILE (.jsonl, .jsonl.gz or .parquet) as they "
            "are computed; memory stays flat.",
            show_default=False,
        ),
    ] = None,
    keep_per_sample: Annotated[
        bool,
        typer.Option(
            "--per-sample",
            help="Put every sample's scores in the --json output (held in memory until the "
            "end; for ragmeter gate/compare on a saved report).",
        ),
    ] = False,
) -> None:
    """Score RAG samples from a JSONL or Parquet file (rag-eval's `eval`, ragmeter's metrics).

    The samples are streamed: memory does not grow with the file (per-sample scores go to
    --per-sample-out, or into --json with --per-sample).
    """
    from ragmeter.evaluation.rag import evaluate_rag
    from ragmeter.io.jsonl import read_jsonl
    from ragmeter.io.scores import score_format, write_scores

    _existing_file(data, "data")
    if per_sample_out is not None:
        try:
            score_format(per_sample_out)
        except InvalidInputError as exc:
            raise CliError(f"--per-sample-out: {exc}") from None
    parquet = data.name.lower().endswith((".parquet", ".pq"))
    kind = "Parquet row" if parquet else "JSON object"
    judge_only = {
        "--judge-metrics": bool(judge_metrics),
        "--judge-cache": judge_cache is not None,
        "--no-judge-cache": no_judge_cache,
        "--concurrency": concurrency is not None,
        "--rpm": rpm is not None,
        "--timeout": timeout is not None,
        "--max-calls": max_calls is not None,
        "--max-tokens": max_tokens is not None,
        "--repeats": repeats is not None,
        "--dry-run": dry_run,
    }
    if judge is None:
        given = [name for name, on in judge_only.items() if on]
        if given:
            raise CliError(f"{given[0]} only applies to LLM judges: add --judge MODULE:FACTORY")
    names = _split_list(metrics)
    if claims_only:
        if names and names != ["faithfulness"]:
            raise CliError(
                "--claims-only scores faithfulness only; drop --metrics or --claims-only"
            )
        names = ["faithfulness"]
    prices = None
    if input_price is not None or output_price is not None:
        if input_price is None or output_price is None:
            raise CliError("cost_usd needs both --input-price and --output-price")
        prices = {"input": input_price, "output": output_price}
    elif "cost_usd" in names:
        raise CliError(
            "--metrics cost_usd needs token prices: add --input-price and --output-price "
            "(USD per million prompt / completion tokens)"
        )
    reader: Any
    if parquet:
        from ragmeter.io.arrow import read_parquet

        reader = read_parquet(data, skip_errors=skip_errors)
    else:
        reader = read_jsonl(data, skip_errors=skip_errors)
    enabled = _progress_wanted(data, as_json)
    total = None
    if enabled:
        if parquet:
            total = reader.num_rows
        elif data.suffix != ".gz":
            total = _count_lines(data)
    samples = _with_progress(reader, total=total, enabled=enabled)
    judge_keys: list[str] = []
    cache_path: Path | None = None
    if judge is not None:
        judge_names = _judge_metric_names(judge_metrics)
        options = _judge_options(concurrency, rpm, timeout, max_calls, max_tokens)
        cache_path = _judge_cache_path(judge_cache, no_judge_cache)
        the_judge = _make_judge(judge)
        try:
            loaded = list(samples)  # judge mode needs them twice: to choose, then to score
        finally:
            samples.close()
        if not loaded:
            raise NoSamplesError(
                f"{data}: no samples to score: the file holds no {kind} "
                + ("" if parquet else "(JSONL = one JSON object per line)")
            )
        judged, notes = _judge_metrics(the_judge, judge_names, repeats or 1, loaded)
        judge_keys = [m.name for m in judged]
        err = _stderr()
        if dry_run:
            from ragmeter.judge.runner import estimate_judges
            from ragmeter.schema import coerce_sample

            cache = _open_judge_cache(cache_path, create=False)
            try:
                coerced = [coerce_sample(s, index=i) for i, s in enumerate(loaded)]
                estimate = estimate_judges(coerced, judged, cache=cache)
            finally:
                if cache is not None:
                    cache.close()
            _print_estimate(estimate, cache_path, as_json=as_json)
            return
        for note in notes:
            err.print(f"not computed: {note}", markup=False, style="dim")
        from ragmeter.evaluation.judged import evaluate_with_judges

        cache = _open_judge_cache(cache_path)
        try:
            with _judge_progress(not as_json and _stderr_is_tty()) as progress:
                report = evaluate_with_judges(
                    loaded,
                    judge_metrics=judged,
                    other_metrics=names or None,
                    evaluate=evaluate_rag,
                    judge_cache=cache,
                    judge_options=options,
                    progress=progress,
                    k=k,
                    prices=prices,
                )
        finally:
            if cache is not None:
                cache.close()
        if per_sample_out is not None:
            write_scores(report, per_sample_out)
            report.extra["per_sample_file"] = str(per_sample_out)
    else:
        keep: Any = per_sample_out if per_sample_out is not None else keep_per_sample
        try:
            report = evaluate_rag(
                samples, metrics=names or None, k=k, prices=prices, per_sample=keep
            )
        except NoSamplesError:
            what = "rows" if parquet else "lines"
            note = f" ({len(reader.skipped)} malformed {what} skipped)" if reader.skipped else ""
            raise NoSamplesError(
                f"{data}: no samples to score: the file holds no {kind}{note}"
                + ("" if parquet else " (JSONL = one JSON object per line)")
            ) from None
        finally:
            samples.close()  # stops the progress bar at once, also on an error
    skipped = list(reader.skipped)
    report.skipped_lines = len(skipped)
    if as_json:
        _print_json(report)
        return
    heading = f"RAG evaluation: {report.n_samples} samples"
    if report.skipped_lines:
        heading += f" ({report.skipped_lines} malformed lines skipped)"
    _print_table(rag_table(report), heading)
    if judge_keys:
        _print_judge_summary(report, judge_keys, cache_path)
    err = _stderr()
    unit = "row" if parquet else "line"
    for line, message in skipped[:20]:
        err.print(f"skipped {unit} {line}: {message}", markup=False)
    if len(skipped) > 20:
        err.print(f"... and {len(skipped) - 20} more skipped {unit}s", markup=False)
    for reason in dict(report.extra.get("not_computed") or {}).values():
        err.print(f"not computed: {reason}", markup=False, style="dim")
    for warning in report.warnings:
        if report.incomplete and warning.startswith("incomplete:"):
            continue  # said under the table already
        err.print(f"warning: {warning}", markup=False)


# --------------------------------------------------------------------------- report


@app.command("report")
def report_command(
    html: Annotated[
        Path,
        typer.Option(
            "--html",
            help="Write the report here: one self-contained HTML file (works offline).",
            show_default=False,
        ),
    ],
    data: Annotated[
        Path | None,
        typer.Argument(
            help="JSONL sample file (a RAG report); omit it and give --qrels and --run for a "
            "retrieval report.",
            show_default=False,
        ),
    ] = None,
    qrels: Annotated[
        Path | None,
        typer.Option(
            "--qrels",
            help="Qrels: TREC, BEIR TSV, or a BEIR directory (whose queries and corpus are "
            "then shown too).",
            show_default=False,
        ),
    ] = None,
    run: Annotated[
        Path | None, typer.Option("--run", "-r", help="TREC run file.", show_default=False)
    ] = None,
    queries: Annotated[
        Path | None,
        typer.Option(
            "--queries",
            help="Query texts: a BEIR directory, queries.jsonl, or a TSV 'id<TAB>text'.",
            show_default=False,
        ),
    ] = None,
    corpus: Annotated[
        Path | None,
        typer.Option(
            "--corpus",
            help="Document texts for snippets: a BEIR directory or corpus.jsonl.",
            show_default=False,
        ),
    ] = None,
    k: Annotated[
        str | None,
        typer.Option(
            "--k",
            "-k",
            help="Retrieval: comma-separated cut-offs (default 1,3,5,10,20,100). Samples: the "
            "cut-off of the retrieval metrics (default 5).",
            show_default=False,
        ),
    ] = None,
    metrics: MetricsOpt = None,
    relevance_level: LevelOpt = None,
    missing_queries: MissingOpt = "zero",
    skip_errors: Annotated[
        bool,
        typer.Option("--skip-errors", help="Samples: skip malformed lines (counted)."),
    ] = False,
    depth: Annotated[
        int, typer.Option("--depth", min=1, help="Ranked docs (or retrieved ids) shown per item.")
    ] = 10,
    title: Annotated[str | None, typer.Option("--title", help="Page title.")] = None,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="Dataset name for the header.")
    ] = None,
    system: Annotated[
        str | None,
        typer.Option("--system", help="System name for the header (default: the file's name)."),
    ] = None,
) -> None:
    """Write an HTML report: plots, a sortable per-query table and drill-down, one file."""
    from ragmeter.html import write_rag_report, write_retrieval_report
    from ragmeter.html._inputs import beir_texts, load_texts

    if data is not None:
        if qrels is not None or run is not None or queries is not None or corpus is not None:
            raise CliError(
                "give either a JSONL sample file (RAG report) or --qrels and --run (retrieval "
                "report), not both; --queries and --corpus go with --qrels and --run"
            )
        from ragmeter.evaluation.rag import evaluate_rag
        from ragmeter.io.jsonl import read_jsonl

        _existing_file(data, "data")
        cut_off = 5
        if k is not None:
            ks = parse_k_values(k)
            if len(ks) != 1:
                raise CliError(f"--k takes one cut-off for a sample file, got {k!r}")
            cut_off = ks[0]
        reader = read_jsonl(data, skip_errors=skip_errors)
        samples = list(reader)
        if not samples:
            raise NoSamplesError(f"{data}: no samples to report: the file holds no JSON object")
        rag = evaluate_rag(samples, metrics=_split_list(metrics) or None, k=cut_off)
        rag.skipped_lines = len(reader.skipped)
        staged, stage_notes = _stage_report(samples)
        written = write_rag_report(
            rag,
            html,
            samples=samples,
            title=title,
            dataset=dataset,
            system=system or data.stem,
            depth=depth,
            stages=staged,
        )
        what = f"{rag.n_samples} samples" + (f", {len(staged.rows)} stages" if staged else "")
        warnings = [*rag.warnings, *stage_notes]
    else:
        if qrels is None or run is None:
            raise CliError(
                "ragmeter report needs a JSONL sample file, or --qrels and --run for a TREC run"
            )
        if not qrels.exists():
            raise CliError(f"qrels file not found: {qrels}")
        if missing_queries not in ("zero", "skip"):
            raise CliError(f"--missing-queries must be 'zero' or 'skip', got {missing_queries!r}")
        from ragmeter.io import read_qrels as read_any_qrels

        judged = read_any_qrels(qrels)
        ranked = read_trec_run(_existing_file(run, "run"))
        scored = evaluate_run(
            judged,
            ranked,
            k_values=parse_k_values(k or _DEFAULT_K),
            metrics=_split_list(metrics) or list(DISPLAY_METRICS),
            relevance_level=relevance_level,
            missing_queries="skip" if missing_queries == "skip" else "zero",
        )
        texts = load_texts(queries, "queries") if queries is not None else None
        docs = load_texts(corpus, "corpus") if corpus is not None else None
        if qrels.is_dir():  # a BEIR directory brings its own texts
            texts = texts if texts is not None else beir_texts(qrels, "queries")
            docs = docs if docs is not None else beir_texts(qrels, "corpus")
        if queries is not None and queries.is_dir() and docs is None:
            docs = beir_texts(queries, "corpus")
        written = write_retrieval_report(
            scored,
            html,
            run=ranked,
            qrels=judged,
            queries=texts,
            corpus=docs,
            title=title,
            dataset=dataset or (qrels.name if qrels.is_dir() else None),
            system=system or run.stem,
            depth=depth,
        )
        what = f"{len(scored.per_query)} queries"
        warnings = list(scored.warnings)
    size = written.stat().st_size
    typer.echo(f"wrote {written} ({size / 1e6:.1f} MB, {what})")
    err = _stderr()
    for warning in warnings:
        err.print(f"warning: {warning}", markup=False)


def _stage_report(samples: Sequence[RagSample]) -> tuple[Any, list[str]]:
    """The stage table of samples that carry stages and relevance (``None`` otherwise), and
    the warnings that say why there is none or come with it."""
    if not any(s.stages for s in samples):
        return None, []
    from ragmeter.stages import evaluate_stages

    try:
        report = evaluate_stages(samples)
    except RagmeterError as exc:
        return None, [f"the samples carry stages, but no stage table could be made: {exc}"]
    return report, list(report.warnings)


# --------------------------------------------------------------------------- serve


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port.")] = 8000,
    max_body_bytes: Annotated[
        int | None,
        typer.Option(min=1, help="Largest request body accepted (413 above); default 10 MiB."),
    ] = None,
    max_samples: Annotated[
        int | None,
        typer.Option(
            min=1, help="Most samples (or queries) per request (413 above); default 10000."
        ),
    ] = None,
    max_concurrent: Annotated[
        int | None,
        typer.Option(min=1, help="Scoring requests read, parsed and scored at once; default 2."),
    ] = None,
    max_queued: Annotated[
        int | None,
        typer.Option(
            min=0, help="More scoring requests that may wait for a slot (429 above); default 16."
        ),
    ] = None,
    queue_timeout: Annotated[
        float | None,
        typer.Option(min=0.001, help="Seconds a queued request waits (429 after); default 30."),
    ] = None,
    body_timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="Seconds for a request body to arrive (408 after) and for the answer to be "
            "read; default 30.",
        ),
    ] = None,
    score_timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001, help="Seconds of parsing and scoring per request (503 after); default 60."
        ),
    ] = None,
    header_timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="Seconds for a connection to send a complete request head; default 10.",
        ),
    ] = None,
    keep_alive_timeout: Annotated[
        int | None,
        typer.Option(min=1, help="Seconds an idle keep-alive connection stays open; default 5."),
    ] = None,
) -> None:
    """Run the HTTP server (needs the optional 'server' extra: fastapi, uvicorn)."""
    from ragmeter.errors import MissingDependencyError

    try:
        import uvicorn  # noqa: F401 - checked here, used by server.run

        from ragmeter import server
    except ImportError as exc:
        missing = getattr(exc, "name", None) or "fastapi"
        raise MissingDependencyError(missing.split(".")[0], "server") from None
    options: dict[str, Any] = {
        name: value
        for name, value in (
            ("max_body_bytes", max_body_bytes),
            ("max_samples", max_samples),
            ("max_concurrent", max_concurrent),
            ("max_queued", max_queued),
            ("queue_timeout", queue_timeout),
            ("body_timeout", body_timeout),
            ("score_timeout", score_timeout),
            ("header_timeout", header_timeout),
            ("keep_alive_timeout", keep_alive_timeout),
        )
        if value is not None
    }
    server.run(host=host, port=port, **options)


# --------------------------------------------------------------------------- entry point


def _register_plugins() -> None:
    """Add the commands defined in their own modules (compare, gate; stages). An import
    error is not swallowed: a command never vanishes without a word."""
    from ragmeter._cli_stages import register as register_stages
    from ragmeter._cli_stats import register

    register(app)
    register_stages(app)


_register_plugins()


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
    except CliError as exc:
        return _fail(str(exc), 2)
    except RagmeterError as exc:
        return _fail(str(exc), 1)
    except BrokenPipeError:
        # the reader went away (`ragmeter ... | head -1`): the output is cut, so not exit 0;
        # point stdout at /dev/null so the interpreter's exit flush does not complain too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _fail("standard output was closed before all results were written", 1)
    except OSError as exc:
        return _fail(describe_error(exc), 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:
        # Command-line errors from click (vendored by recent typer, so matched by shape).
        kind = type(exc).__name__
        if kind == "NoArgsIsHelpError":
            ctx = getattr(exc, "ctx", None)
            typer.echo(ctx.get_help() if ctx is not None else str(exc))
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


def main() -> None:
    """Console-script entry point: ``ragmeter ...``."""
    sys.exit(run())


if __name__ == "__main__":  # pragma: no cover
    main()
