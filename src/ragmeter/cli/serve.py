"""``ragmeter serve``: start the HTTP server (extra ``server``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ragmeter.cli._app import app
from ragmeter.cli._embed import EmbedCacheOpt, NoEmbedCacheOpt, embed_cache_arg


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
    embed_cache: EmbedCacheOpt = None,
    no_embed_cache: NoEmbedCacheOpt = False,
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
    options["embed_cache"] = embed_cache_arg(embed_cache, no_embed_cache)
    server.run(host=host, port=port, **options)


# --------------------------------------------------------------------------- entry point
