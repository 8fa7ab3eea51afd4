"""Assemble the page: template, style, script, static sections and the embedded data.

The data is JSON inside ``<script type="application/json">``; every ``<``, ``>`` and
``&`` in it is written as a ``\\u00XX`` escape, so no string in a report (a query holding
``</script>``) can end that element early. :func:`render` tries the text limits of
:data:`~ragmeter.html._payload.LADDER` in order until the page fits ``max_bytes``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from html import escape
from importlib.resources import files
from string import Template
from typing import Any

from ragmeter._version import __version__
from ragmeter.html._payload import LADDER, Limits

__all__ = ["embed_json", "render"]

_SLACK = 4096  # bytes kept free for the notes written after the data is sized


@cache
def _asset(name: str) -> str:
    return (files("ragmeter.html") / "assets" / name).read_text(encoding="utf-8")


def embed_json(data: Any) -> str:
    """``data`` as compact JSON that is safe inside a ``<script>`` element.

    >>> embed_json({"q": "</script><b>&"})
    '{"q":"\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e\\\\u0026"}'
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _limits_note(limits: Limits, max_bytes: int, parts: Sequence[str]) -> str | None:
    """What the page left out to fit, naming only the ``parts`` it has (``"texts"``,
    ``"contexts"``, ``"snippets"``)."""
    if limits == LADDER[0]:
        return None
    budget = f"To keep this page under {max_bytes / 1e6:g} MB"
    if limits.text == 0:
        return f"{budget}, its texts are left out (the scores are all there)."
    said = [f"texts (queries, answers, references) are cut to {limits.text} characters"]
    if "contexts" in parts:
        said.append(
            f"at most {limits.contexts} retrieved context(s) per sample are shown, each cut to "
            f"{limits.context} characters"
            if limits.contexts and limits.context
            else "retrieved contexts are left out"
        )
    if "snippets" in parts:
        said.append(
            f"document snippets are cut to {limits.snippet} characters"
            if limits.snippet
            else "document snippets are left out"
        )
    return f"{budget}, " + "; ".join(said) + "."


def render(
    *,
    kind: str,
    title: str,
    header: Callable[[Sequence[str]], str],
    body: str,
    items_title: str,
    filter_hint: str,
    fixed: dict[str, Any],
    texts: Callable[[Limits], dict[str, Any]],
    parts: Sequence[str],
    max_bytes: int,
) -> str:
    """The whole page as one string.

    ``header(notes)`` renders the header with the page's own notes (texts cut to fit); the
    embedded data is ``fixed`` (scores, rankings: never cut) merged with ``texts(limits)``
    (the parts made of free text, under text ``limits``), their keys distinct; ``parts``
    names the kinds of text the page has, for the note saying what was cut.
    """
    fields = {
        "version": escape(__version__),
        "title": escape(title),
        "css": _asset("report.css"),
        "kind": escape(kind),
        "body": body,
        "items_title": escape(items_title),
        "filter_hint": escape(filter_hint),
        "js": _asset("report.js"),
    }
    template = Template(_asset("page.html"))
    frame = len(template.substitute(fields, header=header(()), data="").encode("utf-8"))
    base = embed_json(fixed)[1:-1]  # the members of the fixed object, serialised once
    frame += len(base.encode("utf-8"))
    chosen, payload = LADDER[0], "{}"
    for chosen in LADDER:
        payload = embed_json(texts(chosen))
        if frame + len(payload.encode("utf-8")) + _SLACK <= max_bytes:
            break
    notes = [n for n in (_limits_note(chosen, max_bytes, parts),) if n]
    payload = "{" + base + ("," + payload[1:] if payload != "{}" else "}")
    size = frame + len(payload.encode("utf-8"))
    if size + _SLACK > max_bytes:
        notes.append(
            f"This page is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:g} MB budget even "
            "without texts: the per-item scores alone take that much."
        )
    return template.substitute(fields, header=header(notes), data=payload)
