"""The deprecated ``to_html`` of both report types: the one place a report reaches up to
:mod:`ragmeter.html`, which writes the pages."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmeter.report._rag import RagEvalReport
    from ragmeter.report._retrieval import RetrievalEvalReport


def write_retrieval(
    report: RetrievalEvalReport, path: str | os.PathLike[str], **options: Any
) -> Path:
    """:func:`ragmeter.html.write_retrieval_report` (for the deprecated ``to_html``)."""
    from ragmeter.html import write_retrieval_report

    return write_retrieval_report(report, path, **options)


def write_rag(report: RagEvalReport, path: str | os.PathLike[str], **options: Any) -> Path:
    """:func:`ragmeter.html.write_rag_report` (for the deprecated ``to_html``)."""
    from ragmeter.html import write_rag_report

    return write_rag_report(report, path, **options)
