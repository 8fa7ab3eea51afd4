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
* ``ragmeter compare`` and ``ragmeter gate`` compare two runs or reports, paired (the
  gate's baseline may be a saved run: ``--baseline pinned``);
* ``ragmeter runs list|show|diff|trend|pin|unpin|rm`` works on the runs saved by
  ``--save NAME`` (on ``retrieval``, ``beir``, ``eval``, ``report``, ``traces``);
* ``ragmeter traces FILE`` scores production traces (OTLP/JSON or a Phoenix export);
* ``ragmeter fill-holes QRELS RUN... --judge MODULE:FACTORY`` grades the runs' unjudged top
  documents with an LLM judge, measured first on judged ones, and writes augmented qrels;
* ``ragmeter trec_eval [-q] [-c] [-m MEASURE]... qrels results`` is trec_eval 10.0 itself: the
  same options and the same output, byte for byte;
* ``ragmeter serve`` starts the HTTP server (extra ``server``).

Output goes to stdout (a table, ``--json`` or ``--trec``); progress and warnings go to
stderr. Bad input exits with a non-zero code and one line on stderr,
``ragmeter: error: <what and where>``, never a traceback: exit code 2 for a bad command
line (a missing or unknown option, a bad option value, a file that does not exist), 1 for
bad data (a malformed line, an unknown metric, nothing to score).

One module per command family, each a thin shell over one core call: :mod:`.retrieval`
(``retrieval``, ``beir``, ``demo``), :mod:`.eval`, :mod:`.report`, :mod:`.stats`
(``compare``, ``gate``), :mod:`.runs` (``runs ...``; ``--save`` in :mod:`._save`),
:mod:`.stages`, :mod:`.traces`, :mod:`.fill_holes`, :mod:`.serve`; shared options in
:mod:`._options`, rendering in :mod:`._tables`, judge loading in :mod:`._judges`, and the
app with its one error-to-exit-code map in :mod:`._app`.
"""

from __future__ import annotations

from ragmeter.cli import eval as _eval  # noqa: F401 - registers `eval`
from ragmeter.cli import fill_holes as _fill_holes  # noqa: F401 - registers `fill-holes`
from ragmeter.cli import report as _report  # noqa: F401 - registers `report`
from ragmeter.cli import retrieval as _retrieval  # noqa: F401 - `retrieval`, `beir`, `demo`
from ragmeter.cli import runs as _runs  # noqa: F401 - registers `runs` and its subcommands
from ragmeter.cli import serve as _serve  # noqa: F401 - registers `serve`
from ragmeter.cli import traces as _traces  # noqa: F401 - registers `traces`
from ragmeter.cli import trec_eval as _trec_eval  # noqa: F401 - registers `trec_eval`
from ragmeter.cli._app import PROGRESS_MIN_BYTES, CliError, app, main, run
from ragmeter.cli._judges import JUDGE_METRICS, as_judge, load_judge_factory
from ragmeter.cli._options import parse_k_values, read_qrels
from ragmeter.cli._tables import (
    per_query_table,
    rag_table,
    retrieval_table,
    trec_eval_lines,
    trec_measure,
)
from ragmeter.cli.stages import register as _register_stages
from ragmeter.cli.stats import register as _register_stats

__all__ = [
    "JUDGE_METRICS",
    "PROGRESS_MIN_BYTES",
    "CliError",
    "app",
    "as_judge",
    "load_judge_factory",
    "main",
    "parse_k_values",
    "per_query_table",
    "rag_table",
    "read_qrels",
    "retrieval_table",
    "run",
    "trec_eval_lines",
    "trec_measure",
]

# compare, gate and stages; an import error is not swallowed: a command never vanishes
_register_stats(app)
_register_stages(app)
