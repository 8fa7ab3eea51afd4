"""Every trec_eval measure, computed the trec_eval way over a whole run at once.

:func:`evaluate` takes qrels, a run and trec_eval ``-m`` strings (``"all_trec"``,
``"official"``, ``"ndcg_cut.10,20"``, ``"P.5"``, ``"bpref"``, ``"rbp.p=0.8"``) or ir_measures
names (``"nDCG@10"``, ``"P@5"``, ``"AP"``, ``"Judged@10"``, ``"ERR@10"``, ``"RBP(p=0.8)"``), and
returns per-query values keyed by the names trec_eval prints plus the ``all`` aggregates
(:class:`TrecEvalResult`). :func:`format_trec_eval` prints a result as trec_eval does, byte
for byte; :func:`parse_qrels` and :func:`parse_results` read files by trec_eval's rules.
:func:`alpha_ndcg` scores diversity (alpha-nDCG@k, as TREC's ndeval) over subtopic qrels.

Conventions are trec_eval 10.0's (its ``m_*.c`` definitions; see ``docs/measures.md``):
ranking by score descending with ties broken by doc id descending, relevance at grade
``>= relevance_level`` (default 1), unjudged docs non-relevant except for ``bpref``,
``infAP`` and the ``unj``/``rbp_resid`` measures, queries without relevant docs scored (as
0 for most measures) and averaged in, and a query the run lacks left out unless
``complete=True`` (``-c``).
"""

from __future__ import annotations

from ragmeter.metrics.trec._alpha import SubtopicQrels, alpha_ndcg, parse_subtopic_qrels
from ragmeter.metrics.trec._catalog import TREC_MEASURES, TrecMeasure, TrecMeasures
from ragmeter.metrics.trec._engine import TrecEvalResult, evaluate
from ragmeter.metrics.trec._files import Results, parse_qrels, parse_results
from ragmeter.metrics.trec._format import format_trec_eval
from ragmeter.metrics.trec._spec import MEASURES, NICKNAMES, parse_measures

__all__ = [
    "MEASURES",
    "NICKNAMES",
    "TREC_MEASURES",
    "Results",
    "SubtopicQrels",
    "TrecEvalResult",
    "TrecMeasure",
    "TrecMeasures",
    "alpha_ndcg",
    "evaluate",
    "format_trec_eval",
    "parse_measures",
    "parse_qrels",
    "parse_results",
    "parse_subtopic_qrels",
]
