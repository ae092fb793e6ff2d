"""Typed DSPy signatures for query planning and iterative search (CLEAR QPIS): plan sub-queries, then check
whether the evidence gathered so far suffices."""

from __future__ import annotations

import dspy

from clearmed.signatures.clear import EVIDENCE_IS_DATA


class PlanSubqueries(dspy.Signature):
    """Break the medical question into short, targeted web search queries, one per piece of information needed to
    answer it (for example the diagnosis suggested by the findings, then the treatment of that diagnosis)."""

    question: str = dspy.InputField()
    options: str = dspy.InputField(desc="the answer options; empty for free text")
    max_queries: int = dspy.InputField(desc="the most queries allowed")
    subqueries: list[str] = dspy.OutputField(desc="search queries of a few words each, most important first")


class CheckEvidence(dspy.Signature):
    __doc__ = (
        "Decide whether the web evidence gathered so far is enough to answer the medical question. If it is not, "
        "say briefly what is missing and write one search query that would find it." + EVIDENCE_IS_DATA
    )

    question: str = dspy.InputField()
    options: str = dspy.InputField(desc="the answer options; empty for free text")
    evidence: str = dspy.InputField(desc="the results so far, each introduced by its id in square brackets")
    sufficient: bool = dspy.OutputField()
    missing: str = dspy.OutputField(desc="what is still missing; empty if sufficient")
    next_query: str = dspy.OutputField(desc="a search query for what is missing; empty if sufficient")
