"""Grading documents a run retrieved but nobody judged: a 0-3 relevance prompt, a strict
grade parser, and the judge runner's cache, budget and concurrency.

The prompt follows UMBRELA (Upadhyay et al., 2024, "UMBRELA: UMbrela is the (Open-Source
Reproduction of the) Bing RELevance Assessor"), in our own words: the judge reads a query and
one passage and gives an integer grade on TREC's four-point scale,

* **3**: the passage is about the query and holds its exact answer;
* **2**: the passage answers the query in part, or the answer is unclear or buried among
  unrelated text;
* **1**: the passage is on the query's topic but does not answer it;
* **0**: the passage has nothing to do with the query;

thinking first about what the searcher wants, how well the passage meets that need and how
far it can be trusted. The reply must be ``{"grade": <0..3>}`` (see :func:`parse_grade`);
anything else is a *bad reply*: counted and reported, never read as grade 0.

:func:`find_holes` lists the unjudged documents of each judged query's top ``depth``;
:func:`grade_documents` asks the judge about ``(query, document)`` pairs through
:func:`~ragmeter.judge.runner.run_judges` (a re-run is served from the cache). Scoring before
and after, and the judge's agreement with the human grades, are
:func:`ragmeter.stats.fill_holes`'s job (it may call the scoring loop; this module may not).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ragmeter._types import Qrels, RunLike
from ragmeter.errors import InvalidInputError, VerdictError
from ragmeter.judge.cache import JudgeCache
from ragmeter.judge.metrics import JudgeMetric
from ragmeter.judge.protocol import Message
from ragmeter.judge.runner import (
    JudgeEstimate,
    JudgeOptions,
    JudgeRun,
    estimate_judges,
    run_judges,
)
from ragmeter.schema import RagSample

__all__ = [
    "GRADES",
    "Grading",
    "MissingText",
    "RelevanceGrade",
    "find_holes",
    "grade_documents",
    "parse_grade",
    "texts_for",
]

GRADES: tuple[int, ...] = (0, 1, 2, 3)
"""The grades a judge may give (UMBRELA's scale, TREC's four-point scale)."""

MissingText = Literal["error", "skip"]

_SYSTEM = (
    "You are a careful relevance assessor for a search engine. You read a search query and "
    "one passage, decide how well the passage serves the person who searched, and reply "
    'with only a JSON object {"grade": <integer 0-3>}.'
)

_INSTRUCTION = """\
Grade how relevant the passage is to the query, as one integer from 0 to 3:
3 = the passage is about the query and contains its exact answer;
2 = the passage answers the query in part, or its answer is unclear or buried among \
unrelated material;
1 = the passage is on the query's topic but does not answer it;
0 = the passage has nothing to do with the query.
Give 1 when the passage only touches the topic, 2 when it says something important about \
the whole topic along with other things, 3 when it is entirely about the query.
Before deciding, consider what the searcher most likely wants, how well the passage meets \
that need, and how far the passage can be trusted; then settle on one grade.

Query: {query}

Passage: {passage}

Reply with only {{"grade": G}}, where G is 0, 1, 2 or 3. No explanation."""

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_FINAL = re.compile(r"^#*\s*final score\s*[:=]\s*(\S+)\s*$", re.IGNORECASE)


def parse_grade(text: str) -> int:
    """Read a judge's reply as a grade in ``0..3``, strictly.

    Accepted: a JSON object with an integer ``grade`` (or ``score``) field, possibly in a
    fenced code block; a bare integer; or UMBRELA's own answer line ``##final score: 2``.
    ``2.0`` counts as 2. Anything else (prose, a missing field, 1.5, 4, ``true``) raises
    :class:`~ragmeter.errors.VerdictError` saying why: a bad reply, never a silent 0.

    >>> parse_grade('{"grade": 2}'), parse_grade("3"), parse_grade("##final score: 1")
    (2, 3, 1)
    >>> parse_grade("Relevant!")
    Traceback (most recent call last):
    ...
    ragmeter.errors.VerdictError: not a JSON grade or an integer 0-3: 'Relevant!'
    """
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    final = _FINAL.match(stripped)
    if final:
        stripped = final.group(1)
    value: Any
    try:
        value = json.loads(stripped)
    except (json.JSONDecodeError, ValueError, RecursionError):
        raise VerdictError(f"not a JSON grade or an integer 0-3: {text.strip()[:80]!r}") from None
    if isinstance(value, dict):
        key = "grade" if "grade" in value else "score" if "score" in value else None
        if key is None:
            raise VerdictError(f"reply has no 'grade' field: {stripped[:80]!r}")
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise VerdictError(f"grade is not a number: {value!r}")
    if not float(value).is_integer() or int(value) not in GRADES:
        raise VerdictError(f"grade {value!r} is not one of 0, 1, 2, 3")
    return int(value)


class RelevanceGrade(JudgeMetric):
    """The judge's 0-3 relevance grade of one passage for one query (UMBRELA-style).

    A sample carries the query as ``user_input`` and the passage as its one
    ``retrieved_contexts`` entry. Messages: a system instruction (reply with JSON only) and
    the grading instruction with the query and the passage; see the module docstring for the
    scale. :meth:`parse` is :func:`parse_grade`.
    """

    name: ClassVar[str] = "judge_relevance_grade"
    version: ClassVar[str] = "1"
    needs: ClassVar[frozenset[str]] = frozenset({"user_input", "retrieved_contexts"})

    def messages(self, sample: RagSample) -> list[Message]:
        """System instruction + the query and the passage to grade."""
        passage = (sample.retrieved_contexts or [""])[0]
        user = _INSTRUCTION.format(query=sample.user_input or "", passage=passage)
        return [Message("system", _SYSTEM), Message("user", user)]

    def parse(self, text: str) -> float:
        """The grade as a float (the runner's score type); see :func:`parse_grade`."""
        return float(parse_grade(text))


def _depth(depth: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InvalidInputError(f"depth must be an int >= 1, got {depth!r}")
    return depth


def find_holes(runs: Sequence[RunLike], qrels: Qrels, *, depth: int) -> dict[str, list[str]]:
    """``{query_id: [doc_id, ...]}``: the unjudged documents in the top ``depth`` of any of
    ``runs``, for every query that has judgements (a query with none is not scored, so it
    has no holes to fill). A doc graded below 0 is a hole too: trec_eval reads such a grade
    as "pooled, not judged". Ids are compared as strings; each doc is listed once, in the
    order the runs first rank it.

    >>> find_holes([{"q1": ["a", "x", "b", "y"]}], {"q1": {"a": 1, "b": 0}}, depth=3)
    {'q1': ['x']}
    >>> find_holes([{"q1": ["x"]}, {"q1": ["z", "x"]}, {"q9": ["x"]}], {"q1": {}}, depth=10)
    {}
    >>> find_holes([{"q1": ["x"]}, {"q1": ["z", "x"]}], {"q1": {"a": 1}}, depth=10)
    {'q1': ['x', 'z']}
    >>> find_holes([{"q1": ["a", "p"]}], {"q1": {"a": 1, "p": -1}}, depth=10)
    {'q1': ['p']}
    """
    _depth(depth)
    judged = {  # a grade below 0 is "in the pool, not judged" (trec_eval): a hole
        str(q): {str(d) for d, g in docs.items() if g >= 0} for q, docs in qrels.items() if docs
    }
    holes: dict[str, dict[str, None]] = {}
    for run in runs:
        for qid, ranking in run.items():
            seen = judged.get(str(qid))
            if seen is None:
                continue
            for doc in list(ranking)[:depth]:
                if str(doc) not in seen:
                    holes.setdefault(str(qid), {})[str(doc)] = None
    return {q: list(docs) for q, docs in holes.items()}


def texts_for(
    pairs: Mapping[str, Sequence[str]],
    queries: Mapping[str, str],
    corpus: Mapping[str, str],
    *,
    missing_text: MissingText = "error",
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Split ``pairs`` into those with a query text and a document text, and those without.

    ``missing_text="error"`` (the default) raises
    :class:`~ragmeter.errors.InvalidInputError` naming the first query and document lacking
    a text and how many pairs do; ``"skip"`` returns them as the second mapping (counted and
    reported by the caller, never graded).

    >>> texts_for({"q1": ["d1", "d2"]}, {"q1": "q"}, {"d1": "t"}, missing_text="skip")
    ({'q1': ['d1']}, {'q1': ['d2']})
    """
    if missing_text not in ("error", "skip"):
        raise InvalidInputError(f"missing_text must be 'error' or 'skip', got {missing_text!r}")
    kept: dict[str, list[str]] = {}
    skipped: dict[str, list[str]] = {}
    for qid, docs in pairs.items():
        for doc in docs:
            ok = qid in queries and doc in corpus
            (kept if ok else skipped).setdefault(qid, []).append(doc)
    if skipped and missing_text == "error":
        qid, docs = next(iter(skipped.items()))
        what = (
            f"query {qid!r} has no text" if qid not in queries else f"doc {docs[0]!r} has no text"
        )
        total = sum(len(d) for d in skipped.values())
        raise InvalidInputError(
            f"cannot ask the judge about doc {docs[0]!r} for query {qid!r}: {what} "
            f"({total} (query, doc) pair(s) lack a text); pass the texts (queries=, corpus=) "
            "or missing_text='skip' to count and skip them"
        )
    return kept, skipped


@dataclass
class Grading:
    """What the judge said about ``(query, doc)`` pairs.

    ``grades`` holds the grades it gave (``0..3``); ``failed`` the pairs without one and
    why: ``"unparseable verdict: ..."`` (a bad reply), ``"judge raised ..."``, ``"budget
    exhausted"``. ``run`` has the calls, cache hits and tokens; ``estimate`` is set instead
    on a dry run (nothing sent, no grades).
    """

    grades: dict[str, dict[str, int]] = field(default_factory=dict)
    failed: dict[str, dict[str, str]] = field(default_factory=dict)
    run: JudgeRun | None = None
    estimate: JudgeEstimate | None = None

    @property
    def bad_replies(self) -> int:
        """Pairs whose reply was not a grade (unparseable)."""
        return sum(
            why.startswith("unparseable") for row in self.failed.values() for why in row.values()
        )


def grade_documents(
    pairs: Mapping[str, Sequence[str]],
    *,
    metric: RelevanceGrade,
    queries: Mapping[str, str],
    corpus: Mapping[str, str],
    cache: JudgeCache | None = None,
    options: JudgeOptions | None = None,
    dry_run: bool = False,
) -> Grading:
    """Ask ``metric``'s judge for the grade of every ``(query, doc)`` pair in ``pairs``
    (texts looked up in ``queries`` and ``corpus``; every pair must have both, see
    :func:`texts_for`).

    Bounded, cached and budgeted as :func:`~ragmeter.judge.runner.run_judges`; with
    ``dry_run=True`` nothing is sent and the :class:`Grading` carries the
    :class:`~ragmeter.judge.runner.JudgeEstimate` only.
    """
    where: dict[str, tuple[str, str]] = {}
    samples: list[RagSample] = []
    for qid, docs in pairs.items():
        for doc in docs:
            sid = f"pair-{len(samples)}"
            where[sid] = (qid, doc)
            samples.append(
                RagSample(id=sid, user_input=queries[qid], retrieved_contexts=[corpus[doc]])
            )
    if dry_run:
        return Grading(estimate=estimate_judges(samples, [metric], cache=cache))
    run = run_judges(samples, [metric], cache=cache, options=options)
    grading = Grading(run=run)
    for sid, (qid, doc) in where.items():
        score = run.scores.get(sid, {}).get(metric.name)
        if score is not None:  # with repeats, the mean grade rounded half up
            grading.grades.setdefault(qid, {})[doc] = math.floor(score + 0.5)
        else:
            why = run.reasons.get(sid, {}).get(metric.name, "no grade")
            grading.failed.setdefault(qid, {})[doc] = why
    return grading
