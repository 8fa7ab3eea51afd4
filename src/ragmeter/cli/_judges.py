"""Loading the user's judge (``--judge MODULE:FACTORY``), adapting framework models, and
reporting judge calls, cost estimates and cache use."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sqlite3
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from ragmeter.cli._app import CliError, _stderr
from ragmeter.cli._options import _split_list
from ragmeter.errors import InvalidInputError
from ragmeter.report import RagEvalReport

if TYPE_CHECKING:
    from ragmeter.judge import Judge, JudgeCache, JudgeMetric
    from ragmeter.schema import RagSample


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


def _spec_error(spec: str, message: str, option: str = "--judge") -> CliError:
    return CliError(f"{option} {spec}: {message}")


def _load_module(spec: str, target: str, option: str = "--judge") -> ModuleType:
    """Import ``target``: a file path (``*.py`` or containing a slash) or a dotted module
    name, importable from the current directory as well as ``sys.path``."""
    if target.endswith(".py") or "/" in target or os.sep in target:
        path = Path(target)
        if not path.is_file():
            raise _spec_error(spec, f"file not found: {path}", option)
        parent = str(path.resolve().parent)
        if parent not in sys.path:
            sys.path.insert(0, parent)  # like `python path/to/file.py`: siblings import
        name = path.stem
        if not name.isidentifier() or name in sys.modules:
            name = f"_ragmeter_judge_{abs(hash(str(path.resolve())))}"
        loader_spec = importlib.util.spec_from_file_location(name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise _spec_error(spec, f"cannot import {path} as a Python module", option)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        try:
            loader_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    if not all(part.isidentifier() for part in target.split(".")):
        raise _spec_error(
            spec, f"{target!r} is not a module name or a .py file; use {_SPEC_HELP}", option
        )
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)  # console scripts, unlike `python -m`, do not add it
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (target == missing or target.startswith(missing + ".")):
            raise _spec_error(
                spec, f"no module named {missing!r} (looked in {cwd} and on sys.path)", option
            ) from None
        raise


def load_judge_factory(spec: str, option: str = "--judge") -> Callable[[], object]:
    """The factory named by ``spec`` (``MODULE:FACTORY``; ``FACTORY`` may be dotted).

    Raises :class:`CliError` (exit 2) for a malformed spec, a module or file that does not
    exist or an attribute that is missing or not callable, and
    :class:`~ragmeter.errors.InvalidInputError` (exit 1) when importing the module fails.
    """
    target, colon, attr = spec.rpartition(":")
    if not colon or not target or not attr:
        raise _spec_error(spec, f"expected {_SPEC_HELP}", option)
    if not all(part.isidentifier() for part in attr.split(".")):
        raise _spec_error(spec, f"{attr!r} is not a Python name; expected {_SPEC_HELP}", option)
    try:
        obj: object = _load_module(spec, target, option)
    except CliError:
        raise
    except Exception as exc:
        raise InvalidInputError(
            f"{option} {spec}: importing {target} failed: {type(exc).__name__}: {exc}"
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
            raise _spec_error(spec, f"{owner} has no attribute {part!r}{hint}", option)
        obj = getattr(obj, part)
    if not callable(obj):
        raise _spec_error(spec, f"{attr} is a {type(obj).__name__}, not a callable factory", option)
    return obj


def framework_of(
    obj: object, *, langchain: str = "BaseChatModel", llamaindex: str = "LLM"
) -> str | None:
    """Which framework's model ``obj`` is, by its class names (no framework is imported):
    a subclass of LangChain's ``langchain`` base class or LlamaIndex's ``llamaindex`` one
    (chat models by default; ``"Embeddings"``/``"BaseEmbedding"`` for embedding models), or
    a Haystack component."""
    for cls in type(obj).__mro__:
        module = getattr(cls, "__module__", "") or ""
        if cls.__name__ == langchain and module.startswith("langchain_core."):
            return "langchain"
        if cls.__name__ == llamaindex and module.startswith("llama_index."):
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
    framework = framework_of(obj)
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


def _print_estimate(
    estimate: Any,
    cache_path: Path | None,
    *,
    as_json: bool,
    embeddings: dict[str, Any] | None = None,
) -> None:
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
        if embeddings is not None:  # the embedding metrics' estimate (ragmeter.cli._embed)
            data["embeddings"] = embeddings
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
