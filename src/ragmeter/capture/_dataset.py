"""Running a dataset: its queries and qrels, the bounded loop with a progress bar, the report."""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ragmeter.capture._ids import describe
from ragmeter.capture._record import RunRecord
from ragmeter.capture._rules import FailedQueries, Hints
from ragmeter.capture._scope import Scope
from ragmeter.capture._store import SampleStore, materialize
from ragmeter.errors import InvalidInputError, some_ids
from ragmeter.schema import RagSample, SampleLike, coerce_sample

if TYPE_CHECKING:
    from ragmeter.report import RagEvalReport, RetrievalEvalReport

__all__ = [
    "Dataset",
    "DatasetItem",
    "DatasetJob",
    "DatasetReport",
    "arun_items",
    "check_concurrency",
    "load_dataset",
    "prepare_dataset",
    "run_items",
    "score_dataset",
]


class DatasetItem(NamedTuple):
    """One query of a dataset and its ground truth (what ``run_dataset`` runs)."""

    id: str
    query: str
    reference: str | None = None
    references: list[str] | None = None
    reference_ids: list[str] | None = None
    relevance: dict[str, float] | None = None


Dataset = Mapping[str, str] | str | os.PathLike[str] | Iterable[SampleLike]
"""``{query_id: query}``, a BEIR directory, a JSONL file of samples, or samples."""


def load_dataset(
    dataset: Dataset, *, qrels: Mapping[str, Mapping[str, float]] | None = None
) -> tuple[list[DatasetItem], dict[str, dict[str, float]]]:
    """The queries of ``dataset`` and the qrels they are judged by.

    ``dataset`` is ``{query_id: query}`` (judged by ``qrels``, if given); a BEIR directory
    (its judged queries, in ``queries.jsonl`` order, judged by its qrels unless ``qrels`` is
    given); a ragmeter JSONL file, or samples (``id`` and ``user_input`` needed; their
    ``reference``, ``references``, ``reference_ids``/``relevance`` are the ground truth, and
    ``qrels``, when given, wins). Only the dataset's queries are judged: qrels rows of
    queries the dataset does not run are left out. Raises
    :class:`~ragmeter.errors.InvalidInputError` for a query without an id or text, a
    repeated query id, or an empty dataset.

    >>> items, judged = load_dataset({"q1": "lift?", "q2": "drag?"}, qrels={"q1": {"d1": 1}})
    >>> [(i.id, i.query, i.relevance) for i in items], judged
    ([('q1', 'lift?', {'d1': 1.0}), ('q2', 'drag?', None)], {'q1': {'d1': 1.0}})
    """
    items: list[DatasetItem] = []
    given = None if qrels is None else _clean_qrels(qrels)
    if isinstance(dataset, (str, os.PathLike)):
        path = Path(dataset)
        if path.is_dir():
            from ragmeter.io import read_qrels
            from ragmeter.io.beir import _read_texts

            beir_qrels = given if given is not None else _clean_qrels(read_qrels(path))
            queries = _read_texts(
                path / "queries.jsonl", lambda r: str(r.get("text") or ""), "query"
            )
            for qid, text in queries.items():
                if qid in beir_qrels:
                    items.append(DatasetItem(qid, text, relevance=beir_qrels[qid]))
            where = f"BEIR dataset {path}"
        elif path.is_file():
            from ragmeter.io.jsonl import read_jsonl

            items = [_item(s, given) for s in read_jsonl(path)]
            where = f"JSONL file {path}"
        else:
            raise FileNotFoundError(
                2, "dataset not found (a BEIR directory or JSONL file)", str(path)
            )
    elif isinstance(dataset, Mapping):
        for qid, text in dataset.items():
            if not isinstance(text, str):
                raise InvalidInputError(
                    f"a dataset mapping must be {{query_id: query text}}; the value of "
                    f"{qid!r} is {type(text).__name__} (pass a list of samples for more)"
                )
            key = str(qid)
            row = None if given is None else given.get(key)
            items.append(DatasetItem(key, text, relevance=row))
        where = "the dataset"
    else:
        samples: Iterable[SampleLike] = dataset
        items = [_item(coerce_sample(s, index=i), given) for i, s in enumerate(samples)]
        where = "the samples"
    if not items:
        raise InvalidInputError(f"{where} has no query to run (no judged query, or empty)")
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise InvalidInputError(
                f"query id {item.id!r} occurs twice in {where}; ids must be unique"
            )
        seen.add(item.id)
        if not item.query:
            raise InvalidInputError(f"query {item.id!r} of {where} has no text")
    judged: dict[str, dict[str, float]] = {}
    for item in items:
        row = item.relevance
        if row is None and item.reference_ids is not None:
            row = {d: 1.0 for d in item.reference_ids}
        if row is not None:
            judged[item.id] = row
    return items, judged


def _clean_qrels(qrels: Mapping[Any, Mapping[Any, float]]) -> dict[str, dict[str, float]]:
    return {str(q): {str(d): float(g) for d, g in row.items()} for q, row in qrels.items()}


def _item(sample: RagSample, qrels: Mapping[str, dict[str, float]] | None) -> DatasetItem:
    if sample.user_input is None:
        raise InvalidInputError(f"sample {sample.id!r} has no user_input (the query to run)")
    relevance = sample.relevance_map() if qrels is None else qrels.get(sample.id)
    return DatasetItem(
        sample.id,
        sample.user_input,
        reference=sample.reference,
        references=sample.references,
        reference_ids=sample.reference_ids,
        relevance=None if relevance is None else {d: float(g) for d, g in relevance.items()},
    )


def check_concurrency(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"concurrency must be an int >= 1, got {value!r}")
    return value


def _scope_of(item: DatasetItem) -> Scope:
    return Scope(
        item.id,
        reference=item.reference,
        references=item.references,
        reference_ids=item.reference_ids,
        relevance=item.relevance,
        collect=True,
    )


class _Progress:
    """A rich progress bar on stderr (rich is imported only when a dataset runs)."""

    def __init__(self, enabled: bool, total: int, description: str) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            disable=not enabled,
        )
        self._task = self._bar.add_task(description, total=total)

    def advance(self) -> None:
        self._bar.advance(self._task)

    def __enter__(self) -> _Progress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()


Results = list[list[RagSample | RunRecord]]


def run_items(
    items: Sequence[DatasetItem],
    call: Callable[[str], Any],
    store: SampleStore,
    *,
    workers: int,
    progress: bool,
    description: str,
) -> tuple[Results, dict[str, str]]:
    """Run ``call(query)`` for every item, each inside its scope, ``workers`` at a time."""
    from concurrent.futures import ThreadPoolExecutor

    failed: dict[str, str] = {}

    def one(item: DatasetItem) -> list[RagSample | RunRecord]:
        with _scope_of(item) as scope:
            try:
                call(item.query)
            except Exception as exc:  # one failing query does not stop the dataset
                failed[item.id] = describe(exc)
        return scope.records(store)

    with _Progress(progress, len(items), description) as bar:
        if workers == 1:
            results = []
            for item in items:
                results.append(one(item))
                bar.advance()
            return results, failed
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ragmeter") as pool:
            futures = []
            for item in items:  # each query runs in a copy of the caller's context
                future = pool.submit(contextvars.copy_context().run, one, item)
                future.add_done_callback(lambda _: bar.advance())
                futures.append(future)
            return [f.result() for f in futures], failed


async def arun_items(
    items: Sequence[DatasetItem],
    call: Callable[[str], Awaitable[Any]],
    store: SampleStore,
    *,
    workers: int,
    progress: bool,
    description: str,
) -> tuple[Results, dict[str, str]]:
    """``await call(query)`` for every item, each in its scope, ``workers`` at a time."""
    failed: dict[str, str] = {}
    gate = asyncio.Semaphore(workers)

    with _Progress(progress, len(items), description) as bar:

        async def one(item: DatasetItem) -> list[RagSample | RunRecord]:
            async with gate:
                with _scope_of(item) as scope:
                    try:
                        await call(item.query)
                    except Exception as exc:
                        failed[item.id] = describe(exc)
                bar.advance()
            return scope.records(store)

        results = list(await asyncio.gather(*(one(item) for item in items)))
    return results, failed


@dataclass
class DatasetReport:
    """What ``run_dataset`` ran and how it scored.

    ``retrieval``: the captured rankings against the dataset's qrels
    (:meth:`SampleStore.evaluate_retrieval`; ``None`` without judgements); ``answers``:
    ``evaluate_rag`` of the samples (when ``answer_metrics`` were asked for or the dataset
    has reference answers, else ``None``); ``samples``: the samples captured for the
    dataset's queries, in dataset order (they also stay in the adapter's store);
    ``failed``: ``{query_id: "ValueError: ..."}`` for queries whose call raised (the loop
    went on); ``uncaptured``: query ids for which no sample was captured at all.
    """

    retrieval: RetrievalEvalReport | None
    answers: RagEvalReport | None
    samples: list[RagSample]
    failed: dict[str, str] = dataclass_field(default_factory=dict)
    uncaptured: list[str] = dataclass_field(default_factory=list)

    @property
    def primary(self) -> float | None:
        """Mean NDCG@10 of the retrieval report (``None`` without one)."""
        return None if self.retrieval is None else self.retrieval.primary

    def to_text(self) -> str:
        """The reports as text."""
        parts = [f"{len(self.samples)} samples captured"]
        if self.failed:
            parts[0] += f"; {len(self.failed)} queries raised ({some_ids(self.failed)})"
        if self.uncaptured:
            parts[0] += f"; nothing captured for {len(self.uncaptured)} queries"
        if self.retrieval is not None:
            parts.append(self.retrieval.to_text())
        if self.answers is not None:
            parts.append(self.answers.to_text())
        return "\n\n".join(parts)

    def __str__(self) -> str:
        return self.to_text()


def score_dataset(
    hints: Hints,
    items: Sequence[DatasetItem],
    judged: dict[str, dict[str, float]],
    results: Results,
    failed: dict[str, str],
    *,
    k_values: Iterable[int] | None,
    metrics: Iterable[str] | None,
    answer_metrics: Sequence[Any] | None,
    failed_queries: FailedQueries,
) -> DatasetReport:
    samples = [materialize(rec) for recs in results for rec in recs]
    uncaptured = [item.id for item, recs in zip(items, results, strict=True) if not recs]
    if len(uncaptured) == len(items):
        raise InvalidInputError(
            f"none of the {len(items)} queries was captured (e.g. {some_ids(uncaptured)}"
            f"{'; they raised: ' + next(iter(failed.values())) if failed else ''}): the "
            f"handler never saw a run. {hints.name}: is the handler attached to what "
            "was run?"
        )
    retrieval = None
    if judged:
        scored = SampleStore(hints=hints)
        scored.extend(samples)
        kwargs: dict[str, Any] = {}
        if k_values is not None:
            kwargs["k_values"] = k_values
        if metrics is not None:
            kwargs["metrics"] = metrics
        retrieval = scored.evaluate_retrieval(judged, failed_queries=failed_queries, **kwargs)
    answers = None
    if answer_metrics is not None or any(i.reference is not None or i.references for i in items):
        from ragmeter.evaluation.rag import evaluate_rag

        answers = evaluate_rag(samples, metrics=answer_metrics)
    return DatasetReport(retrieval, answers, samples, dict(failed), uncaptured)


@dataclass(frozen=True)
class DatasetJob:
    """A dataset made ready to run (:func:`prepare_dataset`): its items and judged qrels, how
    many queries run at once, and how the captured samples are scored. :meth:`run` and
    :meth:`arun` run one framework call per query and return the
    :class:`DatasetReport`."""

    items: list[DatasetItem]
    judged: dict[str, dict[str, float]]
    workers: int
    progress: bool
    k_values: Iterable[int] | None
    metrics: Iterable[str] | None
    answer_metrics: Sequence[Any] | None
    failed_queries: FailedQueries

    def run(self, call: Callable[[str], Any], store: SampleStore) -> DatasetReport:
        """``call(query)`` for every query, ``workers`` threads at a time, scored from
        what ``store`` captured."""
        results, failed = run_items(
            self.items,
            call,
            store,
            workers=self.workers,
            progress=self.progress,
            description=store.hints.name,
        )
        return self._score(store.hints, results, failed)

    async def arun(
        self, call: Callable[[str], Awaitable[Any]], store: SampleStore
    ) -> DatasetReport:
        """:meth:`run` with ``await call(query)``, ``workers`` tasks at a time."""
        results, failed = await arun_items(
            self.items,
            call,
            store,
            workers=self.workers,
            progress=self.progress,
            description=store.hints.name,
        )
        return self._score(store.hints, results, failed)

    def _score(self, hints: Hints, results: Results, failed: dict[str, str]) -> DatasetReport:
        return score_dataset(
            hints,
            self.items,
            self.judged,
            results,
            failed,
            k_values=self.k_values,
            metrics=self.metrics,
            answer_metrics=self.answer_metrics,
            failed_queries=self.failed_queries,
        )


def prepare_dataset(
    dataset: Dataset,
    *,
    qrels: Mapping[str, Mapping[str, float]] | None = None,
    concurrency: int = 4,
    progress: bool = True,
    k_values: Iterable[int] | None = None,
    metrics: Iterable[str] | None = None,
    answer_metrics: Sequence[Any] | None = None,
    failed_queries: FailedQueries = "zero",
) -> DatasetJob:
    """Load ``dataset`` and check the options of a ``run_dataset`` call, before anything runs.

    ``dataset``: ``{query_id: query}`` (with ``qrels=``), a BEIR directory or a JSONL file
    of samples (:func:`load_dataset`). Each query then runs inside a capture scope with its
    id and ground truth, ``concurrency`` at a time (threads, each in a copy of your
    context; tasks for :meth:`DatasetJob.arun`), with a rich progress bar on stderr
    (``progress=False`` hides it). A query that raises is recorded and the loop goes on.
    The :class:`DatasetReport` holds ``retrieval`` (trec_eval's numbers for the dataset's
    judged queries; ``k_values``/``metrics``/``failed_queries`` as in
    ``StoreFront.evaluate_retrieval``), ``answers`` (``evaluate_rag``, when the dataset has
    reference answers or ``answer_metrics`` are given), ``samples``, ``failed``.
    """
    items, judged = load_dataset(dataset, qrels=qrels)
    return DatasetJob(
        items,
        judged,
        check_concurrency(concurrency),
        progress,
        k_values,
        metrics,
        answer_metrics,
        failed_queries,
    )
