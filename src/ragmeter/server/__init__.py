"""ragmeter's HTTP server: a FastAPI app over the same core the CLI uses.

Needs the optional ``server`` extra (``pip install 'ragmeter[server]'``: fastapi, uvicorn);
``import ragmeter`` never loads this module. Run it with ``ragmeter serve`` or any ASGI
server (``uvicorn --factory ragmeter.server:create_app``).

Endpoints (the OpenAPI schema is served at ``/openapi.json``, docs at ``/docs``):

* ``GET /health`` -> ``{"status": "ok"}``.
* ``POST /evaluate`` -> :meth:`ragmeter.RagEvalReport.to_dict`. Body: ``samples`` (ragmeter's
  :class:`~ragmeter.schema.RagSample` fields or rag-eval's ``question``/``answer``/
  ``context``/``golden_documents``/``retrieved``), optional ``k`` (default 5),
  ``metrics``, ``claims_only`` (faithfulness only) and ``prices`` (``{"input": ...,
  "output": ...}`` USD per million tokens, for ``cost_usd``). rag-eval's payload works
  unchanged. ``semantic_similarity``, ``semantic_context_recall`` and
  ``semantic_context_precision`` use the offline model of ``ragmeter[semantic]`` (a 422
  naming it when it is not installed), cached in ``create_app(embed_cache=...)``.
* ``POST /evaluate/retrieval`` -> :meth:`ragmeter.RetrievalEvalReport.to_dict`. Body:
  ``qrels`` (``{query_id: {doc_id: grade}}``), ``run`` (``{query_id: [doc_id, ...]}``, best
  first), optional ``k_values``, ``metrics``, ``relevance_level``.

Bad input never gives a 500: a body sent without ``Content-Type: application/json`` is a
415; a body that is not JSON a 400 saying where it breaks; a payload that does not validate,
or that the core refuses (unknown metric, duplicate doc ids, nothing to score), is a 422 whose
``detail`` lists ``{"loc": [...field path...], "msg": ..., "type": ...}``; a body larger than
``max_body_bytes`` or more than ``max_samples`` samples (queries, for retrieval) is a 413.

Guards against slow and heavy clients (each limit is an argument of :func:`create_app`, or of
:func:`run` for the connection-level ones, and an option of ``ragmeter serve``):

* **admission**: at most ``max_concurrent`` requests with a body (the scoring endpoints) are
  read, parsed and scored at once; up to ``max_queued`` more wait, unread, for at most
  ``queue_timeout`` seconds; past either, the answer is a 429 with ``Retry-After``. An
  in-flight 10 MiB request costs tens of MiB of memory, so this also caps the server's
  memory. ``GET /health`` is never queued. A 413 or 429 is sent before the body is read;
  the rest of the body is then read and discarded (at most ``MIN_DRAIN_BYTES`` or 4 x
  ``max_body_bytes``, within ``body_timeout`` s) before the connection closes, so that clients
  that send the whole body before reading (``http.client``) get the answer, not a reset.
* **slow bodies and slow readers**: a body must arrive within ``body_timeout`` seconds of
  being admitted (408 otherwise, and the connection is closed); an answer the client does
  not read within ``body_timeout`` seconds is dropped with the connection.
* **bounded work**: parsing, validation and scoring run in a worker thread, never on the
  event loop (so ``/health`` answers while a large request is scored), and stop between two
  samples when the client disconnects or when ``score_timeout`` seconds have been spent (503).
* **connections** (:func:`run`, i.e. ``ragmeter serve``): a connection that has not sent a
  complete request head within ``header_timeout`` seconds is closed (half-open and
  slow-header clients), as is a keep-alive connection idle for ``keep_alive_timeout`` s.

One idea per module: ``_models`` (request bodies), ``_limits`` (defaults, admission, body
size and time), ``_responses`` (answers and error shapes), ``_work`` (parse, validate, score
off the event loop), ``_routes`` (the routes, on an ``APIRouter``), ``_app`` (:func:`create_app`:
the limits on ``app.state``, wired to the routes), ``_run`` (:func:`run`).
"""

from __future__ import annotations

from ragmeter.server._app import create_app
from ragmeter.server._limits import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEEP_ALIVE_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_QUEUED,
    DEFAULT_MAX_SAMPLES,
    DEFAULT_QUEUE_TIMEOUT,
    DEFAULT_SCORE_TIMEOUT,
    MAX_K,
    MAX_K_VALUES,
    MIN_DRAIN_BYTES,
    RETRY_AFTER_SECONDS,
)
from ragmeter.server._run import GC_THRESHOLD, SWITCH_INTERVAL, run

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_KEEP_ALIVE_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_CONCURRENT",
    "DEFAULT_MAX_QUEUED",
    "DEFAULT_MAX_SAMPLES",
    "DEFAULT_QUEUE_TIMEOUT",
    "DEFAULT_SCORE_TIMEOUT",
    "GC_THRESHOLD",
    "MAX_K",
    "MAX_K_VALUES",
    "MIN_DRAIN_BYTES",
    "RETRY_AFTER_SECONDS",
    "SWITCH_INTERVAL",
    "create_app",
    "run",
]
