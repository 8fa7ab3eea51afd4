"""The embedding options of ``ragmeter eval``: picking the embedder (``--embedder
MODULE:FACTORY``), the embedding cache, and the summary of what was embedded."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from ragmeter.cli._app import CliError
from ragmeter.cli._judges import framework_of, load_judge_factory
from ragmeter.errors import InvalidInputError
from ragmeter.report import RagEvalReport

if TYPE_CHECKING:
    from ragmeter.embed import Embedder

EMBED_PANEL = "Embedding metrics"

#: Framework -> (adapter module, its pip distribution, what the factory returned).
_ADAPTERS: dict[str, tuple[str, str, str]] = {
    "langchain": ("ragmeter_langchain", "ragmeter-langchain", "LangChain Embeddings"),
    "llamaindex": ("ragmeter_llamaindex", "ragmeter-llamaindex", "LlamaIndex embedding model"),
    "haystack": ("ragmeter_haystack", "ragmeter-haystack", "Haystack embedder component"),
}

EmbedderOpt = Annotated[
    str | None,
    typer.Option(
        "--embedder",
        help="Score the embedding metrics in --metrics (semantic_similarity, "
        "semantic_context_recall, semantic_context_precision) with the model a factory in "
        "your code returns (MODULE:FACTORY or path/to/file.py:FACTORY, called with no "
        "arguments): a ragmeter embedder, or a LangChain / LlamaIndex / Haystack embedding "
        "model. Default: the offline model of ragmeter[semantic].",
        rich_help_panel=EMBED_PANEL,
    ),
]
EmbedCacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--embed-cache",
        help="SQLite cache of embeddings (file or directory); default: the user cache dir "
        "($RAGMETER_CACHE_DIR, else ~/.cache/ragmeter).",
        rich_help_panel=EMBED_PANEL,
        show_default=False,
    ),
]
NoEmbedCacheOpt = Annotated[
    bool,
    typer.Option("--no-embed-cache", help="Embed every text again.", rich_help_panel=EMBED_PANEL),
]
EmbedBatchOpt = Annotated[
    int | None,
    typer.Option(
        "--embed-batch-size",
        min=1,
        help="Texts per call of the embedding model.",
        show_default="64",
        rich_help_panel=EMBED_PANEL,
    ),
]
EmbedConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        "--embed-concurrency",
        min=1,
        help="Calls of the embedding model in flight at once.",
        show_default="4",
        rich_help_panel=EMBED_PANEL,
    ),
]


def as_embedder(obj: object, *, spec: str) -> Embedder:
    """``obj`` as a :class:`ragmeter.embed.Embedder`: an embedder as is, a framework's
    embedding model through its adapter's ``embedder()``; an
    :class:`~ragmeter.errors.InvalidInputError` (exit 1) naming what to do otherwise."""
    from ragmeter.embed import Embedder

    if isinstance(obj, Embedder):
        return obj
    framework = framework_of(obj, langchain="Embeddings", llamaindex="BaseEmbedding")
    if framework is None:
        raise InvalidInputError(
            f"--embedder {spec}: the factory returned a {type(obj).__name__} object, which is "
            "not an embedder: return an object with .identity and async .embed(texts) (e.g. "
            "ragmeter.embed.FunctionEmbedder(fn)), LangChain Embeddings, a LlamaIndex "
            "embedding model or a Haystack embedder component"
        )
    module_name, dist, what = _ADAPTERS[framework]
    try:
        adapter = importlib.import_module(module_name)
        bridge = adapter.embedder
    except (ImportError, AttributeError):
        raise InvalidInputError(
            f"--embedder {spec}: the factory returned a {what} ({type(obj).__name__}); using "
            f"it needs the adapter's embedder(): pip install -U {dist}"
        ) from None
    try:
        wrapped: Embedder = bridge(obj)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"--embedder {spec}: {exc}") from None
    return wrapped


def make_embedder(spec: str) -> Embedder:
    """Load ``--embedder MODULE:FACTORY``, call the factory, adapt what it returns."""
    factory = load_judge_factory(spec, option="--embedder")
    try:
        obj = factory()
    except Exception as exc:
        raise InvalidInputError(
            f"--embedder {spec}: the factory raised {type(exc).__name__}: {exc}"
        ) from None
    return as_embedder(obj, spec=spec)


def with_embedder(names: Sequence[str], embedder: Embedder | None) -> list[Any]:
    """``--metrics`` names with the embedding metric names turned into metric objects that
    use ``embedder`` (unchanged without one: then they use the default model)."""
    from ragmeter.embed import EMBED_METRICS, EmbedMetric

    if embedder is None:
        return list(names)
    bound: list[Any] = []
    for name in names:
        if name in EMBED_METRICS:
            metric = EMBED_METRICS[name]
            assert isinstance(metric, EmbedMetric)
            bound.append(type(metric)(embedder))
        else:
            bound.append(name)
    return bound


def check_embed_options(names: Sequence[Any], given: dict[str, bool]) -> None:
    """Refuse embedding options when no embedding metric is asked for (they would do
    nothing)."""
    from ragmeter.embed import EMBED_METRICS, EmbedMetric

    if any(isinstance(n, EmbedMetric) or n in EMBED_METRICS for n in names):
        return
    used = [option for option, on in given.items() if on]
    if used:
        raise CliError(
            f"{used[0]} only applies to embedding metrics: add --metrics "
            + ",".join(EMBED_METRICS)
            + " (or some of them)"
        )


def embed_cache_arg(path: Path | None, disabled: bool) -> Path | str | None:
    """The ``embed_cache=`` for ``evaluate_rag``: ``None`` (``--no-embed-cache``),
    ``"default"``, or the file (a directory means ``embed-cache.sqlite`` in it), checked
    now when it exists: a file that is not an embedding cache is bad data (exit 1, one line
    naming it)."""
    from ragmeter.embed import EmbedCache
    from ragmeter.errors import EmbedCacheError

    if disabled:
        if path is not None:
            raise CliError("--embed-cache and --no-embed-cache contradict each other; pick one")
        return None
    if path is None:
        return "default"
    target = path / "embed-cache.sqlite" if path.is_dir() else path
    if not target.exists():
        return target  # made when the first vector is stored (never by --dry-run)
    try:
        cache = EmbedCache(target)
        try:
            len(cache)  # reads the table: a damaged file fails here, not half-way
        finally:
            cache.close()
    except EmbedCacheError as exc:
        hint = exc.hint.replace("use another cache path", "pass another --embed-cache PATH")
        raise InvalidInputError(
            f"--embed-cache {target}: not a usable embedding cache: the file {exc.problem}. "
            f"To go on, {hint}, or pass --no-embed-cache"
        ) from None
    return target


def embedding_arguments(
    names: list[str],
    embedder: str | None,
    cache: Path | None,
    no_cache: bool,
    batch_size: int | None,
    concurrency: int | None,
) -> tuple[list[Any], dict[str, Any]]:
    """The ``metrics=`` (embedding metric names bound to ``--embedder``) and the
    ``embed_cache=``/``embed_options=`` arguments of ``evaluate_rag``, from the options."""
    check_embed_options(
        names,
        {
            "--embedder": embedder is not None,
            "--embed-cache": cache is not None,
            "--no-embed-cache": no_cache,
            "--embed-batch-size": batch_size is not None,
            "--embed-concurrency": concurrency is not None,
        },
    )
    metrics = with_embedder(names, make_embedder(embedder) if embedder else None)
    return metrics, {
        "embed_cache": embed_cache_arg(cache, no_cache),
        "embed_options": embed_options(batch_size, concurrency),
    }


def embed_options(batch_size: int | None, concurrency: int | None) -> Any:
    """The :class:`~ragmeter.embed.EmbedOptions` the options ask for (defaults otherwise)."""
    from ragmeter.embed import EmbedOptions

    given = {"batch_size": batch_size, "concurrency": concurrency}
    return EmbedOptions(**{k: v for k, v in given.items() if v is not None})


def embed_estimate(
    samples: Sequence[Any], metrics: Sequence[Any], embedding: dict[str, Any]
) -> dict[str, Any] | None:
    """What ``--dry-run`` says of the embedding metrics in ``metrics`` (``None`` when there
    are none): texts to embed, already cached, model calls. Nothing is embedded; the cache
    file is not created."""
    from ragmeter.embed import EmbedCache, estimate_embeddings
    from ragmeter.evaluation.embedded import split_embedded
    from ragmeter.schema import coerce_sample

    embeds, _ = split_embedded(list(metrics))
    if not embeds:
        return None
    target = embedding["embed_cache"]
    if target == "default":
        from ragmeter.embed import default_embed_cache_path

        target = default_embed_cache_path()
    cache = EmbedCache(target) if target is not None and Path(target).exists() else None
    try:
        coerced = [coerce_sample(s, index=i) for i, s in enumerate(samples)]
        estimate = estimate_embeddings(
            coerced, embeds, cache=cache, options=embedding["embed_options"]
        )
    finally:
        if cache is not None:
            cache.close()
    return {
        "texts": estimate.texts,
        "distinct": estimate.distinct,
        "cached": estimate.cached,
        "to_embed": estimate.to_embed,
        "calls": estimate.calls,
        "metrics": estimate.metrics,
        "models": estimate.models,
        "cache": None if target is None else str(target),
    }


def print_embed_estimate(data: dict[str, Any], *, samples: int, as_json: bool) -> None:
    """Print :func:`embed_estimate`'s counts (one JSON object with ``--json``)."""
    import json

    if as_json:
        typer.echo(json.dumps({"dry_run": True, "samples": samples, "embeddings": data}, indent=2))
        return
    out = Console(highlight=False, soft_wrap=True)
    models = ", ".join(_model_label(m) for m in data["models"])
    out.print(
        f"Dry run: {samples} samples, embedding metrics {', '.join(data['metrics'])} ({models})",
        style="bold",
        markup=False,
    )
    cache_note = "no cache" if data["cache"] is None else f"cache {data['cache']}"
    for line in (
        f"texts the metrics need: {data['texts']} ({data['distinct']} distinct)",
        f"already cached:         {data['cached']} ({cache_note})",
        f"texts to embed:         {data['to_embed']} in {data['calls']} model calls",
        "nothing was embedded",
    ):
        out.print(line, markup=False)


def print_embed_summary(report: RagEvalReport) -> None:
    """The models, model calls, texts embedded and cache hits, under the table (stdout)."""
    extra = report.extra
    if "embed_calls" not in extra:
        return
    out = Console(highlight=False, soft_wrap=True)
    models = ", ".join(_model_label(m) for m in extra.get("embed_models") or [])
    where = extra.get("embed_cache")
    cache = "no cache" if where is None else f"cache {where}"
    out.print(
        f"embeddings ({models}): {extra.get('embed_embedded', 0)} texts embedded in "
        f"{extra.get('embed_calls', 0)} model calls, {extra.get('embed_cache_hits', 0)} "
        f"served from the cache ({cache})",
        markup=False,
    )


def _model_label(identity: dict[str, Any]) -> str:
    label = str(identity.get("model", "?"))
    weights = identity.get("weights_sha256")
    return f"{label} weights sha256 {str(weights)[:12]}" if weights else label
