"""TREC run and qrels files, read and written the way trec_eval does.

* qrels lines: ``query_id iteration doc_id grade`` (whitespace separated; grade an int,
  possibly negative, with ``|grade| <= 2**53``). A line starting with ``#`` is a comment; a
  ``#`` inside an id is part of the id. A doc judged twice for one query with two grades is
  refused (naming both lines); judged twice with the same grade, it is kept once and the
  returned :class:`~ragmeter.io._lines.Records` says so in ``warnings``.
* run lines: ``query_id Q0 doc_id rank score [tag ...]``. The rank column is ignored and
  extra trailing columns are ignored; the score must be a finite number. Each query's docs
  are ordered by score descending, ties broken by doc id descending (string comparison),
  exactly as trec_eval orders them, so scoring a run file reproduces trec_eval.

Both readers take plain or gzip-compressed files (detected by content), drop a UTF-8
byte-order mark, and name the file and line of anything they cannot read (a line that is
not UTF-8, a truncated ``.gz``). Files are parsed by the compiled parser
(``ragmeter.io._ctrec``, built at install time where a C compiler exists) with the same
results bit for bit; the pure-Python reader is the reference, and reads any file the
compiled one finds irregular, so every error is its own (``RAGMETER_PURE_PYTHON=1`` uses it
throughout).

One module per idea: ``_run`` (the :class:`Run` type), ``_pieces`` (run lines parsed into
per-query pieces, and pieces into rankings), ``_compiled`` (the compiled parser's path and
its hand-over), ``_read`` (a whole run), ``_stream`` (:func:`iter_trec_run`), ``_qrels``
(qrels), ``_write`` (both writers).
"""

from __future__ import annotations

from ragmeter.io._lines import PathLike as PathLike
from ragmeter.io.trec._pieces import _CHUNK as _CHUNK
from ragmeter.io.trec._qrels import read_trec_qrels
from ragmeter.io.trec._read import parse_trec_run, read_trec_run
from ragmeter.io.trec._run import TREC_ORDERING, Run
from ragmeter.io.trec._run import scores_to_write as scores_to_write
from ragmeter.io.trec._stream import RankedQuery, UngroupedRunError, iter_trec_run
from ragmeter.io.trec._write import iter_pairs as iter_pairs
from ragmeter.io.trec._write import write_trec_qrels, write_trec_run

__all__ = [
    "TREC_ORDERING",
    "RankedQuery",
    "Run",
    "UngroupedRunError",
    "iter_trec_run",
    "parse_trec_run",
    "read_trec_qrels",
    "read_trec_run",
    "write_trec_qrels",
    "write_trec_run",
]

# the public classes keep the module they were defined in before the split (reprs, pickles)
for _cls in (Run, RankedQuery, UngroupedRunError):
    _cls.__module__ = __name__
del _cls
