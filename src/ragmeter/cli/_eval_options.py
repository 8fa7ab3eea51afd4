"""The options of ``ragmeter eval``: their help text and the checks of how they combine.

The LLM-judge options are shown in their own help panel (``ragmeter fill-holes`` shares
them); :func:`_checked_options` refuses a combination that cannot work before any sample is
read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragmeter.cli._app import CliError
from ragmeter.cli._judges import _JUDGE_PANEL
from ragmeter.cli._options import _split_list
from ragmeter.errors import InvalidInputError

_DataArg = Annotated[
    Path, typer.Argument(help="JSONL file of samples (ragmeter or rag-eval fields).")
]
_KOpt = Annotated[int, typer.Option("--k", "-k", min=1, help="Cut-off for retrieval metrics.")]
_MetricsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--metrics",
        "-m",
        help="Metrics to compute (comma-separated or repeated); default: every metric "
        "some sample can be scored on.",
    ),
]
_SkipErrorsOpt = Annotated[
    bool,
    typer.Option("--skip-errors", help="Skip malformed lines (counted) instead of failing."),
]
_ClaimsOnlyOpt = Annotated[
    bool,
    typer.Option("--claims-only", help="Faithfulness only (no retrieval or other metrics)."),
]
_InputPriceOpt = Annotated[
    float | None,
    typer.Option(min=0, help="USD per million prompt tokens (for cost_usd)."),
]
_OutputPriceOpt = Annotated[
    float | None,
    typer.Option(min=0, help="USD per million completion tokens (for cost_usd)."),
]
_PerSampleOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--per-sample-out",
        help="Write every sample's scores to FILE (.jsonl, .jsonl.gz or .parquet) as they "
        "are computed; memory stays flat.",
        show_default=False,
    ),
]
_KeepPerSampleOpt = Annotated[
    bool,
    typer.Option(
        "--per-sample",
        help="Put every sample's scores in the --json output (held in memory until the "
        "end; for ragmeter gate/compare on a saved report).",
    ),
]

# The LLM-judge options, shown in their own help panel.
_JudgeOpt = Annotated[
    str | None,
    typer.Option(
        "--judge",
        help="Add LLM-judged metrics with the judge a factory in your code returns "
        "(MODULE:FACTORY or path/to/file.py:FACTORY, called with no arguments): a "
        "ragmeter judge, or a LangChain / LlamaIndex / Haystack chat model.",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_JudgeMetricsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--judge-metrics",
        help="Judge metrics: faithfulness, answer_relevancy, correctness; default: each "
        "that some sample can be scored on.",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_JudgeCacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--judge-cache",
        help="SQLite cache of judge calls (file or directory); default: the user cache "
        "dir ($RAGMETER_CACHE_DIR, else ~/.cache/ragmeter).",
        rich_help_panel=_JUDGE_PANEL,
        show_default=False,
    ),
]
_NoJudgeCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-judge-cache", help="Call the judge for everything.", rich_help_panel=_JUDGE_PANEL
    ),
]
_ConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Judge calls in flight at once.",
        show_default="8",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_RpmOpt = Annotated[
    float | None,
    typer.Option(
        "--rpm", help="At most this many judge calls per minute.", rich_help_panel=_JUDGE_PANEL
    ),
]
_TimeoutOpt = Annotated[
    float | None,
    typer.Option(help="Seconds per judge call.", show_default="60", rich_help_panel=_JUDGE_PANEL),
]
_MaxCallsOpt = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Stop after this many judge calls (the report is marked incomplete).",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Stop once the judge has used this many tokens (as the model reports them).",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_RepeatsOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Ask the judge N times per sample; the mean is the score, the spread is in "
        "--json details.",
        show_default="1",
        rich_help_panel=_JUDGE_PANEL,
    ),
]
_DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print how many judge calls and input tokens (and texts to embed) the run would "
        "need; call no model.",
        rich_help_panel=_JUDGE_PANEL,
    ),
]


def _names_embedding(metrics: list[str] | None) -> bool:
    """Whether ``--metrics`` names an embedding metric."""
    from ragmeter.embed import EMBED_METRICS

    return any(name in EMBED_METRICS for name in _split_list(metrics))


def _checked_options(
    metrics: list[str] | None,
    claims_only: bool,
    input_price: float | None,
    output_price: float | None,
    per_sample_out: Path | None,
    judge: str | None,
    judge_only: dict[str, bool],
) -> tuple[list[str], dict[str, float] | None]:
    """The metric names and token prices the options ask for; a :class:`CliError` for a
    combination that cannot work (judge options without ``--judge``, ``--claims-only`` with
    other metrics, one price without the other)."""
    from ragmeter.io.scores import score_format

    if per_sample_out is not None:
        try:
            score_format(per_sample_out)
        except InvalidInputError as exc:
            raise CliError(f"--per-sample-out: {exc}") from None
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
    return names, prices
